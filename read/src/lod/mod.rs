//! Level-of-detail data built from a layout: the minimap's min/max pyramid and the tile pyramid
//! of element-id rasters. No I/O; encoding tiles for storage is the caller's business.
//!
//! ```text
//!   level ℓ: one column = 2^ℓ actions          rows: byte 0 (bottom) .. peak (top)
//!   ┌────────┬────────┬──── ─ ─                texel = id of the element covering the
//!   │ tile 0 │ tile 1 │ ...                    row's middle byte at the column's sample
//!   └────────┴────────┴──── ─ ─                action (the action with the highest total
//!     TILE_W columns × TILE_H rows each        in the column, so peaks never vanish)
//! ```

mod column;
pub mod minimap;
pub mod raster;
pub mod tiles;

pub use raster::{Raster, RasterSpec, sample_actions};
pub use tiles::{TileLevel, build_pyramid, top_level};

/// gpt2_small's first device laid out, with its checkpoints: a real trace for the tests.
#[cfg(test)]
fn gpt2_small() -> (crate::layout::Layout, crate::layout::Checkpoints) {
    let snap = crate::fixtures::snapshot("gpt2_small");
    let layout = crate::layout::Layout::build(&snap, snap.device_ids()[0]);
    let cps = crate::layout::Checkpoints::build(layout.view());
    (layout, cps)
}
