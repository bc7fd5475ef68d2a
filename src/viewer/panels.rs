//! The panels around the plot: top bar (device, axis, colours, peak), minimap with a brush,
//! bottom bar with the pinned element and its filtered stack, and the tooltip grid.

use eframe::egui::{self, Rect, Sense, Stroke, pos2};

use super::data::Plane;
use super::tabs::Tab;
use super::theme;
use super::timeline::Timeline;
use crate::analysis::{frames, units};
use crate::model::{DeviceId, DeviceIdx};

/// `cuda:0`, or `host` for pinned host memory.
pub fn device_label(d: DeviceId) -> String {
    if d.is_host() { "host (pinned)".to_owned() } else { format!("cuda:{}", d.0) }
}

pub fn top_bar_ui(
    ui: &mut egui::Ui,
    t: &mut Timeline,
    options: &super::ViewerOptions,
    tab: &mut Tab,
    answers_open: &mut bool,
) {
    // Wraps onto a second row in a narrow window rather than clipping the controls.
    ui.horizontal_wrapped(|ui| {
        let root = t.session.root();
        ui.strong(root.source.name.as_str());
        ui.separator();
        egui::ComboBox::from_id_salt("view").selected_text(tab.title()).show_ui(ui, |ui| {
            for v in Tab::ALL {
                ui.selectable_value(tab, v, v.title());
            }
        });
        ui.separator();
        let devices: Vec<DeviceId> = root.devices.iter().map(|d| DeviceId(d.device.to_native())).collect();
        let mut chosen = t.device;
        egui::ComboBox::from_id_salt("device")
            .selected_text(devices.get(t.device.index()).map_or_else(String::new, |&d| device_label(d)))
            .show_ui(ui, |ui| {
                for (i, &d) in devices.iter().enumerate() {
                    ui.selectable_value(&mut chosen, DeviceIdx(i), device_label(d));
                }
            });
        if chosen != t.device {
            t.select_device(chosen);
        }
        ui.separator();
        let mut time_axis = t.time_axis;
        ui.selectable_value(&mut time_axis, false, "actions");
        let times_ready = t.action_times().is_some();
        ui.add_enabled_ui(times_ready, |ui| ui.selectable_value(&mut time_axis, true, "wall time"));
        t.set_time_axis(time_axis);
        ui.separator();
        let by = if t.plane == Plane::Segments { "colour by stream / pool" } else { "colour by site" };
        let mut colour = if t.colour_by_category { 2 } else { u8::from(!t.colour_by_site) };
        ui.selectable_value(&mut colour, 0, by);
        ui.selectable_value(&mut colour, 1, "by allocation");
        if t.plane == Plane::Elements {
            ui.selectable_value(&mut colour, 2, "by category");
        }
        (t.colour_by_site, t.colour_by_category) = (colour != 1, colour == 2);
        ui.separator();
        if ui.button("fit").clicked() {
            t.fit();
        }
        if ui.button("go to peak").clicked() {
            t.go_to_peak();
        }
        ui.toggle_value(answers_open, "live & range");
        ui.separator();
        // The detail slider: everything individually, or only the N largest (the rest form one
        // summarized band at the bottom, as in PyTorch's viewer).
        let n = t.stacked().layout.elements.len().max(1);
        let mut summarize = t.max_entries.is_some();
        ui.checkbox(&mut summarize, "summarize");
        if summarize {
            let mut k = t.max_entries.unwrap_or(n.min(1000)).clamp(1, n);
            ui.add(egui::Slider::new(&mut k, 1..=n).logarithmic(true).text("largest"));
            t.max_entries = Some(k);
        } else {
            t.max_entries = None;
        }
        let l = t.stacked().layout;
        ui.label(format!("peak {} · {} actions", units::bytes(l.peak_bytes), units::thousands(l.actions.len() as u64)));
        if options.model.is_none()
            && let Some(c) = t.shape_candidates()
        {
            ui.separator();
            ui.weak(c).on_hover_text("guessed from the most frequent allocation sizes; pass --model for exact shapes");
        }
    });
}

pub fn info_grid_ui(ui: &mut egui::Ui, lines: &[(String, String)], id: &str) {
    egui::Grid::new(id).num_columns(2).spacing([12.0, 2.0]).show(ui, |ui| {
        for (k, v) in lines {
            ui.label(egui::RichText::new(k).weak());
            ui.label(v);
            ui.end_row();
        }
    });
}

pub fn bottom_bar_ui(
    ui: &mut egui::Ui,
    t: &mut Timeline,
    options: &super::ViewerOptions,
    filter: &mut String,
    full_paths: &mut bool,
) {
    let Some(pin) = t.selection.pinned else {
        ui.weak("Click an allocation to pin it here · scroll: zoom · shift+scroll: zoom bytes · drag: pan · ctrl+drag: zoom to range · double-click: fit bytes · R/T+drag: rulers · ctrl+C: copy stack");
        return;
    };
    let Some(mut info) = t.element_info(pin.element, options).and_then(|i| Option::clone(&i)) else {
        ui.ctx().request_repaint_after(std::time::Duration::from_millis(30));
        return;
    };
    if let Some(c) = t.category_of(pin.element) {
        info.attributes.insert(0, ("category", c.name().to_owned()));
    }
    let start = t.session.time_base_us();
    ui.horizontal_top(|ui| {
        ui.vertical(|ui| {
            ui.set_width(360.0);
            ui.strong(format!("element {}", info.id));
            info_grid_ui(ui, &info.lines(start), "pinned");
        });
        ui.separator();
        ui.vertical(|ui| {
            ui.horizontal(|ui| {
                ui.label("stack");
                ui.add(egui::TextEdit::singleline(filter).hint_text("filter frames").desired_width(200.0));
                ui.checkbox(full_paths, "full paths");
                if ui.button("copy").clicked() {
                    ui.ctx().copy_text(super::details::stack_text(&t.session, info.stack));
                }
            });
            let root = t.session.root();
            let lines = frames::shown_lines(root, info.stack, !*full_paths);
            let forward = frames::shown_lines(root, info.forward_stack, !*full_paths);
            let fx = fx_nodes(root, info.stack);
            egui::ScrollArea::vertical().auto_shrink([false, false]).show(ui, |ui| {
                if lines.is_empty() {
                    ui.weak("(no stack recorded)");
                }
                let needle = filter.to_lowercase();
                let keep = |l: &&String| needle.is_empty() || l.to_lowercase().contains(&needle);
                for l in lines.iter().filter(keep) {
                    ui.monospace(l);
                }
                if !forward.is_empty() {
                    ui.separator();
                    ui.strong("forward: where the forward pass of this backward allocation ran");
                    for l in forward.iter().filter(keep) {
                        ui.monospace(l);
                    }
                }
                if !fx.is_empty() {
                    ui.separator();
                    ui.strong("fx nodes of the compiled frames");
                    for (key, text) in &fx {
                        ui.horizontal_top(|ui| {
                            ui.weak(*key);
                            ui.monospace(text.trim_end());
                        });
                    }
                }
            });
        });
    });
}

/// Every fx key of the stack's compiled frames, frame by frame (innermost first).
fn fx_nodes(root: &impl frames::FrameSource, stack: u32) -> Vec<(&'static str, &str)> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for &f in root.stack(stack) {
        if !seen.contains(&f) {
            seen.push(f);
            out.extend(frames::fx_details(root, f));
        }
    }
    out
}

/// Total memory over the whole trace (min/max per pixel) with a brush showing the view; click or
/// drag to move the view there.
pub fn minimap_ui(ui: &mut egui::Ui, t: &mut Timeline) {
    let rect = ui.available_rect_before_wrap().shrink2(egui::vec2(4.0, 4.0));
    let rect = Rect::from_min_max(pos2(rect.left() + theme::Y_AXIS_WIDTH - 4.0, rect.top()), rect.max);
    let response = ui.allocate_rect(rect, Sense::click_and_drag());
    let painter = ui.painter_at(rect);
    t.minimap_rect = rect;
    let session = std::sync::Arc::clone(&t.session);
    let l = super::timeline::stacked_in(&session, t.device, t.plane).layout;
    let n = l.actions.len();
    if n == 0 {
        return;
    }
    let peak = l.peak_bytes.max(1) as f32;
    let width = rect.width().max(1.0) as usize;
    let per = n as f64 / width as f64;
    if t.by_category() {
        category_overview(&painter, rect, t, per);
        brush_ui(&painter, &response, rect, t, n);
        return;
    }
    // The segment timeline has few actions: its minimap reads the totals.
    let levels = if t.plane == Plane::Elements { session.minimap(t.device) } else { Vec::new() };
    let level = levels.iter().rev().find(|(apb, _, _)| (*apb as f64) <= per.max(1.0));
    // Abutting one-pixel columns (the envelope down to its floor, then the floor) in one texture
    // (`viewer::strip`): each pixel is shaded once, where a line per column smeared its
    // anti-aliasing over its neighbours. The panel is unfilled: the clear colour is the background.
    let mut rects = Vec::with_capacity(2 * width);
    for px in 0..width {
        let (a, b) = (
            (px as f64 * per) as usize,
            (((px + 1) as f64 * per).ceil() as usize).min(n).max((px as f64 * per) as usize + 1),
        );
        let max = match level {
            Some((apb, _, maxs)) => {
                let (i, j) = (a / *apb as usize, (b.div_ceil(*apb as usize)).min(maxs.len()));
                maxs[i.min(maxs.len() - 1)..j.max(i + 1).min(maxs.len())].iter().copied().max().unwrap_or(0)
            }
            None => l.totals[a.min(n - 1)..b.min(n)].iter().copied().max().unwrap_or(0),
        };
        let min = match level {
            Some((apb, mins, _)) => {
                let (i, j) = (a / *apb as usize, (b.div_ceil(*apb as usize)).min(mins.len()));
                mins[i.min(mins.len() - 1)..j.max(i + 1).min(mins.len())].iter().copied().min().unwrap_or(0)
            }
            None => l.totals[a.min(n - 1)..b.min(n)].iter().copied().min().unwrap_or(0),
        };
        let x = rect.left() + px as f32;
        let y = rect.bottom() - (max as f32 / peak) * rect.height();
        // The floor under the peak envelope: memory that never goes away.
        let y_floor = rect.bottom() - (min as f32 / peak) * rect.height();
        rects.push((Rect::from_min_max(pos2(x, y), pos2(x + 1.0, y_floor.max(y))), theme::MINIMAP_FILL));
        rects.push((Rect::from_min_max(pos2(x, y_floor), pos2(x + 1.0, rect.bottom())), theme::MINIMAP_FLOOR));
    }
    let ppp = ui.ctx().pixels_per_point();
    t.minimap_strip.draw(&painter, "memviz minimap", rect, ppp, &rects);
    brush_ui(&painter, &response, rect, t, n);
}

/// The view's brush over the minimap, and clicks or drags on it that move the view.
fn brush_ui(painter: &egui::Painter, response: &egui::Response, rect: Rect, t: &mut Timeline, n: usize) {
    if !t.time_axis {
        let (v0, v1) = (t.view.x0 / n as f64, t.view.x1 / n as f64);
        let brush = Rect::from_x_y_ranges(
            rect.left() + (v0 as f32 * rect.width())
                ..=rect.left() + (v1 as f32 * rect.width()).max(v0 as f32 * rect.width() + 2.0),
            rect.y_range(),
        );
        painter.rect_filled(brush, 0.0, theme::BRUSH);
        painter.rect_stroke(brush, 0.0, Stroke::new(1.0, theme::BRUSH_EDGE), egui::StrokeKind::Inside);
        if let Some(p) = response.interact_pointer_pos()
            && (response.clicked() || response.dragged())
        {
            let centre = f64::from((p.x - rect.left()) / rect.width()) * n as f64;
            let span = t.view.x1 - t.view.x0;
            t.view.x0 = centre - span / 2.0;
            t.view.x1 = centre + span / 2.0;
            t.view.clamp_x(n as f64);
        }
    }
}

/// The stacked category overview in the minimap's place: per pixel column, the categories'
/// bytes at the column's highest total, stacked in legend order (hidden ones dimmed).
fn category_overview(painter: &egui::Painter, rect: Rect, t: &Timeline, per: f64) {
    use crate::model::Category;
    let Some(c) = t.categories_ready() else { return };
    let peak = c.peak as f32;
    let width = rect.width().max(1.0) as usize;
    for px in 0..width {
        let (a, b) = ((px as f64 * per) as usize, ((px + 1) as f64 * per).ceil() as usize);
        let (i, j) = (a / c.per_bucket, b.div_ceil(c.per_bucket).max(a / c.per_bucket + 1).min(c.buckets.len()));
        let Some(column) = c.buckets.get(i..j).and_then(|s| s.iter().max_by_key(|b| b.iter().sum::<u64>())) else {
            continue;
        };
        let x = rect.left() + px as f32 + 0.5;
        let mut y = rect.bottom();
        for (k, &bytes) in column.iter().enumerate() {
            if bytes == 0 {
                continue;
            }
            let h = bytes as f32 / peak * rect.height();
            let colour = if t.hidden_categories & (1 << k) != 0 {
                super::categories::HIDDEN
            } else {
                super::categories::colour(Category::ALL[k])
            };
            painter.vline(x, (y - h)..=y, Stroke::new(1.0, colour));
            y -= h;
        }
    }
}

/// The legend of "colour by category": a chip per category present, with its share of the
/// peak; a click hides or shows it (hidden ones are drawn dim, here, on the timeline and in the
/// overview).
pub fn legend_ui(ui: &mut egui::Ui, t: &mut Timeline) {
    use crate::model::Category;
    let Some(c) = t.categories_ready() else {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("classifying the allocations…");
        });
        return;
    };
    let at_peak = c.at_peak;
    let total: u64 = at_peak.iter().sum::<u64>().max(1);
    let present = (0..Category::ALL.len()).filter(|&k| c.present & (1 << k) != 0);
    let mut toggle = None;
    ui.horizontal_wrapped(|ui| {
        ui.label("categories (share of the peak; click to hide):");
        for k in present {
            let hidden = t.hidden_categories & (1 << k) != 0;
            let colour = if hidden { super::categories::HIDDEN } else { super::categories::colour(Category::ALL[k]) };
            let text = format!("{} {:.0}%", Category::ALL[k].name(), at_peak[k] as f64 * 100.0 / total as f64);
            let label = egui::RichText::new(text).color(colour);
            if ui.selectable_label(!hidden, label).clicked() {
                toggle = Some(k);
            }
        }
    });
    if let Some(k) = toggle {
        t.hidden_categories ^= 1 << k;
    }
}
