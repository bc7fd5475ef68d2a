//! The allocator's state after one event: segments, their blocks, undoing one event, and the
//! summaries (reserved, allocated, holes, fragmentation) answers read.

use serde::Serialize;

use crate::model::{Action, BlockState, DeviceId, Events, Snapshot};

use super::{Blocks, Figures};

/// A segment: memory reserved from CUDA by the caching allocator.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
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
    pub blocks: Blocks,
}

/// The event columns an undo reads: the in-memory model's, or an archive's decompressed chunk by
/// chunk. `e` is an absolute event index.
pub trait EventColumns {
    fn action(&self, e: usize) -> Action;
    fn addr(&self, e: usize) -> u64;
    fn size(&self, e: usize) -> u64;
    fn stream(&self, e: usize) -> u64;
    fn pool(&self, e: usize) -> Option<(i64, i64)>;
    /// The action, address and size of event `e`: what every undo reads, in one call through a
    /// `dyn EventColumns` instead of three.
    fn block_fields(&self, e: usize) -> (Action, u64, u64) {
        (self.action(e), self.addr(e), self.size(e))
    }
}

/// Columns lent out read as their owner does.
impl<C: EventColumns + ?Sized> EventColumns for &C {
    fn action(&self, e: usize) -> Action {
        (**self).action(e)
    }
    fn addr(&self, e: usize) -> u64 {
        (**self).addr(e)
    }
    fn size(&self, e: usize) -> u64 {
        (**self).size(e)
    }
    fn stream(&self, e: usize) -> u64 {
        (**self).stream(e)
    }
    fn pool(&self, e: usize) -> Option<(i64, i64)> {
        (**self).pool(e)
    }
    fn block_fields(&self, e: usize) -> (Action, u64, u64) {
        (**self).block_fields(e)
    }
}

impl EventColumns for Events {
    fn action(&self, e: usize) -> Action {
        self.action[e]
    }
    fn addr(&self, e: usize) -> u64 {
        self.addr[e]
    }
    fn size(&self, e: usize) -> u64 {
        self.size[e]
    }
    fn stream(&self, e: usize) -> u64 {
        self.stream.get(e as u32)
    }
    fn pool(&self, e: usize) -> Option<(i64, i64)> {
        self.pool_id.binary_search_by_key(&(e as u32), |p| p.0).ok().map(|j| self.pool_id[j].1)
    }
}

fn pool(p: Option<(i64, i64)>) -> Option<(i64, i64)> {
    p.filter(|&p| p != (0, 0))
}

/// What undoing a stretch of events does, found without the state before them, so that the
/// stretches of a long trace are read side by side and applied one after another
/// ([`State::undo_stretch`]): for each address its block after the stretch's undo — the last
/// undo applied there (its earliest event) that sets or removes one, and whether an earlier
/// `free_requested` undone after it clears the block's pending free — and the segment events,
/// in the order they are undone (blocks and segments do not meet in an untracked undo).
#[derive(Debug, Default)]
pub struct Stretch {
    blocks: rustc_hash::FxHashMap<u64, BlockEffect>,
    segment_events: Vec<usize>,
}

#[derive(Debug, Clone, Copy)]
enum BlockEffect {
    Set(Option<Block>),
    /// No block set or removed here: the block there before, if any, is no longer pending.
    NotPending,
}

impl Stretch {
    /// The effect of undoing `events` (absolute indices: the last one first).
    pub fn of(ev: &dyn EventColumns, events: std::ops::Range<usize>) -> Stretch {
        let mut out = Stretch::default();
        for e in events.rev() {
            let (action, addr, size) = ev.block_fields(e);
            match BlockUndo::of(action, addr, size) {
                Some(BlockUndo::Set(block)) => {
                    out.blocks.insert(addr, BlockEffect::Set(block));
                }
                Some(BlockUndo::NotPending) => match out.blocks.entry(addr) {
                    std::collections::hash_map::Entry::Occupied(mut o) => {
                        if let BlockEffect::Set(Some(b)) = o.get_mut() {
                            b.pending_free = false;
                        }
                    }
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(BlockEffect::NotPending);
                    }
                },
                None => out.segment_events.push(e),
            }
        }
        out
    }
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
                st.blocks.insert(Block { addr: b.address, size: b.size, requested: b.requested_size, pending_free });
            }
        }
        st.segments.sort_by_key(|s| s.addr);
        st
    }

    /// Undoes event `e` (an absolute index into the snapshot's events), keeping `figures` up to
    /// date.
    pub fn undo(&mut self, ev: &dyn EventColumns, e: usize, figures: &mut Figures) {
        let (action, addr, size) = ev.block_fields(e);
        match BlockUndo::of(action, addr, size) {
            Some(BlockUndo::Set(new)) => {
                let set = self.blocks.set(addr, new);
                figures.block_changed(&self.segments, addr, &set, new);
            }
            Some(BlockUndo::NotPending) => {
                if let Some(b) = self.blocks.get_mut(addr) {
                    let was = b.pending_free;
                    b.pending_free = false;
                    figures.pending_changed(b, was);
                }
            }
            None => self.undo_segments(ev, e, figures),
        }
    }

    /// Undoes event `e` when it is not a block event (see [`BlockUndo`]).
    fn undo_segments(&mut self, ev: &dyn EventColumns, e: usize, figures: &mut Figures) {
        let (action, addr, size) = ev.block_fields(e);
        match action {
            a @ (Action::SegmentFree | Action::SegmentUnmap) => {
                let seg = Segment { addr, size, stream: ev.stream(e), pool: pool(ev.pool(e)) };
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
        // Segment events are rare next to blocks': their figures are derived again.
        if matches!(action, Action::SegmentFree | Action::SegmentUnmap | Action::SegmentAlloc | Action::SegmentMap) {
            figures.segments_changed(self);
        }
    }

    /// The state `undone` events before this one (the last `undone` events of `trace`, this
    /// state being the one after them), without figures: the blocks live in a hash map meanwhile
    /// (a lookup instead of an ordered search per event) and go back into [`Blocks`] once.
    pub(super) fn undo_untracked(self, ev: &dyn EventColumns, trace: std::ops::Range<usize>, undone: usize) -> State {
        let mut blocks: rustc_hash::FxHashMap<u64, Block> = self.blocks.values().map(|b| (b.addr, *b)).collect();
        let mut rest = State { segments: self.segments, blocks: Blocks::default() };
        let mut figures = Figures::default();
        for e in (trace.end - undone.min(trace.len())..trace.end).rev() {
            let (action, addr, size) = ev.block_fields(e);
            match BlockUndo::of(action, addr, size) {
                Some(BlockUndo::Set(Some(b))) => {
                    blocks.insert(addr, b);
                }
                Some(BlockUndo::Set(None)) => {
                    blocks.remove(&addr);
                }
                Some(BlockUndo::NotPending) => {
                    if let Some(b) = blocks.get_mut(&addr) {
                        b.pending_free = false;
                    }
                }
                None => rest.undo_segments(ev, e, &mut figures),
            }
        }
        rest.blocks = blocks.into_values().collect();
        rest
    }

    /// This state with the events of `stretch` undone (they being the ones just before it):
    /// what an untracked undo of them makes (`undo_untracked`), from what [`Stretch::of`] found
    /// without the state.
    pub fn undo_stretch(self, ev: &dyn EventColumns, stretch: &Stretch) -> State {
        let mut blocks: rustc_hash::FxHashMap<u64, Block> = self.blocks.values().map(|b| (b.addr, *b)).collect();
        for (&addr, effect) in &stretch.blocks {
            match effect {
                BlockEffect::Set(Some(b)) => {
                    blocks.insert(addr, *b);
                }
                BlockEffect::Set(None) => {
                    blocks.remove(&addr);
                }
                BlockEffect::NotPending => {
                    if let Some(b) = blocks.get_mut(&addr) {
                        b.pending_free = false;
                    }
                }
            }
        }
        let mut rest = State { segments: self.segments, blocks: Blocks::default() };
        let mut figures = Figures::default();
        for &e in &stretch.segment_events {
            rest.undo_segments(ev, e, &mut figures);
        }
        rest.blocks = blocks.into_values().collect();
        rest
    }

    pub(super) fn insert_segment(&mut self, seg: Segment, merge: bool) {
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
    pub(super) fn cut(&mut self, addr: u64, size: u64) {
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

    /// Each segment with the blocks that start inside it (a block outside every segment is in
    /// none).
    pub(super) fn segment_maps(&self) -> Vec<SegmentMap> {
        let mut segments = Vec::with_capacity(self.segments.len());
        for s in &self.segments {
            let blocks = self.blocks.range(s.addr..s.addr + s.size).copied().collect();
            segments.push(SegmentMap { segment: s.clone(), blocks });
        }
        segments
    }

    /// The totals and the memory map, segment by segment.
    pub fn summary(&self, event: i64) -> Summary {
        let segments = self.segment_maps();
        let largest_free = segments.iter().flat_map(|m| m.holes()).map(|(_, size)| size).max().unwrap_or(0);
        let blocks = self.blocks.values();
        Summary {
            event,
            reserved: self.segments.iter().map(|s| s.size).sum(),
            allocated: blocks.clone().map(|b| b.size).sum(),
            requested: blocks.clone().map(|b| b.requested).sum(),
            pending_free: blocks.filter(|b| b.pending_free).map(|b| b.size).sum(),
            largest_free,
            segments,
        }
    }
}

/// What undoing a block event does to the block at its address.
enum BlockUndo {
    /// It becomes this (`None`: it goes). A re-added block's size and requested size are the
    /// event's size.
    Set(Option<Block>),
    /// It no longer waits on another stream.
    NotPending,
}

impl BlockUndo {
    /// `None` for events that are not block events.
    fn of(action: Action, addr: u64, size: u64) -> Option<BlockUndo> {
        let freed = |pending_free| Some(Block { addr, size, requested: size, pending_free });
        Some(match action {
            Action::Alloc => BlockUndo::Set(None),
            Action::FreeCompleted => BlockUndo::Set(freed(true)),
            Action::Free => BlockUndo::Set(freed(false)),
            Action::FreeRequested => BlockUndo::NotPending,
            _ => return None,
        })
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
