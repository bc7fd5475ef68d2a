//! Zero-copy views of archived vectors as native slices.
//!
//! The archive is little-endian ([`crate::header::LAYOUT_FLAGS`]), so on a little-endian host an
//! archived `u32_le` has the same bytes as a `u32` and a vector of them can be read in place.

use rkyv::rend::{i64_le, u32_le, u64_le};
use rkyv::vec::ArchivedVec;

const _: () = assert!(cfg!(target_endian = "little"), "memviz archives are read in place on little-endian hosts only");

pub fn u32s(v: &ArchivedVec<u32_le>) -> &[u32] {
    bytemuck::cast_slice(v.as_slice())
}

pub fn u64s(v: &ArchivedVec<u64_le>) -> &[u64] {
    bytemuck::cast_slice(v.as_slice())
}

pub fn i64s(v: &ArchivedVec<i64_le>) -> &[i64] {
    bytemuck::cast_slice(v.as_slice())
}

/// A tile level's chunks (FORMAT.md §5): `tiles` holds the level's `ceil(columns / TILE_W)` texel
/// chunks, followed — since version 7, for the element timeline's levels of at most 16 tiles —
/// by as many chunks of their texels' colour keys, tile `i`'s at `n + i`. Older archives, the
/// segment timeline and finer levels have the texel chunks alone.
impl crate::v2::ArchivedTileLevel {
    /// The level's texel chunks, one per tile, left to right.
    pub fn texel_chunks(&self) -> &[crate::v2::ArchivedChunk] {
        let n = (self.columns.to_native() as usize).div_ceil(crate::TILE_W as usize);
        &self.tiles[..n.min(self.tiles.len())]
    }

    /// The chunks of the texels' colour keys, one per tile, when the level has them.
    pub fn key_chunks(&self) -> Option<&[crate::v2::ArchivedChunk]> {
        let n = self.texel_chunks().len();
        (n > 0 && self.tiles.len() == 2 * n).then(|| &self.tiles[n..])
    }
}
