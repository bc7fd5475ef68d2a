//! The answers side panel: what is live at the cursor (table and an icicle of live bytes by
//! stack), and the analysis of the last selected range. The same `analysis::live` and
//! `analysis::range` code answers `memviz at` / `memviz range`, on a worker: the panel shows the
//! answer for the cursor once it is in, the last one until then.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use eframe::egui::{self, Rect, Sense, Stroke, pos2, vec2};

use super::background::Latest;
use super::categories::DeviceCategories;
use super::data::Session;
use super::document::Document;
use super::theme;
use super::timeline::Open;
use crate::analysis::frames::{self, FrameSource};
use crate::analysis::groups::GroupBy;
use crate::analysis::live::{self, LiveSet};
use crate::analysis::range::{self, RangeReport};
use crate::analysis::units;
use crate::archive::DeviceData;
use crate::derive::timeline::TimelineRef;
use crate::model::{DeviceIdx, NONE};

/// Levels of the icicle drawn at most (outermost frames first).
const ICICLE_DEPTH: usize = 16;
const ROW: f32 = 16.0;

#[derive(Default)]
pub struct AnswersPanel {
    pub open: bool,
    /// The worker answering for the session shown.
    worker: Option<(Arc<Session>, Latest<Key, Answer>)>,
}

/// What the panel asks: what is live after an action, or what a range of actions did.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ask {
    Live(i64),
    Range(u32, u32),
}

#[derive(Clone, PartialEq)]
struct Key {
    device: DeviceIdx,
    ask: Ask,
    /// The device's categories once they are in (answers then say them too).
    categories: Option<Categories>,
}

/// A device's categories, shared with the timeline; equal when they are the same.
#[derive(Clone)]
struct Categories(Arc<OnceLock<DeviceCategories>>);

impl PartialEq for Categories {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

enum Answer {
    Live(LiveSet, Icicle),
    Range(RangeReport),
}

fn answer(session: &Session, key: &Key) -> Answer {
    let data = DeviceData::new(session, key.device);
    let cats = key.categories.as_ref().and_then(|c| c.0.get()).map(|c| c.categories.as_slice());
    let tl = TimelineRef { categories: cats, ..data.timeline() };
    match key.ask {
        Ask::Live(k) => {
            let set = live::at(&tl, session.root(), k, GroupBy::Stack);
            let ids = session.checkpoints(key.device).stack_after(tl.layout, k).ids;
            Answer::Live(set, Icicle::build(session, key.device, &ids))
        }
        Ask::Range(a, b) => Answer::Range(range::range(&tl, session.root(), a, b)),
    }
}

/// A tree of live bytes by frame, outermost frame at the root.
#[derive(Default)]
struct Icicle {
    /// `(frame, bytes, depth, x0, width)` with x in fractions of the total.
    nodes: Vec<(u32, u64, usize, f64, f64)>,
    total: u64,
}

impl Icicle {
    fn build(session: &Session, device: DeviceIdx, ids: &[u32]) -> Icicle {
        let root = session.root();
        let sizes = session.layout(device).elements.size;
        let sites = session.sites(device);
        // Children of each node by frame, and bytes per node; node 0 is the root.
        let mut children: Vec<HashMap<u32, usize>> = vec![HashMap::new()];
        let mut bytes = vec![0u64];
        let mut frame_of = vec![NONE];
        for &id in ids {
            let size = sizes[id as usize];
            bytes[0] += size;
            let site = sites.get(id as usize).copied().unwrap_or(NONE);
            let mut node = 0;
            for &f in root.stack(site).iter().rev().filter(|&&f| frames::is_shown(root, f)).take(ICICLE_DEPTH) {
                node = match children[node].get(&f) {
                    Some(&n) => n,
                    None => {
                        children.push(HashMap::new());
                        bytes.push(0);
                        frame_of.push(f);
                        let n = bytes.len() - 1;
                        children[node].insert(f, n);
                        n
                    }
                };
                bytes[node] += size;
            }
        }
        let total = bytes[0].max(1);
        let mut nodes = Vec::new();
        // Depth-first, children by bytes descending, so big subtrees sit left.
        let mut todo = vec![(0usize, 0usize, 0.0f64)];
        while let Some((n, depth, x0)) = todo.pop() {
            if n != 0 {
                nodes.push((frame_of[n], bytes[n], depth - 1, x0, bytes[n] as f64 / total as f64));
            }
            let mut kids: Vec<usize> = children[n].values().copied().collect();
            kids.sort_by(|a, b| bytes[*b].cmp(&bytes[*a]).then(frame_of[*a].cmp(&frame_of[*b])));
            let mut x = x0;
            for k in kids {
                todo.push((k, depth + 1, x));
                x += bytes[k] as f64 / total as f64;
            }
        }
        Icicle { nodes, total: bytes[0] }
    }
}

/// What the panel reads of a frame: the document shown, the action under its focus (the
/// hovered or pinned point) and the device's categories once in — never the plot.
pub struct PanelFrame<'a> {
    pub doc: &'a Document,
    pub at: Option<usize>,
    pub categories: Option<Arc<OnceLock<DeviceCategories>>>,
}

impl<'a> PanelFrame<'a> {
    /// This frame's, of the archive open in `t`.
    pub fn of(t: &'a Open) -> PanelFrame<'a> {
        let at = t.doc.selection.focus().and_then(|h| t.action_at(h.x));
        PanelFrame { doc: &t.doc, at, categories: t.categories_shared() }
    }
}

impl AnswersPanel {
    pub fn ui(&mut self, ui: &mut egui::Ui, t: &PanelFrame<'_>) {
        egui::ScrollArea::vertical().auto_shrink([false, false]).show(ui, |ui| {
            ui.heading("Live at cursor");
            self.live_ui(ui, t);
            ui.separator();
            ui.heading("Selected range");
            self.range_ui(ui, t);
        });
    }

    /// True while an answer is being worked out.
    pub fn busy(&self) -> bool {
        self.worker.as_ref().is_some_and(|(_, w)| w.busy())
    }

    /// The answer to `ask` on the device shown, once it is in.
    fn answer(&mut self, ctx: &egui::Context, t: &PanelFrame<'_>, ask: Ask) -> Option<Arc<Answer>> {
        if self.worker.as_ref().is_none_or(|(s, _)| !Arc::ptr_eq(s, &t.doc.session)) {
            let session = Arc::clone(&t.doc.session);
            let worker = Latest::start("answers", ctx.clone(), move |key: &Key| answer(&session, key));
            self.worker = Some((Arc::clone(&t.doc.session), worker));
        }
        let (_, worker) = self.worker.as_ref()?;
        let categories = t.categories.clone().map(Categories);
        worker.get(&Key { device: t.doc.device, ask, categories })
    }

    fn live_ui(&mut self, ui: &mut egui::Ui, t: &PanelFrame<'_>) {
        let Some(k) = t.at else {
            ui.weak("Hover over (or pin) the timeline to see everything live at that moment.");
            return;
        };
        let Some(answer) = self.answer(ui.ctx(), t, Ask::Live(k as i64)) else {
            ui.weak(format!("after action {}: …", units::thousands(k as u64)));
            return;
        };
        let Answer::Live(set, icicle) = &*answer else { return };
        ui.label(format!(
            "after action {}: {} in {} allocations ({:.0} % of the peak)",
            units::thousands(k as u64),
            units::bytes(set.total_bytes),
            units::thousands(set.count),
            100.0 * set.total_bytes as f64 / set.peak_bytes.max(1) as f64
        ));
        if !set.annotation.is_empty() {
            ui.weak(format!("during {}", set.annotation.join(" > ")));
        }
        egui::Grid::new("live-sites").striped(true).num_columns(3).show(ui, |ui| {
            ui.strong("bytes");
            ui.strong("share");
            ui.strong("site");
            ui.end_row();
            for g in set.groups.iter().take(12) {
                ui.monospace(units::bytes(g.bytes));
                ui.monospace(format!("{:.1} %", g.share_pct));
                ui.label(format!("{} ×{}", g.label, g.count));
                ui.end_row();
            }
        });
        if let Some(by) = &set.by_category {
            ui.add_space(4.0);
            category_table(ui, "live-categories", by);
        }
        ui.add_space(6.0);
        ui.label("live bytes by stack (outermost frame on top)");
        icicle_ui(ui, t.doc, icicle);
    }

    fn range_ui(&mut self, ui: &mut egui::Ui, t: &PanelFrame<'_>) {
        let Some((a, b)) = t.doc.selection.range else {
            ui.weak("Ctrl/Cmd + drag over the timeline to select a range.");
            return;
        };
        let Some(answer) = self.answer(ui.ctx(), t, Ask::Range(a, b)) else {
            ui.weak("…");
            return;
        };
        let Answer::Range(r) = &*answer else { return };
        let rows = [
            ("actions", format!("{} .. {}", units::thousands(u64::from(r.start)), units::thousands(u64::from(r.end)))),
            ("allocated", format!("{} in {}", units::bytes(r.allocated.bytes), units::thousands(r.allocated.count))),
            ("freed", format!("{} in {}", units::bytes(r.freed.bytes), units::thousands(r.freed.count))),
            ("net growth", units::signed_bytes(i128::from(r.net_bytes))),
            ("peak inside", units::bytes(r.peak_bytes)),
            (
                "still live after",
                format!("{} in {}", units::bytes(r.still_live.bytes), units::thousands(r.still_live.count)),
            ),
        ];
        super::panels::info_grid_ui(ui, &rows.map(|(k, v)| (k.to_owned(), v)), "range");
        if let Some(by) = r.still_live_by_category.as_ref().filter(|b| !b.is_empty()) {
            ui.label("still live after, by category:");
            category_table(ui, "range-categories", by);
        }
        if !r.still_live_by_site.is_empty() {
            ui.label("leak candidates (allocated in the range, live after it):");
            for g in r.still_live_by_site.iter().take(6) {
                ui.monospace(format!("{:>10}  {}", units::bytes(g.bytes), g.label));
            }
        }
    }
}

/// Bytes, share and count per category, each in its legend colour.
fn category_table(ui: &mut egui::Ui, id: &str, by: &[crate::analysis::categories::CategoryBytes]) {
    egui::Grid::new(id).striped(true).num_columns(3).show(ui, |ui| {
        ui.strong("bytes");
        ui.strong("share");
        ui.strong("category");
        ui.end_row();
        for c in by {
            ui.monospace(units::bytes(c.bytes));
            ui.monospace(format!("{:.1} %", c.share_pct));
            ui.colored_label(super::categories::colour(c.category), format!("{} ×{}", c.category.name(), c.count));
            ui.end_row();
        }
    });
}

fn icicle_ui(ui: &mut egui::Ui, doc: &Document, icicle: &Icicle) {
    let depth = icicle.nodes.iter().map(|n| n.2 + 1).max().unwrap_or(0);
    let width = ui.available_width().max(50.0);
    let (rect, response) = ui.allocate_exact_size(vec2(width, depth as f32 * ROW), Sense::hover());
    let painter = ui.painter_at(rect);
    let root = doc.session.root();
    let font = egui::FontId::proportional(10.5);
    let mut hovered = None;
    for &(frame, bytes, d, x0, w) in &icicle.nodes {
        let px = w as f32 * rect.width();
        if px < 1.0 {
            continue;
        }
        let r = Rect::from_min_size(
            pos2(rect.left() + x0 as f32 * rect.width(), rect.top() + d as f32 * ROW),
            vec2(px, ROW - 1.0),
        );
        let c = theme::palette(frame);
        let fill = egui::Color32::from_rgb(
            (c & 0xff) as u8 / 2 + 40,
            (c >> 8 & 0xff) as u8 / 2 + 40,
            (c >> 16 & 0xff) as u8 / 2 + 40,
        );
        painter.rect_filled(r, 1.0, fill);
        if px > 40.0 {
            let label = root.name(frame);
            let chars = ((px - 6.0) / 6.0) as usize;
            let text: String = if label.chars().count() > chars {
                label.chars().take(chars.saturating_sub(1)).chain(['…']).collect()
            } else {
                label.to_owned()
            };
            painter.text(
                r.left_center() + vec2(3.0, 0.0),
                egui::Align2::LEFT_CENTER,
                text,
                font.clone(),
                egui::Color32::WHITE,
            );
        }
        if response.hover_pos().is_some_and(|p| r.contains(p)) {
            painter.rect_stroke(r, 1.0, Stroke::new(1.0, egui::Color32::WHITE), egui::StrokeKind::Inside);
            hovered = Some((frame, bytes));
        }
    }
    if let Some((frame, bytes)) = hovered {
        let share = 100.0 * bytes as f64 / icicle.total.max(1) as f64;
        response.on_hover_text(format!(
            "{}\n{} ({share:.1} % of live)",
            frames::describe(root, frame, false),
            units::bytes(bytes)
        ));
    }
}
