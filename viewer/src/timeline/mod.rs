//! The timeline of one device: what to draw this frame (tiles, or an exact raster), input
//! (zoom, pan, range zoom, rulers, hover, pin), and the overlays egui paints on top.
//!
//! ```text
//!  level choice: actions per pixel ≥ 2^finest stored level  → pyramid tiles, coarse → fine
//!                deeper, zoomed in Y, or on the wall-time axis → one raster of exactly the
//!                view from checkpoints (worker thread); until it arrives, tiles stand in
//! ```

mod draw;
mod input;
mod pick;

use crate::model::{DeviceIdx, ElementId};
use std::sync::Arc;

use eframe::egui::{self, Pos2, Rect};

use super::background::Pending;
use super::data::{Plane, Session, StackedRef};
use super::document::Document;
use super::gpu::TexKey;
use super::textures::Textures;
use super::theme;
use super::view::View;
use super::worker::{ViewSpec, Worker};
use memviz_format::{TILE_H, TILE_W};

pub use super::selection::{Hit, Selection};

/// A drag in progress.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Drag {
    None,
    Pan,
    /// Ctrl/Cmd+drag: select an x range to zoom to (data x where it started).
    Range(f64),
    /// R+drag: measure bytes; T+drag: measure time / actions (data point where it started).
    ByteRuler(f64, f64),
    TimeRuler(f64, f64),
}

/// An archive open in the viewer: what is shown ([`Document`]: the archive, device, view,
/// colours, selection and search) and its plot ([`Timeline`]). Its methods are what needs both
/// (a device chosen resets the plot's caches; a colour asks the document's mode and the plot's
/// cached palette); a panel that only reads what is shown takes the [`Document`].
pub struct Open {
    pub doc: Document,
    pub plot: Timeline,
}

/// The plot of a [`Document`], and only that: what drawing it takes — tile and raster workers,
/// textures, the caches of colours, floors and overlays worked out in the background, the drag
/// in progress.
pub struct Timeline {
    categories: Option<Pending<super::categories::DeviceCategories>>,
    pub tooltip_hidden: bool,
    pub drag: Drag,
    pub drag_end: Option<Pos2>,
    pub worker: Worker,
    pub textures: Textures,
    /// Shape candidates of the device (`h=… i=… v=…`), inferred once in the background.
    candidates: Option<Pending<TopFacts>>,
    /// The palette for (device, plane, by-site?), computed once per choice.
    colours: Option<Cached<(DeviceIdx, Plane, bool), Vec<u32>>>,
    /// Per segment of the segment timeline, its colour key (by stream, or by private pool).
    segment_keys: Option<Cached<DeviceIdx, Vec<u32>>>,
    /// The device's OOM events for the markers, worked out in the background.
    ooms: Option<Pending<Arc<super::ooms::OomMarks>>>,
    /// The context the viewer runs in (workers ask it for a repaint when their work is in).
    ctx: egui::Context,
    /// What the viewer runs on: where work can be handed off (`Platform::offload`).
    pub platform: crate::platform::PlatformRef,
    /// Decodes the chunks of action times the UI's lookups wanted (`load_wanted_times`), each
    /// request numbered.
    time_loader: Option<super::background::Latest<(DeviceIdx, usize, u64), ()>>,
    time_requests: u64,
    /// What the tooltip and the bottom bar show of an element, gathered on a worker.
    details: Option<super::background::Latest<DetailsKey, Option<super::details::ElementInfo>>>,
    /// The annotation lane's spans, placed on a worker (`viewer::span_marks`).
    span_marks: Option<Pending<Arc<super::span_marks::SpanMarks>>>,
    pools: Option<Pending<Option<Arc<super::pools::Pools>>>>,
    /// Decoded chunks of the reserved series, for the reserved line.
    pub reserved_cache: super::reserved::ReservedCache,
    /// The newest raster received, and the one asked for last (each with its texture key).
    raster: Option<(ViewSpec, TexKey)>,
    wanted: Option<(ViewSpec, TexKey)>,
    generation: u64,
    /// Screen rectangle of the plot last frame (points) and pixels per point.
    pub plot_rect: Rect,
    /// The view needs an exact raster that has not arrived yet (a screenshot waits for it).
    pub raster_pending: bool,
    pub pixels_per_point: f32,
    /// The floor per pixel column for the view it was computed for (`viewer::floor`).
    pub floor_cache: Option<Cached<super::floor::FloorKey, Vec<Option<u64>>>>,
    /// The minimap, drawn as one texture (`viewer::strip`), and where it was last drawn.
    pub minimap_strip: super::strip::Strip,
    pub minimap_rect: Rect,
    /// The segment timeline's min/max levels for its minimap (`viewer::panels`).
    pub segment_minimap: Option<Pending<Arc<Vec<crate::lod::minimap::MinMax>>>>,
    /// Its GPU resources' key, unique per timeline made: two on screen draw from their own, and
    /// a file opened after another never draws the other's textures.
    pub slot: u32,
}

/// Whose details [`Timeline::element_info`] gathers.
type DetailsKey = (DeviceIdx, Plane, ElementId);

static NEXT_SLOT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Open {
    pub fn new(session: Arc<Session>, ctx: &egui::Context) -> Open {
        let worker = Worker::start(Arc::clone(&session), ctx.clone());
        let plot = Timeline {
            categories: None,
            tooltip_hidden: false,
            drag: Drag::None,
            drag_end: None,
            worker,
            textures: Textures::default(),
            candidates: None,
            colours: None,
            segment_keys: None,
            ooms: None,
            span_marks: None,
            details: None,
            ctx: ctx.clone(),
            platform: Default::default(),
            time_loader: None,
            time_requests: 0,
            pools: None,
            reserved_cache: Default::default(),
            raster: None,
            wanted: None,
            generation: 0,
            plot_rect: Rect::NOTHING,
            raster_pending: false,
            pixels_per_point: 1.0,
            floor_cache: None,
            minimap_strip: Default::default(),
            minimap_rect: Rect::NOTHING,
            segment_minimap: None,
            slot: NEXT_SLOT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        let mut t = Open { doc: Document::new(session), plot };
        t.select_device(DeviceIdx(0));
        t
    }

    pub fn select_device(&mut self, d: DeviceIdx) {
        self.doc.device = DeviceIdx(d.index().min(self.doc.session.devices().saturating_sub(1)));
        if self.doc.session.stacked(self.doc.device, self.doc.plane).is_none() {
            self.doc.plane = Plane::Elements;
        }
        self.reset();
    }

    /// Draws `plane` instead; false (and nothing changes) when the archive lacks it.
    pub fn set_plane(&mut self, plane: Plane) -> bool {
        if plane == self.doc.plane {
            return true;
        }
        if self.doc.session.stacked(self.doc.device, plane).is_none() {
            return false;
        }
        self.doc.plane = plane;
        // Segment actions have no stored times: that view is drawn over actions.
        if plane == Plane::Segments {
            self.doc.time_axis = false;
        }
        self.reset();
        true
    }

    /// The timeline drawn: the device's elements, or its segments.
    pub fn stacked(&self) -> StackedRef<'_> {
        stacked_in(&self.doc.session, self.doc.device, self.doc.plane)
    }

    /// The time of each action of the timeline drawn, once the session has read them once
    /// (`None` for segments).
    /// The shown device's action times for the UI thread: lookups never decode a chunk (they
    /// answer from samples until a worker decoded it: [`Self::load_wanted_times`]), and note
    /// none as wanted while the view spans so many actions that the samples are finer than
    /// its pixels.
    pub fn action_times(&self) -> Option<crate::archive::TimeAxis<'_>> {
        let times = match self.doc.plane {
            Plane::Elements => self.doc.session.time_axis_sampled(self.doc.device)?,
            Plane::Segments => return None,
        };
        if !self.doc.time_axis {
            return Some(times);
        }
        let quiet = times.wanting_nothing();
        let a = quiet.partition_point(|t| (t as f64) < self.doc.view.x0);
        let b = quiet.partition_point(|t| (t as f64) <= self.doc.view.x1);
        let wide =
            b.saturating_sub(a) > crate::archive::session::TIME_SAMPLE * self.plot.plot_rect.width().max(1.0) as usize;
        Some(if wide { quiet } else { times })
    }

    /// Decodes, on a worker, the chunks of action times this frame's lookups wanted.
    pub fn load_wanted_times(&mut self) {
        let wanted = self.doc.session.take_wanted_times();
        if wanted.is_empty() {
            return;
        }
        let loader = self.plot.time_loader.get_or_insert_with(|| {
            let session = Arc::clone(&self.doc.session);
            super::background::Latest::start(
                "times",
                self.plot.ctx.clone(),
                move |&(d, c, _): &(DeviceIdx, usize, u64)| session.load_time_chunk(d, c),
            )
        });
        for (d, c) in wanted {
            self.plot.time_requests += 1;
            let _ = loader.get(&(d, c, self.plot.time_requests));
        }
    }

    fn reset(&mut self) {
        self.load_coarsest();
        self.fit();
        self.doc.selection.clear();
        self.plot.raster = None;
        self.plot.wanted = None;
    }

    /// Decompresses the coarsest level right here (one tile of 512 KiB: under a millisecond), so
    /// the very first frame shows the whole trace; finer tiles stream in from the workers.
    fn load_coarsest(&mut self) {
        let session = Arc::clone(&self.doc.session);
        let tiles = stacked_in(&session, self.doc.device, self.doc.plane).tiles;
        let Some(li) = tiles.len().checked_sub(1) else { return };
        let stacked = stacked_in(&session, self.doc.device, self.doc.plane);
        for i in 0..tiles[li].texel_chunks().len() {
            match stacked.tile(li, i) {
                Ok((texels, keys)) => self.plot.textures.arrived(super::gpu::TexData {
                    key: tile_key(self.doc.device, self.doc.plane, li, i),
                    width: TILE_W,
                    height: TILE_H,
                    texels: Arc::new(texels),
                    site_keys: keys.map(Arc::new),
                }),
                // The one line instead of the timeline, at the next frame.
                Err(e) => return session.mark_corrupt(e),
            }
        }
    }

    /// The palette: one RGBA8 colour per allocation site (stack), so the same tensor has the
    /// same colour in every step; or, by allocation, a fixed palette the shader indexes by a
    /// hash of the element id. Small either way: the element → site table comes straight from
    /// the archive.
    pub fn colours(&mut self) -> Arc<Vec<u32>> {
        if self.by_category() {
            return Arc::new(super::categories::palette(self.doc.hidden_categories));
        }
        let want = (self.doc.device, self.doc.plane, self.doc.colour_by_site);
        if let Some((k, c)) = &self.plot.colours
            && *k == want
        {
            return Arc::clone(c);
        }
        let by_stack = self.doc.colour_by_site && self.doc.plane == Plane::Elements;
        let n = if by_stack {
            self.doc.session.root().stacks.offsets.len().saturating_sub(1)
        } else {
            SEGMENT_KEYS as usize
        };
        let salt = if self.doc.colour_by_site { 0 } else { 0x5bd1_e995 };
        let table = Arc::new((0..n as u32).map(|k| theme::palette(k ^ salt)).collect::<Vec<u32>>());
        self.plot.colours = Some((want, Arc::clone(&table)));
        table
    }

    /// Whether [`Self::site_table`] is each element's stack id (so a tile's stored keys are its
    /// texels' keys).
    pub fn keys_by_site(&self) -> bool {
        self.doc.plane == Plane::Elements && !self.by_category()
    }

    /// What the shader colours an element by (with [`Self::colours`]): its allocation site, read
    /// in place from the archive; for segments, a key of its stream or private pool.
    pub fn site_table(&mut self) -> Arc<dyn AsRef<[u32]> + Send + Sync> {
        if self.by_category()
            && let Some(c) = self.categories()
        {
            return Arc::clone(&c.of) as Arc<dyn AsRef<[u32]> + Send + Sync>;
        }
        if self.doc.plane == Plane::Elements {
            return Arc::new(SitesRef { session: Arc::clone(&self.doc.session), device: self.doc.device });
        }
        if let Some((d, keys)) = &self.plot.segment_keys
            && *d == self.doc.device
        {
            return Arc::clone(keys) as Arc<dyn AsRef<[u32]> + Send + Sync>;
        }
        let keys = Arc::new(segment_keys(&self.doc.session, self.doc.device));
        self.plot.segment_keys = Some((self.doc.device, Arc::clone(&keys)));
        keys
    }

    /// The device's categories once worked out (asked for in the background on first call).
    pub fn categories(&mut self) -> Option<&super::categories::DeviceCategories> {
        if self.plot.categories.as_ref().is_none_or(|p| p.device != self.doc.device) {
            self.plot.categories = Some(Pending::start_offloaded(
                "categories",
                &self.doc.session,
                self.doc.device,
                &self.plot.platform,
                &self.plot.ctx,
                crate::platform::Offload::Categories,
                super::categories::DeviceCategories::decode,
                super::categories::DeviceCategories::compute,
            ));
        }
        self.plot.categories.as_ref().and_then(Pending::get)
    }

    /// The categories if already in (never starts the work).
    pub fn categories_ready(&self) -> Option<&super::categories::DeviceCategories> {
        self.plot.categories_of(self.doc.device)
    }

    /// The categories if already in, shared (for a worker to read).
    pub fn categories_shared(&self) -> Option<Arc<std::sync::OnceLock<super::categories::DeviceCategories>>> {
        self.plot
            .categories
            .as_ref()
            .filter(|p| p.device == self.doc.device && p.ready.get().is_some())
            .map(|p| Arc::clone(&p.ready))
    }

    /// Colouring by category now: asked for, on the element timeline, and the categories are in
    /// (until then the colours stay by site).
    pub fn by_category(&self) -> bool {
        self.doc.colour_by_category && self.doc.plane == Plane::Elements && self.categories_ready().is_some()
    }

    /// The category of element `id`, once known.
    pub fn category_of(&self, id: crate::model::ElementId) -> Option<crate::model::Category> {
        (self.doc.plane == Plane::Elements)
            .then(|| self.categories_ready()?.categories.get(id.index()).copied())
            .flatten()
    }

    /// The shader's mode: 0 colours through the table (sites, segment keys, categories), 1 by
    /// a hash of the element id.
    pub fn shader_mode(&self) -> u32 {
        u32::from(!self.doc.colour_by_site && !self.by_category())
    }

    /// What the bound colour tables are: changes whenever the site table or palette does.
    pub fn colour_key(&self) -> u32 {
        if self.by_category() { 2 | u32::from(self.doc.hidden_categories) << 2 } else { self.shader_mode() }
    }

    /// The device's OOM markers once worked out (asked for in the background on first call).
    /// Element `id`'s details on the device and plane shown, once gathered: the tooltip and the
    /// bottom bar show them a frame after they are first asked for, so a hover never reads the
    /// archive's compressed columns on the UI thread.
    pub fn element_info(
        &mut self,
        id: ElementId,
        options: &super::ViewerOptions,
    ) -> Option<Arc<Option<super::details::ElementInfo>>> {
        let details = self.plot.details.get_or_insert_with(|| {
            let session = Arc::clone(&self.doc.session);
            let (model, filter) = (options.model.clone(), options.annotations.clone());
            super::background::Latest::start("details", self.plot.ctx.clone(), move |&(d, plane, id): &DetailsKey| {
                super::details::ElementInfo::gather(&session, d, plane, id, model.as_ref(), &filter)
            })
        });
        details.get(&(self.doc.device, self.doc.plane, id))
    }

    /// The annotation lane's spans of the device shown, once placed (asked for on first use).
    pub fn span_marks(
        &mut self,
        filter: &crate::analysis::annotations::AnnotationFilter,
    ) -> Option<Arc<super::span_marks::SpanMarks>> {
        use super::span_marks::SpanMarks;
        use crate::analysis::annotations::AnnotationFilter;
        if self.plot.span_marks.as_ref().is_none_or(|p| p.device != self.doc.device) {
            let (session, d) = (&self.doc.session, self.doc.device);
            self.plot.span_marks = Some(if *filter == AnnotationFilter::default() {
                Pending::start_offloaded(
                    "annotations",
                    session,
                    d,
                    &self.plot.platform,
                    &self.plot.ctx,
                    crate::platform::Offload::SpanMarks,
                    |bytes| SpanMarks::decode(bytes).map(Arc::new),
                    |s, d| Arc::new(SpanMarks::compute(s, d, &AnnotationFilter::default())),
                )
            } else {
                let filter = filter.clone();
                Pending::start("annotations", session, d, move |s, d| Arc::new(SpanMarks::compute(s, d, &filter)))
            });
        }
        self.plot.span_marks.as_ref().and_then(Pending::get).cloned()
    }

    pub fn ooms(&mut self) -> Option<&[super::ooms::OomMark]> {
        self.oom_marks().map(|m| m.marks.as_slice())
    }

    /// The OOM markers with their places on both axes (see [`Self::ooms`]).
    pub fn oom_marks(&mut self) -> Option<&Arc<super::ooms::OomMarks>> {
        if self.plot.ooms.as_ref().is_none_or(|p| p.device != self.doc.device) {
            self.plot.ooms = Some(Pending::start_offloaded(
                "ooms",
                &self.doc.session,
                self.doc.device,
                &self.plot.platform,
                &self.plot.ctx,
                crate::platform::Offload::OomMarks,
                |bytes| super::ooms::OomMarks::decode(bytes).map(Arc::new),
                |s, d| Arc::new(super::ooms::OomMarks::compute(s, d)),
            ));
        }
        self.plot.ooms.as_ref().and_then(Pending::get)
    }

    /// The device's private pools for the pools view, once worked out (asked for in the
    /// background on first call; `None` meanwhile, and for a device without private pools).
    pub fn pools(&mut self) -> Option<&Arc<super::pools::Pools>> {
        if self.plot.pools.as_ref().is_none_or(|p| p.device != self.doc.device) {
            self.plot.pools = Some(Pending::start_offloaded(
                "pools",
                &self.doc.session,
                self.doc.device,
                &self.plot.platform,
                &self.plot.ctx,
                crate::platform::Offload::Pools,
                |bytes| super::pools::decode(bytes).map(|p| p.map(Arc::new)),
                |s, d| super::pools::compute(s, d).map(Arc::new),
            ));
        }
        self.plot.pools.as_ref().and_then(Pending::get).and_then(Option::as_ref)
    }

    /// X range of the whole trace in the current axis' units.
    pub fn x_extent(&self) -> (f64, f64) {
        let actions = self.stacked().layout.actions.len();
        if self.doc.time_axis
            && let Some(times) = self.action_times()
            && let (Some(first), Some(last)) = (times.first_timed(), times.last())
        {
            return (first as f64, (last as f64).max(first as f64 + 1.0));
        }
        (0.0, actions.max(1) as f64)
    }

    /// Everything: the whole trace, and bytes up to the highest of the peak, the reserved line
    /// (element timeline) and the capacity line, so that no line drawn runs off the plot.
    pub fn fit(&mut self) {
        let l = self.stacked().layout;
        let (a, b) = self.x_extent();
        let reserved = (self.doc.plane == Plane::Elements).then(|| self.doc.session.reserved_peak(self.doc.device));
        let top = self.ceiling(l.peak_bytes, reserved);
        self.doc.view = View::fit(l.actions.len(), top);
        self.doc.view.x0 = a;
        self.doc.view.x1 = b;
    }

    /// Double-click: fit Y to the highest total visible (and the reserved and capacity lines).
    pub fn fit_y(&mut self) {
        let l = self.stacked().layout;
        let (a, b) = self.visible_actions();
        let max = l.totals.get(a..b.min(l.totals.len())).and_then(|t| t.iter().max().copied()).unwrap_or(l.peak_bytes);
        let reserved = (self.doc.plane == Plane::Elements).then(|| self.visible_reserved(a, b)).flatten();
        self.doc.view.y0 = 0.0;
        self.doc.view.y1 = (self.ceiling(max, reserved).max(1) as f64) * super::view::HEADROOM;
    }

    /// The highest of `allocated`, `reserved` and the capacity line while it is drawn.
    fn ceiling(&self, allocated: u64, reserved: Option<u64>) -> u64 {
        allocated.max(reserved.unwrap_or(0)).max(self.doc.capacity.unwrap_or(0))
    }

    /// Action index range `[a, b)` currently visible.
    pub fn visible_actions(&self) -> (usize, usize) {
        let n = self.stacked().layout.actions.len();
        if self.doc.time_axis {
            let Some(times) = self.action_times() else { return (0, n) };
            let a = times.partition_point(|t| (t as f64) < self.doc.view.x0).saturating_sub(1);
            let b = times.partition_point(|t| (t as f64) <= self.doc.view.x1);
            return (a.min(n), b.min(n));
        }
        ((self.doc.view.x0.floor().max(0.0) as usize).min(n), (self.doc.view.x1.ceil().max(0.0) as usize).min(n))
    }

    /// The action index at data x (either axis).
    pub fn action_at(&self, x: f64) -> Option<usize> {
        let n = self.stacked().layout.actions.len();
        let k = if self.doc.time_axis {
            let times = self.action_times()?;
            times.partition_point(|t| (t as f64) <= x).checked_sub(1)?
        } else {
            (x >= 0.0).then_some(x.floor() as usize)?
        };
        (k < n).then_some(k)
    }

    /// Toggles the x axis, keeping the visible actions (within a sample's actions when their
    /// chunks are not decoded: the UI thread decodes none).
    pub fn set_time_axis(&mut self, on: bool) {
        if on == self.doc.time_axis {
            return;
        }
        let session = Arc::clone(&self.doc.session);
        let Some(times) = session.time_axis_sampled(self.doc.device).filter(|_| self.doc.plane == Plane::Elements)
        else {
            return;
        };
        if times.is_empty() || times.first_timed().is_none() {
            return;
        }
        let (a, b) = self.visible_actions();
        let clamp = |k: usize| times.get(k.min(times.len() - 1)).unwrap_or(0) as f64;
        self.doc.time_axis = on;
        if on {
            self.doc.view.x0 = clamp(a);
            self.doc.view.x1 = clamp(b.saturating_sub(1)).max(self.doc.view.x0 + 1.0);
        } else {
            self.doc.view.x0 = a as f64;
            self.doc.view.x1 = (b as f64).max(self.doc.view.x0 + 1.0);
        }
        self.plot.raster = None;
        self.doc.selection.hovered = None;
    }

    /// Centres the view on action x (the action axis), keeping the zoom.
    pub fn centre_on(&mut self, x: f64) {
        if self.doc.time_axis {
            return;
        }
        let span = self.doc.view.x1 - self.doc.view.x0;
        let n = self.stacked().layout.actions.len() as f64;
        self.doc.view.x0 = x - span / 2.0;
        self.doc.view.x1 = x + span / 2.0;
        self.doc.view.clamp_x(n);
    }

    /// Centres the view on the device's peak and pins the largest allocation live there, so the
    /// bottom bar and the answers panel describe the peak.
    /// Shows element `id` of the element timeline — its whole lifetime, with some room either
    /// side — and pins it.
    pub fn go_to_element(&mut self, id: crate::model::ElementId) {
        let session = Arc::clone(&self.doc.session);
        let stacked = stacked_in(&session, self.doc.device, Plane::Elements);
        let l = stacked.layout;
        let n = l.actions.len() as f64;
        let el = l.element(id);
        let start = el.start_opt().map_or(0.0, |k| f64::from(k.0));
        let end = el.end_opt().map_or(n, |k| f64::from(k.0) + 1.0);
        let pad = ((end - start) * 0.25).max(8.0);
        if !self.doc.time_axis {
            self.doc.view.x0 = start - pad;
            self.doc.view.x1 = end + pad;
            self.doc.view.clamp_x(n);
        }
        let k = el.start_opt().map_or(-1, |k| k.signed());
        let stack = stacked.checkpoints.stack_after(l, k);
        let offset = stack.with_offsets().find(|&(e, _)| e == id).map_or(0, |(_, off)| off);
        let x = if self.doc.time_axis {
            self.action_times().and_then(|t| t.get(k.max(0) as usize).map(|t| t as f64)).unwrap_or(start)
        } else {
            start + 0.5
        };
        self.doc.selection.pinned = Some(Hit { element: id, x, byte: offset as f64 + el.size as f64 / 2.0 });
        self.plot.invalidate_raster();
    }

    pub fn go_to_peak(&mut self) {
        let session = Arc::clone(&self.doc.session);
        let stacked = stacked_in(&session, self.doc.device, self.doc.plane);
        let l = stacked.layout;
        let Some(k) = l.peak_action else { return };
        let span = (self.doc.view.x1 - self.doc.view.x0).min(l.actions.len() as f64 / 8.0).max(16.0);
        let x = if self.doc.time_axis {
            self.action_times().map_or(f64::from(k.0), |t| t.get(k.index()).map_or(0.0, |t| t as f64))
        } else {
            f64::from(k.0) + 0.5
        };
        self.doc.view.x0 = x - span / 2.0;
        self.doc.view.x1 = x + span / 2.0;
        if !self.doc.time_axis {
            self.doc.view.clamp_x(l.actions.len() as f64);
        }
        self.doc.view.y0 = 0.0;
        self.doc.view.y1 = l.peak_bytes as f64 * super::view::HEADROOM;
        let stack = stacked.checkpoints.stack_after(l, k.signed());
        let largest = stack.with_offsets().max_by_key(|&(id, _)| (l.elements.size[id.index()], std::cmp::Reverse(id)));
        self.doc.selection.pinned = largest.map(|(id, off)| Hit {
            element: id,
            x,
            byte: off as f64 + l.elements.size[id.index()] as f64 / 2.0,
        });
    }

    /// `h=… i=… v=…` guessed from the device's most frequent allocation sizes (no `--model`),
    /// worked out on a named thread (a pass over every element): `None` until then.
    pub fn shape_candidates(&mut self) -> Option<&str> {
        self.top_facts().and_then(|f| f.shapes.as_deref())
    }

    /// How many frees of the device have no alloc in the trace (its ring buffer wrapped, or
    /// recording started late), worked out with the shape candidates: `None` when none (or not
    /// yet known).
    pub fn frees_without_alloc(&mut self) -> Option<u64> {
        self.top_facts().map(|f| f.free_only).filter(|&n| n > 0)
    }

    fn top_facts(&mut self) -> Option<&TopFacts> {
        if self.plot.candidates.as_ref().is_none_or(|p| p.device != self.doc.device) {
            self.plot.candidates = Some(Pending::start_offloaded(
                "shapes",
                &self.doc.session,
                self.doc.device,
                &self.plot.platform,
                &self.plot.ctx,
                crate::platform::Offload::TopFacts,
                TopFacts::decode,
                TopFacts::compute,
            ));
        }
        self.plot.candidates.as_ref().and_then(Pending::get)
    }

    /// Which elements a raster draws individually: the pools' mask in the pools view; under
    /// `--max-entries` the N largest, whose mask the raster's worker makes (from the elements
    /// sorted once there), so dragging the detail slider passes over no element here.
    fn keep_mask(&mut self) -> super::worker::Keep {
        use super::worker::Keep;
        if self.doc.pools_view {
            return self.pools().map_or(Keep::All, |p| Keep::Mask(Arc::clone(&p.mask)));
        }
        self.doc.max_entries.map_or(Keep::All, Keep::Largest)
    }
}

impl Timeline {
    /// Device `d`'s categories if already in (never starts the work).
    pub fn categories_of(&self, d: DeviceIdx) -> Option<&super::categories::DeviceCategories> {
        self.categories.as_ref().filter(|p| p.device == d).and_then(Pending::get)
    }

    /// True while chunks of action times are being decoded for the UI.
    pub fn times_pending(&self) -> bool {
        self.time_loader.as_ref().is_some_and(super::background::Latest::busy)
    }

    /// Forgets the current raster (the next frame asks for a new one).
    pub fn invalidate_raster(&mut self) {
        self.raster = None;
        self.wanted = None;
    }

    /// The context the viewer runs in (its workers ask it for a repaint when their work is in).
    pub fn ctx(&self) -> &egui::Context {
        &self.ctx
    }

    /// True while an element's details are being gathered.
    pub fn details_pending(&self) -> bool {
        self.details.as_ref().is_some_and(super::background::Latest::busy)
    }

    /// True while the shape candidates asked for are still being worked out (they change the
    /// top bar: a screenshot waits for them).
    pub fn shapes_pending(&self) -> bool {
        self.candidates.as_ref().is_some_and(|p| p.get().is_none())
    }
}

/// Colour keys of segments: the default pool's by stream (`0..SEGMENT_KEYS / 2`), a private
/// pool's by pool (the upper half), so the segment timeline reads by stream and pool.
const SEGMENT_KEYS: u32 = 4096;

fn segment_keys(session: &Session, d: DeviceIdx) -> Vec<u32> {
    use crate::derive::timeline::Attributes as _;
    let Some(segments) = session.stacked(d, Plane::Segments) else { return Vec::new() };
    let root = session.root();
    let ordinal = session.ordinal(d).0;
    let dump_stream: std::collections::HashMap<u64, u64> = root
        .segments
        .iter()
        .filter(|s| s.device.to_native() == ordinal)
        .map(|s| (s.address.to_native(), s.stream.to_native()))
        .collect();
    let pools = session.segment_pools(d);
    let attrs = crate::archive::attrs::DeviceAttrs { root, layout: segments.layout };
    (0..segments.layout.elements.len())
        .map(|i| {
            let id = crate::model::ElementId::at(i);
            let el = segments.layout.element(id);
            let stream = match el.origin {
                crate::layout::Origin::Ghost => dump_stream.get(&el.addr).copied().unwrap_or(0),
                _ => attrs.attrs(id).stream.unwrap_or(0),
            };
            let half = SEGMENT_KEYS / 2;
            match pools.get(i).copied().flatten() {
                Some((a, b)) => half + ((a as u64).wrapping_mul(31).wrapping_add(b as u64) % u64::from(half)) as u32,
                None => (stream % u64::from(half)) as u32,
            }
        })
        .collect()
}

/// Element → site table of a device's element timeline, read in place from the mapped archive
/// for the upload.
struct SitesRef {
    session: Arc<Session>,
    device: DeviceIdx,
}

impl AsRef<[u32]> for SitesRef {
    fn as_ref(&self) -> &[u32] {
        self.session.elements(self.device).sites
    }
}

/// Device `d`'s timeline of `plane` in `session` (its elements' when the archive lacks it): for
/// code that holds its own handle on the session while it changes the timeline's state.
/// Elements the shape candidates are guessed from, at most: the first ones (a run's first steps
/// allocate every shape it has), so a 10 GB archive's guess reads 50 MB of it, not 550.
const SHAPE_ELEMENTS: usize = 4 << 20;

/// What the row under the top bar says of a device, which takes a pass over its elements (tens
/// of ms on millions of them: a browser works it out in its web worker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopFacts {
    /// The shape candidates line (`None`: nothing guessed).
    shapes: Option<String>,
    /// Frees whose alloc is not in the trace.
    free_only: u64,
}

impl TopFacts {
    pub fn compute(session: &Session, d: DeviceIdx) -> TopFacts {
        let origin = session.elements(d).layout.elements.origin;
        let free_only = origin.iter().filter(|&&o| o == crate::layout::Origin::FreeOnly as u8).count() as u64;
        TopFacts { shapes: shape_candidates(session, d), free_only }
    }

    /// As a web worker sends it back: `free_only` (8 bytes, little-endian), then 0, or 1 and the
    /// shapes line (UTF-8).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.free_only.to_le_bytes().to_vec();
        match &self.shapes {
            None => out.push(0),
            Some(line) => {
                out.push(1);
                out.extend_from_slice(line.as_bytes());
            }
        }
        out
    }

    /// [`Self::encode`]'s bytes read back; `None` for anything else.
    pub fn decode(bytes: &[u8]) -> Option<TopFacts> {
        let (free_only, rest) = bytes.split_first_chunk::<8>()?;
        let shapes = match rest.split_first()? {
            (0, []) => None,
            (1, line) => Some(std::str::from_utf8(line).ok()?.to_owned()),
            _ => return None,
        };
        Some(TopFacts { shapes, free_only: u64::from_le_bytes(*free_only) })
    }
}

/// The shape candidates line of device `d`'s allocations (`None`: nothing guessed).
fn shape_candidates(session: &Session, d: DeviceIdx) -> Option<String> {
    use crate::analysis::shapes;
    let stacked = session.elements(d);
    let e = stacked.layout.elements;
    let long = shapes::long_lived(stacked.layout, SHAPE_ELEMENTS);
    let allocations = || long.iter().copied();
    let site = |i: usize| stacked.sites.get(i).copied().unwrap_or(crate::model::NONE);
    if shapes::is_convnet(session.root(), allocations().map(site)) {
        return None;
    }
    let c = shapes::infer(allocations().map(|i| e.size[i]));
    let parts: Vec<String> =
        [("h", c.h), ("i", c.i), ("v", c.v)].iter().filter_map(|(n, v)| v.map(|v| format!("{n}={v}"))).collect();
    (!parts.is_empty()).then(|| format!("shape candidates: {}", parts.join(" ")))
}

pub fn stacked_in(session: &Session, d: DeviceIdx, plane: Plane) -> StackedRef<'_> {
    session.stacked(d, plane).unwrap_or_else(|| session.elements(d))
}

/// A value computed for one key (device, setting), shared with the GPU side or the workers.
type Cached<K, V> = (K, Arc<V>);

pub fn tile_key(device: DeviceIdx, plane: Plane, level: usize, index: usize) -> TexKey {
    TexKey::Tile { device: device.0 as u32, plane: plane as u8, level: level as u32, index: index as u32 }
}

pub fn raster_key(spec: &ViewSpec, generation: u64) -> TexKey {
    TexKey::Raster { device: spec.device.0 as u32, plane: spec.plane as u8, generation }
}
