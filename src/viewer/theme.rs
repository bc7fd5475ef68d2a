//! Colours and sizes of the viewer, in one place.

use eframe::egui::Color32;

pub const BACKGROUND: Color32 = Color32::from_rgb(24, 26, 30);
pub const GRID: Color32 = Color32::from_rgb(48, 52, 58);
pub const AXIS_TEXT: Color32 = Color32::from_rgb(170, 175, 185);
pub const TOTAL_LINE: Color32 = Color32::from_rgb(120, 190, 255);
pub const MINIMAP_FILL: Color32 = Color32::from_rgb(60, 110, 170);
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
