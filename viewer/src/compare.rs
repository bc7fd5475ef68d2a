//! Two ranks one above the other (Shift+click two ranks in the strip), each a full timeline on
//! its own y scale of the larger peak, their x axes linked by step: zooming or panning one shows
//! the same steps in the other ([`super::ranks::StepAxis`]). On the action axis only; with the
//! wall-time axis on, each moves on its own.

use eframe::egui::{self, Rect, pos2};

use super::app::ViewerOptions;
use super::open_view::new_timeline;
use super::ranks::{RankCurve, StepAxis};
use super::screen::plot_ui;
use super::timeline::Open;
use super::view::View;

pub struct Compare {
    pub a: Open,
    pub b: Open,
    pub axes: [StepAxis; 2],
    pub names: [String; 2],
    /// Each view as last drawn: the one that changed since leads.
    last: [View; 2],
}

impl Compare {
    pub fn new(a: &RankCurve, b: &RankCurve, options: &ViewerOptions, ctx: &egui::Context) -> Compare {
        let open = |c: &RankCurve| {
            let mut t = new_timeline(options, std::sync::Arc::clone(&c.session), ctx);
            t.select_device(c.device);
            t
        };
        let (mut ta, mut tb) = (open(a), open(b));
        // One y scale: the higher peak of the two.
        let y1 = ta.doc.view.y1.max(tb.doc.view.y1);
        ta.doc.view.y1 = y1;
        tb.doc.view.y1 = y1;
        let mut c = Compare {
            last: [ta.doc.view, tb.doc.view],
            a: ta,
            b: tb,
            axes: [a.steps.clone(), b.steps.clone()],
            names: [a.row.label.clone(), b.row.label.clone()],
        };
        c.follow(0);
        c
    }

    /// Sets the other view's x range to the steps view `lead` shows.
    fn follow(&mut self, lead: usize) {
        let (from, to) = (&self.axes[lead], &self.axes[1 - lead]);
        let (src, dst) = if lead == 0 { (&self.a, &mut self.b) } else { (&self.b, &mut self.a) };
        if src.doc.time_axis || dst.doc.time_axis {
            return;
        }
        let x0 = to.action(from.position(src.doc.view.x0));
        let x1 = to.action(from.position(src.doc.view.x1));
        if x1 - x0 > 0.1 {
            dst.doc.view.x0 = x0;
            dst.doc.view.x1 = x1;
            dst.plot.invalidate_raster();
        }
        self.last = [self.a.doc.view, self.b.doc.view];
    }

    /// The bar above: the two ranks and the way back; true when "back" was clicked.
    pub fn bar_ui(&self, ui: &mut egui::Ui, ranks: usize) -> bool {
        ui.horizontal(|ui| {
            let back = ui.button(format!("back to all {ranks} ranks")).clicked();
            ui.label(format!("{} (top) and {} (bottom), x axes linked by step", self.names[0], self.names[1]));
            back
        })
        .inner
    }

    /// Both plots, the top one first; then the one whose view changed leads the other.
    pub fn ui(&mut self, ui: &mut egui::Ui, options: &ViewerOptions) {
        let full = ui.available_rect_before_wrap();
        let mid = full.center().y;
        let halves = [
            Rect::from_min_max(full.min, pos2(full.right(), mid - 2.0)),
            Rect::from_min_max(pos2(full.left(), mid + 2.0), full.max),
        ];
        for (i, half) in halves.into_iter().enumerate() {
            let name = self.names[i].clone();
            let t = if i == 0 { &mut self.a } else { &mut self.b };
            ui.scope_builder(egui::UiBuilder::new().max_rect(half).id_salt(("compare", i)), |ui| {
                ui.label(format!("{name} — {}", t.doc.session.archive.path.display()));
                plot_ui(ui, t, options);
            });
        }
        if self.a.doc.view != self.last[0] {
            self.follow(0);
        } else if self.b.doc.view != self.last[1] {
            self.follow(1);
        }
    }
}
