//! The floor at coarse zoom: where a pixel column covers many actions the tiles draw its peak
//! stack, and this draws its floor — the lowest total inside the column — as a line of
//! one-pixel marks, so memory that never goes away (a leak, optimizer state) reads as a rising
//! floor even when every step's peak is the same. The minimap draws the same floor under its
//! peak envelope.

use eframe::egui::{self, Rect, pos2};

use super::data::Plane;
use super::theme;
use super::timeline::Open;
use crate::lod::minimap;

/// What a column's floors were computed for: device, the view's x range (bits), columns.
pub type FloorKey = (crate::model::DeviceIdx, u64, u64, usize);

/// Columns covering fewer actions than this show every action: no floor to draw.
const MIN_ACTIONS_PER_COLUMN: f64 = 2.0;

impl Open {
    /// Per pixel column of the plot, the floor (`None` where a column shows single actions).
    fn floors(&self, columns: usize) -> Vec<Option<u64>> {
        let l = self.stacked().layout;
        let n = l.actions.len();
        let per = (self.doc.view.x1 - self.doc.view.x0) / columns.max(1) as f64;
        if per < MIN_ACTIONS_PER_COLUMN || n == 0 {
            return Vec::new();
        }
        let levels = self.doc.session.minimap(self.doc.device);
        let mins: Vec<(u64, &[u64])> = levels.iter().map(|&(apb, min, _)| (apb, min)).collect();
        (0..columns)
            .map(|c| {
                let a = (self.doc.view.x0 + per * c as f64).floor().max(0.0) as usize;
                let b = ((self.doc.view.x0 + per * (c + 1) as f64).ceil().max(0.0) as usize).min(n);
                minimap::range_min_outward(l.totals, &mins, a, b)
            })
            .collect()
    }

    /// Draws the floor over the plot at coarse zoom (the element timeline, on the action axis).
    pub fn floor_overlay(&mut self, painter: &egui::Painter) {
        if self.doc.time_axis || self.doc.plane != Plane::Elements || self.doc.pools_view {
            return;
        }
        let rect = self.plot.plot_rect;
        let columns = rect.width().floor().max(1.0) as usize;
        let key = (self.doc.device, self.doc.view.x0.to_bits(), self.doc.view.x1.to_bits(), columns);
        if self.plot.floor_cache.as_ref().is_none_or(|(k, _)| *k != key) {
            self.plot.floor_cache = Some((key, std::sync::Arc::new(self.floors(columns))));
        }
        let Some((_, floors)) = &self.plot.floor_cache else { return };
        // Pixel-aligned marks, side by side ones at the same rows joined (`strip::joined_mesh`):
        // lavapipe pays for every triangle on every frame (a feathered rectangle per column was
        // ten, a quad per column two).
        let mut marks = Vec::with_capacity(floors.len());
        for (c, f) in floors.iter().enumerate() {
            let Some(f) = *f else { continue };
            let y = self.doc.view.screen_from_bytes(rect, f as f64);
            if !(rect.top()..=rect.bottom()).contains(&y) {
                continue;
            }
            let x = rect.left() + c as f32;
            let mark =
                Rect::from_min_max(pos2(x, (y - 1.0).max(rect.top())), pos2(x + 1.0, (y + 1.0).min(rect.bottom())));
            marks.push((mark, theme::FLOOR));
        }
        painter.with_clip_rect(rect).add(super::strip::joined_mesh(&marks, self.plot.pixels_per_point));
    }
}
