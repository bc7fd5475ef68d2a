//! The `.memviz` archive format: a fixed 64-byte [`Header`] followed by one rkyv archive whose
//! root is [`schema::Root`]. This crate is the only place that defines bytes on disk; FORMAT.md
//! beside it documents every section and field.
//!
//! ```text
//!   0        64                                            64 + archive_len
//!   ┌────────┬─────────────────────────────────────────────┬──────────────────────────┐
//!   │ header │ rkyv archive (root object at its very end)  │ block table (version 6+) │
//!   └────────┴─────────────────────────────────────────────┴──────────────────────────┘
//! ```

pub use rkyv;

pub mod hash;
pub mod header;
pub mod schema;
pub mod v1;
pub mod v2;
pub mod v3;
pub mod v4;
pub mod view;

pub use header::{
    BLOCK_LEN, FINGERPRINT_SPAN, FIRST_BLOCKED_VERSION, FORMAT_VERSION, HEADER_LEN, Header, HeaderError, MAGIC,
    OLDEST_READABLE_VERSION, STEP_RULES_VERSION, SourceStamp, block_table, seal,
};

/// Texels per tile row (columns of the timeline).
pub const TILE_W: u32 = 256;
/// Texels per tile column (rows from byte 0 at the bottom to the device's peak at the top).
pub const TILE_H: u32 = 512;
/// Tile texel: no element at this byte.
pub const TEXEL_EMPTY: u32 = u32::MAX;
/// Tile texel: the summarized band of elements too small to draw individually.
pub const TEXEL_AGGREGATED: u32 = u32::MAX - 1;
/// The colour key (`TileKeys`) of a texel that shows no element: empty, or the summarised band.
pub const TEXEL_NO_KEY: u32 = u32::MAX - 1;

/// Each texel's colour key: its element's entry in `table` (each element's stack id: the keys a
/// coarse tile stores, and those the viewer makes of a texture that has none), [`TEXEL_NO_KEY`]
/// where it shows no element.
pub fn texel_keys(texels: &[u32], table: &[u32]) -> Vec<u32> {
    texels.iter().map(|&id| table.get(id as usize).copied().unwrap_or(TEXEL_NO_KEY)).collect()
}
