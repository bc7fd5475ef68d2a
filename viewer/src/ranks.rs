//! The rank strip: `memviz open DIR` (or several files) shows every rank of a job as a small
//! multiple of its total memory over the run, all on one y scale, aligned by action or by step
//! starts, with the outlier ranks framed (the rule of `memviz ranks`) and the leaking ones
//! named. A click opens a rank in the main view; Shift+click marks a rank, and a second
//! Shift+click opens the two one above the other with their x axes linked by step.
//!
//! The ranks load on a named thread (an archive is mapped and its summary read; a snapshot is
//! indexed into its cache first), one message each, so the window draws what has arrived and
//! never waits; where no thread can start (a browser), one rank loads a frame. A curve is the
//! archive's minimap (min and max of the totals per bucket): a thousand ranks cost a few KB each.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};

use eframe::egui::{self, Color32, Rect, Sense, Stroke, pos2, vec2};

use super::data::Session;
use super::theme;
use crate::analysis::ranks::{self, RankFacts, RankRow};
use crate::analysis::units;
use crate::archive::DeviceData;
use crate::model::DeviceIdx;
use crate::model::RankFile;
use crate::platform::PlatformRef;

/// Buckets a curve keeps at most (a cell is a few hundred pixels wide).
const CURVE_BUCKETS: usize = 1024;
const CELL: egui::Vec2 = vec2(250.0, 92.0);
const GAP: f32 = 8.0;

/// Where the x axis of a rank comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Align {
    /// Action k of every rank at the same x.
    #[default]
    Action,
    /// The starts of step j of every rank at the same x.
    Step,
}

/// A rank's actions against its steps: action `k` ↔ a position where step `j` covers
/// `[j + 1, j + 2)` and the actions before the first step `[0, 1)` (the last step runs to the
/// end of the trace). Without steps, the whole trace is `[0, 1)`. Piecewise linear, so views
/// of two ranks link step by step.
///
/// The segments' bounds are worked out once, when the axis is made: the strip maps two
/// positions per pixel column of every cell each frame, and a comparison four per pan.
#[derive(Debug, Clone, PartialEq)]
pub struct StepAxis {
    /// Start action of each step, ascending (read-only: the bounds are made from it by
    /// [`StepAxis::new`]).
    pub starts: Vec<u32>,
    pub actions: u32,
    /// Segment bounds: `[0, starts…, actions]` (each start at most `actions`).
    bounds: Vec<f64>,
}

impl Default for StepAxis {
    fn default() -> StepAxis {
        StepAxis::new(Vec::new(), 0)
    }
}

impl StepAxis {
    /// The axis of a trace of `actions` actions whose steps start at `starts` (ascending).
    pub fn new(starts: Vec<u32>, actions: u32) -> StepAxis {
        let n = f64::from(actions);
        let mut bounds = Vec::with_capacity(starts.len() + 2);
        bounds.push(0.0);
        bounds.extend(starts.iter().map(|&s| f64::from(s).min(n)));
        bounds.push(n);
        StepAxis { starts, actions, bounds }
    }

    /// Segment bounds: `[0, starts…, actions]`.
    pub fn bounds(&self) -> &[f64] {
        &self.bounds
    }

    /// The largest position (one past the last segment).
    pub fn len(&self) -> f64 {
        (self.starts.len() + 1) as f64
    }

    pub fn position(&self, k: f64) -> f64 {
        let b = &self.bounds;
        let j = b.partition_point(|&x| x <= k).clamp(1, b.len() - 1) - 1;
        let span = b[j + 1] - b[j];
        let within = if span > 0.0 { ((k - b[j]) / span).clamp(0.0, 1.0) } else { 0.0 };
        j as f64 + within
    }

    pub fn action(&self, p: f64) -> f64 {
        let b = &self.bounds;
        let p = p.clamp(0.0, self.len());
        let j = (p.floor() as usize).min(b.len() - 2);
        b[j] + (p - j as f64) * (b[j + 1] - b[j])
    }
}

/// One rank's curve and row.
pub struct RankCurve {
    pub row: RankRow,
    pub session: Arc<Session>,
    pub device: DeviceIdx,
    /// Min and max of the totals per bucket of `per_bucket` actions.
    pub per_bucket: u64,
    pub min: Vec<u64>,
    pub max: Vec<u64>,
    pub steps: StepAxis,
}

impl RankCurve {
    fn load(platform: &PlatformRef, f: &RankFile, cache: bool) -> Result<RankCurve, String> {
        let session = if platform.is_archive(&f.path) {
            platform.open_archive(&f.path)?
        } else {
            platform.open_snapshot(&f.path, cache, &|_| {})?
        };
        session.archive.check_ids().map_err(|e| format!("{}: {e}", f.path.display()))?;
        let device = session.main_device();
        let facts =
            RankFacts::new(f.rank, &f.path, f.label(), session.reserved_peak(device), session.oom_events(device).len());
        let row = ranks::row(&DeviceData::new(&session, device).timeline(), session.root(), facts, None);
        let l = session.elements(device).layout;
        let (per_bucket, min, max) = if l.totals.len() <= CURVE_BUCKETS {
            (1, l.totals.to_vec(), l.totals.to_vec())
        } else {
            let levels = session.minimap(device);
            let level = levels.iter().find(|m| m.1.len() <= CURVE_BUCKETS).or(levels.last());
            level.map_or((1, Vec::new(), Vec::new()), |m| (m.0, m.1.to_vec(), m.2.to_vec()))
        };
        let data = DeviceData::new(&session, device);
        let starts = data.timeline().default_steps().map(|s| s.rows.iter().map(|r| r.start_action).collect());
        let steps = StepAxis::new(starts.unwrap_or_default(), l.actions.len() as u32);
        drop(data);
        Ok(RankCurve { row, session, device, per_bucket: per_bucket.max(1), min, max, steps })
    }

    /// Min and max total over actions `[k0, k1)` (the buckets they touch).
    fn range(&self, k0: f64, k1: f64) -> Option<(u64, u64)> {
        let n = self.max.len();
        let b0 = ((k0.max(0.0) as u64) / self.per_bucket) as usize;
        let b1 = (((k1.max(0.0).ceil() as u64).div_ceil(self.per_bucket)) as usize).clamp(b0 + 1, n.max(b0 + 1));
        if b0 >= n {
            return None;
        }
        let lo = self.min[b0..b1.min(n)].iter().copied().min()?;
        let hi = self.max[b0..b1.min(n)].iter().copied().max()?;
        Some((lo, hi))
    }
}

/// Where the ranks come from while they load.
enum Loading {
    /// The loading thread, a message a rank.
    Thread(Receiver<(usize, Result<RankCurve, String>)>),
    /// No thread: the strip loads rank `next` in its next frame.
    Here { platform: PlatformRef, cache: bool, next: usize, ctx: egui::Context },
}

/// What a click in the strip asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    Open(usize),
    Compare(usize, usize),
}

pub struct RankStrip {
    pub files: Vec<RankFile>,
    pub curves: Vec<Option<RankCurve>>,
    pub failed: Vec<String>,
    loading: Option<Loading>,
    /// Indices of the outlier ranks (once all have loaded) and each one's % over the median.
    pub outliers: Vec<(usize, f64)>,
    pub align: Align,
    /// The rank Shift+clicked first.
    pub marked: Option<usize>,
    /// Each rank's cell on screen last frame (the ones drawn), for tests and picking.
    pub cells: Vec<(usize, Rect)>,
}

impl RankStrip {
    /// Starts loading `files` on a named thread (or a rank a frame where none starts); `ctx`
    /// repaints as each arrives.
    pub fn new(platform: &PlatformRef, files: Vec<RankFile>, cache: bool, ctx: &egui::Context) -> RankStrip {
        // Bounded: the loader waits while the window is not taking them (a rank shown instead).
        let (tx, rx) = sync_channel(64);
        let (list, c, on_thread) = (files.clone(), ctx.clone(), platform.clone());
        let spawned = std::thread::Builder::new().name("memviz-ranks".into()).spawn(move || {
            for (i, f) in list.iter().enumerate() {
                if tx.send((i, RankCurve::load(&on_thread, f, cache))).is_err() {
                    return;
                }
                c.request_repaint();
            }
        });
        let loading = match spawned {
            Ok(_) => Loading::Thread(rx),
            Err(_) => Loading::Here { platform: platform.clone(), cache, next: 0, ctx: ctx.clone() },
        };
        let curves = files.iter().map(|_| None).collect();
        RankStrip {
            files,
            curves,
            failed: Vec::new(),
            loading: Some(loading),
            outliers: Vec::new(),
            align: Align::Action,
            marked: None,
            cells: Vec::new(),
        }
    }

    /// Takes what the loading thread sent (or loads the next rank here); once every rank is in,
    /// finds the outliers.
    pub fn poll(&mut self) {
        let Some(loading) = &mut self.loading else { return };
        match loading {
            Loading::Thread(rx) => loop {
                match rx.try_recv() {
                    Ok((i, Ok(c))) => self.curves[i] = Some(c),
                    Ok((_, Err(e))) => self.failed.push(e),
                    Err(std::sync::mpsc::TryRecvError::Empty) => return,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => break,
                }
            },
            Loading::Here { platform, cache, next, ctx } => {
                if let Some(f) = self.files.get(*next) {
                    match RankCurve::load(platform, f, *cache) {
                        Ok(c) => self.curves[*next] = Some(c),
                        Err(e) => self.failed.push(e),
                    }
                    *next += 1;
                    ctx.request_repaint();
                    return;
                }
            }
        }
        self.loading = None;
        let loaded: Vec<usize> = (0..self.curves.len()).filter(|&i| self.curves[i].is_some()).collect();
        let peaks: Vec<ranks::RankPeak> =
            loaded.iter().filter_map(|&i| self.curves[i].as_ref()).map(|c| ranks::RankPeak::from(&c.row)).collect();
        let (found, _) = ranks::outliers(&peaks, None);
        self.outliers = found.into_iter().map(|(j, _, over)| (loaded[j], over)).collect();
    }

    pub fn loaded(&self) -> usize {
        self.curves.iter().filter(|c| c.is_some()).count()
    }

    pub fn done(&self) -> bool {
        self.loading.is_none()
    }

    /// The strip; what a click asked for.
    pub fn ui(&mut self, ui: &mut egui::Ui) -> Option<Pick> {
        self.poll();
        let y_max = self.curves.iter().flatten().map(|c| c.row.peak_bytes).max().unwrap_or(1).max(1);
        let x_max = match self.align {
            Align::Action => self.curves.iter().flatten().map(|c| f64::from(c.steps.actions)).fold(1.0, f64::max),
            Align::Step => self.curves.iter().flatten().map(|c| c.steps.len()).fold(1.0, f64::max),
        };
        ui.horizontal(|ui| {
            ui.strong(format!("{} ranks", self.files.len()));
            if !self.done() {
                ui.label(format!("· loading {} of {}", self.loaded(), self.files.len()));
                ui.spinner();
            }
            ui.label(format!("· one y scale, 0 – {}", units::bytes(y_max)));
            ui.separator();
            ui.label("align by");
            ui.selectable_value(&mut self.align, Align::Action, "action");
            ui.selectable_value(&mut self.align, Align::Step, "step");
            ui.separator();
            let names: Vec<String> = self
                .outliers
                .iter()
                .filter_map(|&(i, over)| Some(format!("{} ({over:+.1}%)", self.curves[i].as_ref()?.row.label)))
                .collect();
            match (self.done(), names.is_empty()) {
                (false, _) => ui.label("outliers: once all are loaded"),
                (true, true) => ui.label("no outlier rank"),
                (true, false) => ui.colored_label(theme::CAPACITY, format!("outliers: {}", names.join(", "))),
            };
        });
        if let Some(m) = self.marked.and_then(|i| self.curves.get(i)?.as_ref()) {
            ui.label(format!("{} marked: Shift+click another rank to compare the two", m.row.label));
        }
        for e in self.failed.iter().take(3) {
            ui.colored_label(theme::CAPACITY, format!("error: {e}"));
        }
        let width = ui.available_width();
        let per_row = ((width + GAP) / (CELL.x + GAP)).floor().max(1.0) as usize;
        let rows = self.files.len().div_ceil(per_row);
        let mut pick = None;
        self.cells.clear();
        egui::ScrollArea::vertical().auto_shrink([false, false]).show_viewport(ui, |ui, viewport| {
            let height = rows as f32 * (CELL.y + GAP);
            let (whole, _) = ui.allocate_exact_size(vec2(width, height), Sense::hover());
            let first = ((viewport.top() / (CELL.y + GAP)).floor().max(0.0)) as usize;
            let last = ((viewport.bottom() / (CELL.y + GAP)).ceil() as usize).min(rows);
            for r in first..last {
                for c in 0..per_row {
                    let i = r * per_row + c;
                    if i >= self.files.len() {
                        break;
                    }
                    let min = whole.min + vec2(c as f32 * (CELL.x + GAP), r as f32 * (CELL.y + GAP));
                    let cell = Rect::from_min_size(min, CELL);
                    self.cells.push((i, cell));
                    if let Some(p) = self.cell_ui(ui, i, cell, (x_max, y_max)) {
                        pick = Some(p);
                    }
                }
            }
        });
        pick
    }

    /// The rectangle of rank `i`'s plot inside its cell.
    pub fn plot_rect(cell: Rect) -> Rect {
        Rect::from_min_max(pos2(cell.left() + 4.0, cell.top() + 20.0), pos2(cell.right() - 4.0, cell.bottom() - 4.0))
    }

    fn cell_ui(&mut self, ui: &mut egui::Ui, i: usize, cell: Rect, scale: (f64, u64)) -> Option<Pick> {
        let id = ui.scope_id().with(("rank cell", i));
        let response = ui.interact(cell, id, Sense::click());
        let painter = ui.painter_at(cell);
        let outlier = self.outliers.iter().find(|o| o.0 == i).map(|o| o.1);
        painter.rect_filled(cell, 3.0, Color32::from_rgb(32, 35, 41));
        let Some(curve) = &self.curves[i] else {
            corner_text(&painter, cell, format!("{} · loading", self.files[i].label()), theme::AXIS_TEXT, false);
            return None;
        };
        cell_titles(&painter, cell, &curve.row, outlier);
        self.draw_curve(&painter, Self::plot_rect(cell), curve, scale);
        let frame = match (outlier.is_some(), self.marked == Some(i)) {
            (_, true) => Some(Stroke::new(2.0, theme::RULER)),
            (true, false) => Some(Stroke::new(2.0, theme::CAPACITY)),
            _ => None,
        };
        if let Some(s) = frame {
            painter.rect_stroke(cell.shrink(1.0), 3.0, s, egui::StrokeKind::Inside);
        }
        let row = &curve.row;
        let response = response.on_hover_ui(|ui| {
            ui.label(&row.file);
            ui.label(format!(
                "peak {} at action {}{}",
                units::bytes(row.peak_bytes),
                row.peak_action,
                row.peak_step.as_ref().map_or(String::new(), |s| format!(" ({s})"))
            ));
            ui.label(format!("reserved peak {}", units::bytes(row.reserved_peak_bytes)));
            ui.label(&row.verdict);
            ui.label("click: open · Shift+click: compare two");
        });
        if !response.clicked() {
            return None;
        }
        self.pick(ui, i)
    }

    /// The rank's curve in `plot`: the envelope per pixel column and its floor, aligned by
    /// action or by step, with the step lines.
    fn draw_curve(&self, painter: &egui::Painter, plot: Rect, curve: &RankCurve, (x_max, y_max): (f64, u64)) {
        let y = |b: u64| plot.bottom() - (b as f64 / y_max as f64 * f64::from(plot.height())) as f32;
        let columns = plot.width().floor().max(1.0) as usize;
        let mut floor: Vec<egui::Pos2> = Vec::with_capacity(columns);
        for px in 0..columns {
            let (p0, p1) = (px as f64 / columns as f64 * x_max, (px + 1) as f64 / columns as f64 * x_max);
            let (k0, k1) = match self.align {
                Align::Action => (p0, p1),
                Align::Step => (curve.steps.action(p0), curve.steps.action(p1)),
            };
            if k0 >= f64::from(curve.steps.actions) {
                break;
            }
            let Some((lo, hi)) = curve.range(k0, k1) else { break };
            let x = plot.left() + px as f32;
            painter.rect_filled(
                Rect::from_min_max(pos2(x, y(hi)), pos2(x + 1.0, plot.bottom())),
                0.0,
                theme::MINIMAP_FILL,
            );
            floor.push(pos2(x + 0.5, y(lo)));
        }
        painter.add(egui::Shape::line(floor, Stroke::new(1.0, theme::TOTAL_LINE)));
        if self.align == Align::Step {
            for j in step_lines(curve.steps.starts.len(), f64::from(plot.width()) / x_max) {
                let x = plot.left() + (j as f64 / x_max * f64::from(plot.width())) as f32;
                painter.vline(x, plot.y_range(), Stroke::new(1.0, theme::GRID));
            }
        }
    }

    /// A click on cell `i`: open it, or (Shift) mark it, comparing it with the one marked.
    fn pick(&mut self, ui: &egui::Ui, i: usize) -> Option<Pick> {
        if !ui.input(|inp| inp.modifiers.shift) {
            return Some(Pick::Open(i));
        }
        match self.marked.take() {
            Some(m) if m != i => Some(Pick::Compare(m, i)),
            Some(_) => None,
            None => {
                self.marked = Some(i);
                None
            }
        }
    }
}

/// A cell's title (the rank and its peak) and its note (outlier, growth or OOMs).
fn cell_titles(painter: &egui::Painter, cell: Rect, row: &ranks::RankRow, outlier: Option<f64>) {
    corner_text(painter, cell, format!("{}  {}", row.label, units::bytes(row.peak_bytes)), theme::AXIS_TEXT, false);
    let note = match (outlier, row.steady_growth, row.oom_events) {
        (Some(over), _, _) => Some((format!("outlier {over:+.0}%"), theme::CAPACITY)),
        (None, true, _) => Some((
            format!("grows {}/step", units::bytes(row.retained_per_step_bytes.unwrap_or(0).max(0) as u64)),
            theme::PEAK,
        )),
        (None, false, n) if n > 0 => Some((units::count(n as u64, "OOM", "OOMs"), theme::CAPACITY)),
        _ => None,
    };
    if let Some((text, colour)) = note {
        corner_text(painter, cell, text, colour, true);
    }
}

/// Text in a cell's top left (or top right) corner.
fn corner_text(painter: &egui::Painter, cell: Rect, text: String, colour: Color32, right: bool) {
    let (at, align) = match right {
        false => (cell.left_top() + vec2(6.0, 4.0), egui::Align2::LEFT_TOP),
        true => (cell.right_top() + vec2(-6.0, 4.0), egui::Align2::RIGHT_TOP),
    };
    painter.text(at, align, text, egui::FontId::proportional(12.0), colour);
}

/// Steps closer than this on screen share one line: a cell draws at most a line every two
/// pixels, however many steps the rank has.
const MIN_STEP_LINE_GAP: f64 = 2.0;

/// The steps whose start gets a line in a cell of `steps` steps, `per_step` points apart: every
/// step's (`1..=steps`), or every k-th when they are closer than [`MIN_STEP_LINE_GAP`].
fn step_lines(steps: usize, per_step: f64) -> std::iter::StepBy<std::ops::RangeInclusive<usize>> {
    let stride = if per_step > 0.0 { (MIN_STEP_LINE_GAP / per_step).ceil().max(1.0) as usize } else { steps.max(1) };
    (1..=steps).step_by(stride)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_positions_map_both_ways() {
        let a = StepAxis::new(vec![10, 30, 60], 100);
        assert_eq!(a.len(), 4.0);
        assert_eq!(a.position(0.0), 0.0);
        assert_eq!(a.position(10.0), 1.0);
        assert_eq!(a.position(20.0), 1.5);
        assert_eq!(a.position(60.0), 3.0);
        assert_eq!(a.position(80.0), 3.5);
        for k in [0.0, 5.0, 10.0, 29.0, 45.0, 99.0] {
            assert!((a.action(a.position(k)) - k).abs() < 1e-9, "{k}");
        }
        // Step 2 of one rank starts where step 2 of another starts.
        let b = StepAxis::new(vec![5, 50, 55], 200);
        assert_eq!(b.action(a.position(30.0)), 50.0);
        let none = StepAxis::new(vec![], 40);
        assert_eq!(none.position(20.0), 0.5);
        assert_eq!(none.action(0.5), 20.0);
    }

    /// The bounds made once are those the axis always had: `[0, starts…, actions]`, a start past
    /// the end at the end; the default axis is a trace of no action without steps.
    #[test]
    fn the_bounds_are_made_once_as_before() {
        let a = StepAxis::new(vec![10, 30, 60], 100);
        assert_eq!(a.bounds(), [0.0, 10.0, 30.0, 60.0, 100.0]);
        assert_eq!((a.starts.as_slice(), a.actions), (&[10, 30, 60][..], 100));
        assert_eq!(StepAxis::new(vec![5, 250], 200).bounds(), [0.0, 5.0, 200.0, 200.0]);
        let d = StepAxis::default();
        assert_eq!((d.bounds(), d.len(), d.position(3.0), d.action(0.5)), (&[0.0, 0.0][..], 1.0, 0.0, 0.0));
    }

    /// Step lines are at least two pixels apart: every step's when there is room, else every k-th.
    #[test]
    fn step_lines_are_thinned_to_two_pixels() {
        assert_eq!(step_lines(4, 10.0).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(step_lines(10, 0.5).collect::<Vec<_>>(), [1, 5, 9]);
        assert_eq!(step_lines(10_000, 0.025).count(), 10_000 / 80);
        assert_eq!(step_lines(0, 3.0).count(), 0);
    }
}
