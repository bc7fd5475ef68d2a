//! The caching allocator's state — segments and their blocks — after any raw trace event of a
//! device. Pure: no I/O.
//!
//! Semantics are `../shared/tools/allocator_oracle.py`'s (PyTorch MemoryViz's *Allocator State
//! History*, with its data-losing quirks fixed). The dump is the state after the last event;
//! the state after event `i` is found by undoing the events after it, last first:
//!
//! ```text
//!   alloc           → remove its block          free_completed → re-add it, pending
//!   free_requested  → no longer pending         free (merged)  → re-add it, not pending
//!   segment_alloc   → remove the segment        segment_free   → re-add it
//!   segment_map     → cut [addr, addr+size) out of its segment
//!   segment_unmap   → re-add the range, merged with address-contiguous neighbours of its stream
//!   oom / snapshot / annotate / unknown → nothing
//! ```
//!
//! A re-added block's size and requested size are the event's size (the trace has no other).
//! Its figures are PyTorch's own: at a real OOM, `allocated` and `reserved − allocated` are the
//! "allocated by PyTorch" and "reserved by PyTorch but unallocated" of torch's message.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::model::{Action, BlockState, DeviceId, Snapshot};

/// A segment: memory reserved from CUDA by the caching allocator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment {
    pub addr: u64,
    pub size: u64,
    pub stream: u64,
    /// The private pool (`segment_pool_id`), `None` for the default pool `(0, 0)`.
    pub pool: Option<(i64, i64)>,
}

/// A block handed out to a tensor (allocated, or freed but pending on another stream).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Block {
    pub addr: u64,
    pub size: u64,
    pub requested: u64,
    pub pending_free: bool,
}

/// The allocator's state at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// Sorted by address, disjoint.
    pub segments: Vec<Segment>,
    /// By address.
    pub blocks: BTreeMap<u64, Block>,
}

fn pool(p: Option<(i64, i64)>) -> Option<(i64, i64)> {
    p.filter(|&p| p != (0, 0))
}

impl State {
    /// The state the dump describes: its segments and their allocated and pending-free blocks.
    pub fn at_dump(snap: &Snapshot, device: DeviceId) -> State {
        let mut st = State::default();
        for s in snap.device_segments(device) {
            st.segments.push(Segment { addr: s.address, size: s.total_size, stream: s.stream, pool: pool(s.pool_id) });
            for b in snap.segment_blocks(s) {
                let pending_free = match b.state {
                    BlockState::ActiveAllocated => false,
                    BlockState::ActivePendingFree => true,
                    _ => continue,
                };
                st.blocks.insert(
                    b.address,
                    Block { addr: b.address, size: b.size, requested: b.requested_size, pending_free },
                );
            }
        }
        st.segments.sort_by_key(|s| s.addr);
        st
    }

    /// Undoes event `e` (an absolute index into the snapshot's events).
    pub fn undo(&mut self, snap: &Snapshot, e: usize) {
        let ev = &snap.events;
        let (addr, size) = (ev.addr[e], ev.size[e]);
        match ev.action[e] {
            Action::Alloc => {
                self.blocks.remove(&addr);
            }
            Action::FreeCompleted => {
                self.blocks.insert(addr, Block { addr, size, requested: size, pending_free: true });
            }
            Action::Free => {
                self.blocks.insert(addr, Block { addr, size, requested: size, pending_free: false });
            }
            Action::FreeRequested => {
                if let Some(b) = self.blocks.get_mut(&addr) {
                    b.pending_free = false;
                }
            }
            a @ (Action::SegmentFree | Action::SegmentUnmap) => {
                let pool_id = pool(ev.pool_id.binary_search_by_key(&(e as u32), |p| p.0).ok().map(|j| ev.pool_id[j].1));
                let seg = Segment { addr, size, stream: ev.stream.get(e as u32), pool: pool_id };
                self.insert_segment(seg, a == Action::SegmentUnmap);
            }
            Action::SegmentAlloc => {
                if let Some(k) = self.segments.iter().position(|s| s.addr == addr) {
                    self.segments.remove(k);
                }
            }
            Action::SegmentMap => self.cut(addr, size),
            _ => {}
        }
    }

    fn insert_segment(&mut self, seg: Segment, merge: bool) {
        let i = self.segments.partition_point(|s| s.addr <= seg.addr);
        self.segments.insert(i, seg);
        if !merge {
            return;
        }
        let segs = &mut self.segments;
        if i + 1 < segs.len() && segs[i].addr + segs[i].size == segs[i + 1].addr && segs[i].stream == segs[i + 1].stream
        {
            segs[i].size += segs[i + 1].size;
            segs.remove(i + 1);
        }
        if i > 0 && segs[i - 1].addr + segs[i - 1].size == segs[i].addr && segs[i - 1].stream == segs[i].stream {
            segs[i - 1].size += segs[i].size;
            segs.remove(i);
        }
    }

    /// Removes `[addr, addr + size)` from the segment holding it (undoing a `segment_map`).
    fn cut(&mut self, addr: u64, size: u64) {
        let end = addr + size;
        let Some(k) = self.segments.iter().position(|s| s.addr <= addr && end <= s.addr + s.size) else { return };
        let s = self.segments[k].clone();
        let s_end = s.addr + s.size;
        if s.addr == addr {
            self.segments[k].addr += size;
            self.segments[k].size -= size;
            if self.segments[k].size == 0 {
                self.segments.remove(k);
            }
        } else if s_end == end {
            self.segments[k].size -= size;
        } else {
            self.segments[k].size = addr - s.addr;
            self.segments.insert(k + 1, Segment { addr: end, size: s_end - end, ..s });
        }
    }

    /// The totals and the memory map, segment by segment.
    pub fn summary(&self, event: i64) -> Summary {
        let blocks: Vec<Block> = self.blocks.values().copied().collect();
        let mut segments = Vec::with_capacity(self.segments.len());
        let (mut largest_free, mut j) = (0u64, 0usize);
        for s in &self.segments {
            let s_end = s.addr + s.size;
            while j < blocks.len() && blocks[j].addr < s.addr {
                j += 1;
            }
            let mut k = j;
            let mut cursor = s.addr;
            while k < blocks.len() && blocks[k].addr < s_end {
                let b = blocks[k];
                largest_free = largest_free.max(b.addr.saturating_sub(cursor));
                cursor = cursor.max(b.addr + b.size);
                k += 1;
            }
            largest_free = largest_free.max(s_end.saturating_sub(cursor));
            segments.push(SegmentMap { segment: s.clone(), blocks: blocks[j..k].to_vec() });
        }
        Summary {
            event,
            reserved: self.segments.iter().map(|s| s.size).sum(),
            allocated: blocks.iter().map(|b| b.size).sum(),
            requested: blocks.iter().map(|b| b.requested).sum(),
            pending_free: blocks.iter().filter(|b| b.pending_free).map(|b| b.size).sum(),
            largest_free,
            segments,
        }
    }
}

/// One segment with the blocks inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentMap {
    pub segment: Segment,
    pub blocks: Vec<Block>,
}

impl SegmentMap {
    /// The free holes of the segment, `(addr, size)`, in address order.
    pub fn holes(&self) -> Vec<(u64, u64)> {
        let s = &self.segment;
        let mut out = Vec::new();
        let mut cursor = s.addr;
        for b in &self.blocks {
            if b.addr > cursor {
                out.push((cursor, b.addr - cursor));
            }
            cursor = cursor.max(b.addr + b.size);
        }
        if s.addr + s.size > cursor {
            out.push((cursor, s.addr + s.size - cursor));
        }
        out
    }
}

/// The allocator's totals after one event, and its memory map.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Raw trace event index within the device (−1: before the first event).
    pub event: i64,
    /// Sum of segment sizes.
    pub reserved: u64,
    /// Sum of live block sizes (what torch calls allocated).
    pub allocated: u64,
    /// Sum of requested sizes (`allocated − requested` is rounding waste).
    pub requested: u64,
    /// Bytes of blocks freed but waiting on another stream.
    pub pending_free: u64,
    /// The largest gap inside any one segment.
    pub largest_free: u64,
    pub segments: Vec<SegmentMap>,
}

impl Summary {
    /// Free bytes inside segments.
    pub fn free(&self) -> u64 {
        self.reserved.saturating_sub(self.allocated)
    }

    /// 1 − largest free block / free bytes (0 when nothing is free).
    pub fn fragmentation(&self) -> f64 {
        let free = self.free();
        if free == 0 { 0.0 } else { 1.0 - self.largest_free as f64 / free as f64 }
    }
}

/// An `oom` event and the state just before it.
#[derive(Debug, Clone, PartialEq)]
pub struct OomState {
    /// Raw trace event index within the device.
    pub event: i64,
    pub requested: u64,
    pub device_free: Option<u64>,
    pub before: Summary,
}

/// The states after the events `wanted` (device-relative; −1 = before the first), plus after the
/// last event and just before every `oom`; one backward pass over the trace.
pub fn states(snap: &Snapshot, device: DeviceId, wanted: &BTreeSet<i64>) -> (Vec<Summary>, Vec<OomState>) {
    let trace = snap.trace(device);
    let (first, n) = (trace.start, trace.len() as i64);
    let ev = &snap.events;
    let ooms: Vec<i64> = (0..n).filter(|&i| ev.action[first + i as usize] == Action::Oom).collect();
    let mut wanted: BTreeSet<i64> = wanted.iter().copied().filter(|&i| (-1..n).contains(&i)).collect();
    wanted.extend(ooms.iter().map(|&i| i - 1));
    wanted.insert(n - 1);
    let mut st = State::at_dump(snap, device);
    let mut found: BTreeMap<i64, Summary> = BTreeMap::new();
    if wanted.contains(&(n - 1)) {
        found.insert(n - 1, st.summary(n - 1));
    }
    for i in (0..n).rev() {
        st.undo(snap, first + i as usize);
        if wanted.contains(&(i - 1)) {
            found.insert(i - 1, st.summary(i - 1));
        }
    }
    let oom_states = ooms
        .iter()
        .map(|&i| {
            let e = first + i as usize;
            OomState {
                event: i,
                requested: ev.size[e],
                device_free: ev.device_free_of(e as u32),
                before: found[&(i - 1)].clone(),
            }
        })
        .collect();
    (found.into_values().collect(), oom_states)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(segs: &[(u64, u64)], blocks: &[(u64, u64)]) -> Summary {
        let mut st = State {
            segments: segs.iter().map(|&(addr, size)| Segment { addr, size, stream: 0, pool: None }).collect(),
            ..State::default()
        };
        for &(addr, size) in blocks {
            st.blocks.insert(addr, Block { addr, size, requested: size, pending_free: false });
        }
        st.summary(0)
    }

    #[test]
    fn largest_hole_and_fragmentation() {
        // Two segments of 100: blocks leave holes of 10, 30 and 60 bytes.
        let s = map(&[(0, 100), (1000, 100)], &[(10, 60), (1000, 40)]);
        assert_eq!((s.reserved, s.allocated, s.largest_free), (200, 100, 60));
        assert_eq!(s.segments[0].holes(), [(0, 10), (70, 30)]);
        assert_eq!(s.segments[1].holes(), [(1040, 60)]);
        assert!((s.fragmentation() - (1.0 - 60.0 / 100.0)).abs() < 1e-12);
    }

    #[test]
    fn unmapping_merges_with_neighbours_of_its_stream() {
        let mut st =
            State { segments: vec![Segment { addr: 0, size: 100, stream: 0, pool: None }], ..State::default() };
        st.insert_segment(Segment { addr: 100, size: 50, stream: 0, pool: None }, true);
        assert_eq!(st.segments.len(), 1);
        assert_eq!(st.segments[0].size, 150);
        st.insert_segment(Segment { addr: 150, size: 50, stream: 7, pool: None }, true);
        assert_eq!(st.segments.len(), 2, "another stream stays apart");
        st.cut(40, 20);
        let spans: Vec<(u64, u64)> = st.segments.iter().map(|s| (s.addr, s.size)).collect();
        assert_eq!(spans, [(0, 40), (60, 90), (150, 50)]);
    }
}
