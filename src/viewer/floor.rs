//! The floor at coarse zoom: where a pixel column covers many actions the tiles draw its peak
//! stack, and this draws its floor — the lowest total inside the column — as a line of
//! one-pixel marks, so memory that never goes away (a leak, optimizer state) reads as a rising
//! floor even when every step's peak is the same. The minimap draws the same floor under its
//! peak envelope.

use eframe::egui::{self, Rect, pos2};

use super::data::Plane;
use super::theme;
use super::timeline::Timeline;

/// What a column's floors were computed for: device, the view's x range (bits), columns.
pub type FloorKey = (crate::model::DeviceIdx, u64, u64, usize);

/// Columns covering fewer actions than this show every action: no floor to draw.
const MIN_ACTIONS_PER_COLUMN: f64 = 2.0;

/// The lowest of `totals[a..b]`, from the min levels (`(actions per bucket, mins)`, finest first)
/// for the whole buckets inside and the totals themselves at the edges.
pub fn floor_of(totals: &[u64], levels: &[(u64, &[u64])], a: usize, b: usize) -> Option<u64> {
    let b = b.min(totals.len());
    if a >= b {
        return None;
    }
    let span = (b - a) as f64;
    // The level whose buckets cost about as much as the edges they leave: ~√span actions each.
    let level = levels.iter().rfind(|(apb, _)| (*apb as f64) * (*apb as f64) <= span);
    let Some(&(apb, mins)) = level else { return totals[a..b].iter().copied().min() };
    let apb = apb as usize;
    let (first, last) = (a.div_ceil(apb), b / apb);
    if first >= last {
        return totals[a..b].iter().copied().min();
    }
    let inner = mins.get(first..last.min(mins.len())).and_then(|m| m.iter().copied().min());
    let edges = totals[a..first * apb].iter().chain(&totals[(last * apb).min(b)..b]).copied().min();
    inner.into_iter().chain(edges).min()
}

impl Timeline {
    /// Per pixel column of the plot, the floor (`None` where a column shows single actions).
    fn floors(&self, columns: usize) -> Vec<Option<u64>> {
        let l = self.stacked().layout;
        let n = l.actions.len();
        let per = (self.view.x1 - self.view.x0) / columns.max(1) as f64;
        if per < MIN_ACTIONS_PER_COLUMN || n == 0 {
            return Vec::new();
        }
        let levels = self.session.minimap(self.device);
        let mins: Vec<(u64, &[u64])> = levels.iter().map(|&(apb, min, _)| (apb, min)).collect();
        (0..columns)
            .map(|c| {
                let a = (self.view.x0 + per * c as f64).floor().max(0.0) as usize;
                let b = ((self.view.x0 + per * (c + 1) as f64).ceil().max(0.0) as usize).min(n);
                floor_of(l.totals, &mins, a, b)
            })
            .collect()
    }

    /// Draws the floor over the plot at coarse zoom (the element timeline, on the action axis).
    pub fn floor_overlay(&mut self, painter: &egui::Painter) {
        if self.time_axis || self.plane != Plane::Elements || self.pools_view {
            return;
        }
        let rect = self.plot_rect;
        let columns = rect.width().floor().max(1.0) as usize;
        let key = (self.device, self.view.x0.to_bits(), self.view.x1.to_bits(), columns);
        if self.floor_cache.as_ref().is_none_or(|(k, _)| *k != key) {
            self.floor_cache = Some((key, std::sync::Arc::new(self.floors(columns))));
        }
        let Some((_, floors)) = &self.floor_cache else { return };
        for (c, f) in floors.iter().enumerate() {
            let Some(f) = *f else { continue };
            let y = self.view.screen_from_bytes(rect, f as f64);
            if !(rect.top()..=rect.bottom()).contains(&y) {
                continue;
            }
            let x = rect.left() + c as f32;
            let mark =
                Rect::from_min_max(pos2(x, (y - 1.0).max(rect.top())), pos2(x + 1.0, (y + 1.0).min(rect.bottom())));
            painter.rect_filled(mark, 0.0, theme::FLOOR);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_the_lowest_total_of_the_column() {
        let totals: Vec<u64> = (0..1000u64).map(|k| 500 + (k * 7919) % 301).collect();
        let mins: Vec<u64> = totals.chunks(64).map(|c| *c.iter().min().unwrap()).collect();
        let levels = [(64u64, mins.as_slice())];
        for (a, b) in [(0, 1000), (3, 700), (64, 128), (100, 101), (990, 1000), (65, 4000), (10, 10)] {
            let exact = totals[a..b.min(1000)].iter().copied().min();
            assert_eq!(floor_of(&totals, &levels, a, b), exact, "{a}..{b}");
        }
    }
}
