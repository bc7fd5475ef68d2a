//! Drawing the memory map's segments and blocks, bounded by the points on screen: the segments
//! on screen found by a binary search of the line, each one's blocks by a binary search of its
//! addresses, and whatever lies under one point of the line drawn as one rectangle. A frame draws
//! a few shapes per point of the map however many blocks the state has; hover and pick stay exact
//! since they search the state itself ([`super::memory_map::Geometry::locate`]).

use eframe::egui::{self, Color32, Pos2, Rect, Stroke, pos2};

use super::memory_map::{FREE, Geometry, SEGMENT_EDGE, Shown};
use crate::allocator::{Block, SegmentMap};

/// Draws the segments and blocks on screen, and only those: the segments found by a binary search
/// of the line, each one's blocks by a binary search of its addresses. What is under one point of
/// the line is drawn as one rectangle (in its first block's colour, or the segment edge's for a
/// run of segments), so the shapes a frame draws are bounded by the map's points, not its blocks.
pub fn draw(painter: &egui::Painter, g: &Geometry, s: &Shown, colour_of: &dyn Fn(&Block) -> Color32) {
    let segs = &s.summary.segments;
    let (a, b) = g.on_screen();
    let range = g.segments_in(a, b);
    let mut i = range.start;
    while i < range.end {
        let x0 = g.starts[i];
        if g.end_of(segs, i) - x0 >= 1.0 {
            g.each_piece(x0, g.end_of(segs, i), |r| {
                painter.rect_filled(r, 0.0, FREE);
                painter.rect_stroke(r, 0.0, Stroke::new(1.0, SEGMENT_EDGE), egui::StrokeKind::Inside);
            });
            draw_blocks(painter, g, segs, i, (a, b), colour_of);
            i += 1;
            continue;
        }
        // Segments narrower than a point: those starting before the next point, drawn as one
        // (each would be its 1-point edge).
        let next = x0.floor() + 1.0;
        let mut k = (i + g.starts[i..range.end].partition_point(|&s| s < next)).max(i + 1);
        if k - 1 > i && g.end_of(segs, k - 1) - g.starts[k - 1] >= 1.0 {
            k -= 1;
        }
        g.each_piece(x0, g.end_of(segs, k - 1), fill(painter, SEGMENT_EDGE));
        i = k;
    }
}

/// Draws the blocks of segment `i` that meet `[a, b)` of the line: each block a point wide or
/// more on its own (its rounding waste hatched), narrower ones joined per point.
fn draw_blocks(
    painter: &egui::Painter,
    g: &Geometry,
    segs: &[SegmentMap],
    i: usize,
    (a, b): (f64, f64),
    colour_of: &dyn Fn(&Block) -> Color32,
) {
    let blocks = &segs[i].blocks;
    let (lo, hi) = (g.addr_at(segs, i, a, false), g.addr_at(segs, i, b, true));
    let end = blocks.partition_point(|bl| bl.addr < hi);
    let mut j = blocks.partition_point(|bl| bl.addr + bl.size <= lo).min(end);
    let wide = |bl: &Block| g.along(segs, i, bl.addr + bl.size) - g.along(segs, i, bl.addr) >= 1.0;
    while j < end {
        let block = &blocks[j];
        let colour = colour_of(block);
        let x0 = g.along(segs, i, block.addr);
        if wide(block) {
            let used = block.requested.min(block.size);
            g.each_piece(x0, g.along(segs, i, block.addr + used.max(1)), fill(painter, colour));
            // Rounding waste: the block's bytes past what was requested, hatched.
            if block.size > used {
                let (w0, w1) = (g.along(segs, i, block.addr + used), g.along(segs, i, block.addr + block.size));
                g.each_piece(w0, w1, |r| hatch(painter, r, colour));
            }
            j += 1;
            continue;
        }
        // Blocks narrower than a point: those starting before the next point, drawn as one.
        let next = g.addr_at(segs, i, x0.floor() + 1.0, true);
        let mut k = (j + blocks[j..end].partition_point(|bl| bl.addr < next)).max(j + 1);
        if k - 1 > j && wide(&blocks[k - 1]) {
            k -= 1;
        }
        let last = &blocks[k - 1];
        g.each_piece(x0, g.along(segs, i, last.addr + last.size), fill(painter, colour));
        j = k;
    }
}

/// Fills each rectangle it is given with `colour`.
fn fill(painter: &egui::Painter, colour: Color32) -> impl FnMut(Rect) + '_ {
    move |r| {
        painter.rect_filled(r, 0.0, colour);
    }
}

/// Diagonal hatching over `r` in a darker tone of `colour`.
fn hatch(painter: &egui::Painter, r: Rect, colour: Color32) {
    let dark = Color32::from_rgb(colour.r() / 2, colour.g() / 2, colour.b() / 2);
    painter.rect_filled(r, 0.0, dark);
    let step = 5.0;
    let mut x = r.left() - r.height();
    while x < r.right() {
        let (a, b) = (pos2(x, r.bottom()), pos2(x + r.height(), r.top()));
        let clip = |p: Pos2| pos2(p.x.clamp(r.left(), r.right()), p.y);
        painter.line_segment([clip(a), clip(b)], Stroke::new(1.0, colour));
        x += step;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::allocator::Summary;
    use crate::memory_map::MapView;
    use crate::model::DeviceIdx;

    use crate::memory_map::test_segment as seg;

    /// The shapes of one frame of the map of `segs` (each block in `colour` of it).
    fn drawn(segs: Vec<SegmentMap>, rect: Rect, view: MapView, colour: fn(&Block) -> Color32) -> Vec<egui::Shape> {
        let g = Geometry::new(&segs, rect, view);
        let s = Shown {
            device: DeviceIdx(0),
            event: 0,
            summary: Summary {
                event: 0,
                reserved: 0,
                allocated: 0,
                requested: 0,
                pending_free: 0,
                largest_free: 0,
                segments: segs,
            },
            elements: HashMap::new(),
            largest: None,
        };
        let out = egui::Context::default()
            .run_ui(egui::RawInput::default(), |ui| draw(ui.painter(), &g, &s, &|b: &Block| colour(b)));
        out.shapes.into_iter().map(|c| c.shape).collect()
    }

    #[test]
    fn a_frame_draws_shapes_by_the_point_not_by_the_block() {
        let rect = Rect::from_min_size(pos2(0.0, 0.0), egui::vec2(200.0, 95.0));
        // 100,000 blocks of 64 bytes, then one of 64 MiB: the small ones share the first points.
        let mut blocks: Vec<(u64, u64)> = (0..100_000).map(|k| (k * 64, 64)).collect();
        blocks.push((100_000 * 64, 64 << 20));
        let size = 100_000 * 64 + (64 << 20);
        let red = |b: &Block| if b.size > 64 { Color32::RED } else { Color32::BLUE };
        let shapes = drawn(vec![seg(0, size, &blocks)], rect, MapView::default(), red);
        assert!(shapes.len() <= 4 * 200, "{} shapes for 4 rows of 200 points", shapes.len());
        assert!(filled_in(&shapes, Color32::BLUE) > 0, "the small blocks are drawn");
        assert!(filled_in(&shapes, Color32::RED) >= 4, "the large block keeps its colour on each of its rows");

        // Zoomed in 1,000× onto the middle of the large block: nothing before it is drawn.
        let view = MapView { zoom: 1000.0, origin: 400_000.0 };
        let shapes = drawn(vec![seg(0, size, &blocks)], rect, view, red);
        assert_eq!(filled_in(&shapes, Color32::BLUE), 0, "off-screen blocks are not drawn");
        assert!(!shapes.is_empty() && shapes.len() < 50, "{} shapes", shapes.len());
    }

    fn filled_in(shapes: &[egui::Shape], c: Color32) -> usize {
        shapes.iter().filter(|s| matches!(s, egui::Shape::Rect(r) if r.fill == c)).count()
    }
}
