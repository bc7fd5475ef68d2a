//! Picking: the element under a screen point, read from the same texels the GPU draws (tiles
//! or the current raster), so hover and the picture always agree.

use eframe::egui::Pos2;
use memviz_format::{TILE_H, TILE_W};

use super::{Hit, Open, tile_key};
use crate::lod::raster::{AGGREGATED, EMPTY};
use crate::model::ElementId;

impl Open {
    /// The element drawn at a screen point: read from the same texels the GPU shows.
    pub fn pick(&self, p: Pos2) -> Option<Hit> {
        let rect = self.plot.plot_rect;
        if !rect.contains(p) {
            return None;
        }
        let (x, byte) = self.doc.view.data_from_screen(rect, p);
        let id = self.texel_at(x, byte)?;
        (id != EMPTY && id < AGGREGATED).then_some(Hit { element: ElementId(id), x, byte })
    }

    fn texel_at(&self, x: f64, byte: f64) -> Option<u32> {
        if let Some((spec, key)) = self.plot.raster
            && spec.device == self.doc.device
            && spec.plane == self.doc.plane
            && spec.time_axis == self.doc.time_axis
            && x >= spec.x0
            && x < spec.x1
            && byte >= spec.y0
            && byte < spec.y1
            && let Some(t) = self.plot.textures.texels(&key)
        {
            let c = ((x - spec.x0) / (spec.x1 - spec.x0) * f64::from(t.width)) as usize;
            let r = ((byte - spec.y0) / (spec.y1 - spec.y0) * f64::from(t.height)) as usize;
            return t
                .texels
                .get(r.min(t.height as usize - 1) * t.width as usize + c.min(t.width as usize - 1))
                .copied();
        }
        if self.doc.time_axis {
            return None;
        }
        let stacked = self.stacked();
        let peak = stacked.layout.peak_bytes.max(1) as f64;
        if x < 0.0 || byte < 0.0 || byte >= peak {
            return None;
        }
        for (li, level) in stacked.tiles.iter().enumerate() {
            let column = (x as u64) >> level.level.to_native();
            if column >= u64::from(level.columns.to_native()) {
                return None;
            }
            let key = tile_key(self.doc.device, self.doc.plane, li, (column / u64::from(TILE_W)) as usize);
            if let Some(t) = self.plot.textures.texels(&key) {
                let c = (column % u64::from(TILE_W)) as usize;
                let r = ((byte / peak) * f64::from(TILE_H)) as usize;
                return t.texels.get(r.min(TILE_H as usize - 1) * TILE_W as usize + c).copied();
            }
        }
        None
    }
}
