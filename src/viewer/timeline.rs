//! The timeline of one device: what to draw this frame (tiles, or an exact raster), input
//! (zoom, pan, range zoom, rulers, hover, pin), and the overlays egui paints on top.
//!
//! ```text
//!  level choice: actions per pixel ≥ 2^finest stored level  → pyramid tiles, coarse → fine
//!                deeper, zoomed in Y, or on the wall-time axis → one raster of exactly the
//!                view from checkpoints (worker thread); until it arrives, tiles stand in
//! ```

use std::sync::Arc;

use eframe::egui::{self, Pos2, Rect};

use super::data::Session;
use super::gpu::{QuadDraw, TexKey};
use super::textures::Textures;
use super::theme;
use super::view::View;
use super::worker::{ViewSpec, Worker};
use memviz_format::{TILE_H, TILE_W};

use crate::lod::raster::{AGGREGATED, EMPTY};

/// An element under the pointer (or pinned).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub element: u32,
    /// Where it was picked, in data space (action or µs, bytes).
    pub x: f64,
    pub byte: f64,
}

/// A drag in progress.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Drag {
    None,
    Pan,
    /// Ctrl/Cmd+drag: select an x range to zoom to (data x where it started).
    Range(f64),
    /// R+drag: measure bytes; T+drag: measure time / actions (data point where it started).
    ByteRuler(f64, f64),
    TimeRuler(f64, f64),
}

pub struct Timeline {
    pub session: Arc<Session>,
    pub device: usize,
    pub view: View,
    pub time_axis: bool,
    pub colour_by_site: bool,
    pub hovered: Option<Hit>,
    pub pinned: Option<Hit>,
    pub tooltip_hidden: bool,
    pub drag: Drag,
    pub drag_end: Option<Pos2>,
    pub worker: Worker,
    pub textures: Textures,
    /// Shape candidates of the device (`h=… i=… v=…`), inferred once.
    candidates: Option<(usize, Option<String>)>,
    /// The last range selected with Ctrl/Cmd + drag, in actions `[a, b)`.
    pub selected_range: Option<(u32, u32)>,
    /// `--max-entries` / the detail slider: draw only the N largest individually.
    pub max_entries: Option<usize>,
    keep: Option<Cached<(usize, usize), Vec<bool>>>,
    /// The palette for (device, by-site?), computed once per choice.
    colours: Option<Cached<(usize, bool), Vec<u32>>>,
    /// The newest raster received, and the one asked for last (each with its texture key).
    raster: Option<(ViewSpec, TexKey)>,
    wanted: Option<(ViewSpec, TexKey)>,
    generation: u64,
    /// Screen rectangle of the plot last frame (points) and pixels per point.
    pub plot_rect: Rect,
    pub pixels_per_point: f32,
}

impl Timeline {
    pub fn new(session: Arc<Session>, ctx: &egui::Context) -> Timeline {
        let worker = Worker::start(Arc::clone(&session), ctx.clone());
        let mut t = Timeline {
            session,
            device: 0,
            view: View::fit(1, 1),
            time_axis: false,
            colour_by_site: true,
            hovered: None,
            pinned: None,
            tooltip_hidden: false,
            drag: Drag::None,
            drag_end: None,
            worker,
            textures: Textures::default(),
            max_entries: None,
            selected_range: None,
            candidates: None,
            keep: None,
            colours: None,
            raster: None,
            wanted: None,
            generation: 0,
            plot_rect: Rect::NOTHING,
            pixels_per_point: 1.0,
        };
        t.select_device(0);
        t
    }

    pub fn select_device(&mut self, d: usize) {
        self.device = d.min(self.session.devices().saturating_sub(1));
        self.load_coarsest();
        self.fit();
        self.hovered = None;
        self.pinned = None;
        self.selected_range = None;
        self.raster = None;
        self.wanted = None;
    }

    /// Decompresses the coarsest level right here (one tile of 512 KiB: under a millisecond), so
    /// the very first frame shows the whole trace; finer tiles stream in from the workers.
    fn load_coarsest(&mut self) {
        let dev = self.session.device(self.device);
        let Some(li) = dev.tiles.len().checked_sub(1) else { return };
        for (i, chunk) in dev.tiles[li].tiles.iter().enumerate() {
            if let Ok(texels) = crate::archive::chunks::decode::<u32>(chunk) {
                let key = tile_key(self.device, li, i);
                self.textures.arrived(super::gpu::TexData {
                    key,
                    width: TILE_W,
                    height: TILE_H,
                    texels: Arc::new(texels),
                });
            }
        }
    }

    /// The palette: one RGBA8 colour per allocation site (stack), so the same tensor has the
    /// same colour in every step; or, by allocation, a fixed palette the shader indexes by a
    /// hash of the element id. Small either way: the element → site table comes straight from
    /// the archive.
    pub fn colours(&mut self) -> Arc<Vec<u32>> {
        let want = (self.device, self.colour_by_site);
        if let Some((k, c)) = &self.colours
            && *k == want
        {
            return Arc::clone(c);
        }
        let n = if self.colour_by_site { self.session.root().stacks.offsets.len().saturating_sub(1) } else { 4096 };
        let salt = if self.colour_by_site { 0 } else { 0x5bd1_e995 };
        let table = Arc::new((0..n as u32).map(|k| theme::palette(k ^ salt)).collect::<Vec<u32>>());
        self.colours = Some((want, Arc::clone(&table)));
        table
    }

    /// X range of the whole trace in the current axis' units.
    pub fn x_extent(&self) -> (f64, f64) {
        let actions = self.session.layout(self.device).actions.len();
        if self.time_axis
            && let Some(times) = self.session.action_times_ready(self.device)
            && let (Some(first), Some(last)) = (times.iter().find(|&&t| t != i64::MIN), times.last())
        {
            return (*first as f64, (*last as f64).max(*first as f64 + 1.0));
        }
        (0.0, actions.max(1) as f64)
    }

    pub fn fit(&mut self) {
        let l = self.session.layout(self.device);
        let (a, b) = self.x_extent();
        self.view = View::fit(l.actions.len(), l.peak_bytes);
        self.view.x0 = a;
        self.view.x1 = b;
    }

    /// Double-click: fit Y to the highest total visible.
    pub fn fit_y(&mut self) {
        let l = self.session.layout(self.device);
        let (a, b) = self.visible_actions();
        let max = l.totals.get(a..b.min(l.totals.len())).and_then(|t| t.iter().max().copied()).unwrap_or(l.peak_bytes);
        self.view.y0 = 0.0;
        self.view.y1 = (max.max(1) as f64) * 1.05;
    }

    /// Action index range `[a, b)` currently visible.
    pub fn visible_actions(&self) -> (usize, usize) {
        let n = self.session.layout(self.device).actions.len();
        if self.time_axis {
            let Some(times) = self.session.action_times_ready(self.device) else { return (0, n) };
            let a = times.partition_point(|&t| (t as f64) < self.view.x0).saturating_sub(1);
            let b = times.partition_point(|&t| (t as f64) <= self.view.x1);
            return (a.min(n), b.min(n));
        }
        ((self.view.x0.floor().max(0.0) as usize).min(n), (self.view.x1.ceil().max(0.0) as usize).min(n))
    }

    /// The action index at data x (either axis).
    pub fn action_at(&self, x: f64) -> Option<usize> {
        let n = self.session.layout(self.device).actions.len();
        let k = if self.time_axis {
            let times = self.session.action_times_ready(self.device)?;
            times.partition_point(|&t| (t as f64) <= x).checked_sub(1)?
        } else {
            (x >= 0.0).then_some(x.floor() as usize)?
        };
        (k < n).then_some(k)
    }

    /// Toggles the x axis, keeping the visible actions.
    pub fn set_time_axis(&mut self, on: bool) {
        if on == self.time_axis {
            return;
        }
        let Some(times) = self.session.action_times_ready(self.device).map(<[i64]>::to_vec) else { return };
        if times.is_empty() || times.iter().all(|&t| t == i64::MIN) {
            return;
        }
        let (a, b) = self.visible_actions();
        let clamp = |k: usize| times[k.min(times.len() - 1)] as f64;
        self.time_axis = on;
        if on {
            self.view.x0 = clamp(a);
            self.view.x1 = clamp(b.saturating_sub(1)).max(self.view.x0 + 1.0);
        } else {
            self.view.x0 = a as f64;
            self.view.x1 = (b as f64).max(self.view.x0 + 1.0);
        }
        self.raster = None;
        self.hovered = None;
    }

    /// Centres the view on the device's peak and pins the largest allocation live there, so the
    /// bottom bar and the answers panel describe the peak.
    pub fn go_to_peak(&mut self) {
        let l = self.session.layout(self.device);
        let Some(k) = l.peak_action else { return };
        let span = (self.view.x1 - self.view.x0).min(l.actions.len() as f64 / 8.0).max(16.0);
        let x = if self.time_axis {
            self.session.action_times_ready(self.device).map_or(k as f64, |t| t[k as usize] as f64)
        } else {
            k as f64 + 0.5
        };
        self.view.x0 = x - span / 2.0;
        self.view.x1 = x + span / 2.0;
        if !self.time_axis {
            self.view.clamp_x(l.actions.len() as f64);
        }
        self.view.y0 = 0.0;
        self.view.y1 = l.peak_bytes as f64 * 1.05;
        let stack = self.session.checkpoints(self.device).stack_after(l, i64::from(k));
        let largest = stack.with_offsets().max_by_key(|&(id, _)| (l.elements.size[id as usize], std::cmp::Reverse(id)));
        self.pinned = largest.map(|(id, off)| Hit {
            element: id,
            x,
            byte: off as f64 + l.elements.size[id as usize] as f64 / 2.0,
        });
    }

    /// The element drawn at a screen point: read from the same texels the GPU shows.
    pub fn pick(&self, p: Pos2) -> Option<Hit> {
        let rect = self.plot_rect;
        if !rect.contains(p) {
            return None;
        }
        let (x, byte) = self.view.data_from_screen(rect, p);
        let id = self.texel_at(x, byte)?;
        (id != EMPTY && id < AGGREGATED).then_some(Hit { element: id, x, byte })
    }

    fn texel_at(&self, x: f64, byte: f64) -> Option<u32> {
        if let Some((spec, key)) = self.raster
            && spec.device == self.device
            && spec.time_axis == self.time_axis
            && x >= spec.x0
            && x < spec.x1
            && byte >= spec.y0
            && byte < spec.y1
            && let Some(t) = self.textures.texels(&key)
        {
            let c = ((x - spec.x0) / (spec.x1 - spec.x0) * f64::from(t.width)) as usize;
            let r = ((byte - spec.y0) / (spec.y1 - spec.y0) * f64::from(t.height)) as usize;
            return t
                .texels
                .get(r.min(t.height as usize - 1) * t.width as usize + c.min(t.width as usize - 1))
                .copied();
        }
        if self.time_axis {
            return None;
        }
        let dev = self.session.device(self.device);
        let peak = dev.peak_bytes.to_native().max(1) as f64;
        if x < 0.0 || byte < 0.0 || byte >= peak {
            return None;
        }
        for (li, level) in dev.tiles.iter().enumerate() {
            let column = (x as u64) >> level.level.to_native();
            if column >= u64::from(level.columns.to_native()) {
                return None;
            }
            let key = tile_key(self.device, li, (column / u64::from(TILE_W)) as usize);
            if let Some(t) = self.textures.texels(&key) {
                let c = (column % u64::from(TILE_W)) as usize;
                let r = ((byte / peak) * f64::from(TILE_H)) as usize;
                return t.texels.get(r.min(TILE_H as usize - 1) * TILE_W as usize + c).copied();
            }
        }
        None
    }

    /// Decides this frame's textures and quads; requests what is missing from the workers.
    pub fn draw_list(&mut self, rect: Rect, pixels_per_point: f32) -> Vec<QuadDraw> {
        self.plot_rect = rect;
        self.pixels_per_point = pixels_per_point;
        for t in self.worker.poll() {
            self.textures.arrived(t);
        }
        self.note_arrivals();
        let mut quads = Vec::new();
        let dev = self.session.device(self.device);
        let levels = dev.tiles.len();
        let peak = dev.peak_bytes.to_native().max(1) as f64;
        let width_px = (rect.width() * pixels_per_point).max(1.0);
        let y_zoomed = self.view.y0 > peak * 0.01 || (self.view.y1 - self.view.y0) < peak * 0.66;
        let mut need_raster = self.time_axis || y_zoomed || levels == 0 || self.max_entries.is_some();
        // Tiles hold every element; with --max-entries only exact rasters draw the summarized band.
        if !self.time_axis && levels > 0 && self.max_entries.is_none() {
            let apx = self.view.actions_per_point(rect.width()) / f64::from(pixels_per_point);
            // Finest level whose columns are at least a pixel wide; coarser ones stand in.
            let finest = dev.tiles[0].level.to_native();
            if apx < f64::from(1u32 << finest) {
                need_raster = true;
            }
            let wanted =
                (0..levels).find(|&li| f64::from(1u32 << dev.tiles[li].level.to_native()) >= apx).unwrap_or(levels - 1);
            // Finest resident tile wins; a coarser tile is drawn only where no finer one covers
            // the view, so each pixel is shaded about once.
            let (vx0, vx1) = (self.view.x0.max(0.0), self.view.x1);
            let mut covered: Vec<(f64, f64)> = Vec::new();
            let mut chosen = Vec::new();
            for li in wanted..levels {
                let level = &dev.tiles[li];
                let span = (1u64 << level.level.to_native()) as f64 * f64::from(TILE_W);
                let first = (vx0 / span).floor() as usize;
                let last = ((vx1 / span).ceil() as usize).min(level.tiles.len());
                for tile in first..last {
                    let key = tile_key(self.device, li, tile);
                    let (x0, x1) = (tile as f64 * span, (tile + 1) as f64 * span);
                    if self.textures.is_resident(&key) {
                        if !is_covered(&covered, x0.max(vx0), x1.min(vx1)) {
                            self.textures.touch(&key);
                            chosen.push(self.quad(key, rect, x0, x1, 0.0, peak));
                            covered.push((x0, x1));
                        }
                    } else if (li == wanted || li == levels - 1) && !self.textures.is_known(&key) {
                        self.worker.request_tile(key, self.device, li, tile);
                    }
                }
            }
            quads.extend(chosen.into_iter().rev());
        }
        // A raster of exactly this view makes every tile redundant.
        if self.raster.is_some_and(|(r, key)| self.raster_matches_view(&r, &key, rect, pixels_per_point)) {
            quads.clear();
        }
        if need_raster {
            self.want_raster(rect, pixels_per_point, width_px);
        }
        if let Some((spec, key)) = self.raster
            && spec.device == self.device
            && spec.time_axis == self.time_axis
            && self.textures.is_resident(&key)
            && (need_raster || self.wanted.is_none())
        {
            self.textures.touch(&key);
            let q = self.quad(key, rect, spec.x0, spec.x1, spec.y0, spec.y1);
            // A raster that still covers the whole plot hides every tile below it.
            let [l, b, r, t] = q.screen;
            if l <= rect.left() && r >= rect.right() && t <= rect.top() && b >= rect.bottom() {
                quads.clear();
            }
            quads.push(q);
        }
        quads
    }

    fn raster_matches_view(&self, r: &ViewSpec, key: &TexKey, rect: Rect, ppp: f32) -> bool {
        let v = &self.view;
        r.device == self.device
            && r.time_axis == self.time_axis
            && (r.x0, r.x1, r.y0, r.y1) == (v.x0, v.x1, v.y0, v.y1)
            && r.columns == (rect.width() * ppp).round() as u32
            && self.textures.is_resident(key)
    }

    /// Asks for a raster of exactly this view, unless one is on its way or already here.
    fn want_raster(&mut self, rect: Rect, ppp: f32, width_px: f32) {
        let spec = ViewSpec {
            device: self.device,
            x0: self.view.x0,
            x1: self.view.x1,
            y0: self.view.y0,
            y1: self.view.y1,
            columns: width_px.round().clamp(1.0, 8192.0) as u32,
            rows: (rect.height() * ppp).round().clamp(1.0, 8192.0) as u32,
            time_axis: self.time_axis,
            max_entries: self.max_entries.map(|n| n as u32),
        };
        if self.time_axis && self.session.action_times_ready(self.device).is_none() {
            return;
        }
        let in_flight = self.worker.in_flight.iter().any(|k| matches!(k, TexKey::Raster { .. }));
        if self.wanted.is_some_and(|(w, _)| w == spec) || in_flight {
            return;
        }
        self.generation += 1;
        let key = raster_key(&spec, self.generation);
        let keep = self.keep_mask();
        if self.worker.request_raster(key, spec, keep) {
            self.wanted = Some((spec, key));
        }
    }

    /// `h=… i=… v=…` guessed from the device's most frequent allocation sizes (no `--model`).
    pub fn shape_candidates(&mut self) -> Option<&str> {
        if self.candidates.as_ref().is_none_or(|(d, _)| *d != self.device) {
            let e = self.session.layout(self.device).elements;
            let sites = self.session.sites(self.device);
            let allocations: Vec<(u64, u32)> = (0..e.len())
                .filter(|&i| e.origin[i] == 0)
                .map(|i| (e.size[i], sites.get(i).copied().unwrap_or(u32::MAX)))
                .collect();
            let c = crate::analysis::shapes::infer_allocations(self.session.root(), &allocations);
            let parts: Vec<String> = [("h", c.h), ("i", c.i), ("v", c.v)]
                .iter()
                .filter_map(|(n, v)| v.map(|v| format!("{n}={v}")))
                .collect();
            let text = (!parts.is_empty()).then(|| format!("shape candidates: {}", parts.join(" ")));
            self.candidates = Some((self.device, text));
        }
        self.candidates.as_ref().and_then(|(_, t)| t.as_deref())
    }

    /// The mask of elements drawn individually under `--max-entries`, computed once per N.
    fn keep_mask(&mut self) -> Option<Arc<Vec<bool>>> {
        let n = self.max_entries?;
        let want = (self.device, n);
        if let Some((k, m)) = &self.keep
            && *k == want
        {
            return Some(Arc::clone(m));
        }
        let mask = Arc::new(crate::lod::raster::largest(self.session.layout(self.device).elements.size, n));
        self.keep = Some((want, Arc::clone(&mask)));
        Some(mask)
    }

    /// After textures arrived: the wanted raster becomes the current one and older rasters go.
    pub fn note_arrivals(&mut self) {
        if let Some((w, key)) = self.wanted
            && self.raster.map(|r| r.1) != Some(key)
            && self.textures.is_known(&key)
        {
            self.raster = Some((w, key));
            self.textures.evict_where(|k| matches!(k, TexKey::Raster { .. }) && *k != key);
        }
    }

    fn quad(&self, key: TexKey, rect: Rect, x0: f64, x1: f64, y0: f64, y1: f64) -> QuadDraw {
        let v = &self.view;
        QuadDraw {
            key,
            screen: [
                v.screen_from_action(rect, x0),
                v.screen_from_bytes(rect, y0),
                v.screen_from_action(rect, x1),
                v.screen_from_bytes(rect, y1),
            ],
            uv: [0.0, 0.0, 1.0, 1.0],
        }
    }

    /// Handles pointer and keyboard input on the plot.
    pub fn input(&mut self, ui: &egui::Ui, response: &egui::Response) {
        let rect = self.plot_rect;
        let (max_x0, max_x1) = self.x_extent();
        let extent = max_x1 - max_x0;
        let (scroll, shift, command, pointer, r_down, t_down) = ui.input(|i| {
            let m = i.modifiers;
            (
                i.smooth_scroll_delta,
                m.shift,
                m.command,
                i.pointer.hover_pos(),
                i.key_down(egui::Key::R),
                i.key_down(egui::Key::T),
            )
        });
        if let Some(p) = pointer.filter(|p| rect.contains(*p)) {
            let (x, b) = self.view.data_from_screen(rect, p);
            let dy = if scroll.y != 0.0 { scroll.y } else { scroll.x };
            if dy != 0.0 {
                let factor = (f64::from(dy) * 0.005).exp();
                if shift {
                    self.view.zoom_y(b, factor, self.session.layout(self.device).peak_bytes as f64 * 4.0);
                } else {
                    self.zoom_x_at(x, factor, max_x0, extent);
                }
            }
        }
        if response.drag_started() {
            let origin = response.interact_pointer_pos().unwrap_or_default();
            let (x, b) = self.view.data_from_screen(rect, origin);
            self.drag = if r_down {
                Drag::ByteRuler(x, b)
            } else if t_down {
                Drag::TimeRuler(x, b)
            } else if command {
                Drag::Range(x)
            } else {
                Drag::Pan
            };
        }
        if response.dragged() {
            self.drag_end = response.interact_pointer_pos();
            if self.drag == Drag::Pan {
                let d = response.drag_delta();
                self.pan(d.x, d.y, max_x0, extent);
            }
        }
        if response.drag_stopped() {
            if let (Drag::Range(start), Some(end)) = (self.drag, self.drag_end) {
                let end = self.view.action_from_screen(rect, end.x);
                let (a, b) = (start.min(end), start.max(end));
                if b - a > 1e-6 {
                    self.view.x0 = a;
                    self.view.x1 = b;
                    let n = self.session.layout(self.device).actions.len() as u32;
                    let first = self.action_at(a).map_or(0, |k| k as u32);
                    let last = self.action_at(b).map_or(n, |k| k as u32 + 1);
                    self.selected_range = Some((first.min(n), last.clamp(first.min(n), n)));
                }
            }
            if matches!(self.drag, Drag::Pan | Drag::Range(_)) {
                self.drag = Drag::None;
            }
        }
        if !r_down && !t_down && matches!(self.drag, Drag::ByteRuler(..) | Drag::TimeRuler(..)) && !response.dragged() {
            self.drag = Drag::None;
        }
        if response.double_clicked() {
            self.fit_y();
        }
        let hovered = pointer.and_then(|p| self.pick(p));
        if hovered.map(|h| h.element) != self.hovered.map(|h| h.element) {
            // A right-click dismisses the tooltip of one element; the next one shows again.
            self.tooltip_hidden = false;
        }
        self.hovered = hovered;
        if response.clicked() {
            self.pinned = self.hovered;
        }
        if response.secondary_clicked() {
            self.tooltip_hidden = true;
        }
    }

    pub fn zoom_x_at(&mut self, x: f64, factor: f64, min: f64, extent: f64) {
        let mut v = self.view;
        v.x0 -= min;
        v.x1 -= min;
        v.zoom_x(x - min, factor, extent);
        v.x0 += min;
        v.x1 += min;
        self.view = v;
    }

    pub fn pan(&mut self, dx: f32, dy: f32, min: f64, extent: f64) {
        let mut v = self.view;
        v.x0 -= min;
        v.x1 -= min;
        v.pan(self.plot_rect, dx, dy, extent);
        v.x0 += min;
        v.x1 += min;
        self.view = v;
    }
}

/// A value computed for one key (device, setting), shared with the GPU side or the workers.
type Cached<K, V> = (K, Arc<V>);

/// True when `[a, b)` lies inside the union of `intervals`.
fn is_covered(intervals: &[(f64, f64)], a: f64, b: f64) -> bool {
    let mut sorted = intervals.to_vec();
    sorted.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut reach = a;
    for (x0, x1) in sorted {
        if x0 > reach {
            break;
        }
        reach = reach.max(x1);
    }
    reach >= b
}

pub fn tile_key(device: usize, level: usize, index: usize) -> TexKey {
    TexKey::Tile { device: device as u32, level: level as u32, index: index as u32 }
}

pub fn raster_key(spec: &ViewSpec, generation: u64) -> TexKey {
    TexKey::Raster { device: spec.device as u32, generation }
}
