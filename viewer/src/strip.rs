//! Shapes made of a rectangle or two per pixel column — the minimap's envelope and floor, the
//! floor marks over the plot, the unallocated band —, drawn in few triangles.
//!
//! On a CPU rasteriser (lavapipe) every triangle costs set-up and binning whatever its size, and
//! every pixel a triangle covers is shaded: as meshes of two triangles a column, the minimap
//! and the floor marks were a third of every frame (docs/design/10). So a shape that fills a small box (the minimap) is painted on the CPU
//! into one texture and drawn as one quad ([`Strip`]: painted again only when its rectangles
//! change, hashed each frame, so a pan uploads nothing), and a thin one that spans the plot,
//! whose bounding box as a texture would be shaded whole, is one mesh with side by side
//! rectangles at the same rows joined ([`joined_mesh`]). Both fill the pixels whose centres a
//! rectangle holds — what a quad per rectangle fills, up to the rasteriser's sub-pixel rounding
//! of a centre on an edge (a few pixels of a large frame move a row).

use std::hash::{Hash as _, Hasher as _};

use eframe::egui::{self, Color32, ColorImage, Rect, pos2};

/// One shape's texture, kept across frames.
#[derive(Default)]
pub struct Strip {
    /// The hash of what was painted, its texture and where it is drawn.
    painted: Option<(u64, egui::TextureHandle, Rect)>,
}

impl Strip {
    /// Draws `rects` (filled with their colour; a later one over an earlier one replaces it) inside
    /// `clip`. A pixel is filled when its centre is inside a rectangle, as the rasteriser fills a
    /// mesh's, at `ppp` pixels per point.
    pub fn draw(&mut self, painter: &egui::Painter, name: &str, clip: Rect, ppp: f32, rects: &[(Rect, Color32)]) {
        let mut h = rustc_hash::FxHasher::default();
        for v in [clip.min.x, clip.min.y, clip.max.x, clip.max.y, ppp] {
            v.to_bits().hash(&mut h);
        }
        for (r, c) in rects {
            for v in [r.min.x, r.min.y, r.max.x, r.max.y] {
                v.to_bits().hash(&mut h);
            }
            c.to_array().hash(&mut h);
        }
        let hash = h.finish();
        if self.painted.as_ref().is_none_or(|(had, _, _)| *had != hash) {
            self.painted = paint(clip, ppp, rects).map(|(image, at)| {
                let options = egui::TextureOptions::NEAREST;
                let handle = match self.painted.take() {
                    Some((_, mut handle, _)) => {
                        handle.set(image, options);
                        handle
                    }
                    None => painter.ctx().load_texture(name, image, options),
                };
                (hash, handle, at)
            });
        }
        if let Some((_, handle, at)) = &self.painted {
            let uv = Rect::from_min_max(pos2(0.0, 0.0), pos2(1.0, 1.0));
            painter.with_clip_rect(clip).image(handle.id(), *at, uv, Color32::WHITE);
        }
    }
}

/// `rects` as one mesh, each snapped to the pixels whose centres it holds (at `ppp` pixels per
/// point) and side by side ones of one colour and the same rows joined: the pixels of a quad per
/// rectangle, in fewer triangles. For thin shapes that span the plot (the floor marks, the
/// unallocated band), whose bounding box as a texture would be shaded whole.
pub fn joined_mesh(rects: &[(Rect, Color32)], ppp: f32) -> egui::Mesh {
    let snap = |a: f32, b: f32| {
        let (a, b) = pixels(a, b, ppp);
        (a / ppp, b / ppp)
    };
    let mut mesh = egui::Mesh::default();
    let mut open: Option<(Rect, Color32)> = None;
    for &(r, c) in rects {
        let ((x0, x1), (y0, y1)) = (snap(r.min.x, r.max.x), snap(r.min.y, r.max.y));
        if x0 >= x1 || y0 >= y1 {
            continue;
        }
        let r = Rect::from_min_max(pos2(x0, y0), pos2(x1, y1));
        match &mut open {
            Some((o, oc)) if *oc == c && o.min.y == y0 && o.max.y == y1 && o.max.x == x0 => o.max.x = x1,
            _ => {
                if let Some((o, oc)) = open.replace((r, c)) {
                    mesh.add_colored_rect(o, oc);
                }
            }
        }
    }
    if let Some((o, oc)) = open {
        mesh.add_colored_rect(o, oc);
    }
    mesh
}

/// The pixel columns (or rows) whose centres lie in `[a, b)` points, at `ppp` pixels per point:
/// the first and one past the last.
fn pixels(a: f32, b: f32, ppp: f32) -> (f32, f32) {
    ((a * ppp - 0.5).ceil(), (b * ppp - 0.5).ceil())
}

/// Columns `[a, b)` and rows `[a, b)` of pixels, and their colour.
type PixelRect = ((i32, i32), (i32, i32), Color32);

/// The pixels of `rects` over their bounding box inside `clip` (whole pixels), and the box in
/// points; `None` when nothing is filled.
fn paint(clip: Rect, ppp: f32, rects: &[(Rect, Color32)]) -> Option<(ColorImage, Rect)> {
    let span = |a: f32, b: f32| {
        let (a, b) = pixels(a, b, ppp);
        (a.max(i32::MIN as f32) as i32, b.min(i32::MAX as f32) as i32)
    };
    let (cx, cy) = (span(clip.min.x, clip.max.x), span(clip.min.y, clip.max.y));
    let spans: Vec<PixelRect> = rects
        .iter()
        .map(|(r, c)| {
            let (x, y) = (span(r.min.x, r.max.x), span(r.min.y, r.max.y));
            ((x.0.max(cx.0), x.1.min(cx.1)), (y.0.max(cy.0), y.1.min(cy.1)), *c)
        })
        .filter(|(x, y, _)| x.0 < x.1 && y.0 < y.1)
        .collect();
    let x0 = spans.iter().map(|s| s.0.0).min()?;
    let x1 = spans.iter().map(|s| s.0.1).max()?;
    let y0 = spans.iter().map(|s| s.1.0).min()?;
    let y1 = spans.iter().map(|s| s.1.1).max()?;
    let (w, h) = ((x1 - x0) as usize, (y1 - y0) as usize);
    let mut pixels = vec![Color32::TRANSPARENT; w * h];
    for ((a, b), (top, bottom), c) in spans {
        for row in top..bottom {
            let start = (row - y0) as usize * w;
            pixels[start + (a - x0) as usize..start + (b - x0) as usize].fill(c);
        }
    }
    let at = Rect::from_min_max(pos2(x0 as f32, y0 as f32) / ppp, pos2(x1 as f32, y1 as f32) / ppp);
    Some((ColorImage::new([w, h], pixels), at))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Side by side rectangles at the same rows become one quad; the rows are those the
    /// rasteriser fills, so a rectangle ending at 3.4 and one ending at 3.6 differ.
    #[test]
    fn side_by_side_rectangles_at_the_same_rows_are_one_quad() {
        let c = Color32::WHITE;
        let r = |x: f32, y0: f32, y1: f32| (Rect::from_min_max(pos2(x, y0), pos2(x + 1.0, y1)), c);
        // Columns 0-2 fill rows 1..3 (1.2 and 0.9 both start at row 1), column 3 rows 1..4.
        let mesh = joined_mesh(&[r(0.0, 1.2, 3.4), r(1.0, 0.9, 3.3), r(2.0, 1.4, 3.1), r(3.0, 1.2, 3.6)], 1.0);
        assert_eq!(mesh.vertices.len(), 8, "two quads");
        let (min, max) = (mesh.vertices[0].pos, mesh.vertices.iter().take(4).fold(pos2(0.0, 0.0), |m, v| m.max(v.pos)));
        assert_eq!((min, max), (pos2(0.0, 1.0), pos2(3.0, 3.0)));
        // A gap, another colour or an empty rectangle starts a new quad (or none).
        let red = (Rect::from_min_max(pos2(5.0, 1.2), pos2(6.0, 3.4)), Color32::RED);
        let empty = (Rect::from_min_max(pos2(6.0, 1.2), pos2(7.0, 1.3)), c);
        assert_eq!(joined_mesh(&[r(0.0, 1.2, 3.4), r(2.0, 1.2, 3.4), red, empty], 1.0).vertices.len(), 12);
    }

    /// Drawn again with the same rectangles, a strip uploads nothing; changed, it updates its
    /// texture in place.
    #[test]
    fn a_strip_is_painted_again_only_when_it_changes() {
        let ctx = egui::Context::default();
        let mut strip = Strip::default();
        let clip = Rect::from_min_max(pos2(0.0, 0.0), pos2(50.0, 20.0));
        let mut frame = |rects: &[(Rect, Color32)]| {
            let out = ctx.run_ui(egui::RawInput::default(), |ui| {
                let painter = ui.painter_at(clip);
                strip.draw(&painter, "t", clip, 1.0, rects);
            });
            let ours = |id: &egui::TextureId| *id != egui::TextureId::default();
            (out.textures_delta.set.iter().filter(|(id, _)| ours(id)).count(), strip.painted.as_ref().map(|p| p.1.id()))
        };
        let a = [(Rect::from_min_max(pos2(1.0, 1.0), pos2(2.0, 9.0)), Color32::RED)];
        let b = [(Rect::from_min_max(pos2(1.0, 2.0), pos2(2.0, 9.0)), Color32::RED)];
        let (uploads, id) = frame(&a);
        assert_eq!(uploads, 1);
        assert_eq!(frame(&a), (0, id), "unchanged: nothing uploaded");
        assert_eq!(frame(&b), (1, id), "changed: the same texture, set again");
    }

    /// A pixel is filled when its centre is inside the rectangle, as a rasteriser fills a mesh.
    #[test]
    fn rectangles_fill_the_pixels_whose_centres_they_hold() {
        let clip = Rect::from_min_max(pos2(0.0, 0.0), pos2(10.0, 10.0));
        let red = Color32::RED;
        let rects = [
            (Rect::from_min_max(pos2(2.0, 1.4), pos2(3.0, 3.6)), red),
            (Rect::from_min_max(pos2(5.0, 8.0), pos2(6.0, 30.0)), Color32::BLUE),
        ];
        let (image, at) = paint(clip, 1.0, &rects).unwrap();
        // Rows 1 (centre 1.5) to 3 (centre 3.5) of column 2; rows 8 and 9 of column 5, clipped.
        assert_eq!(at, Rect::from_min_max(pos2(2.0, 1.0), pos2(6.0, 10.0)));
        assert_eq!(image.size, [4, 9]);
        let at_px = |x: usize, y: usize| image.pixels[(y - 1) * 4 + (x - 2)];
        assert_eq!([at_px(2, 1), at_px(2, 2), at_px(2, 3)], [red; 3]);
        assert_eq!(at_px(2, 4), Color32::TRANSPARENT);
        assert_eq!([at_px(5, 8), at_px(5, 9), at_px(5, 7)], [Color32::BLUE, Color32::BLUE, Color32::TRANSPARENT]);
        // At two pixels per point the same rectangles cover twice the pixels each way.
        let (image, _) = paint(clip, 2.0, &rects).unwrap();
        assert_eq!(image.size, [8, 17]);
        assert!(paint(clip, 1.0, &[(Rect::from_min_max(pos2(20.0, 0.0), pos2(21.0, 5.0)), red)]).is_none());
    }
}
