//! The memory map (the *Allocator State* view): every segment at the selected event drawn to
//! scale, its blocks coloured by allocation site with the timeline's palette, pending frees red,
//! rounding waste hatched, holes left dark and the largest one outlined.
//!
//! Layout: the segments in address order laid end to end on one line of bytes (a small gap
//! between two), at one scale for the whole map, and that line wrapped into rows like text. A
//! segment is as wide as its bytes wherever it sits, so 214 equal 20 MiB segments (frag_oom) read
//! as a grid of equal bars and a 1 GiB segment beside 2 MiB ones (scale_2m7) as a long run across
//! rows: sizes compare at a glance, and address order keeps neighbours together. PyTorch's viewer
//! packs segments into rows by size, which hides where they sit.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use eframe::egui::{self, Color32, Pos2, Rect, Stroke, pos2};

use super::data::Session;
use super::document::Document;
use super::state_worker::{StateWork, StateWorker};
use super::theme;
use super::timeline::{Open, stacked_in};
use crate::allocator::{Block, SegmentMap, State, Summary};
use crate::model::{ActionIdx, DeviceIdx, ElementId};

const ROW_H: f32 = 18.0;
const ROW_GAP: f32 = 5.0;
const SEGMENT_GAP: f64 = 3.0;
pub const FREE: Color32 = Color32::from_rgb(44, 47, 54);
pub const PENDING: Color32 = Color32::from_rgb(230, 60, 60);
pub const LARGEST_HOLE: Color32 = Color32::from_rgb(255, 210, 80);
pub const SEGMENT_EDGE: Color32 = Color32::from_rgb(110, 115, 125);

/// Where every byte of the map is drawn: segment `i` starts `starts[i]` points along the line,
/// which wraps every `rect.width()` points; the rectangle's top-left shows point `origin` of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Geometry {
    pub rect: Rect,
    pub bytes_per_point: f64,
    pub gap: f64,
    pub starts: Vec<f64>,
    pub origin: f64,
}

/// Zoom and pan of the map: `zoom` × the fitted scale, `origin` the line point at the top left.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MapView {
    pub zoom: f64,
    pub origin: f64,
}

impl Default for MapView {
    fn default() -> Self {
        MapView { zoom: 1.0, origin: 0.0 }
    }
}

impl Geometry {
    /// `segments` in `rect` at `view`: the fitted scale (the whole line fills the rows there)
    /// times the zoom.
    pub fn new(segments: &[SegmentMap], rect: Rect, view: MapView) -> Geometry {
        let mut g = Geometry::fit(segments, rect);
        g.bytes_per_point /= view.zoom;
        g.gap *= view.zoom.sqrt().min(4.0);
        let mut at = 0.0;
        for (s, m) in g.starts.iter_mut().zip(segments) {
            *s = at;
            at += m.segment.size as f64 / g.bytes_per_point + g.gap;
        }
        g.origin = view.origin;
        g
    }

    /// The line point under a screen point (rows below the last still count).
    pub fn line_at(&self, p: Pos2) -> f64 {
        let row = ((p.y - self.rect.top()) / (ROW_H + ROW_GAP)).floor();
        self.origin + f64::from(row) * f64::from(self.rect.width()) + f64::from(p.x - self.rect.left())
    }

    /// Fits `segments` into `rect`: the scale that makes the whole line fill the rows there.
    pub fn fit(segments: &[SegmentMap], rect: Rect) -> Geometry {
        let rows = ((rect.height() + ROW_GAP) / (ROW_H + ROW_GAP)).floor().max(1.0) as f64;
        let room = rows * f64::from(rect.width().max(1.0));
        let bytes: u64 = segments.iter().map(|m| m.segment.size).sum();
        let n = segments.len() as f64;
        // Gaps only while they leave most of the room to bytes.
        let gap = if n * SEGMENT_GAP < room / 4.0 { SEGMENT_GAP } else { 0.0 };
        let bytes_per_point = (bytes.max(1) as f64 / (room - n * gap).max(1.0)).max(1e-9);
        let mut starts = Vec::with_capacity(segments.len());
        let mut at = 0.0;
        for m in segments {
            starts.push(at);
            at += m.segment.size as f64 / bytes_per_point + gap;
        }
        Geometry { rect, bytes_per_point, gap, starts, origin: 0.0 }
    }

    /// Where byte `addr` of segment `i` lies along the line.
    pub(super) fn along(&self, segments: &[SegmentMap], i: usize, addr: u64) -> f64 {
        self.starts[i] + addr.saturating_sub(segments[i].segment.addr) as f64 / self.bytes_per_point
    }

    /// The rectangles that draw `[a, b)` of the line (a run that wraps takes one per row).
    pub fn pieces(&self, a: f64, b: f64) -> Vec<Rect> {
        let mut out = Vec::new();
        self.each_piece(a, b, |r| out.push(r));
        out
    }

    /// Calls `f` with each rectangle of [`Self::pieces`], allocating nothing.
    pub fn each_piece(&self, a: f64, b: f64, mut f: impl FnMut(Rect)) {
        let w = f64::from(self.rect.width().max(1.0));
        // Relative to the origin, whose row is the first one shown: what lies before it is above.
        let (a, b) = (a - self.origin, b - self.origin);
        let mut at = a.max(0.0);
        while at < b {
            let row = (at / w).floor();
            let end = b.min((row + 1.0) * w);
            let top = self.rect.top() + row as f32 * (ROW_H + ROW_GAP);
            if top > self.rect.bottom() {
                break;
            }
            let x0 = self.rect.left() + (at - row * w) as f32;
            let x1 = self.rect.left() + (end - row * w) as f32;
            f(Rect::from_min_max(pos2(x0, top), pos2(x1.max(x0 + 0.5), top + ROW_H)));
            at = end;
        }
    }

    /// The stretch of the line on screen: the rows from the origin's down to the last one
    /// whose top is inside the rectangle.
    pub fn on_screen(&self) -> (f64, f64) {
        let rows = (f64::from(self.rect.height()) / f64::from(ROW_H + ROW_GAP)).floor().max(0.0) + 1.0;
        (self.origin, self.origin + rows * f64::from(self.rect.width().max(1.0)))
    }

    /// The segments whose stretch of the line meets `[a, b)` (a binary search of the starts).
    pub fn segments_in(&self, a: f64, b: f64) -> Range<usize> {
        let first = self.starts.partition_point(|&s| s <= a).saturating_sub(1);
        first..self.starts.partition_point(|&s| s < b).max(first)
    }

    /// Where segment `i` ends along the line.
    pub(super) fn end_of(&self, segments: &[SegmentMap], i: usize) -> f64 {
        self.starts[i] + segments[i].segment.size as f64 / self.bytes_per_point
    }

    /// The address of segment `i` at line point `x` (clamped to the segment), rounded down or up.
    pub(super) fn addr_at(&self, segments: &[SegmentMap], i: usize, x: f64, up: bool) -> u64 {
        let s = &segments[i].segment;
        let offset = ((x - self.starts[i]) * self.bytes_per_point).clamp(0.0, s.size as f64);
        s.addr + if up { offset.ceil() } else { offset.floor() } as u64
    }

    /// The rectangles of bytes `[addr, addr + size)` of segment `i`.
    pub fn bytes(&self, segments: &[SegmentMap], i: usize, addr: u64, size: u64) -> Vec<Rect> {
        self.pieces(self.along(segments, i, addr), self.along(segments, i, addr + size))
    }

    /// The segment and the address under a point, if any.
    pub fn locate(&self, segments: &[SegmentMap], p: Pos2) -> Option<(usize, u64)> {
        if !self.rect.contains(p) {
            return None;
        }
        let row = ((p.y - self.rect.top()) / (ROW_H + ROW_GAP)).floor();
        if p.y - self.rect.top() - row * (ROW_H + ROW_GAP) > ROW_H {
            return None;
        }
        let along = self.line_at(p);
        let i = self.starts.partition_point(|&s| s <= along).checked_sub(1)?;
        let s = &segments[i].segment;
        let offset = ((along - self.starts[i]) * self.bytes_per_point) as u64;
        (offset < s.size).then_some((i, s.addr + offset))
    }
}

/// What is under the pointer in the map.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MapHit {
    Block { segment: usize, block: Block, element: Option<ElementId> },
    Hole { segment: usize, addr: u64, size: u64 },
}

/// The state shown and what the map needs to draw it, made once per (device, event) on the
/// state worker ([`super::state_worker`]).
pub struct Shown {
    pub device: DeviceIdx,
    pub event: i64,
    pub summary: Summary,
    /// Block address → the element live there (for its site and for linking to the timeline).
    pub elements: HashMap<u64, ElementId>,
    /// The largest hole: `(segment, addr, size)`.
    pub largest: Option<(usize, u64, u64)>,
}

#[derive(Default)]
pub struct MemoryMap {
    /// The last state that came back from the worker (drawn until the next one does).
    pub shown: Option<Shown>,
    pub hovered: Option<MapHit>,
    pub geometry: Option<Geometry>,
    /// Scroll: zoom at the pointer; drag: pan; double-click: fit again.
    pub view: MapView,
    /// Makes the states and the event list's rows of the open archive.
    worker: Option<StateWorker>,
    /// The last state asked for came back without one (a saved state that does not decode).
    unreadable: bool,
}

impl MemoryMap {
    /// The worker of `t`'s archive, started on first use (and again for another archive).
    pub fn worker(&mut self, doc: &Document, ctx: &egui::Context) -> &mut StateWorker {
        if self.worker.as_ref().is_some_and(|w| !Arc::ptr_eq(w.session(), &doc.session)) {
            *self = MemoryMap::default();
        }
        self.worker.get_or_insert_with(|| StateWorker::start(Arc::clone(&doc.session), ctx.clone()))
    }

    /// A state or rows asked for are still being made: what screenshots and tests wait for.
    pub fn pending(&self) -> bool {
        self.worker.as_ref().is_some_and(StateWorker::pending)
    }

    /// What the worker did so far (`None`: not started).
    pub fn work(&self) -> Option<StateWork> {
        self.worker.as_ref().map(StateWorker::work)
    }

    /// Asks for the state after device-relative event `event` and takes the one that came back,
    /// if one did; `self.shown` stays the last one until then.
    fn follow(&mut self, doc: &Document, ctx: &egui::Context, event: i64) {
        let worker = self.worker(doc, ctx);
        worker.ask_map((doc.device, event));
        if let Some((_, shown)) = worker.take_map() {
            self.unreadable = shown.is_none();
            self.shown = shown;
            self.hovered = None;
        }
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, doc: &mut Document, at: Option<i64>) {
        let Some(event) = at else {
            return note_ui(
                ui,
                "Hover or pin the timeline, or step with the Left / Right arrow keys, to see the allocator's state at that event.",
            );
        };
        if doc.session.device(doc.device).allocator.states.is_empty() {
            return note_ui(
                ui,
                "This archive was made before format 3, without the allocator's states: re-index to see this.",
            );
        }
        self.follow(doc, ui.ctx(), event);
        let gone = self.worker.as_ref().is_some_and(StateWorker::gone);
        let Some(s) = self.shown.as_ref().filter(|s| s.device == doc.device) else {
            return note_ui(
                ui,
                if self.unreadable || gone {
                    "The allocator's state at this event could not be read from the archive."
                } else {
                    "reading the allocator's state…"
                },
            );
        };
        let segs = &s.summary.segments;
        let b = crate::analysis::units::bytes;
        ui.label(format!(
            "after event {} of device {}: {} segments · reserved {} · allocated {} · pending free {} · free {} (largest hole {})",
            crate::analysis::units::thousands(s.event.max(0) as u64),
            doc.session.ordinal(doc.device),
            segs.len(),
            b(s.summary.reserved),
            b(s.summary.allocated),
            b(s.summary.pending_free),
            b(s.summary.free()),
            b(s.summary.largest_free),
        ));
        super::legend::memory_map_ui(ui);
        let rect = ui.available_rect_before_wrap();
        let response = ui.allocate_rect(rect, egui::Sense::click_and_drag());
        let inner = rect.shrink(2.0);
        zoom_pan(&mut self.view, ui, &response, segs, inner);
        let g = Geometry::new(segs, inner, self.view);
        let painter = ui.painter_at(rect);
        painter.rect_filled(rect, 0.0, theme::BACKGROUND);
        let sites = stacked_in(&doc.session, doc.device, super::data::Plane::Elements).sites;
        super::map_draw::draw(&painter, &g, s, &|block: &Block| s.colour(sites, block));
        if let Some((i, addr, size)) = linked_block(doc, s) {
            g.each_piece(g.along(segs, i, addr), g.along(segs, i, addr + size), |r| {
                painter.rect_stroke(r, 0.0, Stroke::new(2.0, Color32::WHITE), egui::StrokeKind::Outside);
            });
        }
        if let Some((i, addr, size)) = s.largest {
            g.each_piece(g.along(segs, i, addr), g.along(segs, i, addr + size), |r| {
                painter.rect_stroke(r, 0.0, Stroke::new(1.5, LARGEST_HOLE), egui::StrokeKind::Inside);
            });
        }
        self.hovered = response.hover_pos().and_then(|p| hit(s, &g, p));
        doc.selection.map_hover = match self.hovered {
            Some(MapHit::Block { element, .. }) => element,
            _ => None,
        };
        // A click on a block pins its element: the bottom bar shows it as for the timeline.
        if response.clicked()
            && let Some(element) = doc.selection.map_hover
        {
            let l = doc.session.elements(doc.device).layout;
            let el = l.element(element);
            let x = el.start_opt().map_or(0.0, |k| f64::from(k.0) + 0.5);
            doc.selection.pinned = Some(super::selection::Hit { element, x, byte: el.size as f64 / 2.0 });
        }
        if let Some(h) = self.hovered {
            let lines = hit_lines(doc, s, h);
            response.on_hover_ui_at_pointer(|ui| super::panels::info_grid_ui(ui, &lines, "map-tooltip"));
        }
        self.geometry = Some(g);
    }
}

/// One line instead of the map, the map's room kept (a panel shrinks to what it was given last).
fn note_ui(ui: &mut egui::Ui, text: &str) {
    ui.label(text);
    ui.allocate_rect(ui.available_rect_before_wrap(), egui::Sense::hover());
}

/// The block of the element hovered or pinned on the timeline, when it is live in the map:
/// `(segment, addr, size)`, found by binary searches.
fn linked_block(doc: &Document, s: &Shown) -> Option<(usize, u64, u64)> {
    let id = doc.selection.hovered.or(doc.selection.pinned)?.element;
    let addr = *doc.session.elements(doc.device).layout.elements.addr.get(id.index())?;
    if s.elements.get(&addr) != Some(&id) {
        return None;
    }
    let segs = &s.summary.segments;
    let i = segs.partition_point(|m| m.segment.addr <= addr).checked_sub(1)?;
    let blocks = &segs[i].blocks;
    let block = blocks.get(blocks.partition_point(|bl| bl.addr < addr)).filter(|bl| bl.addr == addr)?;
    Some((i, block.addr, block.size))
}

/// Scroll zooms at the pointer (the byte under it stays there), drag pans along the line,
/// double-click fits.
fn zoom_pan(view: &mut MapView, ui: &egui::Ui, response: &egui::Response, segs: &[SegmentMap], rect: Rect) {
    if response.double_clicked() {
        *view = MapView::default();
        return;
    }
    let w = f64::from(rect.width().max(1.0));
    if response.dragged() {
        let d = response.drag_delta();
        let rows = (f64::from(d.y) / f64::from(ROW_H + ROW_GAP)).round();
        view.origin -= f64::from(d.x) + rows * w;
    }
    let scroll = ui.input(|i| i.smooth_scroll_delta.y);
    if let (Some(p), true) = (response.hover_pos(), scroll != 0.0) {
        let g = Geometry::new(segs, rect, *view);
        let zoom = (view.zoom * (f64::from(scroll) / 200.0).exp()).clamp(1.0, 1e6);
        let f = zoom / view.zoom;
        // The line point under the pointer keeps its place on the screen.
        let under = g.line_at(p);
        *view = MapView { zoom, origin: under * f - (under - g.origin) };
    }
    view.origin = view.origin.max(0.0);
    if view.zoom <= 1.0 {
        view.origin = 0.0;
    }
}

/// The event the map shows: the hovered action's on the timeline, else the selected one.
pub fn map_event(t: &Open) -> Option<i64> {
    if let Some(k) = t.doc.selection.hovered.and_then(|h| t.action_at(h.x)) {
        return Some(action_event(&t.doc, k));
    }
    t.doc.selection.event
}

/// The device-relative event of element-timeline action `k` (the last event for the synthetic
/// action of a trace without actions).
pub fn action_event(doc: &Document, k: usize) -> i64 {
    doc.session.event_of_action(doc.device, ActionIdx::at(k))
}

/// The element-timeline action at or before device-relative event `event` (−1: none).
pub fn action_before(doc: &Document, event: i64) -> i64 {
    action_before_in(&doc.session, doc.device, event)
}

/// [`action_before`] on device `d` of `session`.
pub fn action_before_in(session: &Session, d: DeviceIdx, event: i64) -> i64 {
    let start = session.trace(d).start as i64;
    let l = session.elements(d).layout;
    i64::from(crate::derive::timeline::actions_before_event(l, (start + event + 1).max(0) as usize)) - 1
}

impl Shown {
    /// What the map draws of `state`, the allocator's state after event `event` of device `d`:
    /// its summary, the element live at each block (from the element checkpoints: fewer than K
    /// actions replayed) and the largest hole.
    pub fn of(session: &Session, d: DeviceIdx, event: i64, state: &State) -> Shown {
        let summary = state.summary(event);
        let stacked = session.elements(d);
        let live = stacked.checkpoints.stack_after(stacked.layout, action_before_in(session, d, event));
        let elements = live.elements().map(|id| (stacked.layout.elements.addr[id.index()], id)).collect();
        let largest = summary
            .segments
            .iter()
            .enumerate()
            .flat_map(|(i, m)| m.holes().into_iter().map(move |(a, s)| (i, a, s)))
            .max_by_key(|&(i, a, s)| (s, std::cmp::Reverse((i, a))));
        Shown { device: d, event, summary, elements, largest }
    }

    /// A block's colour: red when freed but pending, else its allocation site's with the
    /// timeline's palette (grey when no element of the timeline is live there).
    pub fn colour(&self, sites: &[u32], block: &Block) -> Color32 {
        if block.pending_free {
            return PENDING;
        }
        let site = self.elements.get(&block.addr).and_then(|&id| sites.get(id.index()).copied());
        site.map_or(Color32::GRAY, |k| unpack(theme::palette(k)))
    }
}

fn hit(s: &Shown, g: &Geometry, p: Pos2) -> Option<MapHit> {
    let segs = &s.summary.segments;
    let (i, addr) = g.locate(segs, p)?;
    let blocks = &segs[i].blocks;
    let j = blocks.partition_point(|b| b.addr <= addr);
    if let Some(block) = j.checked_sub(1).map(|j| blocks[j]).filter(|b| addr < b.addr + b.size) {
        return Some(MapHit::Block { segment: i, block, element: s.elements.get(&block.addr).copied() });
    }
    segs[i].holes().into_iter().find(|&(a, size)| a <= addr && addr < a + size).map(|(a, size)| MapHit::Hole {
        segment: i,
        addr: a,
        size,
    })
}

/// The tooltip of what is under the pointer: a block (and its element's stack) or a hole in its
/// segment.
fn hit_lines(doc: &Document, s: &Shown, h: MapHit) -> Vec<(String, String)> {
    let b = crate::analysis::units::bytes;
    let seg = |i: usize| &s.summary.segments[i];
    let pool = |i: usize| seg(i).segment.pool.map_or("default".to_owned(), |(a, c)| format!("({a}, {c})"));
    match h {
        MapHit::Block { segment, block, element } => {
            let mut v = vec![
                ("block".into(), format!("{} ({} requested)", b(block.size), b(block.requested))),
                ("address".into(), format!("{:#x}", block.addr)),
                (
                    "state".into(),
                    if block.pending_free { "freed, pending on another stream" } else { "allocated" }.into(),
                ),
                ("stream".into(), seg(segment).segment.stream.to_string()),
                ("pool".into(), pool(segment)),
            ];
            let info = element.and_then(|id| {
                super::details::ElementInfo::gather(
                    &doc.session,
                    doc.device,
                    super::data::Plane::Elements,
                    id,
                    None,
                    &Default::default(),
                )
            });
            if let Some(info) = info {
                v.push(("element".into(), info.id.to_string()));
                if let Some(f) = info.top_frame {
                    v.push(("allocated at".into(), f));
                }
            }
            v
        }
        MapHit::Hole { segment, addr, size } => {
            let m = seg(segment);
            let holes = m.holes();
            let free: u64 = holes.iter().map(|h| h.1).sum();
            let largest = holes.iter().map(|h| h.1).max().unwrap_or(0);
            vec![
                ("free hole".into(), format!("{} at {addr:#x}", b(size))),
                (
                    "segment".into(),
                    format!(
                        "{} at {:#x}, {:.0} % free in {} holes (largest {})",
                        b(m.segment.size),
                        m.segment.addr,
                        100.0 * free as f64 / m.segment.size.max(1) as f64,
                        holes.len(),
                        b(largest)
                    ),
                ),
                ("stream".into(), m.segment.stream.to_string()),
                ("pool".into(), pool(segment)),
            ]
        }
    }
}

fn unpack(rgba: u32) -> Color32 {
    let [r, g, b, _] = rgba.to_le_bytes();
    Color32::from_rgb(r, g, b)
}

/// A segment at `addr` of `size` bytes holding `blocks` `(addr, size)`, for the map's tests.
#[cfg(test)]
pub(crate) fn test_segment(addr: u64, size: u64, blocks: &[(u64, u64)]) -> SegmentMap {
    SegmentMap {
        segment: crate::allocator::Segment { addr, size, stream: 0, pool: None },
        blocks: blocks.iter().map(|&(a, s)| Block { addr: a, size: s, requested: s, pending_free: false }).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(addr: u64, size: u64, blocks: &[(u64, u64)]) -> SegmentMap {
        test_segment(addr, size, blocks)
    }

    #[test]
    fn segments_are_to_scale_in_address_order_and_points_find_them() {
        let segs = vec![seg(1000, 400, &[(1000, 100)]), seg(5000, 200, &[])];
        let g = Geometry::fit(&segs, Rect::from_min_size(pos2(0.0, 0.0), egui::vec2(100.0, 41.0)));
        // Two rows of 100 points: 600 bytes and two 3-point gaps over 200 points.
        assert!((g.bytes_per_point - 600.0 / 194.0).abs() < 1e-9);
        assert_eq!(g.starts[0], 0.0);
        assert!((g.starts[1] - (400.0 / g.bytes_per_point + 3.0)).abs() < 1e-9);
        // The first segment wraps onto the second row.
        let pieces = g.bytes(&segs, 0, 1000, 400);
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[1].top(), ROW_H + ROW_GAP);
        assert_eq!(g.locate(&segs, pos2(1.0, 5.0)), Some((0, 1003)));
        let second = g.bytes(&segs, 1, 5000, 200)[0];
        assert_eq!(g.locate(&segs, second.center()).map(|h| h.0), Some(1));
        assert_eq!(g.locate(&segs, pos2(1.0, ROW_H + 1.0)), None, "between rows");

        // Zoomed 3× and scrolled: what is drawn at a point is what the point finds.
        let rect = Rect::from_min_size(pos2(0.0, 0.0), egui::vec2(100.0, 41.0));
        let z = Geometry::new(&segs, rect, MapView { zoom: 3.0, origin: 150.0 });
        assert!((z.bytes_per_point - g.bytes_per_point / 3.0).abs() < 1e-9);
        let r = z.bytes(&segs, 0, 1300, 40)[0];
        let (i, addr) = z.locate(&segs, r.center()).unwrap();
        assert!(i == 0 && (1300..1340).contains(&addr), "{i} {addr}");
        assert!(z.bytes(&segs, 0, 1000, 10).is_empty(), "scrolled out above");
    }
}
