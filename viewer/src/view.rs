//! The visible window onto a timeline: which actions and bytes map to which screen points.
//! Data space is f64 (actions, bytes), screen space f32 (egui points). No egui types here
//! beyond `Rect`, so the transforms are unit-testable.

use eframe::egui::{Pos2, Rect};

/// Visible ranges: actions `[x0, x1)` (fractional) and bytes `[y0, y1)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct View {
    pub x0: f64,
    pub x1: f64,
    pub y0: f64,
    pub y1: f64,
}

/// The room above the highest total a fitted view leaves: 5 % of it.
pub const HEADROOM: f64 = 1.05;

/// Smallest visible span: a tenth of an action, a few bytes.
const MIN_X_SPAN: f64 = 0.1;
const MIN_Y_SPAN: f64 = 16.0;

impl View {
    /// Everything: all actions, bytes up to the peak (with 5 % headroom).
    pub fn fit(actions: usize, peak_bytes: u64) -> View {
        View { x0: 0.0, x1: actions.max(1) as f64, y0: 0.0, y1: (peak_bytes.max(1) as f64) * HEADROOM }
    }

    pub fn action_from_screen(&self, rect: Rect, x: f32) -> f64 {
        self.x0 + (f64::from(x - rect.left()) / f64::from(rect.width())) * (self.x1 - self.x0)
    }

    pub fn screen_from_action(&self, rect: Rect, a: f64) -> f32 {
        rect.left() + ((a - self.x0) / (self.x1 - self.x0) * f64::from(rect.width())) as f32
    }

    /// Bytes grow upwards: the bottom of `rect` is `y0`.
    pub fn bytes_from_screen(&self, rect: Rect, y: f32) -> f64 {
        self.y0 + (f64::from(rect.bottom() - y) / f64::from(rect.height())) * (self.y1 - self.y0)
    }

    pub fn screen_from_bytes(&self, rect: Rect, b: f64) -> f32 {
        rect.bottom() - ((b - self.y0) / (self.y1 - self.y0) * f64::from(rect.height())) as f32
    }

    pub fn data_from_screen(&self, rect: Rect, p: Pos2) -> (f64, f64) {
        (self.action_from_screen(rect, p.x), self.bytes_from_screen(rect, p.y))
    }

    /// Zooms X by `factor` (> 1 zooms in) keeping the action under `anchor` fixed.
    pub fn zoom_x(&mut self, anchor: f64, factor: f64, max: f64) {
        let span = ((self.x1 - self.x0) / factor).clamp(MIN_X_SPAN, max.max(MIN_X_SPAN) * 1.0);
        let t = (anchor - self.x0) / (self.x1 - self.x0);
        self.x0 = anchor - t * span;
        self.x1 = self.x0 + span;
        self.clamp_x(max);
    }

    /// Zooms Y by `factor` keeping the byte under `anchor` fixed; never below 0.
    pub fn zoom_y(&mut self, anchor: f64, factor: f64, max: f64) {
        let span = ((self.y1 - self.y0) / factor).clamp(MIN_Y_SPAN, max.max(MIN_Y_SPAN));
        let t = (anchor - self.y0) / (self.y1 - self.y0);
        self.y0 = (anchor - t * span).max(0.0);
        self.y1 = self.y0 + span;
    }

    /// Moves by a screen delta (drag): content follows the pointer.
    pub fn pan(&mut self, rect: Rect, dx: f32, dy: f32, max_x: f64) {
        let ax = f64::from(dx) / f64::from(rect.width()) * (self.x1 - self.x0);
        let by = f64::from(dy) / f64::from(rect.height()) * (self.y1 - self.y0);
        self.x0 -= ax;
        self.x1 -= ax;
        self.y0 += by;
        self.y1 += by;
        if self.y0 < 0.0 {
            self.y1 -= self.y0;
            self.y0 = 0.0;
        }
        self.clamp_x(max_x);
    }

    /// Keeps the X window inside `[0, max]` without changing its span (when it fits).
    pub fn clamp_x(&mut self, max: f64) {
        let span = (self.x1 - self.x0).min(max.max(MIN_X_SPAN));
        if self.x0 < 0.0 {
            self.x0 = 0.0;
        }
        if self.x0 + span > max {
            self.x0 = (max - span).max(0.0);
        }
        self.x1 = self.x0 + span;
    }

    /// Actions per screen point at width `w`.
    pub fn actions_per_point(&self, w: f32) -> f64 {
        (self.x1 - self.x0) / f64::from(w.max(1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eframe::egui::pos2;

    #[test]
    fn transforms_round_trip_and_zoom_keeps_anchor() {
        let rect = Rect::from_min_max(pos2(10.0, 20.0), pos2(810.0, 620.0));
        let mut v = View::fit(1000, 1 << 20);
        let a = v.action_from_screen(rect, 410.0);
        assert!((a - 500.0).abs() < 1e-9);
        assert!((v.screen_from_action(rect, a) - 410.0).abs() < 1e-3);
        let b = v.bytes_from_screen(rect, 620.0);
        assert_eq!(b, 0.0);
        v.zoom_x(250.0, 4.0, 1000.0);
        assert!((v.x1 - v.x0 - 250.0).abs() < 1e-9);
        assert!((v.action_from_screen(rect, v.screen_from_action(rect, 250.0)) - 250.0).abs() < 1e-9);
        v.pan(rect, 800.0, 0.0, 1000.0);
        assert_eq!(v.x0, 0.0, "clamped at the start");
        v.zoom_y(1000.0, 2.0, 2e6);
        assert!(v.y0 >= 0.0);
    }
}
