//! On the element timeline: the allocator's reserved bytes as a line over the allocated area,
//! the gap between them shaded as "reserved but unallocated", and the OOM events as red markers
//! whose tooltip is the explainer's verdict (a click opens the memory map at that OOM).
//!
//! Per screen column the line is the highest reserved value over the column's actions, read from
//! the series' min/max levels when a column covers many actions and from its chunks (a few,
//! decoded once each on a worker) when zoomed in: the cost follows the screen, not the trace.

use std::sync::Arc;

use eframe::egui::{self, Color32, Rect, Stroke, pos2};

use super::background::Latest;
use super::data::Plane;
use super::timeline::Open;
use crate::archive::chunks::{self, CHUNK_ROWS};
use crate::lod::raster::{action_columns, time_columns};
use crate::model::DeviceIdx;

pub const RESERVED_LINE: Color32 = Color32::from_rgb(250, 250, 250);
pub const UNALLOCATED: Color32 = Color32::from_rgba_premultiplied(40, 34, 10, 70);
pub const OOM: Color32 = Color32::from_rgb(255, 40, 40);

/// Decoded chunks of the reserved series, by (device, chunk): decoded on a worker, so a frame
/// that zooms in where the levels are too coarse draws the line once its chunks are in.
#[derive(Default)]
pub struct ReservedCache {
    chunks: Option<Latest<(DeviceIdx, usize), Vec<i64>>>,
}

impl ReservedCache {
    /// True while a chunk is being decoded.
    pub fn busy(&self) -> bool {
        self.chunks.as_ref().is_some_and(Latest::busy)
    }

    /// The highest reserved bytes after any action of `[a, b)`; `None` without the series, or
    /// while a chunk it needs is being decoded.
    fn max(&mut self, t: &Open, a: usize, b: usize) -> Option<u64> {
        let series = &t.doc.session.device(t.doc.device).allocator.reserved;
        if series.chunks.is_empty() || a >= b {
            return None;
        }
        let span = (b - a) as u64;
        // (A level without a bucket width is no index's: the background check says so.)
        let level = series.levels.iter().rev().find(|l| {
            let per = l.actions_per_bucket.to_native();
            per != 0 && !l.max.is_empty() && per.saturating_mul(4) <= span
        });
        if let Some(l) = level {
            let per = l.actions_per_bucket.to_native() as usize;
            let (i, j) = (a / per, b.div_ceil(per).min(l.max.len()));
            return l.max.get(i..j.max(i + 1).min(l.max.len()))?.iter().map(|v| v.to_native()).max();
        }
        let loader = self.chunks.get_or_insert_with(|| {
            let session = Arc::clone(&t.doc.session);
            Latest::start("reserved", t.plot.ctx().clone(), move |&(d, c): &(DeviceIdx, usize)| {
                let series = &session.device(d).allocator.reserved;
                series.chunks.get(c).and_then(|ch| session.noting(chunks::decode_deltas(ch))).unwrap_or_default()
            })
        });
        let mut best = None;
        for c in a / CHUNK_ROWS..=(b - 1) / CHUNK_ROWS {
            let values = loader.get(&(t.doc.device, c))?;
            let (lo, hi) = (a.max(c * CHUNK_ROWS) - c * CHUNK_ROWS, (b.min((c + 1) * CHUNK_ROWS)) - c * CHUNK_ROWS);
            let m = values.get(lo..hi.min(values.len())).and_then(|v| v.iter().max().copied());
            best = best.max(m.map(|v| v as u64));
        }
        best
    }
}

impl Open {
    /// The highest reserved bytes over actions `[a, b)` (`None`: not known yet or no series).
    pub fn visible_reserved(&mut self, a: usize, b: usize) -> Option<u64> {
        let mut cache = std::mem::take(&mut self.plot.reserved_cache);
        let max = cache.max(self, a, b);
        self.plot.reserved_cache = cache;
        max
    }

    /// The reserved line and the shaded gap over the allocated area (element timeline only).
    pub fn reserved_overlay(&mut self, painter: &egui::Painter) {
        let mut cache = std::mem::take(&mut self.plot.reserved_cache);
        self.draw_reserved(painter, &mut cache);
        self.plot.reserved_cache = cache;
    }

    fn draw_reserved(&self, painter: &egui::Painter, cache: &mut ReservedCache) {
        if self.doc.plane != Plane::Elements {
            return;
        }
        let rect = self.plot.plot_rect;
        let columns = (rect.width() / 2.0).max(1.0) as u32;
        let l = self.stacked().layout;
        let ranges: Vec<(usize, usize)> = if self.doc.time_axis {
            let Some(times) = self.action_times() else { return };
            time_columns(&times, self.doc.view.x0, self.doc.view.x1, columns).collect()
        } else {
            action_columns(self.doc.view.x0, self.doc.view.x1, columns).collect()
        };
        let col_w = rect.width() / columns as f32;
        let levels = self.doc.session.minimap(self.doc.device);
        let maxs: Vec<(u64, &[u64])> = levels.iter().map(|&(apb, _, max)| (apb, max)).collect();
        let mut line = Vec::with_capacity(ranges.len() * 2);
        // The unallocated band as abutting rectangles, side by side ones at the same rows joined
        // (`strip::joined_mesh`): each pixel is shaded once. As a rectangle per column, each with
        // its anti-aliasing fringe over its neighbours, it was half of every frame on a CPU
        // rasteriser (docs/design/10); as quads, two triangles a column.
        let mut band = Vec::with_capacity(ranges.len());
        // The line's pieces (it breaks where the reserved memory is not known), drawn over the band.
        let mut pieces = Vec::new();
        let painter = painter.with_clip_rect(rect);
        for (c, &(a, b)) in ranges.iter().enumerate() {
            let b = b.min(l.totals.len());
            let Some(reserved) = cache.max(self, a, b) else {
                if !line.is_empty() {
                    pieces.push(egui::Shape::line(std::mem::take(&mut line), Stroke::new(1.5, RESERVED_LINE)));
                }
                continue;
            };
            let allocated = crate::lod::minimap::range_max_outward(l.totals, &maxs, a, b).unwrap_or(0);
            let (x0, x1) = (rect.left() + c as f32 * col_w, rect.left() + (c + 1) as f32 * col_w);
            let (y_r, y_a) = (
                self.doc.view.screen_from_bytes(rect, reserved as f64),
                self.doc.view.screen_from_bytes(rect, allocated as f64),
            );
            if y_r < y_a {
                band.push((Rect::from_min_max(pos2(x0, y_r), pos2(x1, y_a)), UNALLOCATED));
            }
            line.push(pos2(x0, y_r));
            line.push(pos2(x1, y_r));
        }
        if !line.is_empty() {
            pieces.push(egui::Shape::line(line, Stroke::new(1.5, RESERVED_LINE)));
        }
        painter.add(super::strip::joined_mesh(&band, self.plot.pixels_per_point));
        painter.extend(pieces);
    }

    /// Red markers at each OOM's action, at most one a pixel; hovering one shows the verdict; a
    /// click returns the OOM's event (the memory map opens there). The marks' places were sorted
    /// on their thread: a frame reads only those in view.
    pub fn oom_markers(&mut self, ui: &egui::Ui) -> Option<i64> {
        if self.doc.plane != Plane::Elements {
            return None;
        }
        let rect = self.plot.plot_rect;
        let marks = Arc::clone(self.oom_marks()?);
        let painter = ui.painter_at(rect);
        let pointer = ui.input(|i| i.pointer.hover_pos());
        let clicked = ui.input(|i| i.pointer.primary_clicked());
        let data = |sx: f32| self.doc.view.action_from_screen(rect, sx);
        let pixel = (data(rect.left() + 1.0 / self.plot.pixels_per_point.max(1e-3)) - data(rect.left())).abs();
        for (x, _) in marks.visible(self.doc.time_axis, data(rect.left()), data(rect.right()), pixel) {
            let sx = self.doc.view.screen_from_action(rect, x);
            if sx < rect.left() || sx > rect.right() {
                continue;
            }
            painter.vline(sx, rect.y_range(), Stroke::new(2.0, OOM));
            let top = rect.top();
            painter.add(egui::Shape::convex_polygon(
                vec![pos2(sx - 6.0, top), pos2(sx + 6.0, top), pos2(sx, top + 10.0)],
                OOM,
                Stroke::NONE,
            ));
        }
        // The last mark within 5 points of the pointer, of those drawn (inside the plot).
        let hit = pointer.filter(|p| rect.contains(*p)).and_then(|p| {
            let (lo, hi) = ((p.x - 5.0).max(rect.left()), (p.x + 5.0).min(rect.right()));
            marks.under(self.doc.time_axis, data(lo), data(hi)).cloned()
        });
        let m = hit?;
        let tip = ui.scope_id().with("memviz-oom-tip");
        egui::Tooltip::always_open(ui.ctx().clone(), ui.layer_id(), tip, egui::PopupAnchor::Pointer).show(|ui| {
            ui.colored_label(OOM, format!("OOM at event {}", crate::analysis::units::thousands(m.event as u64)));
            ui.label(&m.verdict);
            ui.weak("click: the memory map at this OOM");
        });
        clicked.then_some(m.event)
    }
}
