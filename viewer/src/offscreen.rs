//! Rendering without a window: a headless wgpu device, egui run by hand, the frame read back.
//! Serves `--screenshot`, `--bench` and the rendering tests (which also read the id buffer).

use anyhow::{Context as _, anyhow};
use eframe::egui::{self, Pos2, Rect, vec2};
use eframe::egui_wgpu::{self, wgpu};

use super::app::ViewerApp;
use super::gpu::TimelineResources;

/// The colour target: egui renders in gamma space, so these bytes go straight into a PNG.
const FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8Unorm;

/// How long [`Offscreen::settle`] waits for a view at most: far more than any real archive's
/// view takes (a 10 GB archive's settles in seconds), so a view still busy then never will be.
pub const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

pub struct Offscreen {
    device: wgpu::Device,
    queue: wgpu::Queue,
    renderer: egui_wgpu::Renderer,
    pub ctx: egui::Context,
    pub width: u32,
    pub height: u32,
    target: wgpu::Texture,
    time: f64,
    /// Keys held, as the last event that carried modifiers left them: a window's backend sends
    /// `ModifiersChanged` when they change; here the test's or bench's events are all there is.
    modifiers: egui::Modifiers,
    pub adapter: String,
    /// The UI thread's CPU time in the last [`Self::frame`]: the UI, tessellation, texture and
    /// buffer uploads and recording the pass, not the submission and the wait for the GPU.
    pub ui_cpu_ms: f64,
}

impl Offscreen {
    pub fn new(width: u32, height: u32, ctx: egui::Context) -> anyhow::Result<Offscreen> {
        Offscreen::new_timed(width, height, ctx, &|_| {})
    }

    /// [`Self::new`], telling `stage` as each start-up stage ends (`MEMVIZ_TIMINGS`).
    pub fn new_timed(width: u32, height: u32, ctx: egui::Context, stage: &dyn Fn(&str)) -> anyhow::Result<Offscreen> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        if std::env::var_os("WGPU_BACKEND").is_none() {
            // Vulkan / Metal / DX12 only: probing GL as well costs tens of ms at start-up.
            desc.backends = wgpu::Backends::PRIMARY;
        }
        let instance = wgpu::Instance::new(desc);
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::default(),
            force_fallback_adapter: false,
            compatible_surface: None,
            apply_limit_buckets: false,
        }))
        .map_err(|e| anyhow!("no GPU adapter (install Mesa's lavapipe: mesa-vulkan-drivers): {e}"))?;
        stage("adapter");
        let info = adapter.get_info();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("memviz offscreen"),
            required_features: wgpu::Features::empty(),
            required_limits: super::gpu::required_limits(&adapter, wgpu::Limits::downlevel_defaults()),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::default(),
            trace: wgpu::Trace::Off,
        }))
        .context("creating the GPU device")?;
        stage("device");
        let mut renderer = egui_wgpu::Renderer::new(&device, FORMAT, egui_wgpu::RendererOptions::default());
        stage("egui renderer");
        renderer.callback_resources.insert(TimelineResources::new(&device, FORMAT, true));
        stage("timeline pipelines");
        let target = color_target(&device, width, height, FORMAT);
        stage("offscreen target");
        Ok(Offscreen {
            device,
            queue,
            renderer,
            ctx,
            width,
            height,
            target,
            time: 0.0,
            modifiers: egui::Modifiers::NONE,
            adapter: format!("{} ({:?})", info.name, info.backend),
            ui_cpu_ms: 0.0,
        })
    }

    /// Runs the UI once with `events` and renders it; waits for the GPU to finish.
    pub fn frame(&mut self, app: &mut ViewerApp, events: Vec<egui::Event>) {
        let cpu = thread_cpu_ms();
        self.time += 1.0 / 60.0;
        let held = events.iter().rev().find_map(|e| match e {
            egui::Event::PointerButton { modifiers, .. }
            | egui::Event::MouseWheel { modifiers, .. }
            | egui::Event::Key { modifiers, .. } => Some(*modifiers),
            _ => None,
        });
        let mut events = events;
        if let Some(m) = held.filter(|&m| m != self.modifiers) {
            self.modifiers = m;
            events.insert(0, egui::Event::ModifiersChanged(m));
        }
        let ui = run_ui(&self.ctx, app, (self.width, self.height), self.time, events);
        let submitting = self.render(ui);
        self.ui_cpu_ms = submitting - cpu;
    }

    /// Renders a frame whose UI already ran (see [`run_ui`]); returns [`thread_cpu_ms`] when the
    /// frame was ready to submit.
    pub fn render(&mut self, frame: UiFrame) -> f64 {
        let UiFrame { out, prims } = frame;
        for (id, deltas) in &out.textures_delta.set {
            for delta in deltas {
                self.renderer.update_texture(&self.device, &self.queue, *id, delta);
            }
        }
        let screen = egui_wgpu::ScreenDescriptor {
            size_in_pixels: [self.width, self.height],
            pixels_per_point: out.pixels_per_point,
        };
        let mut encoder =
            self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("memviz frame") });
        let mut buffers = self.renderer.update_buffers(&self.device, &self.queue, &mut encoder, &prims, &screen);
        {
            let view = self.target.create_view(&wgpu::TextureViewDescriptor::default());
            let bg = super::theme::BACKGROUND;
            let mut pass = encoder
                .begin_render_pass(&wgpu::RenderPassDescriptor {
                    label: Some("memviz egui"),
                    color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                        view: &view,
                        depth_slice: None,
                        resolve_target: None,
                        ops: wgpu::Operations {
                            load: wgpu::LoadOp::Clear(wgpu::Color {
                                r: f64::from(bg.r()) / 255.0,
                                g: f64::from(bg.g()) / 255.0,
                                b: f64::from(bg.b()) / 255.0,
                                a: 1.0,
                            }),
                            store: wgpu::StoreOp::Store,
                        },
                    })],
                    depth_stencil_attachment: None,
                    timestamp_writes: None,
                    occlusion_query_set: None,
                    multiview_mask: None,
                })
                .forget_lifetime();
            self.renderer.render(&mut pass, &prims, &screen);
        }
        for id in &out.textures_delta.free {
            self.renderer.free_texture(id);
        }
        buffers.push(encoder.finish());
        let ready = thread_cpu_ms();
        self.queue.submit(buffers);
        let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
        ready
    }

    /// Frames until the workers and uploads are idle: at most `max_frames`, and none started
    /// after [`SETTLE_LIMIT`]. False when the view was still busy then.
    pub fn settle(&mut self, app: &mut ViewerApp, max_frames: usize) -> bool {
        let start = std::time::Instant::now();
        for _ in 0..max_frames {
            self.frame(app, Vec::new());
            if !app.busy() {
                self.frame(app, Vec::new());
                return true;
            }
            if start.elapsed() > SETTLE_LIMIT {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        false
    }

    /// The last frame, RGBA8, row-major from the top.
    pub fn read_rgba(&self) -> Vec<u8> {
        read_texture(&self.device, &self.queue, &self.target, 4)
    }

    /// Element ids of the plot in the last frame: `(rect in pixels, ids row-major from the top)`,
    /// [`crate::lod::raster::EMPTY`] where no element is drawn.
    pub fn read_ids(&mut self, app: &ViewerApp) -> Option<(Rect, Vec<u32>)> {
        let t = app.timeline()?;
        Some(self.read_ids_of(t))
    }

    /// [`Self::read_ids`] of timeline `t`, one of those on screen (two when comparing ranks).
    pub fn read_ids_of(&mut self, t: &super::timeline::Open) -> (Rect, Vec<u32>) {
        let rect = t.plot.plot_rect;
        let Some(r) = self.renderer.callback_resources.get::<TimelineResources>() else {
            return (rect, Vec::new());
        };
        let (ids, commands) = super::gpu::draw_ids(&self.device, r, t.plot.slot, (self.width, self.height), rect);
        self.queue.submit([commands]);
        let bytes = read_texture(&self.device, &self.queue, &ids, 4);
        (rect, bytemuck::cast_slice(&bytes).to_vec())
    }

    /// The frame drawn last, as a PNG file's bytes.
    pub fn png(&self) -> anyhow::Result<Vec<u8>> {
        png_bytes(&self.read_rgba(), self.width, self.height)
    }
}

/// This thread's CPU time so far, in ms (wall time where the platform has no thread clock): what
/// a frame costs the UI thread, whatever the GPU or other threads do meanwhile.
pub fn thread_cpu_ms() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
    }
    #[cfg(not(target_os = "linux"))]
    {
        super::ms_since_start()
    }
}

/// One frame's UI output, made without touching the GPU.
pub struct UiFrame {
    out: egui::FullOutput,
    prims: Vec<egui::ClippedPrimitive>,
}

/// Runs the UI for one frame of `size` pixels at `time` seconds and tessellates it. Needs no GPU,
/// so the first frame's UI work can overlap the GPU device's creation.
pub fn run_ui(
    ctx: &egui::Context,
    app: &mut ViewerApp,
    size: (u32, u32),
    time: f64,
    events: Vec<egui::Event>,
) -> UiFrame {
    let raw = egui::RawInput {
        screen_rect: Some(Rect::from_min_size(Pos2::ZERO, vec2(size.0 as f32, size.1 as f32))),
        time: Some(time),
        predicted_dt: 1.0 / 60.0,
        events,
        focused: true,
        ..Default::default()
    };
    let mut out = ctx.run_ui(raw, |ui| app.ui(ui));
    let prims = ctx.tessellate(std::mem::take(&mut out.shapes), out.pixels_per_point);
    UiFrame { out, prims }
}

fn color_target(device: &wgpu::Device, width: u32, height: u32, format: wgpu::TextureFormat) -> wgpu::Texture {
    device.create_texture(&wgpu::TextureDescriptor {
        label: Some("memviz target"),
        size: wgpu::Extent3d { width, height, depth_or_array_layers: 1 },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    })
}

/// Copies a texture to a buffer (rows padded to 256 bytes) and returns the unpadded bytes.
fn read_texture(device: &wgpu::Device, queue: &wgpu::Queue, texture: &wgpu::Texture, texel_bytes: u32) -> Vec<u8> {
    let (w, h) = (texture.width(), texture.height());
    let row = w * texel_bytes;
    let padded = row.div_ceil(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT) * wgpu::COPY_BYTES_PER_ROW_ALIGNMENT;
    let buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("memviz readback"),
        size: u64::from(padded * h),
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("memviz readback") });
    encoder.copy_texture_to_buffer(
        wgpu::TexelCopyTextureInfo {
            texture,
            mip_level: 0,
            origin: wgpu::Origin3d::ZERO,
            aspect: wgpu::TextureAspect::All,
        },
        wgpu::TexelCopyBufferInfo {
            buffer: &buffer,
            layout: wgpu::TexelCopyBufferLayout { offset: 0, bytes_per_row: Some(padded), rows_per_image: Some(h) },
        },
        wgpu::Extent3d { width: w, height: h, depth_or_array_layers: 1 },
    );
    queue.submit([encoder.finish()]);
    let slice = buffer.slice(..);
    slice.map_async(wgpu::MapMode::Read, |_| {});
    let _ = device.poll(wgpu::PollType::wait_indefinitely());
    let mut out = Vec::with_capacity((row * h) as usize);
    if let Ok(data) = slice.get_mapped_range() {
        for r in 0..h as usize {
            out.extend_from_slice(&data[r * padded as usize..r * padded as usize + row as usize]);
        }
    }
    out
}

/// RGBA pixels as a PNG file's bytes.
pub fn png_bytes(rgba: &[u8], width: u32, height: u32) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, width, height);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header()?.write_image_data(rgba)?;
    Ok(out)
}
