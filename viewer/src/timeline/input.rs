//! How the timeline takes input: scroll zooms X at the cursor (Shift: Y), drag pans, Ctrl/Cmd+drag
//! selects a range, R/T+drag measure, double-click fits Y, click pins, right-click hides the
//! tooltip. The result lands in the view and in the shared [`super::Selection`].

use eframe::egui;

use super::{Drag, Open};

/// How much a point of scrolling zooms: by e^(0.005 · points), so 100 points of scroll zoom by
/// e^0.5 ≈ 1.65.
const ZOOM_PER_POINT: f64 = 0.005;
impl Open {
    /// Handles pointer and keyboard input on the plot.
    pub fn input(&mut self, ui: &egui::Ui, response: &egui::Response) {
        let rect = self.plot.plot_rect;
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
            let (x, b) = self.doc.view.data_from_screen(rect, p);
            let dy = if scroll.y != 0.0 { scroll.y } else { scroll.x };
            if dy != 0.0 {
                let factor = (f64::from(dy) * ZOOM_PER_POINT).exp();
                if shift {
                    self.doc.view.zoom_y(b, factor, self.stacked().layout.peak_bytes as f64 * 4.0);
                } else {
                    self.zoom_x_at(x, factor, max_x0, extent);
                }
            }
        }
        if response.drag_started() {
            // Where the button went down: egui starts a drag a few points later.
            let origin = ui.input(|i| i.pointer.press_origin()).or(response.interact_pointer_pos()).unwrap_or_default();
            let (x, b) = self.doc.view.data_from_screen(rect, origin);
            self.plot.drag = if r_down {
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
            self.plot.drag_end = response.interact_pointer_pos();
            if self.plot.drag == Drag::Pan {
                let d = response.drag_delta();
                self.pan(d.x, d.y, max_x0, extent);
            }
        }
        if response.drag_stopped() {
            if let (Drag::Range(start), Some(end)) = (self.plot.drag, self.plot.drag_end) {
                let end = self.doc.view.action_from_screen(rect, end.x);
                let (a, b) = (start.min(end), start.max(end));
                if b - a > 1e-6 {
                    self.doc.view.x0 = a;
                    self.doc.view.x1 = b;
                    let n = self.stacked().layout.actions.len() as u32;
                    let first = self.action_at(a).map_or(0, |k| k as u32);
                    let last = self.action_at(b).map_or(n, |k| k as u32 + 1);
                    self.doc.selection.range = Some((first.min(n), last.clamp(first.min(n), n)));
                }
            }
            if matches!(self.plot.drag, Drag::Pan | Drag::Range(_)) {
                self.plot.drag = Drag::None;
            }
        }
        if !r_down
            && !t_down
            && matches!(self.plot.drag, Drag::ByteRuler(..) | Drag::TimeRuler(..))
            && !response.dragged()
        {
            self.plot.drag = Drag::None;
        }
        if response.double_clicked() {
            self.fit_y();
        }
        let hovered = pointer.and_then(|p| self.pick(p));
        if hovered.map(|h| h.element) != self.doc.selection.hovered.map(|h| h.element) {
            // A right-click dismisses the tooltip of one element; the next one shows again.
            self.plot.tooltip_hidden = false;
        }
        self.doc.selection.hovered = hovered;
        if response.clicked() {
            self.doc.selection.pinned = self.doc.selection.hovered;
            // The memory map then stays at the clicked action's event.
            if self.doc.plane == super::Plane::Elements
                && let Some(k) =
                    pointer.and_then(|p| self.action_at(self.doc.view.data_from_screen(self.plot.plot_rect, p).0))
            {
                self.doc.selection.event = Some(crate::memory_map::action_event(&self.doc, k));
            }
        }
        if response.secondary_clicked() {
            self.plot.tooltip_hidden = true;
        }
    }

    pub fn zoom_x_at(&mut self, x: f64, factor: f64, min: f64, extent: f64) {
        let mut v = self.doc.view;
        v.x0 -= min;
        v.x1 -= min;
        v.zoom_x(x - min, factor, extent);
        v.x0 += min;
        v.x1 += min;
        self.doc.view = v;
    }

    pub fn pan(&mut self, dx: f32, dy: f32, min: f64, extent: f64) {
        let mut v = self.doc.view;
        v.x0 -= min;
        v.x1 -= min;
        v.pan(self.plot.plot_rect, dx, dy, extent);
        v.x0 += min;
        v.x1 += min;
        self.doc.view = v;
    }
}
