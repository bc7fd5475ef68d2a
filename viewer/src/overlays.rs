//! What egui paints over and around the GPU quads: grid, axis labels, the capacity line, rulers,
//! the range selection, and the annotation lane (thinned, labels never overlapping).

use eframe::egui::{self, Rect, Sense, Stroke, pos2, vec2};

use super::data::Plane;
use super::span_marks::Axis;
use super::timeline::{Drag, Open};
use super::{axis, theme};
use crate::analysis::annotations::AnnotationFilter;

impl Open {
    /// Grid lines, painted before the GPU quads so the data covers them.
    pub fn grid(&self, painter: &egui::Painter) {
        let (rect, v) = (self.plot.plot_rect, &self.doc.view);
        for t in axis::ticks(v.y0, v.y1, (rect.height() / 60.0).max(2.0) as usize, true) {
            painter.hline(rect.x_range(), v.screen_from_bytes(rect, t), Stroke::new(1.0, theme::GRID));
        }
        for t in axis::ticks(v.x0, v.x1, (rect.width() / 110.0).max(2.0) as usize, false) {
            painter.vline(v.screen_from_action(rect, t), rect.y_range(), Stroke::new(1.0, theme::GRID));
        }
    }

    /// Axis labels, capacity line, rulers and selection, painted by egui over and around the
    /// GPU quads.
    pub fn overlays(&self, painter: &egui::Painter, full: Rect, capacity: Option<(&str, u64)>) {
        let rect = self.plot.plot_rect;
        let v = &self.doc.view;
        let font = egui::FontId::monospace(11.0);
        for t in axis::ticks(v.y0, v.y1, (rect.height() / 60.0).max(2.0) as usize, true) {
            let y = v.screen_from_bytes(rect, t);
            painter.text(
                pos2(rect.left() - 4.0, y),
                egui::Align2::RIGHT_CENTER,
                axis::bytes_label(t),
                font.clone(),
                theme::AXIS_TEXT,
            );
        }
        // Wall-time labels count from the snapshot's start, as every printed time does.
        let t0 = self.doc.session.time_base_us().map_or(self.x_extent().0, |t| t as f64);
        let axis_name = if self.doc.time_axis { "wall time" } else { "action" };
        let name = painter.layout_no_wrap(axis_name.to_owned(), font.clone(), theme::AXIS_TEXT);
        let name_rect = egui::Align2::RIGHT_TOP.anchor_size(pos2(full.right() - 4.0, rect.bottom() + 3.0), name.size());
        painter.galley(name_rect.min, name, theme::AXIS_TEXT);
        for t in axis::ticks(v.x0, v.x1, (rect.width() / 110.0).max(2.0) as usize, false) {
            let x = v.screen_from_action(rect, t);
            let label = if self.doc.time_axis { axis::time_label(t - t0) } else { axis::action_label(t) };
            let galley = painter.layout_no_wrap(label, font.clone(), theme::AXIS_TEXT);
            let at = egui::Align2::CENTER_TOP.anchor_size(pos2(x, rect.bottom() + 3.0), galley.size());
            // A tick label that would run into the axis name is left out rather than overprinted.
            if at.right() + 6.0 < name_rect.left() {
                painter.galley(at.min, galley, theme::AXIS_TEXT);
            }
        }
        if let Some((name, bytes)) = capacity {
            let y = v.screen_from_bytes(rect, bytes as f64);
            if rect.y_range().contains(y) {
                painter.hline(rect.x_range(), y, Stroke::new(1.5, theme::CAPACITY));
                painter.text(
                    pos2(rect.right() - 4.0, y - 2.0),
                    egui::Align2::RIGHT_BOTTOM,
                    name,
                    font.clone(),
                    theme::CAPACITY,
                );
            }
        }
        match (self.plot.drag, self.plot.drag_end) {
            (Drag::Range(start), Some(end)) => {
                let a = v.screen_from_action(rect, start);
                let sel = Rect::from_x_y_ranges(a.min(end.x)..=a.max(end.x), rect.y_range());
                painter.rect_filled(sel, 0.0, theme::SELECTION);
            }
            (Drag::ByteRuler(_, b0), Some(end)) => {
                let b1 = v.bytes_from_screen(rect, end.y);
                let (y0, y1) = (v.screen_from_bytes(rect, b0), end.y);
                painter.vline(end.x, y0.min(y1)..=y0.max(y1), Stroke::new(1.5, theme::RULER));
                painter.hline(rect.x_range(), y0, Stroke::new(1.0, theme::RULER));
                painter.hline(rect.x_range(), y1, Stroke::new(1.0, theme::RULER));
                let text = format!("Δ {}", axis::bytes_label((b1 - b0).abs()));
                painter.text(end + vec2(8.0, 0.0), egui::Align2::LEFT_CENTER, text, font.clone(), theme::RULER);
            }
            (Drag::TimeRuler(x0, _), Some(end)) => {
                let x1 = v.action_from_screen(rect, end.x);
                let sx0 = v.screen_from_action(rect, x0);
                painter.hline(sx0.min(end.x)..=sx0.max(end.x), end.y, Stroke::new(1.5, theme::RULER));
                painter.vline(sx0, rect.y_range(), Stroke::new(1.0, theme::RULER));
                painter.vline(end.x, rect.y_range(), Stroke::new(1.0, theme::RULER));
                let text = if self.doc.time_axis {
                    format!("Δ {}", axis::time_label((x1 - x0).abs()))
                } else {
                    format!("Δ {} actions", axis::action_label((x1 - x0).abs()))
                };
                painter.text(end + vec2(8.0, -8.0), egui::Align2::LEFT_BOTTOM, text, font, theme::RULER);
            }
            _ => {}
        }
    }

    /// Annotation spans and points above the plot, labels thinned so none overlap and the data
    /// is never covered; the rest show on hover. The spans come placed from a worker
    /// ([`super::span_marks`]): a frame visits those in view, one a pixel column per depth.
    pub fn annotations_ui(&mut self, ui: &mut egui::Ui, lane: Rect, filter: &AnnotationFilter) {
        if self.doc.plane == Plane::Segments {
            return;
        }
        let Some(placed) = self.span_marks(filter) else {
            ui.ctx().request_repaint_after(std::time::Duration::from_millis(30));
            return;
        };
        let painter = ui.painter_at(lane);
        let v = &self.doc.view;
        let rect = self.plot.plot_rect;
        let axis = if self.doc.time_axis { Axis::Micros } else { Axis::Actions };
        let per_pixel = (v.x1 - v.x0) / f64::from(rect.width().max(1.0));
        let font = egui::FontId::proportional(11.0);
        let mut labels = Vec::new();
        // Thinned by zoom: at most one marker per 3 px, so thousands of steps never paint the
        // lane solid; labels are placed without overlaps below.
        let mut last_marker = f32::NEG_INFINITY;
        // Shades and marks as two joined meshes (`strip::joined_mesh`): a stroke or a filled
        // rectangle per marker was ~10 triangles each, which lavapipe paid for on every frame.
        let (mut shades, mut marks) = (Vec::new(), Vec::new());
        let mark = |x: f32| (Rect::from_x_y_ranges(x - 0.5..=x + 0.5, lane.y_range()), theme::ANNOTATION);
        for depth in &placed.depths {
            for span in depth.visible(axis, v.x0, v.x1, per_pixel) {
                let (x0, x1) = (span.start(axis), span.end(axis).min(v.x1));
                let (sx0, sx1) =
                    (v.screen_from_action(rect, x0).max(rect.left()), v.screen_from_action(rect, x1).min(rect.right()));
                if depth.depth == 0 && sx0 - last_marker >= 3.0 {
                    if !span.point {
                        shades.push((
                            Rect::from_x_y_ranges(sx0..=sx1.max(sx0 + 1.0), lane.y_range()),
                            theme::ANNOTATION_SPAN,
                        ));
                    }
                    marks.push(mark(sx0));
                    last_marker = sx0;
                }
                labels.push((
                    sx0 + 2.0,
                    (sx1 - sx0) as u32 / depth.depth.saturating_add(1),
                    self.doc.session.str(span.name),
                ));
            }
        }
        // In start order, as the lane reads: equal rooms go to the earlier label.
        labels.sort_by(|a, b| a.0.total_cmp(&b.0));
        let ppp = ui.ctx().pixels_per_point();
        painter.add(super::strip::joined_mesh(&shades, ppp));
        painter.add(super::strip::joined_mesh(&marks, ppp));
        let places: Vec<(f32, u32)> = labels.iter().map(|l| (l.0, l.1)).collect();
        // A label that would run past the lane's right edge is not drawn: clipped, `## step 9 ##`
        // reads "#".
        let mut overflows = vec![false; labels.len()];
        let shown = axis::place_labels_lazily(&places, 6.0, |i| {
            let w = painter.layout_no_wrap(labels[i].2.to_owned(), font.clone(), theme::ANNOTATION).size().x;
            overflows[i] = labels[i].0 + w > lane.right();
            w
        });
        for ((l, show), overflow) in labels.iter().zip(shown).zip(overflows) {
            if show && !overflow {
                painter.text(
                    pos2(l.0, lane.center().y),
                    egui::Align2::LEFT_CENTER,
                    l.2,
                    font.clone(),
                    theme::ANNOTATION,
                );
            }
        }
        let response = ui.interact(lane, ui.scope_id().with("annotation-lane"), Sense::hover());
        if let Some(p) = response.hover_pos() {
            let near: Vec<&str> = labels.iter().filter(|l| (l.0 - p.x).abs() < 40.0).map(|l| l.2).collect();
            if !near.is_empty() {
                response.on_hover_text(near.join("\n"));
            }
        }
    }
}
