//! What each colour and line means, under the view that draws it: the element timeline's
//! reserved line, reserved-but-unallocated shade, OOM markers and capacity line; the pools'
//! bands; the segment timeline's colours; the memory map's blocks.

use eframe::egui::{self, Color32, Rect, Sense, Stroke, vec2};

use super::data::Plane;
use super::document::Document;
use super::memory_map::{FREE, LARGEST_HOLE, PENDING, SEGMENT_EDGE};
use super::pools::Pools;
use super::reserved::{OOM, RESERVED_LINE, UNALLOCATED};
use super::theme;
use std::sync::Arc;

/// How a legend entry is drawn.
#[derive(Clone, Copy)]
pub enum Swatch {
    Fill(Color32),
    Line(Color32),
    Outline(Color32),
    /// A fill hatched in a darker tone, as rounding waste is.
    Hatched(Color32),
}

/// One row of entries: a swatch, its name, and what it means on hover.
pub fn row(ui: &mut egui::Ui, entries: &[(Swatch, &str, &str)]) {
    ui.horizontal_wrapped(|ui| {
        for &(swatch, name, meaning) in entries {
            let (rect, response) = ui.allocate_exact_size(vec2(14.0, 10.0), Sense::hover());
            draw(ui.painter(), rect, swatch);
            response.on_hover_text(meaning);
            ui.add(egui::Label::new(egui::RichText::new(name).small()).truncate()).on_hover_text(meaning);
            ui.add_space(8.0);
        }
    });
}

fn draw(painter: &egui::Painter, r: Rect, swatch: Swatch) {
    match swatch {
        Swatch::Fill(c) => {
            painter.rect_filled(r, 0.0, c);
        }
        Swatch::Line(c) => {
            painter.hline(r.x_range(), r.center().y, Stroke::new(2.0, c));
        }
        Swatch::Outline(c) => {
            painter.rect_stroke(r.shrink(1.0), 0.0, Stroke::new(1.5, c), egui::StrokeKind::Inside);
        }
        Swatch::Hatched(c) => {
            painter.rect_filled(r, 0.0, Color32::from_rgb(c.r() / 2, c.g() / 2, c.b() / 2));
            for i in 0..3 {
                let x = r.left() + 4.0 * i as f32;
                painter.line_segment(
                    [egui::pos2(x, r.bottom()), egui::pos2(x + r.height(), r.top())],
                    Stroke::new(1.0, c),
                );
            }
        }
    }
}

/// The legend of the timeline shown: the lines and shades drawn over the element timeline (and
/// the pools' bands in the pools view), or the segment timeline's colours. `pools`: the
/// device's private pools, in the pools view once worked out.
pub fn timeline_ui(ui: &mut egui::Ui, doc: &Document, pools: Option<Arc<Pools>>) {
    if doc.plane == Plane::Segments {
        let key = |k: u32| {
            let [r, g, b, _] = theme::palette(k).to_le_bytes();
            Color32::from_rgb(r, g, b)
        };
        return row(
            ui,
            &[
                (Swatch::Fill(key(0)), "stream 0", "a segment of the default pool on the default stream"),
                (
                    Swatch::Fill(key(7)),
                    "another stream or a private pool: a colour each",
                    "a default-pool segment is coloured by its CUDA stream, a private pool's (CUDA graphs, MemPool) by its pool; hover a segment to see which",
                ),
            ],
        );
    }
    let mut entries = vec![
        (
            Swatch::Line(RESERVED_LINE),
            "reserved",
            "the caching allocator's reserved bytes (its segments), over the allocated ones",
        ),
        (
            Swatch::Fill(opaque(UNALLOCATED)),
            "reserved but unallocated",
            "cached by the allocator but holding no tensor: free blocks inside segments",
        ),
        (Swatch::Fill(OOM), "OOM", "an out-of-memory event (hover it for the verdict, click for the memory map)"),
    ];
    if doc.capacity.is_some() {
        entries.push((Swatch::Line(theme::CAPACITY), "capacity", "the card's memory (--gpu)"));
    }
    let names: Vec<String> =
        pools.iter().flat_map(|p| p.ids.iter().map(|&(a, b)| format!("pool ({a}, {b})"))).collect();
    for (i, name) in names.iter().enumerate() {
        entries.push((
            Swatch::Fill(super::pools::pool_colour(i)),
            name,
            "a private pool's band: the larger of its live tensors and its reserved bytes",
        ));
    }
    row(ui, &entries);
}

/// The memory map's legend.
pub fn memory_map_ui(ui: &mut egui::Ui) {
    row(
        ui,
        &[
            (
                Swatch::Fill(super::categories::colour(crate::model::Category::Activation)),
                "allocated (site colour)",
                "a live block, in its allocation site's colour, as on the timeline",
            ),
            (
                Swatch::Hatched(super::categories::colour(crate::model::Category::Activation)),
                "rounding waste",
                "the block's bytes past what was requested (the allocator rounds sizes up)",
            ),
            (
                Swatch::Fill(PENDING),
                "pending free",
                "freed by the program, waiting for its stream's work to finish before the allocator reuses it",
            ),
            (Swatch::Fill(FREE), "hole", "a free block inside a segment"),
            (
                Swatch::Outline(LARGEST_HOLE),
                "largest hole",
                "the largest free block: the biggest request that fits without a new segment",
            ),
            (
                Swatch::Outline(SEGMENT_EDGE),
                "segment",
                "a segment: one cudaMalloc (or an expandable segment's mapped range)",
            ),
        ],
    );
}

/// A translucent shade as it looks over the background.
fn opaque(c: Color32) -> Color32 {
    let a = f32::from(c.a()) / 255.0;
    let over = |x: u8, bg: u8| (f32::from(x) + f32::from(bg) * (1.0 - a)).min(255.0) as u8;
    let bg = theme::BACKGROUND;
    Color32::from_rgb(over(c.r(), bg.r()), over(c.g(), bg.g()), over(c.b(), bg.b()))
}
