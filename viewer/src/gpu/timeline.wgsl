// The timeline: textured quads whose texels are element ids. Colour comes from the id here;
// hover (white) and pin (red) outlines are drawn where the id under a pixel's neighbour differs.

const EMPTY: u32 = 0xffffffffu;
const AGGREGATED: u32 = 0xfffffffeu;
const NONE: u32 = 0xffffffffu;
// The key of a texel that shows no element (the summarized band, or an id past the table).
const NO_ELEMENT_KEY: u32 = 0xfffffffeu;

struct Globals {
    hovered: u32,
    pinned: u32,
    // Whether the outline pass is needed at all (something is hovered or pinned).
    outlines: u32,
    // 0: colour by the texel's key (the element's site, category or segment key), 1: by
    // allocation (its id).
    mode: u32,
    // Elements (unused: the keys come with each texture).
    n_sites: u32,
    n_colours: u32,
    // 1 while a search is on: matches keep their colour, everything else is dimmed.
    search: u32,
    pad1: u32,
};

@group(0) @binding(0) var<uniform> g: Globals;
// RGBA8 palette: one colour per key, or a fixed palette hashed by element id. Tables are
// textures of rows (entry i at (i % width, i / width)): WebGL2 has no storage buffers here.
@group(0) @binding(2) var colours: texture_2d<u32>;
// The search's matches: bit `id` set for a matching element (empty without a search).
@group(0) @binding(3) var marks: texture_2d<u32>;
@group(1) @binding(0) var ids: texture_2d<u32>;
// Each texel's colour key, made from the element → key table when the texture was uploaded.
@group(1) @binding(1) var keys: texture_2d<u32>;

struct Quad {
    // NDC of the quad: x0, y0 (bottom), x1, y1 (top).
    @location(0) rect: vec4<f32>,
    // Texture coordinates in [0, 1] at the same corners (v = 0 is texture row 0: byte 0).
    @location(1) uv: vec4<f32>,
};

struct VsOut {
    @builtin(position) pos: vec4<f32>,
    @location(0) uv: vec2<f32>,
};

@vertex
fn vs(@builtin(vertex_index) vi: u32, q: Quad) -> VsOut {
    let corner = vec2<f32>(f32(vi & 1u), f32((vi >> 1u) & 1u));
    var out: VsOut;
    out.pos = vec4<f32>(mix(q.rect.xy, q.rect.zw, corner), 0.0, 1.0);
    out.uv = mix(q.uv.xy, q.uv.zw, corner);
    return out;
}

fn inside(uv: vec2<f32>) -> bool {
    return uv.x >= 0.0 && uv.y >= 0.0 && uv.x < 1.0 && uv.y < 1.0;
}

fn texel(uv: vec2<f32>) -> vec2<i32> {
    let dims = vec2<i32>(textureDimensions(ids));
    return clamp(vec2<i32>(floor(uv * vec2<f32>(dims))), vec2<i32>(0), dims - vec2<i32>(1));
}

fn id_at(uv: vec2<f32>) -> u32 {
    if (!inside(uv)) {
        return EMPTY;
    }
    return textureLoad(ids, texel(uv), 0).r;
}

fn colour_entry(i: u32) -> u32 {
    let w = textureDimensions(colours).x;
    return textureLoad(colours, vec2<i32>(i32(i % w), i32(i / w)), 0).r;
}

// Word `i` of the marks (0 past their end).
fn marks_word(i: u32) -> u32 {
    let d = textureDimensions(marks);
    if (i >= d.x * d.y) {
        return 0u;
    }
    return textureLoad(marks, vec2<i32>(i32(i % d.x), i32(i / d.x)), 0).r;
}

// An RGBA8 colour's RGB (what unpack4x8unorm gives; WebGL2's GLSL ES 3.00 lacks it).
fn rgb(c: u32) -> vec3<f32> {
    return vec3<f32>(f32(c & 0xffu), f32((c >> 8u) & 0xffu), f32((c >> 16u) & 0xffu)) / 255.0;
}

fn mix32(x: u32) -> u32 {
    var h = x * 0x9e3779b1u;
    h = h ^ (h >> 16u);
    h = h * 0x85ebca6bu;
    return h ^ (h >> 13u);
}

// `at`: the texel of `id` (the key texture has the id texture's size).
fn colour(id: u32, at: vec2<i32>) -> vec3<f32> {
    var key: u32;
    if (g.mode == 0u) {
        key = textureLoad(keys, at, 0).r;
        if (key == NO_ELEMENT_KEY) {
            return vec3<f32>(0.45, 0.45, 0.5);
        }
    } else {
        key = mix32(id) % max(g.n_colours, 1u);
    }
    if (key >= g.n_colours) {
        return vec3<f32>(0.5, 0.5, 0.55);
    }
    return rgb(colour_entry(key));
}

// True when `id` is `target` but a pixel within `r` screen pixels is not: the outline.
fn edge(uv: vec2<f32>, du: vec2<f32>, dv: vec2<f32>, target_id: u32, r: f32) -> bool {
    return id_at(uv + du * r) != target_id || id_at(uv - du * r) != target_id
        || id_at(uv + dv * r) != target_id || id_at(uv - dv * r) != target_id;
}

// A software rasteriser (lavapipe) runs this for every pixel of the plot: the texel is found
// once for both textures, and the derivatives and the hash only where they are used.
@fragment
fn fs_colour(in: VsOut) -> @location(0) vec4<f32> {
    if (!inside(in.uv)) {
        discard;
    }
    let at = texel(in.uv);
    let id = textureLoad(ids, at, 0).r;
    if (id == EMPTY) {
        discard;
    }
    var c = colour(id, at);
    if (g.search != 0u) {
        let hit = id < AGGREGATED && ((marks_word(id >> 5u) >> (id & 31u)) & 1u) == 1u;
        if (hit) {
            c = mix(c, vec3<f32>(1.0, 0.92, 0.25), 0.35);
        } else {
            c = c * 0.22;
        }
    }
    if (g.outlines != 0u) {
        let du = dpdx(in.uv);
        let dv = dpdy(in.uv);
        if (id == g.pinned && edge(in.uv, du, dv, id, 2.0)) {
            c = vec3<f32>(0.95, 0.1, 0.1);
        } else if (id == g.hovered && edge(in.uv, du, dv, id, 1.5)) {
            c = vec3<f32>(1.0, 1.0, 1.0);
        }
    }
    return vec4<f32>(c, 1.0);
}

// The id buffer: what element each pixel shows (EMPTY where none), for tests and picking.
@fragment
fn fs_id(in: VsOut) -> @location(0) u32 {
    return id_at(in.uv);
}
