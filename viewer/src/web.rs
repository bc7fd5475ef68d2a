//! The viewer in a browser (wasm32): the page hands it a canvas and the bytes of one archive, or
//! of a job's ranks (the rank strip); eframe's web runner draws with wgpu (WebGPU where the
//! browser has it, else WebGL2). What it needs of the machine is [`WebPlatform`]: the archives
//! are already in memory, so "opening" one is reading the bytes the page fetched, and the id
//! check runs before the first frame (there is no thread to run it beside).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use eframe::egui_wgpu::{self, wgpu};
use wasm_bindgen::prelude::*;

use crate::app::{ViewerApp, ViewerOptions};
use crate::archive::{Archive, Memory, Session};
use crate::model::DeviceIdx;
use crate::model::Job;
use crate::open_view::ViewState;
use crate::platform::{FirstFrame, Offload, Platform, PlatformRef};

/// What a page holds: the runner of one viewer, its GPU (for the tests' id-buffer read) and a
/// read of the id buffer under way.
#[wasm_bindgen]
pub struct WebHandle {
    runner: eframe::WebRunner,
    platform: RefCell<Option<Arc<WebPlatform>>>,
    ctx: Rc<RefCell<Option<eframe::egui::Context>>>,
    gpu: Rc<RefCell<Option<egui_wgpu::RenderState>>>,
    id_read: RefCell<Option<IdRead>>,
}

/// A texel of the id buffer copied to `buffer`, mapped once `mapped` is set (WebGL cannot wait
/// for the GPU: the page asks again until it is).
struct IdRead {
    buffer: wgpu::Buffer,
    mapped: Arc<AtomicBool>,
}

#[wasm_bindgen]
impl WebHandle {
    #[wasm_bindgen(constructor)]
    pub fn new() -> WebHandle {
        WebHandle {
            runner: eframe::WebRunner::new(),
            platform: RefCell::default(),
            ctx: Rc::default(),
            gpu: Rc::default(),
            id_read: RefCell::default(),
        }
    }

    /// Opens the archives `bytes` (each a `Uint8Array`, called by the name at the same place in
    /// `names`: the URL it came from) in the viewer on `canvas`: one archive as itself, several
    /// as a job's rank strip (ranked by the numbers in their names, as `memviz open DIR` does).
    /// `query` (the page's `location.search`) names the view first shown, with `memviz open`'s
    /// option names ([`ViewerOptions::with_query`]). "Copy link" and the address bar give `page`
    /// with `?archive=NAME` for each archive shown (and `token` when given), then the view's
    /// options; with `inline` (a page `memviz export html` wrote: the archive is in the page),
    /// `page` alone. With `preview` (one archive, of which only the parts its first frame reads
    /// are in `bytes` yet: `memviz serve`'s `?parts`), that frame is drawn from them alone
    /// ([`ViewerApp::open_preview`]: no check, no input) until [`Self::complete`] gives the rest.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        &self,
        canvas: web_sys::HtmlCanvasElement,
        names: js_sys::Array,
        bytes: js_sys::Array,
        page: String,
        token: String,
        inline: bool,
        query: String,
        preview: bool,
    ) -> Result<(), JsValue> {
        let names: Vec<String> = names.iter().map(|n| n.as_string().unwrap_or_default()).collect();
        let mut files = HashMap::new();
        for (name, b) in names.iter().zip(bytes.iter()) {
            let b: js_sys::Uint8Array = b.dyn_into().map_err(|_| JsValue::from_str("an archive is not bytes"))?;
            files.insert(PathBuf::from(name), Opened::Bytes(memory_of(&b)));
        }
        let platform = Arc::new(WebPlatform {
            page,
            token,
            archives: if inline { Vec::new() } else { names.clone() },
            files: Mutex::new(files),
            shown: Mutex::new((String::new(), 0.0)),
        });
        // One archive is opened before the runner starts, so that a bad one fails the page's
        // start with its one line; a job's ranks load in the strip, each failure listed there.
        let one = match names.as_slice() {
            [name] => Some(platform.open_archive(Path::new(name)).map_err(|e| JsValue::from_str(&e))?),
            _ => None,
        };
        mark("archive opened");
        *self.platform.borrow_mut() = Some(Arc::clone(&platform));
        let paths: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
        let (gpu, egui_ctx) = (Rc::clone(&self.gpu), Rc::clone(&self.ctx));
        let options = ViewerOptions { platform: PlatformRef(platform), ..ViewerOptions::default() }
            .with_query(&query)
            .map_err(|e| JsValue::from_str(&e))?;
        self.runner
            .start(
                canvas,
                eframe::WebOptions::default(),
                Box::new(move |cc| {
                    mark("graphics ready");
                    let rs = cc.wgpu_render_state.as_ref().ok_or("the wgpu renderer is not available")?;
                    rs.renderer.write().callback_resources.insert(crate::gpu::TimelineResources::new(
                        &rs.device,
                        rs.target_format,
                        false,
                    ));
                    *gpu.borrow_mut() = Some(rs.clone());
                    *egui_ctx.borrow_mut() = Some(cc.egui_ctx.clone());
                    let mut app = ViewerApp::new(options);
                    match one {
                        Some(session) if preview => app.open_preview(session, &cc.egui_ctx),
                        Some(session) => app.open_session(session, &cc.egui_ctx),
                        None => app.open_paths(&paths, &cc.egui_ctx),
                    }
                    mark("viewer made");
                    Ok(Box::new(app))
                }),
            )
            .await
    }

    /// The whole archive a preview ([`Self::start`]'s `preview`) was the first parts of: opened
    /// and checked, it replaces the preview on the same view. The preview's copy is let go
    /// first, so the tab holds one copy of the archive at a time.
    pub fn complete(&self, bytes: js_sys::Uint8Array) -> Result<(), JsValue> {
        let platform = self.platform.borrow().clone().ok_or_else(|| JsValue::from_str("the viewer has not started"))?;
        let mut app =
            self.runner.app_mut::<ViewerApp>().ok_or_else(|| JsValue::from_str("the viewer has not started"))?;
        let path = app.timeline().filter(|t| t.doc.preview).map(|t| t.doc.session.archive.path.clone());
        let path = path.ok_or_else(|| JsValue::from_str("no preview is shown"))?;
        app.content = crate::app::Content::Empty;
        let files = || platform.files.lock().unwrap_or_else(PoisonError::into_inner);
        files().remove(&path);
        let whole = memory_of(&bytes);
        files().insert(path.clone(), Opened::Bytes(whole));
        let ctx = self.ctx.borrow().clone().ok_or_else(|| JsValue::from_str("the viewer has not started"))?;
        match platform.open_archive(&path) {
            Ok(session) => app.open_session(session, &ctx),
            Err(e) => app.content = crate::app::Content::Failed(e),
        }
        ctx.request_repaint();
        Ok(())
    }

    /// Whether the viewer shows a preview (an archive's first parts: [`Self::start`]).
    pub fn previewing(&self) -> bool {
        self.runner.app_mut::<ViewerApp>().is_some_and(|a| a.previewing())
    }

    /// Whether the viewer has drawn a frame yet (the page's tests wait for it).
    pub fn frames(&self) -> u64 {
        self.runner.app_mut::<ViewerApp>().map_or(0, |a| a.frames)
    }

    /// For tests: the plot's rectangle on the canvas (CSS pixels: left, top, right, bottom).
    pub fn plot_rect(&self) -> Vec<f32> {
        let app = self.runner.app_mut::<ViewerApp>();
        let r = app.as_ref().and_then(|a| a.timeline()).map(|t| t.plot.plot_rect);
        r.map_or_else(Vec::new, |r| vec![r.left(), r.top(), r.right(), r.bottom()])
    }

    /// For tests: the element drawn at `(x, y)` on the canvas, as the viewer picks it.
    pub fn element_at(&self, x: f32, y: f32) -> Option<u32> {
        let app = self.runner.app_mut::<ViewerApp>()?;
        let hit = app.timeline()?.pick(eframe::egui::pos2(x, y))?;
        Some(hit.element.index() as u32)
    }

    /// For tests: asks the GPU for the element its id pass draws at `(x, y)` (CSS pixels): the
    /// plot drawn again with the id pipeline into an `R32Uint` target, the texel there copied to
    /// a buffer and mapped; [`Self::drawn_id`] answers once the map is done. False where no
    /// timeline is shown or `(x, y)` is past the plot.
    pub fn request_drawn_id(&self, x: f32, y: f32) -> bool {
        let Some(app) = self.runner.app_mut::<ViewerApp>() else { return false };
        let Some(t) = app.timeline() else { return false };
        let Some(rs) = self.gpu.borrow().clone() else { return false };
        let ppp = t.plot.pixels_per_point;
        let viewport = eframe::egui::Rect::from_min_max(
            (t.plot.plot_rect.min.to_vec2() * ppp).to_pos2(),
            (t.plot.plot_rect.max.to_vec2() * ppp).to_pos2(),
        );
        let (w, h) = (viewport.right().ceil() as u32, viewport.bottom().ceil() as u32);
        let (x, y) = ((x * ppp) as u32, (y * ppp) as u32);
        if x >= w || y >= h {
            return false;
        }
        let mut renderer = rs.renderer.write();
        let Some(r) = renderer.callback_resources.get_mut::<crate::gpu::TimelineResources>() else { return false };
        r.make_id_pipeline(&rs.device);
        let (ids, draw) = crate::gpu::draw_ids(&rs.device, r, t.plot.slot, (w, h), viewport);
        let buffer = rs.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("memviz id read"),
            size: u64::from(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT),
            usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
            mapped_at_creation: false,
        });
        let mut copy =
            rs.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("memviz id read") });
        copy.copy_texture_to_buffer(
            wgpu::TexelCopyTextureInfo {
                texture: &ids,
                mip_level: 0,
                origin: wgpu::Origin3d { x, y, z: 0 },
                aspect: wgpu::TextureAspect::All,
            },
            wgpu::TexelCopyBufferInfo {
                buffer: &buffer,
                layout: wgpu::TexelCopyBufferLayout { offset: 0, bytes_per_row: None, rows_per_image: None },
            },
            wgpu::Extent3d { width: 1, height: 1, depth_or_array_layers: 1 },
        );
        rs.queue.submit([draw, copy.finish()]);
        let mapped = Arc::new(AtomicBool::new(false));
        let done = Arc::clone(&mapped);
        buffer.slice(..).map_async(wgpu::MapMode::Read, move |r| done.store(r.is_ok(), Ordering::Release));
        *self.id_read.borrow_mut() = Some(IdRead { buffer, mapped });
        true
    }

    /// For tests: the element id [`Self::request_drawn_id`] asked for, once read back (`None`
    /// until then); `u32::MAX` where the plot draws no element.
    pub fn drawn_id(&self) -> Option<u32> {
        let rs = self.gpu.borrow().clone()?;
        let _ = rs.device.poll(wgpu::PollType::Poll);
        let mut read = self.id_read.borrow_mut();
        if !read.as_ref()?.mapped.load(Ordering::Acquire) {
            return None;
        }
        let IdRead { buffer, .. } = read.take()?;
        let id = buffer
            .slice(..)
            .get_mapped_range()
            .ok()
            .map(|data| u32::from_le_bytes([data[0], data[1], data[2], data[3]]));
        buffer.unmap();
        id
    }

    /// For tests: the categories present on the device shown (bit i: `Category::ALL[i]`) once
    /// they are in, else `None`.
    pub fn categories_present(&self) -> Option<u32> {
        let app = self.runner.app_mut::<ViewerApp>()?;
        app.timeline()?.categories_ready().map(|c| u32::from(c.present))
    }

    /// For tests: how many matches the search shows, once it shows those of the text typed
    /// (`None` while none is open or they are on their way).
    pub fn search_matches(&self) -> Option<u32> {
        let app = self.runner.app_mut::<ViewerApp>()?;
        let search = &app.timeline()?.doc.search;
        (search.open && !search.text.trim().is_empty() && !search.pending()).then_some(search.matches.len() as u32)
    }

    /// For tests: the pinned element, if any.
    pub fn pinned(&self) -> Option<u32> {
        let app = self.runner.app_mut::<ViewerApp>()?;
        app.timeline()?.doc.selection.pinned.map(|h| h.element.index() as u32)
    }

    /// For tests: the view shown (`--view`'s name), or why there is none.
    pub fn view(&self) -> String {
        let Some(app) = self.runner.app_mut::<ViewerApp>() else { return String::from("(not started)") };
        match &app.content {
            crate::app::Content::Failed(e) => format!("failed: {e}"),
            _ => app.tab.arg().to_owned(),
        }
    }

    /// For tests: the actions across the plot (first, last).
    pub fn x_range(&self) -> Vec<f64> {
        let app = self.runner.app_mut::<ViewerApp>();
        let view = app.as_ref().and_then(|a| a.timeline()).map(|t| t.doc.view);
        view.map_or_else(Vec::new, |v| vec![v.x0, v.x1])
    }

    /// What "copy link" copies now: this page's URL on the view shown.
    pub fn link(&self) -> Option<String> {
        let app = self.runner.app_mut::<ViewerApp>()?;
        let doc = &app.timeline()?.doc;
        Some(app.options.platform.link(&doc.session.archive.path, &ViewState::of(doc, app.tab)))
    }

    /// For tests: the job's rank strip — how many ranks it has and how many have loaded, then
    /// each drawn cell's rank index and rectangle (CSS pixels: left, top, right, bottom), five
    /// numbers a cell; empty when no strip is shown.
    pub fn ranks(&self) -> Vec<f32> {
        let Some(app) = self.runner.app_mut::<ViewerApp>() else { return Vec::new() };
        let Some(strip) = app.ranks.as_ref().filter(|_| matches!(app.content, crate::app::Content::Ranks)) else {
            return Vec::new();
        };
        let mut out = vec![strip.files.len() as f32, strip.loaded() as f32];
        for (i, r) in &strip.cells {
            out.extend([*i as f32, r.left(), r.top(), r.right(), r.bottom()]);
        }
        out
    }

    /// For tests: which screen of a job is shown — `strip`, `compare`, a rank's archive name
    /// when one is open, or empty without a job.
    pub fn job_screen(&self) -> String {
        let Some(app) = self.runner.app_mut::<ViewerApp>() else { return String::new() };
        if app.ranks.is_none() {
            return String::new();
        }
        match &app.content {
            crate::app::Content::Ranks => "strip".into(),
            crate::app::Content::Compare(_) => "compare".into(),
            crate::app::Content::Open(t) => t.doc.session.archive.path.display().to_string(),
            _ => String::new(),
        }
    }
}

/// What runs in the page's web worker (`web/worker.js`): the archive again, in the worker's own
/// memory, and the jobs the viewer hands it (`Platform::offload`), so that they never stall the
/// page's thread.
#[wasm_bindgen]
pub struct WorkerHandle {
    session: Arc<Session>,
}

#[wasm_bindgen]
impl WorkerHandle {
    /// The archive `bytes` (the page's, checked there), opened.
    #[wasm_bindgen(constructor)]
    pub fn new(bytes: js_sys::Uint8Array) -> Result<WorkerHandle, JsValue> {
        let archive = Archive::new(Box::new(memory_of(&bytes)), Path::new("(worker)"))
            .map_err(|e| JsValue::from_str(&e.to_string()))?;
        Ok(WorkerHandle { session: Arc::new(Session::from_archive(archive)) })
    }

    /// The answer to `job` (an [`Offload`]'s name; `arg`, its argument) for device `device`, as
    /// bytes.
    pub fn run(&self, job: &str, device: u32, arg: &str) -> Result<Vec<u8>, JsValue> {
        let d = crate::model::DeviceIdx(device as usize);
        if d.index() >= self.session.root().devices.len() {
            return Err(JsValue::from_str(&format!("no device {device}")));
        }
        match job {
            j if j == Offload::Categories.name() => {
                Ok(crate::categories::DeviceCategories::compute(&self.session, d).encode())
            }
            j if j == Offload::TopFacts.name() => Ok(crate::timeline::TopFacts::compute(&self.session, d).encode()),
            j if j == Offload::OomMarks.name() => Ok(crate::ooms::OomMarks::compute(&self.session, d).encode()),
            j if j == Offload::Pools.name() => {
                Ok(crate::pools::encode(crate::pools::compute(&self.session, d).as_ref()))
            }
            j if j == Offload::Search.name() => {
                crate::search::answer(&self.session, d, arg).map_err(|e| JsValue::from_str(&e))
            }
            j if j == Offload::SpanMarks.name() => {
                let filter = crate::analysis::annotations::AnnotationFilter::default();
                Ok(crate::span_marks::SpanMarks::compute(&self.session, d, &filter).encode())
            }
            _ => Err(JsValue::from_str(&format!("no job {job}"))),
        }
    }
}

impl Default for WebHandle {
    fn default() -> Self {
        WebHandle::new()
    }
}

/// The browser's platform: the archives came with the page, whose address is `page`.
struct WebPlatform {
    page: String,
    /// The page's access token (`memviz serve` beyond loopback), or empty.
    token: String,
    /// The archives' names, as the page's URL names them (none for an exported page).
    archives: Vec<String>,
    /// Each archive the page fetched: its bytes until the viewer opens it, then its session.
    files: Mutex<HashMap<PathBuf, Opened>>,
    /// The URL last put in the address bar, and when (ms since the epoch).
    shown: Mutex<(String, f64)>,
}

enum Opened {
    Bytes(Memory),
    Session(Arc<Session>),
}

/// `bytes` copied once into this module's memory, aligned as an archive is read.
fn memory_of(bytes: &js_sys::Uint8Array) -> Memory {
    let mut v = memviz_format::rkyv::util::AlignedVec::<16>::with_capacity(bytes.length() as usize);
    v.resize(bytes.length() as usize, 0);
    bytes.copy_to(v.as_mut_slice());
    Memory(v)
}

impl WebPlatform {
    /// The page's URL on `archives` (each an `archive=`), with `view`'s options.
    fn url(&self, archives: &[&str], view: Option<&ViewState>) -> String {
        let mut query: Vec<String> =
            archives.iter().map(|a| format!("archive={}", js_sys::encode_uri_component(a))).collect();
        if !self.token.is_empty() {
            query.push(format!("token={}", js_sys::encode_uri_component(&self.token)));
        }
        query.extend(view.into_iter().flat_map(ViewState::options).map(|(k, v)| format!("{k}={v}")));
        match query.is_empty() {
            true => self.page.clone(),
            false => format!("{}?{}", self.page, query.join("&")),
        }
    }

    /// The archives a URL names to show `path`: that one alone when it is one of the job's, else
    /// every one the page has.
    fn naming(&self, path: &Path) -> Vec<&str> {
        match self.archives.iter().find(|a| Path::new(a.as_str()) == path) {
            Some(one) => vec![one.as_str()],
            None => self.archives.iter().map(String::as_str).collect(),
        }
    }
}

/// The address bar follows the view at most this often (browsers refuse `replaceState` called
/// every frame).
const URL_EVERY_MS: f64 = 250.0;

const NOT_HERE: &str = "not in a browser: open the archive in the page";

impl Platform for WebPlatform {
    fn is_archive(&self, path: &Path) -> bool {
        self.files.lock().unwrap_or_else(PoisonError::into_inner).contains_key(path)
    }
    /// The archive the page fetched as `path` (its bytes move into it: opened once).
    fn open_archive(&self, path: &Path) -> Result<Arc<Session>, String> {
        let mut files = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        let session = match files.remove(path) {
            None => return Err(format!("{}: not fetched by this page", path.display())),
            Some(Opened::Session(s)) => s,
            Some(Opened::Bytes(memory)) => {
                let archive = Archive::new(Box::new(memory), path).map_err(|e| format!("{}: {e}", path.display()))?;
                Arc::new(Session::from_archive(archive))
            }
        };
        files.insert(path.to_owned(), Opened::Session(Arc::clone(&session)));
        Ok(session)
    }
    fn open_snapshot(&self, _: &Path, _: bool, _: &dyn Fn(u64)) -> Result<Arc<Session>, String> {
        Err(NOT_HERE.into())
    }
    /// Through the page's `memvizOffload(job, archive, device, arg)` (its web worker: a promise
    /// of the answer's bytes, or of `null` where the worker does not hold that archive or
    /// failed); `false` where the page has none (an exported page, an archive too large for a
    /// second copy).
    fn offload(
        &self,
        job: Offload,
        arg: &str,
        path: &Path,
        d: DeviceIdx,
        done: Box<dyn FnOnce(Option<Vec<u8>>)>,
    ) -> bool {
        let hook = web_sys::window()
            .and_then(|w| js_sys::Reflect::get(&w, &JsValue::from_str("memvizOffload")).ok())
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok());
        let Some(hook) = hook else { return false };
        let (name, archive, device) = (job.name().into(), path.display().to_string().into(), (d.index() as u32).into());
        let args = js_sys::Array::of4(&name, &archive, &device, &JsValue::from_str(arg));
        let Some(promise) = hook.apply(&JsValue::NULL, &args).ok() else { return false };
        let Ok(promise) = promise.dyn_into::<js_sys::Promise>() else { return false };
        wasm_bindgen_futures::spawn_local(async move {
            let answer = wasm_bindgen_futures::JsFuture::from(promise).await.ok();
            done(answer.and_then(|v| v.dyn_into::<js_sys::Uint8Array>().ok()).map(|a| a.to_vec()));
        });
        true
    }
    fn start_checks(&self, session: &Arc<Session>, first_frame: &Arc<FirstFrame>) {
        session.check_ids_here();
        first_frame.drawn();
    }
    /// The page's archives, ranked by the numbers in their names.
    fn job(&self, paths: &[PathBuf]) -> Result<Job, String> {
        Ok(crate::model::ranked(paths.to_vec(), Path::new("")))
    }
    fn write(&self, _: &Path, _: &[u8]) -> anyhow::Result<()> {
        anyhow::bail!(NOT_HERE)
    }
    fn print(&self, text: &str) -> anyhow::Result<()> {
        web_sys::console::log_1(&JsValue::from_str(text));
        Ok(())
    }
    fn timing(&self, _: &str, _: f64) {}
    /// The page's URL on the archive at `path` (a job's rank alone) with the view's options.
    fn link(&self, path: &Path, view: &ViewState) -> String {
        self.url(&self.naming(path), Some(view))
    }
    /// The address bar says the view (what "copy link" copies), so the browser's own copy,
    /// bookmark or reload gives it too; a job's strip is the page on all its archives.
    fn showing(&self, shown: Option<(&Path, &ViewState)>) -> bool {
        let url = match shown {
            Some((path, view)) => self.link(path, view),
            None => self.url(&self.archives.iter().map(String::as_str).collect::<Vec<_>>(), None),
        };
        let mut last = self.shown.lock().unwrap_or_else(PoisonError::into_inner);
        if last.0 == url {
            return false;
        }
        let now = js_sys::Date::now();
        if now - last.1 < URL_EVERY_MS {
            return true;
        }
        let history = web_sys::window().and_then(|w| w.history().ok());
        if let Some(h) = history {
            // A refusal (a browser's own limit) only leaves the previous URL.
            let _ = h.replace_state_with_url(&JsValue::NULL, "", Some(&url));
        }
        *last = (url, now);
        false
    }
}

/// A start-up point on the page's timeline (`performance.mark`: the browser bench prints them).
fn mark(name: &str) {
    if let Some(p) = web_sys::window().and_then(|w| w.performance()) {
        let _ = p.mark(name);
    }
}
