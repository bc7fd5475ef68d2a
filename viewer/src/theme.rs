//! Colours and sizes of the viewer, in one place.

use eframe::egui::{self, Color32};

pub const BACKGROUND: Color32 = Color32::from_rgb(24, 26, 30);

/// The viewer's style: panels are left unfilled, so the frame's clear colour ([`BACKGROUND`])
/// is their background; no frame is filled with it either. A software rasteriser (lavapipe,
/// the browser's SwiftShader) shades every pixel of a fill: the panels' fills covered a fifth of
/// the window a second time on every frame, and the settings view's two fills of the whole
/// window cost more than the timeline's plot.
pub fn apply(ui: &mut egui::Ui) {
    ui.ctx().global_style_mut(|s| s.visuals.panel_fill = Color32::TRANSPARENT);
    // The pass under way took its style before: without this its panels are filled.
    ui.style_mut().visuals.panel_fill = Color32::TRANSPARENT;
}

pub const GRID: Color32 = Color32::from_rgb(48, 52, 58);
pub const AXIS_TEXT: Color32 = Color32::from_rgb(170, 175, 185);
pub const TOTAL_LINE: Color32 = Color32::from_rgb(120, 190, 255);
pub const MINIMAP_FILL: Color32 = Color32::from_rgb(60, 110, 170);
/// The floor (lowest total of a column) at coarse zoom, and under the minimap's peak envelope.
pub const FLOOR: Color32 = Color32::from_rgb(235, 235, 245);
pub const MINIMAP_FLOOR: Color32 = Color32::from_rgb(35, 70, 115);
// Translucent colours are premultiplied: each channel at most alpha.
pub const BRUSH: Color32 = Color32::from_rgba_premultiplied(40, 40, 40, 40);
pub const BRUSH_EDGE: Color32 = Color32::from_rgb(230, 230, 230);
pub const ANNOTATION: Color32 = Color32::from_rgb(230, 200, 90);
pub const ANNOTATION_SPAN: Color32 = Color32::from_rgba_premultiplied(21, 19, 9, 90);
pub const CAPACITY: Color32 = Color32::from_rgb(240, 80, 80);
pub const PEAK: Color32 = Color32::from_rgb(255, 160, 60);
pub const RULER: Color32 = Color32::from_rgb(120, 255, 170);
pub const SELECTION: Color32 = Color32::from_rgba_premultiplied(21, 33, 60, 60);

/// Left margin for byte labels, bottom margin for the x axis, top lane for annotations.
pub const Y_AXIS_WIDTH: f32 = 72.0;
pub const X_AXIS_HEIGHT: f32 = 22.0;
pub const ANNOTATION_LANE: f32 = 18.0;
pub const MINIMAP_HEIGHT: f32 = 56.0;

/// A stable, well-spread colour for a key (stack id or element id), packed RGBA8 (R in the low
/// byte, as WGSL's `unpack4x8unorm` reads it).
pub fn palette(key: u32) -> u32 {
    let mut h = key.wrapping_mul(0x9e37_79b1);
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    let hue = (h & 0xffff) as f32 / 65536.0;
    let sat = 0.45 + 0.35 * ((h >> 16) & 0xff) as f32 / 255.0;
    let val = 0.70 + 0.25 * ((h >> 24) & 0xff) as f32 / 255.0;
    let channel = |n: f32| {
        let k = (n + hue * 6.0) % 6.0;
        val - val * sat * k.min(4.0 - k).clamp(0.0, 1.0)
    };
    let [r, g, b] = [channel(5.0), channel(3.0), channel(1.0)].map(|c| (c * 255.0).round() as u32);
    r | g << 8 | b << 16 | 0xff << 24
}
