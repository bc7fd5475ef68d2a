//! The only place wgpu appears: element-id textures, the timeline pipeline, and the egui paint
//! callback that draws them.
//!
//! Each frame the app hands over a [`TimelinePaint`]: textures to upload (tiles decompressed
//! from the mmap, or rasters made on the fly), and quads that map a texture region onto the
//! screen. Textures are keyed by [`TexKey`]: a tile is uploaded once and drawn for as long as
//! the app's LRU (`viewer::textures`) keeps it; evictions arrive with the paint.

use std::collections::HashMap;
use std::sync::Arc;

use eframe::egui;
use eframe::egui_wgpu::{self, wgpu};
use wgpu::util::DeviceExt as _;

/// Which texture: a tile of the archive's pyramid, or a raster made for the view (`plane`: 0
/// the elements' timeline, 1 the segments').
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TexKey {
    Tile { device: u32, plane: u8, level: u32, index: u32 },
    Raster { device: u32, plane: u8, generation: u64 },
}

/// Element ids for one texture, row 0 = the lowest bytes.
#[derive(Debug, Clone)]
pub struct TexData {
    pub key: TexKey,
    pub width: u32,
    pub height: u32,
    pub texels: Arc<Vec<u32>>,
    /// The texels' colour keys by site — stored in the archive (a tile), or made by the worker
    /// that made the texture (a raster): uploaded as they are while the view colours by site,
    /// so the UI thread never reads the sites for them.
    pub site_keys: Option<Arc<Vec<u32>>>,
}

/// A texture region drawn onto a screen rectangle (egui points).
#[derive(Debug, Clone, Copy)]
pub struct QuadDraw {
    pub key: TexKey,
    /// left, bottom, right, top in points.
    pub screen: [f32; 4],
    /// u0, v0 (bottom), u1, v1 (top).
    pub uv: [f32; 4],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
#[derive(bytemuck::Pod, bytemuck::Zeroable)]
pub struct Globals {
    pub hovered: u32,
    pub pinned: u32,
    /// 1 when something is hovered or pinned (the shader skips outline work otherwise).
    pub outlines: u32,
    /// 0: colour by allocation site, 1: by allocation.
    pub mode: u32,
    pub n_sites: u32,
    pub n_colours: u32,
    /// 1 while a search is on (matches bright, the rest dimmed).
    pub search: u32,
    pub pad: u32,
}

/// Everything the GPU side keeps between frames: the pipelines, and per view (a timeline on
/// screen: one, or two side by side) its globals, colour tables, textures and quads — two views
/// drawn in one frame must not share them, as every `prepare` runs before every `paint`.
pub struct TimelineResources {
    colour_pipeline: wgpu::RenderPipeline,
    id_pipeline: Option<wgpu::RenderPipeline>,
    /// What the id pipeline is made from when it is first wanted.
    shader: wgpu::ShaderModule,
    layout: wgpu::PipelineLayout,
    globals_layout: wgpu::BindGroupLayout,
    texture_layout: wgpu::BindGroupLayout,
    views: HashMap<u32, ViewResources>,
    /// Prepares so far: a view's `last_used`, for dropping the least recently drawn.
    clock: u64,
    /// Texture uploads done so far (for the bench and tests).
    pub uploads: u64,
}

/// Views kept at most; the least recently drawn one beyond goes (a view drawn again re-uploads).
const MAX_VIEWS: usize = 4;

/// What one view on screen keeps.
struct ViewResources {
    globals: wgpu::Buffer,
    globals_group: Option<wgpu::BindGroup>,
    /// Which (device, colour mode) the bound site and colour tables belong to, and which
    /// generation of the search's marks.
    colours_for: Option<((u32, u32), u64)>,
    /// The key table the textures' keys were made from.
    keys_for: Option<(u32, u32)>,
    textures: HashMap<TexKey, GpuTexture>,
    instances: Option<wgpu::Buffer>,
    draws: Vec<TexKey>,
    last_used: u64,
}

struct GpuTexture {
    bind: wgpu::BindGroup,
    ids: wgpu::TextureView,
    /// The ids, to make the keys again when the key table changes.
    texels: Arc<Vec<u32>>,
    /// The keys by site the archive stores for them, if any.
    site_keys: Option<Arc<Vec<u32>>>,
    size: wgpu::Extent3d,
}

/// A texture's colour keys: the keys by site the archive stores for it (`site_keys`) while the
/// view colours by site, else each texel's entry in `table`.
fn keys_texture(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    size: wgpu::Extent3d,
    texels: &[u32],
    site_keys: Option<&Vec<u32>>,
    table: &[u32],
    by_site: bool,
) -> wgpu::TextureView {
    match site_keys.filter(|_| by_site) {
        Some(stored) => u32_texture(device, queue, "memviz keys", size, stored),
        None => u32_texture(device, queue, "memviz keys", size, &memviz_format::texel_keys(texels, table)),
    }
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Instance {
    rect: [f32; 4],
    uv: [f32; 4],
}

impl TimelineResources {
    /// Builds the pipelines for `target` (and the id pipeline writing `R32Uint`, offscreen).
    pub fn new(device: &wgpu::Device, target: wgpu::TextureFormat, with_id_pipeline: bool) -> Self {
        let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("memviz timeline"),
            source: wgpu::ShaderSource::Wgsl(include_str!("timeline.wgsl").into()),
        });
        let globals_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("memviz globals"),
            entries: &[
                wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::FRAGMENT,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                },
                uint_texture_entry(2),
                uint_texture_entry(3),
            ],
        });
        // A texture's element ids and each texel's colour key (its element's site, category or
        // segment key), made when it is uploaded: no table over every element is ever uploaded.
        let texture_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("memviz ids"),
            entries: &[uint_texture_entry(0), uint_texture_entry(1)],
        });
        let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("memviz timeline"),
            bind_group_layouts: &[Some(&globals_layout), Some(&texture_layout)],
            immediate_size: 0,
        });
        let colour_pipeline = render_pipeline(device, &layout, &shader, "fs_colour", target);
        let mut r = TimelineResources {
            colour_pipeline,
            id_pipeline: None,
            shader,
            layout,
            globals_layout,
            texture_layout,
            views: HashMap::new(),
            clock: 0,
            uploads: 0,
        };
        if with_id_pipeline {
            r.make_id_pipeline(device);
        }
        r
    }

    /// Builds the id pipeline ([`draw_ids`] needs it) if it is not built yet: a page builds it
    /// only when a test first reads its id buffer, so a page's start never compiles it.
    pub fn make_id_pipeline(&mut self, device: &wgpu::Device) {
        if self.id_pipeline.is_none() {
            let format = wgpu::TextureFormat::R32Uint;
            self.id_pipeline = Some(render_pipeline(device, &self.layout, &self.shader, "fs_id", format));
        }
    }

    /// View `slot`'s resources, made on its first use (dropping the least recently drawn view
    /// past [`MAX_VIEWS`]).
    fn view(&mut self, device: &wgpu::Device, slot: u32) -> &mut ViewResources {
        self.clock += 1;
        if !self.views.contains_key(&slot) && self.views.len() >= MAX_VIEWS {
            let oldest = self.views.iter().min_by_key(|(_, v)| v.last_used).map(|(&k, _)| k);
            if let Some(k) = oldest {
                self.views.remove(&k);
            }
        }
        let clock = self.clock;
        let v = self.views.entry(slot).or_insert_with(|| ViewResources {
            globals: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("memviz globals"),
                size: std::mem::size_of::<Globals>() as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            globals_group: None,
            colours_for: None,
            keys_for: None,
            textures: HashMap::new(),
            instances: None,
            draws: Vec::new(),
            last_used: clock,
        });
        v.last_used = clock;
        v
    }

    /// One frame of view `paint.slot`: its colour tables, evictions, uploads and quads.
    pub fn prepare_view(&mut self, device: &wgpu::Device, queue: &wgpu::Queue, paint: &TimelinePaint) {
        let (globals_layout, texture_layout) = (self.globals_layout.clone(), self.texture_layout.clone());
        let v = self.view(device, paint.slot);
        v.set_colours(device, queue, &globals_layout, paint);
        for k in &paint.evict {
            v.textures.remove(k);
        }
        let table: &[u32] = (*paint.sites).as_ref();
        if v.keys_for != Some(paint.colours_for) {
            v.rekey(device, queue, &texture_layout, table, paint.by_site);
            v.keys_for = Some(paint.colours_for);
        }
        for t in &paint.uploads {
            v.upload(device, queue, &texture_layout, t, table, paint.by_site);
        }
        v.prepare(device, queue, paint.clip, paint);
        self.uploads += paint.uploads.len() as u64;
    }

    /// Draws view `slot`'s prepared quads, in colour or (offscreen) as raw ids.
    pub fn paint(&self, pass: &mut wgpu::RenderPass<'_>, slot: u32, ids: bool) {
        let Some(v) = self.views.get(&slot) else { return };
        let pipeline = if ids { self.id_pipeline.as_ref().expect("id pipeline built") } else { &self.colour_pipeline };
        v.paint(pass, pipeline);
    }
}

/// An `R32Uint` texture holding `texels`.
fn u32_texture(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    label: &str,
    size: wgpu::Extent3d,
    texels: &[u32],
) -> wgpu::TextureView {
    let texture = device.create_texture(&wgpu::TextureDescriptor {
        label: Some(label),
        size,
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::R32Uint,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    });
    queue.write_texture(
        wgpu::TexelCopyTextureInfo {
            texture: &texture,
            mip_level: 0,
            origin: wgpu::Origin3d::ZERO,
            aspect: wgpu::TextureAspect::All,
        },
        bytemuck::cast_slice(texels),
        wgpu::TexelCopyBufferLayout { offset: 0, bytes_per_row: Some(4 * size.width), rows_per_image: None },
        size,
    );
    texture.create_view(&wgpu::TextureViewDescriptor::default())
}

fn texture_group(
    device: &wgpu::Device,
    layout: &wgpu::BindGroupLayout,
    ids: &wgpu::TextureView,
    keys: &wgpu::TextureView,
) -> wgpu::BindGroup {
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("memviz ids"),
        layout,
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: wgpu::BindingResource::TextureView(ids) },
            wgpu::BindGroupEntry { binding: 1, resource: wgpu::BindingResource::TextureView(keys) },
        ],
    })
}

/// The device limits the viewer asks for: wgpu's defaults (WebGL2's on GL), with the largest
/// storage buffers the adapter allows (the search marks hold a bit per element).
pub fn required_limits(adapter: &wgpu::Adapter, base: wgpu::Limits) -> wgpu::Limits {
    let have = adapter.limits();
    wgpu::Limits {
        max_storage_buffer_binding_size: have.max_storage_buffer_binding_size.max(base.max_storage_buffer_binding_size),
        max_buffer_size: have.max_buffer_size.max(base.max_buffer_size),
        ..base
    }
    .using_resolution(have)
}

impl ViewResources {
    /// Binds the paint's palette and search marks, when they changed (identified by device,
    /// mode and the marks' generation).
    fn set_colours(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        layout: &wgpu::BindGroupLayout,
        paint: &TimelinePaint,
    ) {
        let which = (paint.colours_for, paint.marks.0);
        let (colours, marks): (&[u32], &[u32]) = (&paint.colours, &paint.marks.1);
        if self.colours_for == Some(which) {
            return;
        }
        let (colours, marks) = (
            table_texture(device, queue, "memviz colours", colours),
            table_texture(device, queue, "memviz marks", marks),
        );
        self.globals_group = Some(device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("memviz globals"),
            layout,
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: self.globals.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 2, resource: wgpu::BindingResource::TextureView(&colours) },
                wgpu::BindGroupEntry { binding: 3, resource: wgpu::BindingResource::TextureView(&marks) },
            ],
        }));
        self.colours_for = Some(which);
    }

    /// Uploads a texture (replacing one with the same key) and the colour keys of its texels.
    fn upload(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        layout: &wgpu::BindGroupLayout,
        data: &TexData,
        table: &[u32],
        by_site: bool,
    ) {
        let size = wgpu::Extent3d { width: data.width, height: data.height, depth_or_array_layers: 1 };
        let ids = u32_texture(device, queue, "memviz ids", size, &data.texels);
        let keys = keys_texture(device, queue, size, &data.texels, data.site_keys.as_deref(), table, by_site);
        let bind = texture_group(device, layout, &ids, &keys);
        let (texels, site_keys) = (Arc::clone(&data.texels), data.site_keys.clone());
        self.textures.insert(data.key, GpuTexture { bind, ids, texels, site_keys, size });
    }

    /// Makes every texture's keys again from `table` (the colouring changed).
    fn rekey(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        layout: &wgpu::BindGroupLayout,
        table: &[u32],
        by_site: bool,
    ) {
        for t in self.textures.values_mut() {
            let keys = keys_texture(device, queue, t.size, &t.texels, t.site_keys.as_deref(), table, by_site);
            t.bind = texture_group(device, layout, &t.ids, &keys);
        }
    }

    /// Records this frame's quads (in NDC of `clip`, the callback rectangle).
    fn prepare(&mut self, device: &wgpu::Device, queue: &wgpu::Queue, clip: egui::Rect, paint: &TimelinePaint) {
        queue.write_buffer(&self.globals, 0, bytemuck::bytes_of(&paint.globals));
        let ndc_x = |x: f32| (x - clip.left()) / clip.width() * 2.0 - 1.0;
        let ndc_y = |y: f32| 1.0 - (y - clip.top()) / clip.height() * 2.0;
        let mut instances = Vec::with_capacity(paint.quads.len());
        self.draws.clear();
        for q in &paint.quads {
            if self.textures.contains_key(&q.key) {
                instances.push(Instance {
                    rect: [ndc_x(q.screen[0]), ndc_y(q.screen[1]), ndc_x(q.screen[2]), ndc_y(q.screen[3])],
                    uv: q.uv,
                });
                self.draws.push(q.key);
            }
        }
        self.instances = (!instances.is_empty()).then(|| {
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("memviz quads"),
                contents: bytemuck::cast_slice(&instances),
                usage: wgpu::BufferUsages::VERTEX,
            })
        });
    }

    fn paint(&self, pass: &mut wgpu::RenderPass<'_>, pipeline: &wgpu::RenderPipeline) {
        let (Some(instances), Some(globals)) = (&self.instances, &self.globals_group) else { return };
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, globals, &[]);
        pass.set_vertex_buffer(0, instances.slice(..));
        for (i, key) in self.draws.iter().enumerate() {
            if let Some(t) = self.textures.get(key) {
                pass.set_bind_group(1, &t.bind, &[]);
                pass.draw(0..4, i as u32..i as u32 + 1);
            }
        }
    }
}

/// The timeline's pipeline with fragment entry point `entry`, writing `format`.
fn render_pipeline(
    device: &wgpu::Device,
    layout: &wgpu::PipelineLayout,
    shader: &wgpu::ShaderModule,
    entry: &str,
    format: wgpu::TextureFormat,
) -> wgpu::RenderPipeline {
    device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some(entry),
        layout: Some(layout),
        vertex: wgpu::VertexState {
            module: shader,
            entry_point: Some("vs"),
            compilation_options: Default::default(),
            buffers: &[Some(wgpu::VertexBufferLayout {
                array_stride: std::mem::size_of::<Instance>() as u64,
                step_mode: wgpu::VertexStepMode::Instance,
                attributes: &wgpu::vertex_attr_array![0 => Float32x4, 1 => Float32x4],
            })],
        },
        fragment: Some(wgpu::FragmentState {
            module: shader,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            targets: &[Some(wgpu::ColorTargetState { format, blend: None, write_mask: wgpu::ColorWrites::ALL })],
        }),
        primitive: wgpu::PrimitiveState { topology: wgpu::PrimitiveTopology::TriangleStrip, ..Default::default() },
        depth_stencil: None,
        multisample: wgpu::MultisampleState::default(),
        multiview_mask: None,
        cache: None,
    })
}

/// Draws view `slot`'s prepared quads as raw element ids (the id pipeline) into a new `R32Uint`
/// texture of `size` pixels, inside `viewport` (the plot, in pixels), [`EMPTY`](crate::lod::raster::EMPTY)
/// elsewhere: the id buffer tests read back, natively and in a browser. The texture can be copied
/// from; the commands are for the caller to submit.
pub fn draw_ids(
    device: &wgpu::Device,
    resources: &TimelineResources,
    slot: u32,
    size: (u32, u32),
    viewport: egui::Rect,
) -> (wgpu::Texture, wgpu::CommandBuffer) {
    let ids = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("memviz ids"),
        size: wgpu::Extent3d { width: size.0.max(1), height: size.1.max(1), depth_or_array_layers: 1 },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::R32Uint,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("memviz ids") });
    {
        let view = ids.create_view(&wgpu::TextureViewDescriptor::default());
        let empty = wgpu::Color { r: f64::from(crate::lod::raster::EMPTY), g: 0.0, b: 0.0, a: 0.0 };
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("memviz ids"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: &view,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations { load: wgpu::LoadOp::Clear(empty), store: wgpu::StoreOp::Store },
            })],
            depth_stencil_attachment: None,
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        });
        pass.set_viewport(viewport.left(), viewport.top(), viewport.width(), viewport.height(), 0.0, 1.0);
        resources.paint(&mut pass, slot, true);
    }
    (ids, encoder.finish())
}

/// A `R32Uint` texture the fragment shader reads: a texture's ids and keys, and the tables (the
/// palette, the search's marks) — WebGL2 has no storage buffers in fragment shaders, and a
/// texture reads the same on every backend.
fn uint_texture_entry(binding: u32) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::FRAGMENT,
        ty: wgpu::BindingType::Texture {
            sample_type: wgpu::TextureSampleType::Uint,
            view_dimension: wgpu::TextureViewDimension::D2,
            multisampled: false,
        },
        count: None,
    }
}

/// A table's row length as a texture: entry `i` is texel `(i % TABLE_W, i / TABLE_W)`. WebGL2
/// promises 2D textures of 2,048 texels a side at least.
const TABLE_W: u32 = 2048;

/// `data` as a texture of rows of [`TABLE_W`] (the last one padded with zeros; at least one
/// texel).
fn table_texture(device: &wgpu::Device, queue: &wgpu::Queue, label: &str, data: &[u32]) -> wgpu::TextureView {
    let width = (data.len() as u32).clamp(1, TABLE_W);
    let height = (data.len() as u32).div_ceil(width).max(1);
    let mut texels = data.to_vec();
    texels.resize((width * height) as usize, 0);
    let size = wgpu::Extent3d { width, height, depth_or_array_layers: 1 };
    u32_texture(device, queue, label, size, &texels)
}

/// One frame's timeline drawing, handed to egui as a paint callback.
pub struct TimelinePaint {
    /// Which view on screen (`Timeline::slot`): its resources are its own.
    pub slot: u32,
    pub evict: Vec<TexKey>,
    /// (device, colour mode) of `sites` and `colours`, to make keys and upload the palette only
    /// when they change.
    pub colours_for: (u32, u32),
    /// Each element's colour key (site, category or segment key), read in place: the keys of
    /// each texture's texels are made from it when the texture is uploaded.
    pub sites: Arc<dyn AsRef<[u32]> + Send + Sync>,
    /// `sites` is each element's stack id (the element timeline coloured by site): a texture's
    /// stored keys ([`TexData::site_keys`]) are then its texels' keys.
    pub by_site: bool,
    pub colours: Arc<Vec<u32>>,
    /// The search's marks (one bit per element) and their generation (0: no search).
    pub marks: (u64, Arc<Vec<u32>>),
    pub uploads: Vec<TexData>,
    pub quads: Vec<QuadDraw>,
    pub globals: Globals,
    pub clip: egui::Rect,
}

impl egui_wgpu::CallbackTrait for TimelinePaint {
    fn prepare(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        _screen: &egui_wgpu::ScreenDescriptor,
        _encoder: &mut wgpu::CommandEncoder,
        resources: &mut egui_wgpu::CallbackResources,
    ) -> Vec<wgpu::CommandBuffer> {
        if let Some(r) = resources.get_mut::<TimelineResources>() {
            r.prepare_view(device, queue, self);
        }
        Vec::new()
    }

    fn paint(
        &self,
        _info: egui::PaintCallbackInfo,
        pass: &mut wgpu::RenderPass<'static>,
        resources: &egui_wgpu::CallbackResources,
    ) {
        if let Some(r) = resources.get::<TimelineResources>() {
            r.paint(pass, self.slot, false);
        }
    }
}
