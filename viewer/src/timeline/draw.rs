//! What the timeline draws this frame: pyramid tiles from coarse to fine, or one exact raster of
//! the view from the checkpoints (asked of the workers; tiles stand in until it arrives).

use crate::archive::parts::COARSE_TILES;
use eframe::egui::Rect;
use memviz_format::TILE_W;

use super::{Open, Timeline, raster_key, tile_key};
use crate::gpu::{QuadDraw, TexKey};
use crate::worker::ViewSpec;

/// Tiles are drawn from 0 to the peak, so a view whose floor is above 1 % of the peak, or whose
/// span is under two thirds of it, is zoomed in on bytes: a tile's texel would be several pixels
/// tall there, and an exact raster of the view is drawn instead.
const TILES_FLOOR: f64 = 0.01;
const TILES_MIN_SPAN: f64 = 0.66;
impl Open {
    /// Decides this frame's textures and quads; requests what is missing from the workers.
    pub fn draw_list(&mut self, rect: Rect, pixels_per_point: f32) -> Vec<QuadDraw> {
        self.plot.plot_rect = rect;
        self.plot.pixels_per_point = pixels_per_point;
        for t in self.plot.worker.poll() {
            self.plot.textures.arrived(t);
        }
        self.plot.note_arrivals();
        let mut quads = Vec::new();
        if self.doc.session.is_bad() {
            // Nothing more is asked of a bad archive: its one line replaces the timeline.
            return quads;
        }
        let session = std::sync::Arc::clone(&self.doc.session);
        let stacked = super::stacked_in(&session, self.doc.device, self.doc.plane);
        let tiles = stacked.tiles;
        let levels = tiles.len();
        let peak = stacked.layout.peak_bytes.max(1) as f64;
        let width_px = (rect.width() * pixels_per_point).max(1.0);
        let y_zoomed =
            self.doc.view.y0 > peak * TILES_FLOOR || (self.doc.view.y1 - self.doc.view.y0) < peak * TILES_MIN_SPAN;
        // Tiles hold every element; with --max-entries or the pools' bands only exact rasters
        // draw the band.
        let banded = self.doc.max_entries.is_some() || (self.doc.pools_view && self.pools().is_some());
        let mut need_raster = self.doc.time_axis || y_zoomed || levels == 0 || banded;
        if !self.doc.time_axis && levels > 0 && !banded {
            let apx = self.doc.view.actions_per_point(rect.width()) / f64::from(pixels_per_point);
            // Finest level whose columns are at least a pixel wide; coarser ones stand in.
            let finest = tiles[0].level.to_native();
            if apx < f64::from(1u32 << finest) {
                need_raster = true;
            }
            let mut wanted =
                (0..levels).find(|&li| f64::from(1u32 << tiles[li].level.to_native()) >= apx).unwrap_or(levels - 1);
            if self.doc.preview {
                // Only the coarse levels are here (`Archive::first_frame_ranges`).
                wanted =
                    (wanted..levels).find(|&li| tiles[li].texel_chunks().len() <= COARSE_TILES).unwrap_or(levels - 1);
            }
            // Finest resident tile wins; a coarser tile is drawn only where no finer one covers
            // the view, so each pixel is shaded about once.
            let (vx0, vx1) = (self.doc.view.x0.max(0.0), self.doc.view.x1);
            let mut covered: Vec<(f64, f64)> = Vec::new();
            let mut chosen = Vec::new();
            for li in wanted..levels {
                let level = &tiles[li];
                let span = (1u64 << level.level.to_native()) as f64 * f64::from(TILE_W);
                let first = (vx0 / span).floor() as usize;
                let last = ((vx1 / span).ceil() as usize).min(level.texel_chunks().len());
                for tile in first..last {
                    let key = tile_key(self.doc.device, self.doc.plane, li, tile);
                    let (x0, x1) = (tile as f64 * span, (tile + 1) as f64 * span);
                    if self.plot.textures.is_resident(&key) {
                        if !is_covered(&covered, x0.max(vx0), x1.min(vx1)) {
                            self.plot.textures.touch(&key);
                            chosen.push(self.quad(key, rect, x0, x1, 0.0, peak));
                            covered.push((x0, x1));
                        }
                    } else if (li == wanted || li == levels - 1) && !self.plot.textures.is_known(&key) {
                        self.plot.worker.request_tile(key, self.doc.device, self.doc.plane, li, tile);
                    }
                }
            }
            quads.extend(chosen.into_iter().rev());
        }
        // A preview's raster would read what has not arrived: its tiles stand in.
        need_raster &= !self.doc.preview;
        // A raster of exactly this view makes every tile redundant.
        if self.plot.raster.is_some_and(|(r, key)| self.raster_matches_view(&r, &key, rect, pixels_per_point)) {
            quads.clear();
        }
        if need_raster {
            self.want_raster(rect, pixels_per_point, width_px);
        }
        self.plot.raster_pending = need_raster
            && !self.plot.raster.is_some_and(|(r, key)| self.raster_matches_view(&r, &key, rect, pixels_per_point));
        if let Some((spec, key)) = self.plot.raster
            && spec.device == self.doc.device
            && spec.plane == self.doc.plane
            && spec.time_axis == self.doc.time_axis
            && self.plot.textures.is_resident(&key)
            && (need_raster || self.plot.wanted.is_none())
        {
            self.plot.textures.touch(&key);
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

    /// The raster drawn (its spec) and the sample action of each of its columns, for overlays
    /// drawn column by column over it (the pools' bands): read, never searched again.
    pub fn drawn_raster_samples(&self) -> Option<(ViewSpec, crate::worker::Samples)> {
        let (spec, key) = self.plot.raster?;
        let drawn = spec.device == self.doc.device
            && spec.plane == self.doc.plane
            && spec.time_axis == self.doc.time_axis
            && self.plot.textures.is_resident(&key);
        if !drawn {
            return None;
        }
        Some((spec, std::sync::Arc::clone(self.plot.worker.raster_samples(&key)?)))
    }

    fn raster_matches_view(&self, r: &ViewSpec, key: &TexKey, rect: Rect, ppp: f32) -> bool {
        let v = &self.doc.view;
        r.device == self.doc.device
            && r.plane == self.doc.plane
            && r.time_axis == self.doc.time_axis
            && (r.x0, r.x1, r.y0, r.y1) == (v.x0, v.x1, v.y0, v.y1)
            && r.columns == (rect.width() * ppp).round() as u32
            && self.plot.textures.is_resident(key)
    }

    /// Asks for a raster of exactly this view, unless one is on its way or already here.
    fn want_raster(&mut self, rect: Rect, ppp: f32, width_px: f32) {
        let spec = ViewSpec {
            device: self.doc.device,
            plane: self.doc.plane,
            x0: self.doc.view.x0,
            x1: self.doc.view.x1,
            y0: self.doc.view.y0,
            y1: self.doc.view.y1,
            columns: width_px.round().clamp(1.0, 8192.0) as u32,
            rows: (rect.height() * ppp).round().clamp(1.0, 8192.0) as u32,
            time_axis: self.doc.time_axis,
            max_entries: self.doc.max_entries.map(|n| n as u32),
            pools: self.doc.pools_view && self.pools().is_some(),
        };
        if self.doc.time_axis && self.action_times().is_none() {
            return;
        }
        let in_flight = self.plot.worker.in_flight.iter().any(|k| matches!(k, TexKey::Raster { .. }));
        if self.plot.wanted.is_some_and(|(w, _)| w == spec) || in_flight {
            return;
        }
        self.plot.generation += 1;
        let key = raster_key(&spec, self.plot.generation);
        let keep = self.keep_mask();
        if self.plot.worker.request_raster(key, spec, keep) {
            self.plot.wanted = Some((spec, key));
        }
    }

    fn quad(&self, key: TexKey, rect: Rect, x0: f64, x1: f64, y0: f64, y1: f64) -> QuadDraw {
        let v = &self.doc.view;
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
}

impl Timeline {
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
}

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
