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
