//! `memviz open`: the GPU viewer over a mapped `.memviz` archive.
//!
//! ```text
//!   app (egui panels, input) ──▶ timeline (what to draw) ──▶ gpu (wgpu: id textures, shader)
//!          │                          │   ▲
//!          │                          ▼   │ tiles / rasters
//!          └── data (mmap archive) ◀── worker threads (decompress, rasterise from checkpoints)
//! ```
//!
//! The UI thread never waits on work that grows with the file: tiles and rasters come from
//! named worker threads through bounded channels, and uploads are budgeted per frame.

// The read crate's modules under their own names, as the root crate has them.
pub use memviz_read::{allocator, analysis, archive, derive, layout, lod, model};

pub mod answers_panel;
pub mod app;
pub mod axis;
pub mod background;
pub mod categories;
pub mod compare;
pub mod data;
pub mod details;
pub mod document;
pub mod events_list;
pub mod floor;
pub mod gpu;
pub mod indexing;
pub mod legend;
pub mod map_draw;
pub mod marks;
pub mod memory_map;
pub mod offscreen;
pub mod ooms;
pub mod open_view;
pub mod overlays;
pub mod panels;
pub mod platform;
pub mod pools;
pub mod ranks;
pub mod reserved;
pub mod screen;
pub mod search;
pub mod selection;
pub mod settings;
pub mod span_marks;
pub mod state_worker;
pub mod strip;
pub mod tabs;
pub mod textures;
pub mod theme;
pub mod timeline;
pub mod view;
#[cfg(target_arch = "wasm32")]
pub mod web;
pub mod wire;
pub mod worker;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use anyhow::Context as _;
use eframe::egui;

pub use app::{ViewerApp, ViewerOptions};
use offscreen::Offscreen;

static PROCESS_START: OnceLock<Instant> = OnceLock::new();

/// Call first thing in `main`: `open_ms` and `first_frame_ms` count from here.
pub fn mark_process_start() {
    PROCESS_START.get_or_init(Instant::now);
}

fn ms_since_start() -> f64 {
    PROCESS_START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
}

/// How `memviz open` runs.
#[derive(Debug, Clone)]
pub struct OpenArgs {
    pub path: PathBuf,
    /// A job's ranks (a folder, or several files): the rank strip instead of one file.
    pub job: Option<Vec<crate::model::RankFile>>,
    pub screenshot: Option<PathBuf>,
    pub size: (u32, u32),
    pub bench: bool,
    /// Close the window after this many frames (for tests under Xvfb).
    pub exit_after_frames: Option<u64>,
    pub options: ViewerOptions,
}

pub fn open(args: &OpenArgs) -> anyhow::Result<()> {
    if args.screenshot.is_some() || args.bench {
        return offscreen_run(args);
    }
    window(args)
}

fn offscreen_run(args: &OpenArgs) -> anyhow::Result<()> {
    let mut app = ViewerApp::new(args.options.clone());
    let ctx = egui::Context::default();
    // Creating the GPU device is the slowest step of start-up (the driver's): it runs while the
    // archive is opened and the first frame's UI (layout, fonts, the palette, the coarsest tile)
    // is worked out.
    let (w, h) = args.size;
    let (gpu_ctx, gpu_platform) = (ctx.clone(), args.options.platform.clone());
    let gpu_init = std::thread::Builder::new()
        .name("memviz-gpu-init".into())
        .spawn(move || Offscreen::new_timed(w, h, gpu_ctx, &|what| stage(&gpu_platform, what)))
        .context("starting the GPU thread")?;
    let opened = (|| {
        if let Some(files) = &args.job {
            app.open_job(files.clone(), &ctx);
        } else if args.options.platform.is_archive(&args.path) {
            app.open_archive(&args.path, &ctx);
        } else {
            let platform = &args.options.platform;
            let session =
                platform.open_snapshot(&args.path, !args.options.no_cache, &|_| {}).map_err(anyhow::Error::msg)?;
            app.open_session(session, &ctx);
        }
        if let app::Content::Failed(e) = &app.content {
            anyhow::bail!("{e}");
        }
        Ok(())
    })();
    if let Err(e) = opened {
        // The driver is still loading on its thread: exiting meanwhile ran LLVM's exit-time
        // destructors beside lavapipe's start-up, which then aborted ("Option ... registered more
        // than once") after the error line, so the exit code was not 1.
        let _ = gpu_init.join();
        return Err(e);
    }
    let open_ms = ms_since_start();
    stage(&args.options.platform, "opened");
    let first_ui = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        offscreen::run_ui(&ctx, &mut app, (w, h), 1.0 / 60.0, Vec::new())
    }));
    stage(&args.options.platform, "first frame's ui");
    // Joined on every path: a panic that unwound past a loading driver could hang at exit.
    let gpu = gpu_init.join();
    let first_ui = first_ui.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let mut gpu = gpu.map_err(|_| anyhow::anyhow!("the GPU thread panicked"))??;
    stage(&args.options.platform, "gpu ready");
    gpu.render(first_ui);
    stage(&args.options.platform, "frame");
    // Textures are uploaded with the frame that first draws them; the coarsest tile is decoded
    // on open, so normally the first frame already shows the whole trace.
    for _ in 0..500 {
        if args.job.is_some() || !app.draws_timeline() || app.timeline().is_none_or(|t| t.plot.textures.uploaded > 0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        gpu.frame(&mut app, Vec::new());
        stage(&args.options.platform, "frame");
    }
    let first_frame_ms = ms_since_start();
    // No window to say it in: every id and the checksum of every block, before anything is
    // written.
    if let Some(t) = app.timeline() {
        let a = &t.doc.session.archive;
        t.doc.session.ids.wait().clone().map_err(anyhow::Error::msg)?;
        a.verify_checksum_unmapped().map_err(|e| anyhow::anyhow!("{}: {e}", a.path.display()))?;
    }
    if let Some(e) = app.failure() {
        anyhow::bail!("{e}");
    }
    let mut report = serde_json::json!({
        "open_ms": round(open_ms),
        "first_frame_ms": round(first_frame_ms),
        "size": format!("{}x{}", args.size.0, args.size.1),
        "adapter": gpu.adapter,
    });
    if let Some(out) = &args.screenshot {
        if !gpu.settle(&mut app, 2000) {
            eprintln!(
                "warning: the view was still loading after {:?}; the screenshot shows what was drawn",
                offscreen::SETTLE_LIMIT
            );
        }
        if let Some(e) = app.failure() {
            anyhow::bail!("{e}");
        }
        args.options.platform.write(out, &gpu.png()?).with_context(|| out.display().to_string())?;
        report["screenshot"] = out.display().to_string().into();
    }
    if args.bench {
        let b = bench::run(&mut gpu, &mut app);
        report["frames"] = b.frames.into();
        report["view"] = if args.job.is_some() { "ranks" } else { app.tab.arg() }.into();
        report["frame_ms"] = b.frame_ms;
        report["ui_ms"] = b.ui_ms;
        report["ui_thread_chunks"] = b.ui_thread_chunks.into();
        report["hover_ms"] = b.hover_ms;
        if let Some(s) = b.step_ms {
            report["step_1000_events_ms"] = s;
        }
    }
    // A closed or full standard output is the one error line, never a panic.
    args.options.platform.print(&format!("{}\n", serde_json::to_string_pretty(&report)?))?;
    Ok(())
}

/// With `MEMVIZ_TIMINGS` set, prints when each start-up stage ended.
fn stage(platform: &platform::PlatformRef, what: &str) {
    platform.timing(what, ms_since_start());
}

fn round(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}

/// What to say when there is no screen to open a window on.
pub const NO_DISPLAY: &str = "no display found: use --screenshot, or open the .memviz on a machine with a display";

/// On Linux and the BSDs a window needs an X11 or Wayland display; say so before winit does
/// (its error quotes a path inside the cargo registry).
#[cfg(not(target_arch = "wasm32"))]
fn has_display() -> bool {
    if cfg!(any(target_os = "linux", target_os = "freebsd", target_os = "openbsd", target_os = "netbsd")) {
        ["DISPLAY", "WAYLAND_DISPLAY", "WAYLAND_SOCKET"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
    } else {
        true
    }
}

/// A browser build has no native window: its page runs the viewer (docs/design/11).
#[cfg(target_arch = "wasm32")]
fn window(args: &OpenArgs) -> anyhow::Result<()> {
    anyhow::bail!("{}: no native window in a browser build", args.path.display())
}

#[cfg(not(target_arch = "wasm32"))]
fn window(args: &OpenArgs) -> anyhow::Result<()> {
    if !has_display() {
        anyhow::bail!("{}: {NO_DISPLAY}", args.path.display());
    }
    let title = match &args.job {
        Some(files) => format!("memviz — {} ranks", files.len()),
        None => format!("memviz — {}", args.path.display()),
    };
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title(title.clone())
            .with_inner_size([args.size.0 as f32, args.size.1 as f32])
            .with_drag_and_drop(true),
        renderer: eframe::Renderer::Wgpu,
        wgpu_options: wgpu_options(),
        ..Default::default()
    };
    let (path, job, opts, exit_after) =
        (args.path.clone(), args.job.clone(), args.options.clone(), args.exit_after_frames);
    // The archive is opened while the window and the GPU device are made.
    let prepared = (job.is_none() && opts.platform.is_archive(&path)).then(|| {
        let (path, platform) = (path.clone(), opts.platform.clone());
        std::thread::Builder::new().name("memviz-open".into()).spawn(move || open_view::open_file(&platform, &path))
    });
    eframe::run_native(
        &title,
        options,
        Box::new(move |cc| {
            let rs = cc.wgpu_render_state.as_ref().ok_or("the wgpu renderer is not available")?;
            rs.renderer.write().callback_resources.insert(gpu::TimelineResources::new(
                &rs.device,
                rs.target_format,
                false,
            ));
            let mut app = ViewerApp::new(opts);
            match (job, prepared) {
                (Some(files), _) => app.open_job(files, &cc.egui_ctx),
                (None, Some(Ok(opening))) => {
                    let opened = opening.join().unwrap_or_else(|_| Err("the opening thread panicked".into()));
                    app.open_prepared(&path, opened, &cc.egui_ctx);
                }
                (None, _) => app.open_any(&path, &cc.egui_ctx),
            }
            Ok(Box::new(WindowApp { app, exit_after }))
        }),
    )
    .map_err(|e| {
        let text = e.to_string();
        if text.to_lowercase().contains("display") || text.contains("XOpenDisplay") || text.contains("wayland") {
            anyhow::anyhow!("{}: {NO_DISPLAY}", args.path.display())
        } else {
            anyhow::anyhow!("{}: cannot open a window: {}", args.path.display(), text.lines().next().unwrap_or(""))
        }
    })
}

/// eframe's wgpu set-up with the limits the timeline needs ([`gpu::required_limits`]).
#[cfg(not(target_arch = "wasm32"))]
fn wgpu_options() -> eframe::egui_wgpu::WgpuConfiguration {
    use eframe::egui_wgpu::{WgpuConfiguration, WgpuSetup, WgpuSetupCreateNew, wgpu};
    let mut setup = WgpuSetupCreateNew::without_display_handle();
    let egui_default = std::sync::Arc::clone(&setup.device_descriptor);
    setup.device_descriptor = std::sync::Arc::new(move |adapter: &wgpu::Adapter| {
        let mut d = egui_default(adapter);
        d.required_limits = gpu::required_limits(adapter, d.required_limits.clone());
        d
    });
    WgpuConfiguration { wgpu_setup: WgpuSetup::CreateNew(setup), ..Default::default() }
}

/// The native window's app: the viewer, closed after `exit_after` frames (tests under Xvfb).
#[cfg(not(target_arch = "wasm32"))]
struct WindowApp {
    app: ViewerApp,
    exit_after: Option<u64>,
}

#[cfg(not(target_arch = "wasm32"))]
impl eframe::App for WindowApp {
    fn clear_color(&self, visuals: &egui::Visuals) -> [f32; 4] {
        eframe::App::clear_color(&self.app, visuals)
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.app.ui(ui);
        if let Some(n) = self.exit_after {
            if self.app.frames >= n {
                ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
            } else {
                ui.ctx().request_repaint();
            }
        }
    }
}

pub mod bench;
