//! The viewer window's state and layout: top bar, timeline, minimap, bottom bar. The same
//! `ui` function draws into a real window (eframe) and offscreen (screenshots, bench, tests).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use eframe::egui::{self, Rect, Sense, pos2};
use eframe::egui_wgpu;

use super::data::{Plane, Session};
use super::details::stack_text;
use super::gpu::{Globals, TimelinePaint};
use super::memory_map::MemoryMap;
use super::tabs::{OpenAt, Tab};
use super::timeline::Timeline;
use super::{panels, theme};
use crate::model::NONE;

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
    Open(Box<Timeline>),
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
    pub fn open_job(&mut self, files: Vec<crate::index::folder::RankFile>, ctx: &egui::Context) {
        self.ranks = Some(Box::new(super::ranks::RankStrip::new(files, !self.options.no_cache, ctx)));
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
            _ => match crate::index::folder::job(paths) {
                Ok(job) => self.open_job(job.files, ctx),
                Err(e) => self.content = Content::Failed(e),
            },
        }
    }

    /// The strip's or a comparison's work in flight, or the allocator state being made for the
    /// State view (for screenshots and tests to wait on).
    pub fn busy(&self) -> bool {
        let timeline_busy = |t: &Timeline| {
            t.worker.busy()
                || t.textures.pending() > 0
                || (t.colour_by_category && t.categories_ready().is_none())
                || t.shapes_pending()
                || t.raster_pending
                || t.details_pending()
                || t.reserved_cache.busy()
                || t.times_pending()
                || t.search.pending()
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
        self.show_opened(open_file(path), ctx);
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
        let mut t = new_timeline(&self.options, session, ctx);
        if let Err(e) = apply_view(&mut t, &self.options) {
            self.content = Content::Failed(format!("{}: {e}", t.session.archive.path.display()));
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
        if crate::file::is_archive(path) {
            return self.open_archive(path, ctx);
        }
        self.content = super::indexing::start(path, ctx, !self.options.no_cache);
    }

    pub fn timeline(&self) -> Option<&Timeline> {
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
            Tab::Segments => self.timeline().is_none_or(|t| t.session.stacked(t.device, Plane::Segments).is_some()),
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

    pub fn timeline_mut(&mut self) -> Option<&mut Timeline> {
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
                t.first_frame.drawn();
            }
            return;
        };
        if let Some(t) = self.timeline() {
            t.first_frame.drawn();
            if let Err(e) = t.session.ids.wait() {
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
        let failed = match t.session.ids.get() {
            Some(Err(e)) => Some(e.clone()),
            _ => t.session.corruption().map(|why| {
                format!("{}: {why}; re-run `memviz index` on the snapshot", t.session.archive.path.display())
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
            let t: &mut Timeline = t;
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
        egui::Frame::new().fill(theme::BACKGROUND).show(ui, |ui| match &mut self.content {
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
        });
    }

    /// The job's screens: the strip, a comparison, or the bar above one opened rank; what to show
    /// next when a click asks for it.
    fn job_ui(&mut self, ui: &mut egui::Ui) -> Option<Content> {
        let ctx = ui.ctx().clone();
        let strip = self.ranks.as_mut()?;
        match &mut self.content {
            Content::Ranks => {
                let pick = egui::CentralPanel::default()
                    .frame(egui::Frame::new().fill(theme::BACKGROUND).inner_margin(8.0))
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
                egui::CentralPanel::default()
                    .frame(egui::Frame::new().fill(theme::BACKGROUND))
                    .show(ui, |ui| c.ui(ui, &self.options));
                back.then_some(Content::Ranks)
            }
            Content::Open(t) => {
                let name = t.session.archive.path.display().to_string();
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

/// Opens the archive at `path` (any thread: `memviz open` starts it beside the window).
pub fn open_file(path: &Path) -> Result<Arc<Session>, String> {
    crate::file::open_session(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// A timeline of an opened archive with the settings the options ask for (its ids and checksum
/// are checked, and the action times read for the time axis, in the background:
/// `crate::file::spawn_checks`).
pub(super) fn new_timeline(options: &ViewerOptions, session: Arc<Session>, ctx: &egui::Context) -> Timeline {
    let first_frame = crate::file::spawn_checks(&session);
    let mut t = Timeline::new(session, ctx);
    t.first_frame = first_frame;
    t.max_entries = options.max_entries;
    t.capacity = options.gpu.map(|g| g.1);
    t.fit();
    t.colour_by_category = options.by_category;
    t.colour_by_site = !options.by_allocation;
    t
}

/// Applies the view options to a timeline just opened: the device, the instant, the x range and
/// the pinned element; what does not exist is said the way the commands say it.
fn apply_view(t: &mut Timeline, o: &ViewerOptions) -> Result<(), String> {
    if let Some(want) = o.device {
        let ordinals: Vec<_> = t.session.device_indices().map(|d| t.session.ordinal(d)).collect();
        let d = crate::model::pick_devices(&ordinals, Some(want))?;
        t.select_device(crate::model::DeviceIdx(d[0]));
    }
    if let Some(at) = o.at {
        open_at(t, at)?;
    }
    let n = t.stacked().layout.actions.len() as f64;
    if let Some((a, b)) = o.x_range {
        if !(a < b && b > 0.0 && a < n) {
            return Err(format!("--x {a}..{b} is not a range of the actions (0..{n})"));
        }
        t.time_axis = false;
        t.view.x0 = a;
        t.view.x1 = b;
        t.view.clamp_x(n);
    }
    match o.pin {
        None => {}
        Some(super::tabs::Pin::Element(id)) => {
            let count = t.stacked().layout.elements.len();
            if id as usize >= count {
                return Err(format!("element {id} is out of range (0..{count})"));
            }
            let view = t.view;
            t.go_to_element(crate::model::ElementId(id));
            if o.x_range.is_some() || o.at.is_some() {
                t.view = view;
            }
        }
        Some(super::tabs::Pin::Addr(addr)) => {
            let session = Arc::clone(&t.session);
            let data = crate::archive::DeviceData::new(&session, t.device);
            let hits = crate::analysis::find::matching(
                &data.timeline(),
                session.root(),
                &crate::analysis::find::Query::Addr(addr),
            );
            let l = t.stacked().layout;
            let centre = ((t.view.x0 + t.view.x1) / 2.0).floor() as i64;
            let live = |id: &crate::model::ElementId| {
                let e = l.element(*id);
                e.start_opt().is_none_or(|s| s.signed() <= centre) && e.end_opt().is_none_or(|x| x.signed() > centre)
            };
            let pick = hits.iter().copied().find(live).or_else(|| hits.last().copied());
            let id = pick.ok_or_else(|| format!("no allocation ever covered address {addr:#x}"))?;
            let view = t.view;
            t.go_to_element(id);
            if o.x_range.is_some() || o.at.is_some() {
                t.view = view;
            }
        }
    }
    Ok(())
}

/// The command line that reopens what `t` shows (file, device, view, x range, pinned element).
pub fn link(path: &Path, t: &Timeline, tab: Tab) -> String {
    let quote = |s: &str| {
        if s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:,=".contains(c)) {
            s.to_owned()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    let mut cmd = format!(
        "memviz open {} --device {} --view {}",
        quote(&path.display().to_string()),
        t.session.ordinal(t.device),
        tab.arg()
    );
    if !t.time_axis {
        cmd.push_str(&format!(" --x {:.1}..{:.1}", t.view.x0, t.view.x1));
    }
    if let Some(p) = t.selection.pinned {
        cmd.push_str(&format!(" --element {}", p.element.0));
    }
    if t.colour_by_category {
        cmd.push_str(" --colour category");
    } else if !t.colour_by_site {
        cmd.push_str(" --colour allocation");
    }
    cmd
}

/// Applies `--event`, `--action` or `--oom` to a timeline just opened: the memory map's event,
/// and the view centred on its action; what does not exist is said the way the commands say it.
fn open_at(t: &mut Timeline, at: OpenAt) -> Result<(), String> {
    let device = t.session.ordinal(t.device);
    let events = t.session.trace(t.device).len() as i64;
    let actions = t.session.elements(t.device).layout.actions.len() as i64;
    let event = match at {
        OpenAt::Event(e) if (-1..events).contains(&e) => e,
        OpenAt::Event(e) => return Err(format!("event {e} is out of range on device {device} (-1..{events})")),
        OpenAt::Action(k) if (0..actions).contains(&k) => super::memory_map::action_event(t, k as usize),
        OpenAt::Action(k) => return Err(format!("action {k} is out of range on device {device} (0..{actions})")),
        OpenAt::Time(us) => {
            let data = crate::archive::DeviceData::new(&t.session, t.device);
            let tl = data.timeline();
            let base = tl.time_base_us.ok_or_else(|| format!("device {device} recorded no times; use --action"))?;
            let k = i64::from(tl.actions_until(base + us)) - 1;
            if k < 0 {
                return Err(format!(
                    "no action at or before {} on device {device}",
                    crate::analysis::units::duration_us(us)
                ));
            }
            super::memory_map::action_event(t, k as usize)
        }
        OpenAt::Oom(n) => {
            let marks = super::ooms::marks(&t.session, t.device);
            let pick = if n == 0 { marks.last() } else { marks.get(n - 1) };
            match pick {
                Some(m) => m.event - 1,
                None => {
                    let have = crate::analysis::units::count(marks.len() as u64, "OOM event", "OOM events");
                    let asked = if n == 0 { "last".to_owned() } else { n.to_string() };
                    return Err(format!("device {device} has {have} (asked for OOM {asked})"));
                }
            }
        }
    };
    t.selection.event = Some(event);
    let k = super::memory_map::action_before(t, event);
    t.centre_on(k.max(0) as f64 + 0.5);
    Ok(())
}

/// The app state the main screen changes besides the timeline.
struct Screen<'a> {
    tab: &'a mut Tab,
    map: &'a mut MemoryMap,
    answers: &'a mut super::answers_panel::AnswersPanel,
    stack_filter: &'a mut String,
    full_paths: &'a mut bool,
    /// The file the user opened (what "copy link" names) and the last status line.
    source: Option<&'a Path>,
    status: &'a mut Option<String>,
}

/// The main screen of an open archive: the top bar with the view switch, then the view.
fn timeline_screen(ui: &mut egui::Ui, t: &mut Timeline, options: &ViewerOptions, s: Screen<'_>) {
    egui::Panel::top("top").show(ui, |ui| panels::top_bar_ui(ui, t, options, s.tab, &mut s.answers.open));
    egui::Panel::top("share").show(ui, |ui| {
        ui.horizontal(|ui| {
            let path = s.source.map_or_else(|| t.session.archive.path.clone(), Path::to_path_buf);
            if ui.button("copy link").on_hover_text("copy the command line that reopens this view").clicked() {
                let cmd = link(&path, t, *s.tab);
                ui.ctx().copy_text(cmd.clone());
                *s.status = Some(format!("copied: {cmd}"));
            }
            if ui.button("save PNG").on_hover_text("write this view to a PNG in the current folder").clicked() {
                let out = save_png(ui.ctx(), t, s.source);
                *s.status = Some(format!("saved {}", out.display()));
            }
            if let Some(text) = s.status.as_deref() {
                ui.weak(text);
            }
        });
    });
    if ui.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::F)) {
        t.search.open = true;
        ui.ctx().memory_mut(|m| m.request_focus(egui::Id::unique("memviz search")));
    }
    if t.search.open {
        egui::Panel::top("search").show(ui, |ui| search_ui(ui, t));
    }
    let plane = if *s.tab == Tab::Segments { Plane::Segments } else { Plane::Elements };
    let has_plane = t.set_plane(plane);
    if t.pools_view != (*s.tab == Tab::Pools) {
        t.pools_view = *s.tab == Tab::Pools;
        t.invalidate_raster();
    }
    if *s.tab == Tab::Settings {
        egui::CentralPanel::default().frame(egui::Frame::new().fill(theme::BACKGROUND)).show(ui, |ui| {
            super::settings::ui(ui, t.session.allocator_settings().as_ref());
        });
        return;
    }
    if !has_plane {
        egui::CentralPanel::default().frame(egui::Frame::new().fill(theme::BACKGROUND)).show(ui, |ui| {
            ui.centered_and_justified(|ui| {
                ui.label("This archive was made before format 4, without the segment timeline: re-index to see this.")
            });
        });
        return;
    }
    egui::Panel::bottom("details").resizable(true).default_size(170.0).show(ui, |ui| {
        panels::bottom_bar_ui(ui, t, options, s.stack_filter, s.full_paths);
    });
    egui::Panel::bottom("minimap").exact_size(theme::MINIMAP_HEIGHT).show(ui, |ui| panels::minimap_ui(ui, t));
    egui::Panel::bottom("lines legend").show(ui, |ui| super::legend::timeline_ui(ui, t));
    if t.colour_by_category && t.plane == Plane::Elements {
        egui::Panel::bottom("legend").show(ui, |ui| panels::legend_ui(ui, t));
    }
    if *s.tab == Tab::State {
        let height = ui.available_height() * 0.55;
        egui::Panel::right("events").resizable(true).default_size(300.0).show(ui, |ui| {
            super::events_list::ui(ui, t, s.map);
        });
        egui::Panel::bottom("memory map").resizable(true).default_size(height).show(ui, |ui| {
            s.map.ui(ui, t);
        });
        super::events_list::keys(ui, t);
    } else if s.answers.open && *s.tab == Tab::Timeline {
        egui::Panel::right("answers").resizable(true).default_size(380.0).show(ui, |ui| s.answers.ui(ui, t));
    }
    // Unfilled: the frame is cleared to the background colour already (offscreen: the pass's
    // clear; the window: `clear_color`), and on a CPU rasteriser each full-plot fill costs a
    // fifth of the frame.
    let oom = egui::CentralPanel::default().frame(egui::Frame::new()).show(ui, |ui| plot_ui(ui, t, options)).inner;
    // A click on an OOM marker: the memory map just before it.
    if let Some(e) = oom {
        *s.tab = Tab::State;
        t.selection.event = Some(e - 1);
    }
    let copy = ui.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND, egui::Key::C));
    if copy && let Some(hit) = t.selection.focus() {
        let stack = t.stacked().sites.get(hit.element.index()).copied().unwrap_or(NONE);
        ui.ctx().copy_text(stack_text(&t.session, stack));
    }
}

/// `NAME.png`, or `NAME-2.png`, `NAME-3.png`, … whichever does not exist yet: a save never
/// overwrites an earlier one.
pub fn unused_png_name(name: &str) -> PathBuf {
    let first = PathBuf::from(format!("{name}.png"));
    std::iter::once(first)
        .chain((2..).map(|n| PathBuf::from(format!("{name}-{n}.png"))))
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .expect("an unused name")
}

/// "save PNG": asks the window for this frame, written (by the integration, once it has the
/// pixels) to the working folder, named after the file and the actions shown.
fn save_png(ctx: &egui::Context, t: &Timeline, source: Option<&Path>) -> PathBuf {
    let stem = source
        .unwrap_or(&t.session.archive.path)
        .file_stem()
        .map_or("memviz".into(), |s| s.to_string_lossy().into_owned());
    let out = unused_png_name(&format!("{stem}-{:.0}-{:.0}", t.view.x0.max(0.0), t.view.x1));
    let target = out.clone();
    ctx.request_screenshot(move |image| {
        let [w, h] = image.size;
        let rgba: Vec<u8> = image.pixels.iter().flat_map(|c| c.to_array()).collect();
        let written = crate::output::write_atomic(&target, |f| {
            let mut enc = png::Encoder::new(f, w as u32, h as u32);
            enc.set_color(png::ColorType::Rgba);
            enc.set_depth(png::BitDepth::Eight);
            enc.write_header()?.write_image_data(&rgba)?;
            Ok(())
        });
        if let Err(e) = written {
            eprintln!("warning: could not save {}: {e:#}", target.display());
        }
    });
    out
}

/// The search bar: the field, the count, and the next / previous match (Enter / Shift+Enter).
fn search_ui(ui: &mut egui::Ui, t: &mut Timeline) {
    let session = Arc::clone(&t.session);
    ui.horizontal(|ui| {
        ui.label("find");
        let field = egui::TextEdit::singleline(&mut t.search.text)
            .id(egui::Id::unique("memviz search"))
            .hint_text("address (0x…) or frame text (/regex/)")
            .desired_width(360.0);
        let response = ui.add(field);
        t.search.update(&session, t.device, ui.ctx());
        let entered = response.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        let back = ui.input(|i| i.modifiers.shift);
        let mut go = entered.then_some(!back);
        if ui.button("▲").on_hover_text("previous match (Shift+Enter)").clicked() {
            go = Some(false);
        }
        if ui.button("▼").on_hover_text("next match (Enter)").clicked() {
            go = Some(true);
        }
        if let Some(forward) = go
            && let Some(id) = t.search.step(forward)
        {
            t.go_to_element(id);
            response.request_focus();
        }
        match (&t.search.error, t.search.matches.len(), t.search.current) {
            (Some(e), _, _) => ui.colored_label(theme::CAPACITY, e.as_str()),
            (None, 0, _) if t.search.pending() => ui.weak("searching…"),
            (None, 0, _) if !t.search.text.trim().is_empty() => ui.label("no match"),
            (None, 0, _) => ui.weak("every allocation that ever covered an address, or a frame's text"),
            (None, n, Some(i)) => ui.label(format!("match {} of {n}", i + 1)),
            (None, n, None) => ui.label(format!("{n} match{}", if n == 1 { "" } else { "es" })),
        };
        if ui.button("✕").on_hover_text("close (Esc)").clicked() || ui.input(|i| i.key_pressed(egui::Key::Escape)) {
            t.search.open = false;
        }
    });
}

/// A tick at the top of the plot where each match of the search was allocated, so a match too
/// small to be drawn at this zoom is still found (the current one taller).
fn search_ticks(painter: &egui::Painter, t: &Timeline, rect: Rect) {
    if !t.search.active() || t.time_axis || t.plane != Plane::Elements {
        return;
    }
    t.search.ticks(painter, &t.view, rect);
}

/// The plot: GPU quads through a paint callback, egui overlays, input, tooltip; the OOM event
/// whose marker was clicked.
pub(super) fn plot_ui(ui: &mut egui::Ui, t: &mut Timeline, options: &ViewerOptions) -> Option<i64> {
    let full = ui.available_rect_before_wrap();
    let lane = Rect::from_min_max(
        pos2(full.left() + theme::Y_AXIS_WIDTH, full.top()),
        pos2(full.right(), full.top() + theme::ANNOTATION_LANE),
    );
    let rect = Rect::from_min_max(
        pos2(full.left() + theme::Y_AXIS_WIDTH, lane.bottom() + 2.0),
        pos2(full.right() - 8.0, full.bottom() - theme::X_AXIS_HEIGHT),
    );
    if rect.width() < 10.0 || rect.height() < 10.0 {
        return None;
    }
    let response = ui.allocate_rect(rect, Sense::click_and_drag());
    let ppp = ui.ctx().pixels_per_point();
    t.plot_rect = rect;
    t.input(ui, &response);
    let quads = t.draw_list(rect, ppp);
    let frame_uploads = t.textures.begin_frame();
    if t.colour_by_category && t.categories().is_none() {
        ui.ctx().request_repaint_after(std::time::Duration::from_millis(30));
    }
    let sites = t.site_table();
    let colours = t.colours();
    let mode = t.shader_mode();
    let globals = Globals {
        hovered: t.selection.hovered.map(|h| h.element).or(t.selection.map_hover).map_or(NONE, |e| e.0),
        pinned: t.selection.pinned.map_or(NONE, |h| h.element.0),
        outlines: u32::from(t.selection.hovered.is_some() || t.selection.pinned.is_some()),
        mode,
        n_sites: sites.as_ref().as_ref().len() as u32,
        n_colours: colours.len() as u32,
        search: u32::from(t.search.active()),
        pad: 0,
    };
    let paint = TimelinePaint {
        slot: t.slot,
        evict: frame_uploads.evict,
        colours_for: (t.device.0 as u32 * 2 + t.plane as u32, t.colour_key()),
        sites,
        by_site: t.keys_by_site(),
        colours,
        marks: if t.search.active() {
            (t.search.generation, Arc::clone(&t.search.marks))
        } else {
            (0, Arc::new(Vec::new()))
        },
        uploads: frame_uploads.uploads,
        quads,
        globals,
        clip: rect,
    };
    t.grid(ui.painter());
    ui.painter().add(egui_wgpu::Callback::new_paint_callback(rect, paint));
    t.pools_overlay(ui);
    t.reserved_overlay(ui.painter());
    t.floor_overlay(ui.painter());
    t.overlays(ui.painter(), full, options.gpu);
    t.annotations_ui(ui, lane, &options.annotations);
    search_ticks(ui.painter(), t, rect);
    let oom = t.oom_markers(ui);
    t.load_wanted_times();
    if t.worker.busy() || t.textures.pending() > 0 {
        ui.ctx().request_repaint();
    }
    if let Some(hit) = t.selection.hovered
        && !t.tooltip_hidden
        && let Some(gathered) = t.element_info(hit.element, options)
        && let Some(mut info) = Option::clone(&gathered)
    {
        if let Some(c) = t.category_of(hit.element) {
            info.attributes.insert(0, ("category", c.name().to_owned()));
        }
        let start = t.session.time_base_us();
        response.on_hover_ui_at_pointer(|ui| panels::info_grid_ui(ui, &info.lines(start), "tooltip"));
    }
    oom
}

impl eframe::App for ViewerApp {
    /// The timeline's background: its panel is left unfilled (`timeline_screen`).
    fn clear_color(&self, _visuals: &egui::Visuals) -> [f32; 4] {
        theme::BACKGROUND.to_normalized_gamma_f32()
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        ViewerApp::ui(self, ui);
    }
}
