//! Which bytes of an archive the viewer's first frame reads, so that a browser can fetch those
//! first (Range requests) and draw while the rest arrives.
//!
//! The first frame of the element timeline over the whole trace reads the archive's structure
//! (what opening validates), the tables of names and stacks, the summary, the reserved and pool
//! lines, the coarse tile levels (at most [`COARSE_TILES`] tiles, with their colour keys), the
//! coarse levels of the minimap and the allocator's series, and a short trace's totals. It does not read the per-event and
//! per-element columns, the per-action columns, the checkpoints, the finer tile levels, the
//! allocator's saved states or the series' values: those are the *later* parts, listed here by
//! where they lie. A part under [`SMALL`] bytes (once joined to
//! the parts beside it) stays with the first ones (not worth a request).
//!
//! `tests/viewer/parts.rs` holds this to the viewer: an archive whose later parts are
//! overwritten draws the same settled first frame as the archive itself.

use std::ops::Range;

use memviz_format::HEADER_LEN;
use memviz_format::schema::{ArchivedDevice, ArchivedRoot};
use memviz_format::v2::{ArchivedChunk, ArchivedElements, ArchivedMinMax, ArchivedTileLevel};

use super::Archive;

/// Tile levels of at most this many tiles are the first frame's (the levels that hold colour
/// keys: FORMAT.md §5).
pub const COARSE_TILES: usize = 16;
/// The widest plot a first frame is drawn in, in columns.
pub const WIDEST: usize = 4096;
/// A min/max level of at most this many buckets is read by a first frame: the minimap reads the
/// coarsest level whose buckets are at most a column, which has fewer than four a column.
pub const COARSE_BUCKETS: usize = 4 * WIDEST;
/// Totals of fewer actions than this are read by a first frame: there a minimap column can cover
/// fewer actions than the finest min/max bucket, and the minimap reads the totals themselves.
pub const TOTALS_READ: usize = crate::lod::minimap::FINEST_BUCKET as usize * WIDEST;
/// The first format whose coarse tiles hold their texels' colour keys (FORMAT.md, version 7).
pub const FIRST_KEYED_VERSION: u32 = 7;
/// Parts smaller than this stay with the first frame's bytes.
pub const SMALL: u64 = 64 << 10;

impl Archive {
    /// The byte ranges of the file (header, body and block table) that the first frame of the
    /// element timeline reads, in order and apart. The whole file for an archive of a format
    /// before [`FIRST_KEYED_VERSION`]: its coarse tiles have no colour keys (the viewer makes
    /// them from every element's site), and before version 5 its structure is not the file's.
    pub fn first_frame_ranges(&self) -> Vec<Range<u64>> {
        let bytes = self.source().bytes();
        if self.is_upgraded() || self.format_version() < FIRST_KEYED_VERSION {
            return complement(&[], 0, bytes.len() as u64);
        }
        let body = &bytes[HEADER_LEN..HEADER_LEN + self.header().archive_len as usize];
        let later = later_parts(self.root(), body);
        complement(&later, HEADER_LEN as u64, bytes.len() as u64)
    }
}

/// The parts of `body` (offsets in it) the first frame does not read, in order, apart.
pub fn later_parts(root: &ArchivedRoot, body: &[u8]) -> Vec<Range<u64>> {
    let mut parts = Parts { base: body.as_ptr() as usize, ranges: Vec::new() };
    let e = &root.events;
    for column in [&e.action, &e.addr, &e.size, &e.time_us, &e.stack] {
        parts.chunks(column.as_slice());
    }
    for d in root.devices.iter() {
        parts.device(d);
    }
    let mut ranges = parts.ranges;
    ranges.sort_by_key(|r| r.start);
    // Joined where they touch (one column's chunks lie one after another; two vectors are apart
    // by their alignment's padding at most), then the small ones left with the first.
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end + 16 => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out.retain(|r| r.end - r.start >= SMALL);
    out
}

/// The ranges of `0..len` outside `later` (shifted by `shift`).
fn complement(later: &[Range<u64>], shift: u64, len: u64) -> Vec<Range<u64>> {
    let mut out = Vec::with_capacity(later.len() + 1);
    let mut at = 0;
    for r in later {
        out.push(at..r.start + shift);
        at = r.end + shift;
    }
    out.push(at..len);
    out.retain(|r| !r.is_empty());
    out
}

struct Parts {
    base: usize,
    ranges: Vec<Range<u64>>,
}

impl Parts {
    /// Notes a slice of the body as a later part.
    fn slice<T>(&mut self, s: &[T]) {
        let bytes = std::mem::size_of_val(s) as u64;
        if bytes > 0 {
            let start = (s.as_ptr() as usize - self.base) as u64;
            self.ranges.push(start..start + bytes);
        }
    }

    fn chunks(&mut self, chunks: &[ArchivedChunk]) {
        for c in chunks {
            self.slice(c.data.as_slice());
        }
    }

    fn elements(&mut self, e: &ArchivedElements) {
        self.slice(e.addr.as_slice());
        self.slice(e.size.as_slice());
        self.slice(e.start.as_slice());
        self.slice(e.end.as_slice());
        self.slice(e.origin.as_slice());
        self.slice(e.alloc_event.as_slice());
        self.slice(e.free_event.as_slice());
        self.slice(e.block.as_slice());
        self.slice(e.stack.as_slice());
        self.slice(e.slot.as_slice());
        self.slice(e.annotated.as_slice());
        self.slice(e.annotation.as_slice());
    }

    fn tiles(&mut self, levels: &[ArchivedTileLevel]) {
        for l in levels.iter().filter(|l| l.texel_chunks().len() > COARSE_TILES) {
            self.slice(l.sample.as_slice());
            self.chunks(l.tiles.as_slice());
        }
    }

    fn levels(&mut self, levels: &[ArchivedMinMax]) {
        for l in levels.iter().filter(|l| l.min.len() > COARSE_BUCKETS) {
            self.slice(l.min.as_slice());
            self.slice(l.max.as_slice());
        }
    }

    fn device(&mut self, d: &ArchivedDevice) {
        self.elements(&d.elements);
        self.slice(d.actions.as_slice());
        self.chunks(d.action_time_us.as_slice());
        if d.totals.len() >= TOTALS_READ {
            self.slice(d.totals.as_slice());
        }
        self.levels(d.minimap.as_slice());
        self.slice(d.checkpoints.starts.as_slice());
        self.slice(d.checkpoints.ids.as_slice());
        self.tiles(d.tiles.as_slice());
        let a = &d.allocator;
        self.chunks(a.states.as_slice());
        for s in
            [&a.reserved, &a.allocated, &a.requested, &a.pending_free, &a.unallocated, &a.largest_free, &a.segments]
        {
            self.chunks(s.chunks.as_slice());
            self.levels(s.levels.as_slice());
        }
        let s = &d.segment_timeline;
        self.elements(&s.elements);
        self.slice(s.actions.as_slice());
        self.slice(s.totals.as_slice());
        self.slice(s.checkpoints.starts.as_slice());
        self.slice(s.checkpoints.ids.as_slice());
        self.tiles(s.tiles.as_slice());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_ranges_are_what_the_later_parts_leave() {
        let later = [0..100, 300..500, 600..1000];
        assert_eq!(complement(&later, 64, 1100), vec![0..64, 164..364, 564..664, 1064..1100]);
        assert_eq!(complement(&[], 64, 1000), vec![0..1000]);
    }
}
