//! The timeline of one device: what to draw this frame (tiles, or an exact raster), input
//! (zoom, pan, range zoom, rulers, hover, pin), and the overlays egui paints on top.
//!
//! ```text
//!  level choice: actions per pixel ≥ 2^finest stored level  → pyramid tiles, coarse → fine
//!                deeper, zoomed in Y, or on the wall-time axis → one raster of exactly the
//!                view from checkpoints (worker thread); until it arrives, tiles stand in
//! ```

mod draw;
mod input;
mod pick;

use crate::model::DeviceIdx;
use std::sync::Arc;

use eframe::egui::{self, Pos2, Rect};

use super::data::Session;
use super::gpu::TexKey;
use super::textures::Textures;
use super::theme;
use super::view::View;
use super::worker::{ViewSpec, Worker};
use memviz_format::{TILE_H, TILE_W};

pub use super::selection::{Hit, Selection};

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
    pub device: DeviceIdx,
    pub view: View,
    pub time_axis: bool,
    pub colour_by_site: bool,
    /// Hovered and pinned elements, the selected range: shared with every panel.
    pub selection: Selection,
    pub tooltip_hidden: bool,
    pub drag: Drag,
    pub drag_end: Option<Pos2>,
    pub worker: Worker,
    pub textures: Textures,
    /// Shape candidates of the device (`h=… i=… v=…`), inferred once.
    candidates: Option<(DeviceIdx, Option<String>)>,
    /// `--max-entries` / the detail slider: draw only the N largest individually.
    pub max_entries: Option<usize>,
    keep: Option<Cached<(DeviceIdx, usize), Vec<bool>>>,
    /// The palette for (device, by-site?), computed once per choice.
    colours: Option<Cached<(DeviceIdx, bool), Vec<u32>>>,
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
            device: DeviceIdx(0),
            view: View::fit(1, 1),
            time_axis: false,
            colour_by_site: true,
            selection: Selection::default(),
            tooltip_hidden: false,
            drag: Drag::None,
            drag_end: None,
            worker,
            textures: Textures::default(),
            max_entries: None,
            candidates: None,
            keep: None,
            colours: None,
            raster: None,
            wanted: None,
            generation: 0,
            plot_rect: Rect::NOTHING,
            pixels_per_point: 1.0,
        };
        t.select_device(DeviceIdx(0));
        t
    }

    pub fn select_device(&mut self, d: DeviceIdx) {
        self.device = DeviceIdx(d.index().min(self.session.devices().saturating_sub(1)));
        self.load_coarsest();
        self.fit();
        self.selection.clear();
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
        self.selection.hovered = None;
    }

    /// Centres the view on the device's peak and pins the largest allocation live there, so the
    /// bottom bar and the answers panel describe the peak.
    pub fn go_to_peak(&mut self) {
        let l = self.session.layout(self.device);
        let Some(k) = l.peak_action else { return };
        let span = (self.view.x1 - self.view.x0).min(l.actions.len() as f64 / 8.0).max(16.0);
        let x = if self.time_axis {
            self.session.action_times_ready(self.device).map_or(f64::from(k.0), |t| t[k.index()] as f64)
        } else {
            f64::from(k.0) + 0.5
        };
        self.view.x0 = x - span / 2.0;
        self.view.x1 = x + span / 2.0;
        if !self.time_axis {
            self.view.clamp_x(l.actions.len() as f64);
        }
        self.view.y0 = 0.0;
        self.view.y1 = l.peak_bytes as f64 * 1.05;
        let stack = self.session.checkpoints(self.device).stack_after(l, k.signed());
        let largest = stack.with_offsets().max_by_key(|&(id, _)| (l.elements.size[id.index()], std::cmp::Reverse(id)));
        self.selection.pinned = largest.map(|(id, off)| Hit {
            element: id,
            x,
            byte: off as f64 + l.elements.size[id.index()] as f64 / 2.0,
        });
    }

    /// `h=… i=… v=…` guessed from the device's most frequent allocation sizes (no `--model`).
    pub fn shape_candidates(&mut self) -> Option<&str> {
        if self.candidates.as_ref().is_none_or(|(d, _)| *d != self.device) {
            let e = self.session.layout(self.device).elements;
            let sites = self.session.sites(self.device);
            let allocations: Vec<(u64, u32)> = (0..e.len())
                .filter(|&i| e.origin[i] == 0)
                .map(|i| (e.size[i], sites.get(i).copied().unwrap_or(crate::model::NONE)))
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
}

/// A value computed for one key (device, setting), shared with the GPU side or the workers.
type Cached<K, V> = (K, Arc<V>);

pub fn tile_key(device: DeviceIdx, level: usize, index: usize) -> TexKey {
    TexKey::Tile { device: device.0 as u32, level: level as u32, index: index as u32 }
}

pub fn raster_key(spec: &ViewSpec, generation: u64) -> TexKey {
    TexKey::Raster { device: spec.device.0 as u32, generation }
}
