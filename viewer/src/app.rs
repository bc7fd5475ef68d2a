//! The viewer window's state and layout: top bar, timeline, minimap, bottom bar. The same
//! `ui` function draws into a real window (eframe) and offscreen (screenshots, bench, tests).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use eframe::egui;

use super::data::{Plane, Session};
use super::memory_map::MemoryMap;
use super::open_view::{apply_view, new_timeline, open_file, preview_timeline};
use super::screen::{Screen, timeline_screen};
use super::tabs::{OpenAt, Tab};
use super::theme;
use super::timeline::Open;

/// Options from the command line.
#[derive(Debug, Clone, Default)]
pub struct ViewerOptions {
    /// `--gpu NAME`: draw that card's memory capacity.
    pub gpu: Option<(&'static str, u64)>,
    /// Which annotations to draw.
    pub annotations: crate::analysis::annotations::AnnotationFilter,
    /// `--model`: tensor shapes in the tooltip and the bottom bar.
    pub model: Option<crate::analysis::shapes::ModelDims>,
    /// `--max-entries N`: the N largest allocations drawn individually, the rest summarized.
    pub max_entries: Option<usize>,
    /// `--no-cache`: index snapshots into a temporary archive instead of the cache.
    pub no_cache: bool,
    /// What opening files, the background checks and writing take on this machine.
    pub platform: crate::platform::PlatformRef,
    /// `--view`: the view shown first.
    pub tab: Tab,
    /// `--event`, `--action`, `--oom`: the instant shown first.
    pub at: Option<OpenAt>,
    /// `--colour category` / `allocation`: the colouring from the start (default: by site).
    pub by_category: bool,
    pub by_allocation: bool,
    /// `--device D` (an ordinal), `--x A..B` (the actions shown), `--pin` / `--element`.
    pub device: Option<crate::model::DeviceId>,
    pub x_range: Option<(f64, f64)>,
    pub pin: Option<super::tabs::Pin>,
}

/// What the window shows: a timeline, or progress while a snapshot is indexed.
pub enum Content {
    Empty,
    Indexing {
        path: PathBuf,
        progress: Arc<std::sync::atomic::AtomicU64>,
        total: u64,
        done: Receiver<Result<Arc<Session>, String>>,
    },
    Open(Box<Open>),
    /// A job's ranks as small multiples (`memviz open DIR`).
    Ranks,
    /// Two ranks one above the other, x axes linked by step.
    Compare(Box<super::compare::Compare>),
    Failed(String),
}

pub struct ViewerApp {
    pub content: Content,
    pub answers: super::answers_panel::AnswersPanel,
    pub options: ViewerOptions,
    pub stack_filter: String,
    pub full_paths: bool,
    /// Frames drawn so far.
    pub frames: u64,
    /// The view shown.
    pub tab: Tab,
    pub map: MemoryMap,
    /// The job's rank strip, when a folder or several files were opened: kept while a rank (or
    /// two) is shown, to go back to.
    pub ranks: Option<Box<super::ranks::RankStrip>>,
    /// The file the user opened (what "copy link" names), and the share bar's last message.
    pub source: Option<PathBuf>,
    pub status: Option<String>,
}

impl ViewerApp {
    pub fn new(options: ViewerOptions) -> ViewerApp {
        ViewerApp {
            content: Content::Empty,
            answers: Default::default(),
            tab: options.tab,
            options,
            stack_filter: String::new(),
            full_paths: false,
            frames: 0,
            map: MemoryMap::default(),
            ranks: None,
            source: None,
            status: None,
        }
    }

    /// Opens a job's ranks: the strip, loading them on a named thread.
    pub fn open_job(&mut self, files: Vec<crate::model::RankFile>, ctx: &egui::Context) {
        self.ranks =
            Some(Box::new(super::ranks::RankStrip::new(&self.options.platform, files, !self.options.no_cache, ctx)));
        self.content = Content::Ranks;
    }

    /// Dropped or given paths: one file opens as itself; a folder, or several files, as a job.
    pub fn open_paths(&mut self, paths: &[PathBuf], ctx: &egui::Context) {
        match paths {
            [] => {}
            [one] if !one.is_dir() => {
                self.ranks = None;
                self.open_any(one, ctx);
            }
            _ => match self.options.platform.job(paths) {
                Ok(job) => self.open_job(job.files, ctx),
                Err(e) => self.content = Content::Failed(e),
            },
        }
    }

    /// The strip's or a comparison's work in flight, or the allocator state being made for the
    /// State view (for screenshots and tests to wait on).
    pub fn busy(&self) -> bool {
        let timeline_busy = |t: &Open| {
            t.plot.worker.busy()
                || t.plot.textures.pending() > 0
                || (t.doc.colour_by_category && t.categories_ready().is_none())
                || t.plot.shapes_pending()
                || t.plot.raster_pending
                || t.plot.details_pending()
                || t.plot.reserved_cache.busy()
                || t.plot.times_pending()
                || t.doc.search.pending()
                || t.segment_minimap_pending()
        };
        match &self.content {
            Content::Open(t) => {
                (self.draws_timeline() && (timeline_busy(t) || self.answers.busy()))
                    || (self.tab == Tab::State && self.map.pending())
            }
            Content::Compare(c) => timeline_busy(&c.a) || timeline_busy(&c.b),
            Content::Ranks => self.ranks.as_ref().is_some_and(|r| !r.done()),
            Content::Indexing { .. } => true,
            Content::Empty | Content::Failed(_) => false,
        }
    }

    pub fn compare(&self) -> Option<&super::compare::Compare> {
        match &self.content {
            Content::Compare(c) => Some(c),
            _ => None,
        }
    }

    /// Opens an archive now (fast: mmap + validation).
    pub fn open_archive(&mut self, path: &Path, ctx: &egui::Context) {
        self.source.get_or_insert_with(|| path.to_owned());
        self.show_opened(open_file(&self.options.platform, path), ctx);
    }

    /// Shows an opened archive. Its ids are checked in the background (under a second even at
    /// 10 GB), then its checksum: a colleague's file with an id out of range
    /// is one error line, never a panic ([`Self::ui`] catches one and waits for the check).
    pub fn open_session(&mut self, session: Arc<Session>, ctx: &egui::Context) {
        self.show_opened(Ok(session), ctx);
    }

    /// Shows an opened archive, or the line that says why it did not open.
    pub fn show_opened(&mut self, opened: Result<Arc<Session>, String>, ctx: &egui::Context) {
        let session = match opened {
            Ok(s) => s,
            Err(e) => {
                self.content = Content::Failed(e);
                return;
            }
        };
        let t = new_timeline(&self.options, session, ctx);
        self.show(t);
    }

    /// Shows the first frame of an archive of which only the parts that frame reads are here
    /// (`Archive::first_frame_ranges`: a page fetching the rest), drawn from those alone with no
    /// input, check or background work, until [`Self::open_session`] shows the whole archive
    /// (with the same options: the view did not move meanwhile).
    pub fn open_preview(&mut self, session: Arc<Session>, ctx: &egui::Context) {
        let t = preview_timeline(&self.options, session, ctx);
        self.show(t);
    }

    /// True while the timeline shown is an archive's first parts ([`Self::open_preview`]).
    pub fn previewing(&self) -> bool {
        self.timeline().is_some_and(|t| t.doc.preview)
    }

    /// Shows `t` with the view the options ask for, or the line that says why it cannot be.
    fn show(&mut self, mut t: Open) {
        if let Err(e) = apply_view(&mut t, &self.options) {
            self.content = Content::Failed(format!("{}: {e}", t.doc.session.archive.path.display()));
            return;
        }
        self.content = Content::Open(Box::new(t));
    }

    /// Opens an archive opened on another thread ([`open_file`]) while the window started.
    pub fn open_prepared(&mut self, path: &Path, opened: Result<Arc<Session>, String>, ctx: &egui::Context) {
        self.source = Some(path.to_owned());
        self.show_opened(opened, ctx);
    }

    /// Opens any file: an archive directly, a snapshot by indexing it (cached) on a worker
    /// thread while the window stays responsive.
    pub fn open_any(&mut self, path: &Path, ctx: &egui::Context) {
        self.source = Some(path.to_owned());
        if self.options.platform.is_archive(path) {
            return self.open_archive(path, ctx);
        }
        self.content = super::indexing::start(&self.options.platform, path, ctx, !self.options.no_cache);
    }

    pub fn timeline(&self) -> Option<&Open> {
        match &self.content {
            Content::Open(t) => Some(t),
            _ => None,
        }
    }

    /// True when the view shown draws a timeline: every view but the settings, and the segment
    /// timeline's of an archive made before format 4 (which says so instead).
    pub fn draws_timeline(&self) -> bool {
        match self.tab {
            Tab::Settings => false,
            Tab::Segments => {
                self.timeline().is_none_or(|t| t.doc.session.stacked(t.doc.device, Plane::Segments).is_some())
            }
            _ => true,
        }
    }

    /// The one line shown instead of a timeline when opening failed.
    pub fn failure(&self) -> Option<&str> {
        match &self.content {
            Content::Failed(e) => Some(e),
            _ => None,
        }
    }

    pub fn timeline_mut(&mut self) -> Option<&mut Open> {
        match &mut self.content {
            Content::Open(t) => Some(t),
            _ => None,
        }
    }

    /// One frame of the whole UI.
    /// One frame. A panic while the archive's ids are not checked yet waits for the check: an
    /// archive with an id out of range shows its one line instead (see `archive::guard`).
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        if self.frames == 0 {
            theme::apply(ui);
        }
        self.refresh_status();
        let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.frame_ui(ui))) else {
            // The second frame's UI runs once the first was drawn.
            if self.frames >= 2
                && let Some(t) = self.timeline()
            {
                t.doc.first_frame.drawn();
            }
            return;
        };
        if let Some(t) = self.timeline() {
            t.doc.first_frame.drawn();
            if let Err(e) = t.doc.session.ids.wait() {
                self.content = Content::Failed(e.clone());
                // What the panic left half drawn (textures it dropped, among them) must not reach
                // the GPU: egui runs the frame again, showing the line.
                ui.ctx().request_discard("the archive is corrupted");
                return;
            }
        }
        std::panic::resume_unwind(panic)
    }

    /// Turns what the background checks found into the one line shown instead of the timeline.
    pub fn refresh_status(&mut self) {
        let Content::Open(t) = &self.content else { return };
        let failed = match t.doc.session.ids.get() {
            Some(Err(e)) => Some(e.clone()),
            _ => t.doc.session.corruption().map(|why| {
                format!("{}: {why}; re-run `memviz index` on the snapshot", t.doc.session.archive.path.display())
            }),
        };
        if let Some(e) = failed {
            self.content = Content::Failed(e);
        }
    }

    fn frame_ui(&mut self, ui: &mut egui::Ui) {
        self.frames += 1;
        let ctx = ui.ctx().clone();
        let dropped: Vec<PathBuf> = ctx.input(|i| i.raw.dropped_files.iter().map(|f| f.path().to_owned()).collect());
        if !dropped.is_empty() {
            self.open_paths(&dropped, &ctx);
        }
        if let Content::Indexing { done, .. } = &self.content
            && let Ok(result) = done.try_recv()
        {
            match result {
                Ok(session) => self.open_session(session, &ctx),
                Err(e) => self.content = Content::Failed(e),
            }
        }
        if matches!(self.content, Content::Ranks | Content::Compare(_)) || self.ranks.is_some() {
            if let Some(next) = self.job_ui(ui) {
                self.content = next;
            }
            if matches!(self.content, Content::Ranks | Content::Compare(_)) {
                return;
            }
        }
        if let Content::Open(t) = &mut self.content {
            let t: &mut Open = t;
            let screen = Screen {
                tab: &mut self.tab,
                map: &mut self.map,
                answers: &mut self.answers,
                stack_filter: &mut self.stack_filter,
                full_paths: &mut self.full_paths,
                source: self.source.as_deref(),
                status: &mut self.status,
            };
            timeline_screen(ui, t, &self.options, screen);
            return;
        }
        match &mut self.content {
            Content::Empty => {
                ui.centered_and_justified(|ui| ui.label("Drop a snapshot or a .memviz archive here."));
            }
            Content::Failed(e) => {
                let e = e.clone();
                ui.centered_and_justified(|ui| ui.colored_label(theme::CAPACITY, format!("error: {e}")));
            }
            Content::Indexing { path, progress, total, .. } => {
                let done = progress.load(std::sync::atomic::Ordering::Relaxed) as f32 / (*total).max(1) as f32;
                let name = path.display().to_string();
                ui.centered_and_justified(|ui| {
                    ui.vertical_centered(|ui| {
                        ui.add_space(ui.available_height() / 2.0 - 30.0);
                        ui.label(format!("indexing {name}"));
                        ui.add(egui::ProgressBar::new(done.min(1.0)).show_percentage().desired_width(360.0));
                    });
                });
                ctx.request_repaint_after(std::time::Duration::from_millis(50));
            }
            Content::Open(_) | Content::Ranks | Content::Compare(_) => {}
        }
    }

    /// The job's screens: the strip, a comparison, or the bar above one opened rank; what to show
    /// next when a click asks for it.
    fn job_ui(&mut self, ui: &mut egui::Ui) -> Option<Content> {
        let ctx = ui.ctx().clone();
        let strip = self.ranks.as_mut()?;
        if matches!(self.content, Content::Ranks | Content::Compare(_)) && self.options.platform.showing(None) {
            ctx.request_repaint_after(std::time::Duration::from_millis(300));
        }
        match &mut self.content {
            Content::Ranks => {
                let pick = egui::CentralPanel::default()
                    .frame(egui::Frame::new().inner_margin(8.0))
                    .show(ui, |ui| strip.ui(ui))
                    .inner?;
                let session = |i: usize| strip.curves[i].as_ref().map(|c| (Arc::clone(&c.session), c.device));
                match pick {
                    super::ranks::Pick::Open(i) => {
                        // The strip's loader checked the archive's ids before reading its row.
                        let (s, d) = session(i)?;
                        let mut t = new_timeline(&self.options, s, &ctx);
                        t.select_device(d);
                        Some(Content::Open(Box::new(t)))
                    }
                    super::ranks::Pick::Compare(i, j) => {
                        let (a, b) = (strip.curves[i].as_ref()?, strip.curves[j].as_ref()?);
                        Some(Content::Compare(Box::new(super::compare::Compare::new(a, b, &self.options, &ctx))))
                    }
                }
            }
            Content::Compare(c) => {
                let back = egui::Panel::top("ranks bar").show(ui, |ui| c.bar_ui(ui, strip.files.len())).inner;
                egui::CentralPanel::default().frame(egui::Frame::new()).show(ui, |ui| c.ui(ui, &self.options));
                back.then_some(Content::Ranks)
            }
            Content::Open(t) => {
                let name = t.doc.session.archive.path.display().to_string();
                let back = egui::Panel::top("ranks bar")
                    .show(ui, |ui| {
                        ui.horizontal(|ui| {
                            let back = ui.button(format!("back to all {} ranks", strip.files.len())).clicked();
                            ui.label(name);
                            back
                        })
                        .inner
                    })
                    .inner;
                back.then_some(Content::Ranks)
            }
            _ => None,
        }
    }
}

impl eframe::App for ViewerApp {
    /// The timeline's background: its panel is left unfilled (`timeline_screen`).
    fn clear_color(&self, _visuals: &egui::Visuals) -> [f32; 4] {
        theme::BACKGROUND.to_normalized_gamma_f32()
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        ViewerApp::ui(self, ui);
    }

    /// While only an archive's first parts are here, nothing the user does reaches the viewer.
    fn raw_input_hook(&mut self, _ctx: &egui::Context, raw_input: &mut egui::RawInput) {
        if self.previewing() {
            raw_input.events.clear();
        }
    }

    /// The page reaches the app through its runner (`web::WebHandle`).
    #[cfg(target_arch = "wasm32")]
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(&mut *self)
    }
}
