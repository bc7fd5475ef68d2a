//! The viewer in a browser (wasm32): the page hands it a canvas and an archive's bytes; eframe's
//! web runner draws with wgpu (WebGPU where the browser has it, else WebGL2). What it needs of
//! the machine is [`WebPlatform`]: the archive is already in memory, so nothing is opened by path,
//! and the id check runs before the first frame (there is no thread to run it beside).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasm_bindgen::prelude::*;

use crate::app::{ViewerApp, ViewerOptions};
use crate::archive::{Archive, Session};
use crate::model::Job;
use crate::open_view::ViewState;
use crate::platform::{FirstFrame, Platform, PlatformRef};

/// What a page holds: the runner of one viewer.
#[wasm_bindgen]
pub struct WebHandle {
    runner: eframe::WebRunner,
}

#[wasm_bindgen]
impl WebHandle {
    #[wasm_bindgen(constructor)]
    pub fn new() -> WebHandle {
        WebHandle { runner: eframe::WebRunner::new() }
    }

    /// Opens the archive `bytes` (called `name` in messages) in the viewer on `canvas`, on the
    /// view `query` asks for (the page's `location.search`: `memviz open`'s option names, see
    /// [`ViewerOptions::with_query`]); "copy link" copies `base` (the page's URL that opens this
    /// archive) with the view's options after it.
    pub async fn start(
        &self,
        canvas: web_sys::HtmlCanvasElement,
        bytes: Vec<u8>,
        name: String,
        base: String,
        query: String,
    ) -> Result<(), JsValue> {
        let fail = |e: String| JsValue::from_str(&format!("{name}: {e}"));
        let archive = Archive::from_memory(&bytes, Path::new(&name)).map_err(|e| fail(e.to_string()))?;
        drop(bytes);
        let session = Arc::new(Session::from_archive(archive));
        let shown = std::sync::Mutex::new((String::new(), 0.0));
        let platform = PlatformRef(Arc::new(WebPlatform { base, shown }));
        let options = ViewerOptions { platform, ..ViewerOptions::default() }.with_query(&query).map_err(fail)?;
        self.runner
            .start(
                canvas,
                eframe::WebOptions::default(),
                Box::new(move |cc| {
                    let rs = cc.wgpu_render_state.as_ref().ok_or("the wgpu renderer is not available")?;
                    rs.renderer.write().callback_resources.insert(crate::gpu::TimelineResources::new(
                        &rs.device,
                        rs.target_format,
                        false,
                    ));
                    let mut app = ViewerApp::new(options);
                    app.open_session(session, &cc.egui_ctx);
                    Ok(Box::new(app))
                }),
            )
            .await
    }

    /// Whether the viewer has drawn a frame yet (the page's tests wait for it).
    pub fn frames(&self) -> u64 {
        self.runner.app_mut::<ViewerApp>().map_or(0, |a| a.frames)
    }

    /// For tests: the plot's rectangle on the canvas (CSS pixels: left, top, right, bottom).
    pub fn plot_rect(&self) -> Vec<f32> {
        let app = self.runner.app_mut::<ViewerApp>();
        let r = app.as_ref().and_then(|a| a.timeline()).map(|t| t.plot_rect);
        r.map_or_else(Vec::new, |r| vec![r.left(), r.top(), r.right(), r.bottom()])
    }

    /// For tests: the element drawn at `(x, y)` on the canvas, as the viewer picks it.
    pub fn element_at(&self, x: f32, y: f32) -> Option<u32> {
        let app = self.runner.app_mut::<ViewerApp>()?;
        let hit = app.timeline()?.pick(eframe::egui::pos2(x, y))?;
        Some(hit.element.index() as u32)
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
        let view = ViewState::of(&app.timeline()?.doc, app.tab);
        Some(app.options.platform.link(Path::new(""), &view))
    }
}

impl Default for WebHandle {
    fn default() -> Self {
        WebHandle::new()
    }
}

/// The browser's platform: the archive came with the page, whose URL is `base`.
struct WebPlatform {
    base: String,
    /// The URL last put in the address bar, and when (ms since the epoch).
    shown: std::sync::Mutex<(String, f64)>,
}

/// The address bar follows the view at most this often (browsers refuse `replaceState` called
/// every frame).
const URL_EVERY_MS: f64 = 250.0;

const NOT_HERE: &str = "not in a browser: open the archive in the page";

impl Platform for WebPlatform {
    fn is_archive(&self, _: &Path) -> bool {
        false
    }
    fn open_archive(&self, _: &Path) -> Result<Arc<Session>, String> {
        Err(NOT_HERE.into())
    }
    fn open_snapshot(&self, _: &Path, _: bool, _: &dyn Fn(u64)) -> Result<Arc<Session>, String> {
        Err(NOT_HERE.into())
    }
    fn start_checks(&self, session: &Arc<Session>, first_frame: &Arc<FirstFrame>) {
        session.check_ids_here();
        first_frame.drawn();
    }
    fn job(&self, _: &[PathBuf]) -> Result<Job, String> {
        Err(NOT_HERE.into())
    }
    fn write(&self, _: &Path, _: &[u8]) -> anyhow::Result<()> {
        anyhow::bail!(NOT_HERE)
    }
    fn print(&self, text: &str) -> anyhow::Result<()> {
        web_sys::console::log_1(&JsValue::from_str(text));
        Ok(())
    }
    fn timing(&self, _: &str, _: f64) {}
    /// The page's URL with the view's options in its query.
    fn link(&self, _: &Path, view: &ViewState) -> String {
        let options = view.options().into_iter().map(|(k, v)| format!("{k}={v}"));
        let sep = if self.base.contains('?') { "&" } else { "?" };
        format!("{}{sep}{}", self.base, options.collect::<Vec<_>>().join("&"))
    }
    /// The address bar says the view (what "copy link" copies), so the browser's own copy,
    /// bookmark or reload gives it too.
    fn showing(&self, view: &ViewState) -> bool {
        let url = self.link(Path::new(""), view);
        let mut shown = self.shown.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if shown.0 == url {
            return false;
        }
        let now = js_sys::Date::now();
        if now - shown.1 < URL_EVERY_MS {
            return true;
        }
        let history = web_sys::window().and_then(|w| w.history().ok());
        if let Some(h) = history {
            // A refusal (a browser's own limit) only leaves the previous URL.
            let _ = h.replace_state_with_url(&JsValue::NULL, "", Some(&url));
        }
        *shown = (url, now);
        false
    }
}
