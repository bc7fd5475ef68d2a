//! The main screen of an open archive: the top bar, the view switch and the search bar, the
//! timeline's plot with its overlays, saving a PNG of it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use eframe::egui::{self, Rect, Sense, pos2};
use eframe::egui_wgpu;

use super::document::Document;
use super::gpu::{Globals, TimelinePaint};
use super::open_view::ViewState;

use super::app::ViewerOptions;
use super::data::Plane;
use super::details::stack_text;
use super::memory_map::{MemoryMap, map_event};
use super::tabs::Tab;
use super::timeline::Open;
use super::{panels, theme};
use crate::model::NONE;

/// The app state the main screen changes besides the timeline.
pub(super) struct Screen<'a> {
    pub(super) tab: &'a mut Tab,
    pub(super) map: &'a mut MemoryMap,
    pub(super) answers: &'a mut super::answers_panel::AnswersPanel,
    pub(super) stack_filter: &'a mut String,
    pub(super) full_paths: &'a mut bool,
    /// The file the user opened (what "copy link" names) and the last status line.
    pub(super) source: Option<&'a Path>,
    pub(super) status: &'a mut Option<String>,
}

/// The main screen of an open archive: the top bar with the view switch, then the view.
pub(super) fn timeline_screen(ui: &mut egui::Ui, t: &mut Open, options: &ViewerOptions, s: Screen<'_>) {
    if t.doc.preview {
        return preview_screen(ui, t, options, s);
    }
    if let Some(tab) = view_key(ui.ctx()) {
        *s.tab = tab;
    }
    let path = s.source.map_or_else(|| t.doc.session.archive.path.clone(), Path::to_path_buf);
    if options.platform.showing(Some((&path, &ViewState::of(&t.doc, *s.tab)))) {
        ui.ctx().request_repaint_after(std::time::Duration::from_millis(300));
    }
    egui::Panel::top("top").show(ui, |ui| panels::top_bar_ui(ui, t, s.tab, &mut s.answers.open, true));
    egui::Panel::top("share").show(ui, |ui| {
        ui.horizontal(|ui| {
            if ui.button("copy link").on_hover_text("copy the link that reopens this view").clicked() {
                let cmd = options.platform.link(&path, &ViewState::of(&t.doc, *s.tab));
                ui.ctx().copy_text(cmd.clone());
                *s.status = Some(format!("copied: {cmd}"));
            }
            if ui.button("save PNG").on_hover_text("write this view to a PNG in the current folder").clicked() {
                let out = save_png(ui.ctx(), &options.platform, &t.doc, s.source);
                *s.status = Some(format!("saved {}", out.display()));
            }
            if let Some(text) = s.status.as_deref() {
                ui.weak(text);
            }
            panels::facts_ui(ui, t, options);
        });
    });
    if ui.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::F)) {
        t.doc.search.open = true;
        ui.ctx().memory_mut(|m| m.request_focus(egui::Id::unique("memviz search")));
    }
    if t.doc.search.open {
        egui::Panel::top("search").show(ui, |ui| search_ui(ui, t));
    }
    let plane = if *s.tab == Tab::Segments { Plane::Segments } else { Plane::Elements };
    let has_plane = t.set_plane(plane);
    if t.doc.pools_view != (*s.tab == Tab::Pools) {
        t.doc.pools_view = *s.tab == Tab::Pools;
        t.plot.invalidate_raster();
    }
    if *s.tab == Tab::Settings {
        egui::CentralPanel::default().frame(egui::Frame::new()).show(ui, |ui| {
            super::settings::ui(ui, t.doc.session.allocator_settings().as_ref());
        });
        return;
    }
    if !has_plane {
        egui::CentralPanel::default().frame(egui::Frame::new()).show(ui, |ui| {
            ui.centered_and_justified(|ui| {
                ui.label("This archive was made before format 4, without the segment timeline: re-index to see this.")
            });
        });
        return;
    }
    let details = egui::Panel::bottom("details").resizable(true).default_size(panels::DETAILS_HEIGHT);
    let details = if t.doc.selection.pinned.is_some() { details.min_size(panels::DETAILS_HEIGHT) } else { details };
    details.show(ui, |ui| {
        panels::bottom_bar_ui(ui, t, options, s.stack_filter, s.full_paths);
    });
    egui::Panel::bottom("minimap").exact_size(theme::MINIMAP_HEIGHT).show(ui, |ui| panels::minimap_ui(ui, t));
    let pools = if t.doc.pools_view { t.pools().cloned() } else { None };
    egui::Panel::bottom("lines legend").show(ui, |ui| super::legend::timeline_ui(ui, &t.doc, pools));
    if t.doc.colour_by_category && t.doc.plane == Plane::Elements {
        egui::Panel::bottom("legend").show(ui, |ui| {
            let categories = t.plot.categories_of(t.doc.device);
            panels::legend_ui(ui, &mut t.doc, categories);
        });
    }
    if *s.tab == Tab::State {
        let height = ui.available_height() * 0.55;
        egui::Panel::right("events").resizable(true).default_size(300.0).show(ui, |ui| {
            let at = map_event(t);
            super::events_list::ui(ui, &mut t.doc, s.map, at);
        });
        egui::Panel::bottom("memory map").resizable(true).default_size(height).show(ui, |ui| {
            let at = map_event(t);
            s.map.ui(ui, &mut t.doc, at);
        });
        let at = map_event(t);
        super::events_list::keys(ui, &mut t.doc, at);
    } else if s.answers.open && *s.tab == Tab::Timeline {
        let frame = super::answers_panel::PanelFrame::of(t);
        egui::Panel::right("answers").resizable(true).default_size(380.0).show(ui, |ui| s.answers.ui(ui, &frame));
    }
    // Unfilled: the frame is cleared to the background colour already (offscreen: the pass's
    // clear; the window: `clear_color`), and on a CPU rasteriser each full-plot fill costs a
    // fifth of the frame.
    let oom = egui::CentralPanel::default().frame(egui::Frame::new()).show(ui, |ui| plot_ui(ui, t, options)).inner;
    // A click on an OOM marker: the memory map just before it.
    if let Some(e) = oom {
        *s.tab = Tab::State;
        t.doc.selection.event = Some(e - 1);
    }
    let copy = ui.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::C));
    if copy && let Some(hit) = t.doc.selection.focus() {
        let stack = t.stacked().sites.get(hit.element.index()).copied().unwrap_or(NONE);
        ui.ctx().copy_text(stack_text(&t.doc.session, stack));
    }
}

/// The first frame while the rest of the archive arrives (`Document::preview`): the archive's
/// name, the minimap, and the plot's coarse tiles with its axes — what the first parts hold.
/// The panels around the plot are the whole screen's, at their sizes (the bars' controls
/// disabled, the bottom bar's hint), so the plot stays where it is when the rest arrives.
fn preview_screen(ui: &mut egui::Ui, t: &mut Open, options: &ViewerOptions, s: Screen<'_>) {
    egui::Panel::top("top").show(ui, |ui| panels::top_bar_ui(ui, t, s.tab, &mut s.answers.open, false));
    egui::Panel::top("share").show(ui, |ui| {
        ui.horizontal(|ui| {
            ui.disable();
            let _ = ui.button("copy link");
            let _ = ui.button("save PNG");
            ui.separator();
            ui.weak("the rest of the archive is on its way");
        });
    });
    let details = egui::Panel::bottom("details").resizable(true).default_size(panels::DETAILS_HEIGHT);
    let details = if options.pin.is_some() { details.min_size(panels::DETAILS_HEIGHT) } else { details };
    details.show(ui, |ui| {
        // (A link's pinned allocation comes with the rest: the bar is as tall as it will be.)
        ui.weak(if options.pin.is_some() {
            "the pinned allocation, once the rest is here"
        } else {
            panels::BOTTOM_HINT
        });
    });
    egui::Panel::bottom("minimap").exact_size(theme::MINIMAP_HEIGHT).show(ui, |ui| panels::minimap_ui(ui, t));
    egui::Panel::bottom("lines legend").show(ui, |ui| super::legend::timeline_ui(ui, &t.doc, None));
    if t.doc.colour_by_category && t.doc.plane == Plane::Elements {
        // The categories come with the rest (they read every element): their row says so.
        egui::Panel::bottom("legend").show(ui, |ui| panels::legend_ui(ui, &mut t.doc, None));
    }
    egui::CentralPanel::default().frame(egui::Frame::new()).show(ui, |ui| plot_ui(ui, t, options));
}

/// The view keys 1–5 switch to (in the view switch's order), unless a text field has the keys.
fn view_key(ctx: &egui::Context) -> Option<Tab> {
    const KEYS: [egui::Key; 5] = [egui::Key::Num1, egui::Key::Num2, egui::Key::Num3, egui::Key::Num4, egui::Key::Num5];
    if ctx.egui_wants_keyboard_input() {
        return None;
    }
    ctx.input_mut(|i| KEYS.iter().position(|&k| i.consume_key(egui::Modifiers::NONE, k))).map(|n| Tab::ALL[n])
}

/// `NAME.png`, or `NAME-2.png`, `NAME-3.png`, … whichever does not exist yet: a save never
/// overwrites an earlier one.
pub fn unused_png_name(name: &str) -> PathBuf {
    let first = PathBuf::from(format!("{name}.png"));
    std::iter::once(first)
        .chain((2..).map(|n| PathBuf::from(format!("{name}-{n}.png"))))
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .expect("an unused name")
}

/// "save PNG": asks the window for this frame, written (by the integration, once it has the
/// pixels) to the working folder, named after the file and the actions shown.
pub(super) fn save_png(
    ctx: &egui::Context,
    platform: &crate::platform::PlatformRef,
    doc: &Document,
    source: Option<&Path>,
) -> PathBuf {
    let stem = source
        .unwrap_or(&doc.session.archive.path)
        .file_stem()
        .map_or("memviz".into(), |s| s.to_string_lossy().into_owned());
    let out = unused_png_name(&format!("{stem}-{:.0}-{:.0}", doc.view.x0.max(0.0), doc.view.x1));
    let (target, platform) = (out.clone(), platform.clone());
    ctx.request_screenshot(move |image| {
        let [w, h] = image.size;
        let rgba: Vec<u8> = image.pixels.iter().flat_map(|c| c.to_array()).collect();
        let written =
            super::offscreen::png_bytes(&rgba, w as u32, h as u32).and_then(|png| platform.write(&target, &png));
        if let Err(e) = written {
            eprintln!("warning: could not save {}: {e:#}", target.display());
        }
    });
    out
}

/// The search bar: the field, the count, and the next / previous match (Enter / Shift+Enter).
pub(super) fn search_ui(ui: &mut egui::Ui, t: &mut Open) {
    let session = Arc::clone(&t.doc.session);
    ui.horizontal(|ui| {
        ui.label("find");
        let field = egui::TextEdit::singleline(&mut t.doc.search.text)
            .id(egui::Id::unique("memviz search"))
            .hint_text("address (0x…) or frame text (/regex/)")
            .desired_width(360.0);
        let response = ui.add(field);
        t.doc.search.update(&session, t.doc.device, &t.plot.platform, ui.ctx());
        let entered = response.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        let back = ui.input(|i| i.modifiers.shift);
        let mut go = entered.then_some(!back);
        if ui.button("▲").on_hover_text("previous match (Shift+Enter)").clicked() {
            go = Some(false);
        }
        if ui.button("▼").on_hover_text("next match (Enter)").clicked() {
            go = Some(true);
        }
        if let Some(forward) = go
            && let Some(id) = t.doc.search.step(forward)
        {
            t.go_to_element(id);
            response.request_focus();
        }
        match (&t.doc.search.error, t.doc.search.matches.len(), t.doc.search.current) {
            (Some(e), _, _) => ui.colored_label(theme::CAPACITY, e.as_str()),
            (None, 0, _) if t.doc.search.pending() => ui.weak("searching…"),
            (None, 0, _) if !t.doc.search.text.trim().is_empty() => ui.label("no match"),
            (None, 0, _) => ui.weak("every allocation that ever covered an address, or a frame's text"),
            (None, n, Some(i)) => ui.label(format!("match {} of {n}", i + 1)),
            (None, n, None) => ui.label(format!("{n} match{}", if n == 1 { "" } else { "es" })),
        };
        if ui.button("✕").on_hover_text("close (Esc)").clicked() || ui.input(|i| i.key_pressed(egui::Key::Escape)) {
            t.doc.search.open = false;
        }
    });
}

/// A tick at the top of the plot where each match of the search was allocated, so a match too
/// small to be drawn at this zoom is still found (the current one taller).
pub(super) fn search_ticks(painter: &egui::Painter, doc: &Document, rect: Rect) {
    if !doc.search.active() || doc.time_axis || doc.plane != Plane::Elements {
        return;
    }
    doc.search.ticks(painter, &doc.view, rect);
}

/// The plot: GPU quads through a paint callback, egui overlays, input, tooltip; the OOM event
/// whose marker was clicked.
pub(super) fn plot_ui(ui: &mut egui::Ui, t: &mut Open, options: &ViewerOptions) -> Option<i64> {
    let full = ui.available_rect_before_wrap();
    let lane = Rect::from_min_max(
        pos2(full.left() + theme::Y_AXIS_WIDTH, full.top()),
        pos2(full.right(), full.top() + theme::ANNOTATION_LANE),
    );
    let rect = Rect::from_min_max(
        pos2(full.left() + theme::Y_AXIS_WIDTH, lane.bottom() + 2.0),
        pos2(full.right() - 8.0, full.bottom() - theme::X_AXIS_HEIGHT),
    );
    if rect.width() < 10.0 || rect.height() < 10.0 {
        return None;
    }
    let response = ui.allocate_rect(rect, Sense::click_and_drag());
    let ppp = ui.ctx().pixels_per_point();
    t.plot.plot_rect = rect;
    t.input(ui, &response);
    let quads = t.draw_list(rect, ppp);
    let frame_uploads = t.plot.textures.begin_frame();
    if t.doc.colour_by_category && t.categories().is_none() {
        ui.ctx().request_repaint_after(std::time::Duration::from_millis(30));
    }
    let sites = t.site_table();
    let colours = t.colours();
    let mode = t.shader_mode();
    let globals = Globals {
        hovered: t.doc.selection.hovered.map(|h| h.element).or(t.doc.selection.map_hover).map_or(NONE, |e| e.0),
        pinned: t.doc.selection.pinned.map_or(NONE, |h| h.element.0),
        outlines: u32::from(t.doc.selection.hovered.is_some() || t.doc.selection.pinned.is_some()),
        mode,
        n_sites: sites.as_ref().as_ref().len() as u32,
        n_colours: colours.len() as u32,
        search: u32::from(t.doc.search.active()),
        pad: 0,
    };
    let paint = TimelinePaint {
        slot: t.plot.slot,
        evict: frame_uploads.evict,
        colours_for: (t.doc.device.0 as u32 * 2 + t.doc.plane as u32, t.colour_key()),
        sites,
        by_site: t.keys_by_site(),
        colours,
        marks: if t.doc.search.active() {
            (t.doc.search.generation, Arc::clone(&t.doc.search.marks))
        } else {
            (0, Arc::new(Vec::new()))
        },
        uploads: frame_uploads.uploads,
        quads,
        globals,
        clip: rect,
    };
    t.grid(ui.painter());
    ui.painter().add(egui_wgpu::Callback::new_paint_callback(rect, paint));
    if t.doc.preview {
        t.overlays(ui.painter(), full, options.gpu);
        return None;
    }
    t.pools_overlay(ui);
    t.reserved_overlay(ui.painter());
    t.floor_overlay(ui.painter());
    t.overlays(ui.painter(), full, options.gpu);
    t.annotations_ui(ui, lane, &options.annotations);
    search_ticks(ui.painter(), &t.doc, rect);
    let oom = t.oom_markers(ui);
    t.load_wanted_times();
    if t.plot.worker.busy() || t.plot.textures.pending() > 0 {
        ui.ctx().request_repaint();
    }
    if let Some(hit) = t.doc.selection.hovered
        && !t.plot.tooltip_hidden
        && let Some(gathered) = t.element_info(hit.element, options)
        && let Some(mut info) = Option::clone(&gathered)
    {
        if let Some(c) = t.category_of(hit.element) {
            info.attributes.insert(0, ("category", c.name().to_owned()));
        }
        let start = t.doc.session.time_base_us();
        response.on_hover_ui_at_pointer(|ui| panels::info_grid_ui(ui, &info.lines(start), "tooltip"));
    }
    oom
}
