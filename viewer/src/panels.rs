//! The panels around the plot: top bar (device, axis, colours, peak), minimap with a brush,
//! bottom bar with the pinned element and its filtered stack, and the tooltip grid.

use eframe::egui::{self, Color32, Rect, Sense, Stroke, pos2};

use super::categories::DeviceCategories;
use super::data::Plane;
use super::document::Document;
use super::tabs::Tab;
use super::theme;
use super::timeline::Open;
use crate::analysis::{frames, units};
use crate::model::{DeviceId, DeviceIdx};

/// `cuda:0`, or `host` for pinned host memory.
pub fn device_label(d: DeviceId) -> String {
    if d.is_host() { "host (pinned)".to_owned() } else { format!("cuda:{}", d.0) }
}

/// The top bar: the archive's name, the view and device, the axis, the colours, fit, go to peak,
/// live & range, summarize and the peak. `enabled: false` (the first frame of an archive whose
/// rest is on its way) draws the same controls, disabled, reading only what the first parts
/// hold — the same bar, so the plot below it stays where it is.
pub fn top_bar_ui(ui: &mut egui::Ui, t: &mut Open, tab: &mut Tab, answers_open: &mut bool, enabled: bool) {
    // The controls wrap onto a second row in a narrow window rather than being clipped; the
    // texts elide (`…`, the whole on hover) rather than wrapping.
    ui.horizontal_wrapped(|ui| {
        if !enabled {
            ui.disable();
        }
        let root = t.doc.session.root();
        let name = root.source.name.as_str();
        ui.add(egui::Label::new(egui::RichText::new(name).strong()).truncate()).on_hover_text(name);
        ui.separator();
        egui::ComboBox::from_id_salt("view").selected_text(tab.title()).show_ui(ui, |ui| {
            for (n, v) in Tab::ALL.into_iter().enumerate() {
                ui.selectable_value(tab, v, v.title()).on_hover_text(format!("key {}", n + 1));
            }
        });
        ui.separator();
        let devices: Vec<DeviceId> = root.devices.iter().map(|d| DeviceId(d.device.to_native())).collect();
        let mut chosen = t.doc.device;
        egui::ComboBox::from_id_salt("device")
            .selected_text(devices.get(t.doc.device.index()).map_or_else(String::new, |&d| device_label(d)))
            .show_ui(ui, |ui| {
                for (i, &d) in devices.iter().enumerate() {
                    ui.selectable_value(&mut chosen, DeviceIdx(i), device_label(d));
                }
            });
        if chosen != t.doc.device {
            t.select_device(chosen);
        }
        ui.separator();
        let mut time_axis = t.doc.time_axis;
        ui.selectable_value(&mut time_axis, false, "actions");
        let times_ready = enabled && t.action_times().is_some();
        ui.add_enabled_ui(times_ready, |ui| ui.selectable_value(&mut time_axis, true, "wall time"));
        t.set_time_axis(time_axis);
        ui.separator();
        let by = if t.doc.plane == Plane::Segments { "colour by stream / pool" } else { "colour by site" };
        let mut colour = if t.doc.colour_by_category { 2 } else { u8::from(!t.doc.colour_by_site) };
        ui.selectable_value(&mut colour, 0, by);
        ui.selectable_value(&mut colour, 1, "by allocation");
        if t.doc.plane == Plane::Elements {
            ui.selectable_value(&mut colour, 2, "by category");
        }
        (t.doc.colour_by_site, t.doc.colour_by_category) = (colour != 1, colour == 2);
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
        let mut summarize = t.doc.max_entries.is_some();
        ui.checkbox(&mut summarize, "summarize");
        if summarize {
            let mut k = t.doc.max_entries.unwrap_or(n.min(1000)).clamp(1, n);
            ui.add(egui::Slider::new(&mut k, 1..=n).logarithmic(true).text("largest"));
            t.doc.max_entries = Some(k);
        } else {
            t.doc.max_entries = None;
        }
        let l = t.stacked().layout;
        let peak =
            format!("peak {} · {} actions", units::bytes(l.peak_bytes), units::thousands(l.actions.len() as u64));
        ui.add(egui::Label::new(peak).truncate());
    });
}

/// What the allocations' sizes tell, once worked out (the row under the top bar: its text
/// arriving there does not move the plot): frees without their alloc, the shape candidates.
pub fn facts_ui(ui: &mut egui::Ui, t: &mut Open, options: &super::ViewerOptions) {
    if let Some(n) = t.frees_without_alloc() {
        ui.separator();
        let said = format!("truncated trace: {} frees without their alloc", units::thousands(n));
        ui.add(egui::Label::new(egui::RichText::new(said).color(super::theme::PEAK)).truncate()).on_hover_text(
            "the ring buffer wrapped (_record_memory_history's max_entries) or recording started late: memory allocated before the trace's first event is drawn from the start",
        );
    }
    if options.model.is_none()
        && let Some(c) = t.shape_candidates()
    {
        ui.separator();
        ui.add(egui::Label::new(egui::RichText::new(c).weak()).truncate())
            .on_hover_text("guessed from the long-lived allocations' sizes; pass --model for exact shapes");
    }
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

/// The bottom bar's height at least while an allocation is pinned (it can be dragged taller;
/// its facts and stack scroll within it), and on a link's first frame that will pin one: the
/// pinned details arriving with the rest of the archive never move the plot.
pub const DETAILS_HEIGHT: f32 = 170.0;

/// The bottom bar while nothing is pinned (also the first frame's, whose bar is as tall).
pub const BOTTOM_HINT: &str = "Click an allocation to pin it here · scroll: zoom · shift+scroll: zoom bytes · drag: pan · ctrl+drag: zoom to range · double-click: fit bytes · R/T+drag: rulers · ctrl+C: copy stack";

pub fn bottom_bar_ui(
    ui: &mut egui::Ui,
    t: &mut Open,
    options: &super::ViewerOptions,
    filter: &mut String,
    full_paths: &mut bool,
) {
    let Some(pin) = t.doc.selection.pinned else {
        ui.weak(BOTTOM_HINT);
        return;
    };
    let Some(mut info) = t.element_info(pin.element, options).and_then(|i| Option::clone(&i)) else {
        ui.ctx().request_repaint_after(std::time::Duration::from_millis(30));
        return;
    };
    if let Some(c) = t.category_of(pin.element) {
        info.attributes.insert(0, ("category", c.name().to_owned()));
    }
    let start = t.doc.session.time_base_us();
    ui.horizontal_top(|ui| {
        ui.vertical(|ui| {
            ui.set_width(360.0);
            ui.strong(format!("element {}", info.id));
            // Scrolled within the bar's height, as the stack is: the details arriving never
            // make the bar taller, which would move the plot.
            let facts = egui::ScrollArea::vertical().id_salt("pinned facts").auto_shrink([false, false]);
            facts.show(ui, |ui| info_grid_ui(ui, &info.lines(start), "pinned"));
        });
        ui.separator();
        ui.vertical(|ui| {
            ui.horizontal(|ui| {
                ui.label("stack");
                ui.add(egui::TextEdit::singleline(filter).hint_text("filter frames").desired_width(200.0));
                ui.checkbox(full_paths, "full paths");
                if ui.button("copy").clicked() {
                    ui.ctx().copy_text(super::details::stack_text(&t.doc.session, info.stack));
                }
            });
            let root = t.doc.session.root();
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
pub fn minimap_ui(ui: &mut egui::Ui, t: &mut Open) {
    let rect = ui.available_rect_before_wrap().shrink2(egui::vec2(4.0, 4.0));
    let rect = Rect::from_min_max(pos2(rect.left() + theme::Y_AXIS_WIDTH - 4.0, rect.top()), rect.max);
    let response = ui.allocate_rect(rect, Sense::click_and_drag());
    let painter = ui.painter_at(rect);
    t.plot.minimap_rect = rect;
    let session = std::sync::Arc::clone(&t.doc.session);
    let l = super::timeline::stacked_in(&session, t.doc.device, t.doc.plane).layout;
    let n = l.actions.len();
    if n == 0 {
        return;
    }
    let width = rect.width().max(1.0) as usize;
    let per = n as f64 / width as f64;
    if t.by_category() {
        if let Some(c) = t.categories_ready() {
            category_overview(&painter, rect, &t.doc, c, per);
        }
        brush_ui(&painter, &response, rect, &mut t.doc, n);
        return;
    }
    // The archive stores the element timeline's levels; the segment timeline's are built once on
    // a named thread (until then the minimap shows only the brush).
    let segments = if t.doc.plane == Plane::Segments { t.segment_minimap() } else { None };
    let levels = match &segments {
        Some(s) => s.iter().map(|m| (m.actions_per_bucket, m.min.as_slice(), m.max.as_slice())).collect(),
        None if t.doc.plane == Plane::Elements => session.minimap(t.doc.device),
        None => {
            ui.ctx().request_repaint_after(std::time::Duration::from_millis(30));
            brush_ui(&painter, &response, rect, &mut t.doc, n);
            return;
        }
    };
    let rects = minimap_rects(rect, l.totals, l.peak_bytes, &levels);
    let ppp = ui.ctx().pixels_per_point();
    t.plot.minimap_strip.draw(&painter, "memviz minimap", rect, ppp, &rects);
    brush_ui(&painter, &response, rect, &mut t.doc, n);
}

/// The minimap's abutting one-pixel columns over `rect`: the envelope down to its floor, then
/// the floor, drawn as one texture (`viewer::strip`): each pixel is shaded once, where a line per
/// column smeared its anti-aliasing over its neighbours. Each column reads the level (`(actions
/// per bucket, mins, maxes)`, finest first) whose buckets are just finer than it, or the totals
/// where a column covers fewer actions than the finest bucket, so a frame reads about as many
/// values as the minimap has pixels, at any trace length.
fn minimap_rects(rect: Rect, totals: &[u64], peak: u64, levels: &[(u64, &[u64], &[u64])]) -> Vec<(Rect, Color32)> {
    let n = totals.len();
    let peak = peak.max(1) as f32;
    let width = rect.width().max(1.0) as usize;
    let per = n as f64 / width as f64;
    let level = levels.iter().rev().find(|(apb, _, _)| (*apb as f64) <= per.max(1.0));
    let mut rects = Vec::with_capacity(2 * width);
    for px in 0..width {
        let (a, b) = (
            (px as f64 * per) as usize,
            (((px + 1) as f64 * per).ceil() as usize).min(n).max((px as f64 * per) as usize + 1),
        );
        let (min, max) = column_extremes(totals, level.copied(), a, b);
        let x = rect.left() + px as f32;
        let y = rect.bottom() - (max as f32 / peak) * rect.height();
        // The floor under the peak envelope: memory that never goes away.
        let y_floor = rect.bottom() - (min as f32 / peak) * rect.height();
        rects.push((Rect::from_min_max(pos2(x, y), pos2(x + 1.0, y_floor.max(y))), theme::MINIMAP_FILL));
        rects.push((Rect::from_min_max(pos2(x, y_floor), pos2(x + 1.0, rect.bottom())), theme::MINIMAP_FLOOR));
    }
    rects
}

/// The lowest and highest total of a minimap column over actions `[a, b)`: from `level`'s whole
/// buckets touching it, or from the totals without a level.
fn column_extremes(totals: &[u64], level: Option<(u64, &[u64], &[u64])>, a: usize, b: usize) -> (u64, u64) {
    let n = totals.len();
    let Some((apb, mins, maxs)) = level else {
        let column = &totals[a.min(n - 1)..b.min(n)];
        return (column.iter().copied().min().unwrap_or(0), column.iter().copied().max().unwrap_or(0));
    };
    // The whole buckets touching the column (at least one, the last one past the end).
    let whole = |v: &[u64]| {
        let (i, j) = (a / apb as usize, b.div_ceil(apb as usize).min(v.len()));
        i.min(v.len() - 1)..j.max(i + 1).min(v.len())
    };
    let min = mins[whole(mins)].iter().copied().min().unwrap_or(0);
    let max = maxs[whole(maxs)].iter().copied().max().unwrap_or(0);
    (min, max)
}

/// Min/max levels of device `d`'s segment timeline totals, as the archive stores the element
/// timeline's (empty without a segment timeline).
pub fn segment_levels(session: &super::data::Session, d: DeviceIdx) -> Vec<crate::lod::minimap::MinMax> {
    session.stacked(d, Plane::Segments).map_or_else(Vec::new, |s| crate::lod::minimap::build(s.layout.totals))
}

impl Open {
    /// The segment timeline's minimap levels (asked for on a named thread on first call; `None`
    /// meanwhile).
    pub fn segment_minimap(&mut self) -> Option<std::sync::Arc<Vec<crate::lod::minimap::MinMax>>> {
        if self.plot.segment_minimap.as_ref().is_none_or(|p| p.device != self.doc.device) {
            self.plot.segment_minimap =
                Some(super::background::Pending::start("minimap", &self.doc.session, self.doc.device, |s, d| {
                    std::sync::Arc::new(segment_levels(s, d))
                }));
        }
        self.plot.segment_minimap.as_ref().and_then(super::background::Pending::get).cloned()
    }

    /// True while the segment timeline's minimap levels asked for are being built.
    pub fn segment_minimap_pending(&self) -> bool {
        self.doc.plane == Plane::Segments && self.plot.segment_minimap.as_ref().is_some_and(|p| p.get().is_none())
    }
}

/// The view's brush over the minimap, and clicks or drags on it that move the view.
fn brush_ui(painter: &egui::Painter, response: &egui::Response, rect: Rect, doc: &mut Document, n: usize) {
    if !doc.time_axis {
        let (v0, v1) = (doc.view.x0 / n as f64, doc.view.x1 / n as f64);
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
            let span = doc.view.x1 - doc.view.x0;
            doc.view.x0 = centre - span / 2.0;
            doc.view.x1 = centre + span / 2.0;
            doc.view.clamp_x(n as f64);
        }
    }
}

/// The stacked category overview in the minimap's place: per pixel column, the categories'
/// bytes at the column's highest total, stacked in legend order (hidden ones dimmed).
fn category_overview(painter: &egui::Painter, rect: Rect, doc: &Document, c: &DeviceCategories, per: f64) {
    use crate::model::Category;
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
            let colour = if doc.hidden_categories & (1 << k) != 0 {
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
/// overview). `categories`: the device's, once in.
pub fn legend_ui(ui: &mut egui::Ui, doc: &mut Document, categories: Option<&DeviceCategories>) {
    use crate::model::Category;
    let Some(c) = categories else {
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
            let hidden = doc.hidden_categories & (1 << k) != 0;
            let colour = if hidden { super::categories::HIDDEN } else { super::categories::colour(Category::ALL[k]) };
            let text = format!("{} {:.0}%", Category::ALL[k].name(), at_peak[k] as f64 * 100.0 / total as f64);
            let label = egui::RichText::new(text).color(colour);
            if ui.selectable_label(!hidden, label).clicked() {
                toggle = Some(k);
            }
        }
    });
    if let Some(k) = toggle {
        doc.hidden_categories ^= 1 << k;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{Archive, Session};

    fn golden() -> Session {
        let name = format!("../tests/data/golden/gpt2_small.v{}.memviz", memviz_format::FORMAT_VERSION);
        let bytes = std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap();
        Session::from_archive(Archive::from_memory(&bytes, std::path::Path::new("g.memviz")).unwrap())
    }

    /// The segment timeline's levels, built on the minimap's thread, hold each bucket's min and
    /// max of the segment totals, level after level up to one bucket.
    #[test]
    fn the_segment_minimap_levels_are_the_min_and_max_of_the_segment_totals() {
        let session = golden();
        let totals = session.stacked(DeviceIdx(0), Plane::Segments).expect("a segment timeline").layout.totals;
        let levels = segment_levels(&session, DeviceIdx(0));
        assert!(totals.len() > 64 && levels.len() >= 2, "{} segment actions", totals.len());
        for m in &levels {
            let apb = m.actions_per_bucket as usize;
            assert_eq!(m.max.len(), totals.len().div_ceil(apb));
            for (i, bucket) in totals.chunks(apb).enumerate() {
                assert_eq!((m.min[i], m.max[i]), (*bucket.iter().min().unwrap(), *bucket.iter().max().unwrap()));
            }
        }
        assert_eq!(levels.last().unwrap().max, [*totals.iter().max().unwrap()]);
    }

    /// A column reads the totals without a level; with one, the whole buckets it touches, which
    /// hold the column's own extremes.
    #[test]
    fn a_columns_extremes_come_from_the_totals_or_the_buckets_it_touches() {
        let totals: Vec<u64> = (0..1000u64).map(|k| 100 + (k * 7919) % 503).collect();
        let levels = crate::lod::minimap::build(&totals);
        let l = &levels[0];
        for (a, b) in [(0, 1), (3, 70), (64, 128), (500, 1000), (999, 1000)] {
            let column = &totals[a..b];
            let exact = (*column.iter().min().unwrap(), *column.iter().max().unwrap());
            assert_eq!(column_extremes(&totals, None, a, b), exact);
            let (lo, hi) = column_extremes(&totals, Some((l.actions_per_bucket, &l.min, &l.max)), a, b);
            let whole = &totals[a / 64 * 64..(b.div_ceil(64) * 64).min(totals.len())];
            assert!(lo <= exact.0 && hi >= exact.1, "{a}..{b}");
            assert_eq!((lo, hi), (*whole.iter().min().unwrap(), *whole.iter().max().unwrap()), "{a}..{b}");
        }
    }
}
