//! The allocator's figures — reserved, allocated, requested, pending free, segment count, reserved
//! per private pool and the largest free block — kept up to date while events are undone, so the
//! archive's per-action series cost O(log n) an event rather than a walk of the memory map.
//!
//! The largest free block is the largest element of a multiset of hole sizes. A block that
//! appears or disappears at `addr` changes only the hole between its neighbours inside its
//! segment (`[end of the block before, start of the block after)`, clipped to the segment): that
//! one hole is split or re-joined. A segment event re-derives the holes of the whole map (they
//! are rare next to block events). Holes are measured as [`super::State::summary`] measures them.
//!
//! The multiset is a hash map of counts beside the largest size, or beside a max-heap of the
//! sizes when many are live at once (see [`Holes`]): a hole split or joined costs two hash
//! lookups, where a tree of sizes took a descent for each (several a block event: the pass's
//! hottest code after the blocks' own ordered map, [`super::Blocks`], whose neighbours of a
//! changed block bound its hole).

use std::collections::{BTreeMap, BinaryHeap};

use rustc_hash::FxHashMap;

use super::{Block, Segment, State};

/// The allocator's figures after one event.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Sum of segment sizes.
    pub reserved: u64,
    /// Sum of live block sizes (allocated and pending free).
    pub allocated: u64,
    pub requested: u64,
    pub pending_free: u64,
    pub segments: u64,
    /// Reserved bytes per private pool; pools without a segment are absent.
    pub pools: BTreeMap<(i64, i64), u64>,
    /// The sizes of the holes; `None` when not tracked.
    holes: Option<Holes>,
    /// The index of the segment the last block event fell in: the next one usually falls in the
    /// same one, and checking it spares a binary search over the segments.
    last_segment: usize,
    /// Each segment's start address, in the state's order (kept by [`Self::segments_changed`]):
    /// the binary search for a block's segment reads 8 bytes a probe instead of a 48-byte
    /// [`Segment`], so the probes stay in a few cache lines (the search's loads dominated
    /// `block_changed`, itself the pass's hottest function).
    segment_starts: Vec<u64>,
}

/// A multiset of hole sizes that answers its largest: each size's count in a hash map, and the
/// largest size — kept as a plain value while few sizes are live (a training loop's holes come
/// in a few dozen sizes at once, though a pass adds and removes millions of holes), found again
/// among the counts' keys when its last hole goes (rarely, next to the holes). Past [`FEW_SIZES`] sizes that search would cost too much each time, and the
/// largest comes from a max-heap holding every size whose count is above zero (and, lazily,
/// some whose count fell to zero: they leave when they reach the top, so the top is always a
/// live size), rebuilt from the counts past twice the live sizes (plus slack) so it stays linear
/// in the holes.
#[derive(Debug, Clone, Default)]
struct Holes {
    count: FxHashMap<u64, u32>,
    /// The largest live size while at most [`FEW_SIZES`] sizes were ever live at once.
    largest: u64,
    /// Every live size (and some dead ones), once more than [`FEW_SIZES`] were live at once.
    heap: Option<BinaryHeap<u64>>,
}

/// Live sizes up to which the largest is searched for among the counts when its last hole goes.
const FEW_SIZES: usize = 64;

impl Holes {
    fn largest(&self) -> u64 {
        match &self.heap {
            None => self.largest,
            Some(heap) => heap.peek().copied().unwrap_or(0),
        }
    }

    fn add(&mut self, size: u64) {
        let n = self.count.entry(size).or_default();
        *n += 1;
        let new = *n == 1;
        match &mut self.heap {
            None if new && self.count.len() > FEW_SIZES => self.heap = Some(self.count.keys().copied().collect()),
            None => self.largest = self.largest.max(size),
            Some(heap) if new => heap.push(size),
            Some(_) => {}
        }
    }

    /// Removes one hole of `size`; nothing when there is none (a malformed trace's overlapping
    /// blocks can ask for one).
    fn remove(&mut self, size: u64) {
        let Some(n) = self.count.get_mut(&size) else { return };
        *n -= 1;
        if *n > 0 {
            return;
        }
        self.count.remove(&size);
        match &mut self.heap {
            None if size == self.largest => self.largest = self.count.keys().copied().max().unwrap_or(0),
            None => {}
            Some(heap) => {
                while heap.peek().is_some_and(|top| !self.count.contains_key(top)) {
                    heap.pop();
                }
                if heap.len() > 2 * self.count.len() + 1024 {
                    *heap = self.count.keys().copied().collect();
                }
            }
        }
    }
}

impl Figures {
    /// The figures of `st`, derived from scratch; `holes` also tracks the largest free block.
    pub fn of(st: &State, holes: bool) -> Figures {
        let mut f = Figures {
            allocated: st.blocks.values().map(|b| b.size).sum(),
            requested: st.blocks.values().map(|b| b.requested).sum(),
            pending_free: st.blocks.values().filter(|b| b.pending_free).map(|b| b.size).sum(),
            holes: holes.then(Holes::default),
            ..Figures::default()
        };
        f.segments_changed(st);
        f
    }

    /// The largest free block inside one segment (tracked figures only).
    pub fn largest_free(&self) -> Option<u64> {
        Some(self.holes.as_ref()?.largest())
    }

    /// Bytes reserved but not allocated.
    pub fn unallocated(&self) -> u64 {
        self.reserved.saturating_sub(self.allocated)
    }

    /// The block at `addr` changed from `set.old` to `new` (`set.before` and `set.after`: its
    /// neighbours); `segments`: the state's.
    pub(super) fn block_changed(&mut self, segments: &[Segment], addr: u64, set: &super::Set, new: Option<Block>) {
        let old = set.old;
        for (b, sign) in [(old, false), (new, true)] {
            let Some(b) = b else { continue };
            let pending = if b.pending_free { b.size } else { 0 };
            if sign {
                self.allocated += b.size;
                self.requested += b.requested;
                self.pending_free += pending;
            } else {
                self.allocated -= b.size;
                self.requested -= b.requested;
                self.pending_free -= pending;
            }
        }
        if self.holes.is_none() || old.map(|b| b.size) == new.map(|b| b.size) {
            return;
        }
        let Some(seg) = self.segment_at(segments, addr) else { return };
        let (start, end) = (seg.addr, seg.addr + seg.size);
        let lo = set.before.filter(|b| b.addr >= start).map_or(start, |b| (b.addr + b.size).max(start));
        let hi = set.after.filter(|b| b.addr < end).map_or(end, |b| b.addr);
        let split = |b: Option<Block>| match b {
            None => [hi.saturating_sub(lo), 0],
            Some(b) => [b.addr.saturating_sub(lo), hi.saturating_sub(lo.max(b.addr + b.size))],
        };
        for size in split(old) {
            self.remove_hole(size);
        }
        for size in split(new) {
            self.add_hole(size);
        }
    }

    /// The block at `addr` stopped (or started) waiting on another stream.
    pub(super) fn pending_changed(&mut self, b: &Block, was_pending: bool) {
        if was_pending && !b.pending_free {
            self.pending_free -= b.size;
        } else if !was_pending && b.pending_free {
            self.pending_free += b.size;
        }
    }

    /// A segment appeared, went or changed size: the segment figures and holes are re-derived.
    pub(super) fn segments_changed(&mut self, st: &State) {
        self.reserved = st.segments.iter().map(|s| s.size).sum();
        self.segments = st.segments.len() as u64;
        self.segment_starts.clear();
        self.segment_starts.extend(st.segments.iter().map(|s| s.addr));
        self.pools.clear();
        for s in &st.segments {
            if let Some(p) = s.pool {
                *self.pools.entry(p).or_default() += s.size;
            }
        }
        if self.holes.is_some() {
            let mut holes = Holes::default();
            for m in st.segment_maps() {
                for (_, size) in m.holes() {
                    holes.add(size);
                }
            }
            self.holes = Some(holes);
        }
    }

    /// The segment holding `addr` (segments are sorted by address and disjoint).
    fn segment_at<'s>(&mut self, segs: &'s [Segment], addr: u64) -> Option<&'s Segment> {
        let holds = |s: &Segment| s.addr <= addr && addr < s.addr + s.size;
        if let Some(s) = segs.get(self.last_segment).filter(|s| holds(s)) {
            return Some(s);
        }
        let i = self.segment_starts.partition_point(|&a| a <= addr).checked_sub(1)?;
        self.last_segment = i;
        segs.get(i).filter(|s| holds(s))
    }

    fn add_hole(&mut self, size: u64) {
        if let (Some(h), true) = (self.holes.as_mut(), size > 0) {
            h.add(size);
        }
    }

    fn remove_hole(&mut self, size: u64) {
        if let Some(h) = self.holes.as_mut() {
            h.remove(size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest hole is a sorted multiset's largest after any adds and removes — with few
    /// sizes live (the largest searched for among the counts when it goes) and with many (the
    /// heap), and across the move from one to the other.
    #[test]
    fn the_largest_hole_is_the_multisets_largest() {
        for distinct in [5u64, FEW_SIZES as u64, 4 * FEW_SIZES as u64] {
            let mut holes = Holes::default();
            let mut model: BTreeMap<u64, u32> = BTreeMap::new();
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            for step in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let size = 1 + x % distinct;
                // Adds outnumber removes early on, so the multiset grows before it churns.
                if x.is_multiple_of(3) || (step > 2_000 && x.is_multiple_of(2)) {
                    holes.remove(size);
                    if let Some(n) = model.get_mut(&size) {
                        *n -= 1;
                        if *n == 0 {
                            model.remove(&size);
                        }
                    }
                } else {
                    holes.add(size);
                    *model.entry(size).or_default() += 1;
                }
                let want = model.keys().next_back().copied().unwrap_or(0);
                assert_eq!(holes.largest(), want, "{distinct} sizes, step {step}");
            }
            assert_eq!(holes.heap.is_some(), distinct as usize > FEW_SIZES, "{distinct} sizes");
        }
    }
}
