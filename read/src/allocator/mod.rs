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

mod blocks;
pub mod cut;
mod figures;

use std::collections::{BTreeMap, BTreeSet};

pub use blocks::{Blocks, Set};
pub use cut::Cut;

use serde::Serialize;

use crate::layout::{Replay, partition};
use crate::model::{Action, BlockState, DeviceId, Events, Snapshot};

pub use figures::Figures;

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
    fn undo_untracked(self, ev: &dyn EventColumns, trace: std::ops::Range<usize>, undone: usize) -> State {
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

    /// Each segment with the blocks that start inside it (a block outside every segment is in
    /// none).
    fn segment_maps(&self) -> Vec<SegmentMap> {
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

/// States kept somewhere that answers faster than a replay from the dump (an archive's saved
/// states): the same answer as [`states`], or `None` when they were not kept.
pub trait SavedStates {
    fn states(&self, device: DeviceId, wanted: &BTreeSet<i64>) -> Option<(Vec<Summary>, Vec<OomState>)>;
}

/// No saved states: every answer is a replay.
pub struct Replayed;

impl SavedStates for Replayed {
    fn states(&self, _: DeviceId, _: &BTreeSet<i64>) -> Option<(Vec<Summary>, Vec<OomState>)> {
        None
    }
}

/// The states after the events `wanted` (device-relative; −1 = before the first), plus after the
/// last event and just before every `oom`; one backward pass from the dump to the oldest of them.
pub fn states(snap: &Snapshot, device: DeviceId, wanted: &BTreeSet<i64>) -> (Vec<Summary>, Vec<OomState>) {
    let trace = snap.trace(device);
    let (first, n) = (trace.start, trace.len() as i64);
    let ev = &snap.events;
    let ooms: Vec<i64> = (0..n).filter(|&i| ev.action[first + i as usize] == Action::Oom).collect();
    let mut wanted: BTreeSet<i64> = wanted.iter().copied().filter(|&i| (-1..n).contains(&i)).collect();
    wanted.extend(ooms.iter().map(|&i| i - 1));
    wanted.insert(n - 1);
    let mut st = State::at_dump(snap, device);
    let mut figures = Figures::of(&st, false);
    let mut found: BTreeMap<i64, Summary> = BTreeMap::new();
    if wanted.contains(&(n - 1)) {
        found.insert(n - 1, st.summary(n - 1));
    }
    // Undo only back to the oldest state asked for: undoing event `i` gives the state after `i − 1`.
    let oldest = wanted.first().copied().unwrap_or(n - 1);
    for i in ((oldest + 1).max(0)..n).rev() {
        st.undo(&snap.events, first + i as usize, &mut figures);
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

/// The allocator's state as a checkpointed replay (the second user of `layout::Checkpoints`):
/// step `s` undoes the `s`-th event from the end, so the state after event `i` of an `n`-event
/// trace is `n − 1 − i` steps in. Saved flat as `u64` words: the segment count, the block count,
/// then per segment `addr, size, stream, has_pool, pool.0, pool.1` and per block
/// `addr, size, requested, pending`.
pub struct Undo<'s> {
    events: &'s dyn EventColumns,
    first: usize,
    n: usize,
    undone: usize,
    pub state: State,
    pub figures: Figures,
}

const SEGMENT_WORDS: usize = 6;
const BLOCK_WORDS: usize = 4;

impl<'s> Undo<'s> {
    pub fn at_dump(snap: &'s Snapshot, device: DeviceId) -> Undo<'s> {
        Undo::at_dump_over(snap, &snap.events, device)
    }

    /// [`Self::at_dump`], undoing `events` (the snapshot's columns, or the same compressed).
    pub fn at_dump_over(snap: &Snapshot, events: &'s dyn EventColumns, device: DeviceId) -> Undo<'s> {
        let trace = snap.trace(device);
        let state = State::at_dump(snap, device);
        let figures = Figures::of(&state, false);
        Undo { events, first: trace.start, n: trace.len(), undone: 0, figures, state }
    }

    /// A state saved by [`Replay::save`] after `undone` steps (a checkpoint; malformed words
    /// give an empty state rather than a panic), over the device's events `trace`.
    pub fn resume(
        events: &'s dyn EventColumns,
        trace: std::ops::Range<usize>,
        words: &[u64],
        undone: usize,
    ) -> Undo<'s> {
        let state = State::from_words(words).unwrap_or_default();
        Undo { events, first: trace.start, n: trace.len(), undone, figures: Figures::of(&state, false), state }
    }
}

impl Replay for Undo<'_> {
    type Word = u64;
    fn applied(&self) -> usize {
        self.undone
    }
    fn step(&mut self) -> bool {
        if self.undone >= self.n {
            return false;
        }
        self.state.undo(self.events, self.first + self.n - 1 - self.undone, &mut self.figures);
        self.undone += 1;
        true
    }
    fn save(&self, out: &mut Vec<u64>) {
        let st = &self.state;
        out.extend([st.segments.len() as u64, st.blocks.len() as u64]);
        for s in &st.segments {
            let (has, (a, b)) = (u64::from(s.pool.is_some()), s.pool.unwrap_or((0, 0)));
            out.extend([s.addr, s.size, s.stream, has, a as u64, b as u64]);
        }
        for b in st.blocks.values() {
            out.extend([b.addr, b.size, b.requested, u64::from(b.pending_free)]);
        }
    }
}

impl State {
    fn from_words(w: &[u64]) -> Option<State> {
        let (&ns, &nb) = (w.first()?, w.get(1)?);
        let (ns, nb) = (usize::try_from(ns).ok()?, usize::try_from(nb).ok()?);
        let segs = w.get(2..2 + ns.checked_mul(SEGMENT_WORDS)?)?;
        let blocks = w.get(2 + ns * SEGMENT_WORDS..)?.get(..nb.checked_mul(BLOCK_WORDS)?)?;
        let segments = segs
            .chunks_exact(SEGMENT_WORDS)
            .map(|s| Segment {
                addr: s[0],
                size: s[1],
                stream: s[2],
                pool: (s[3] != 0).then_some((s[4] as i64, s[5] as i64)),
            })
            .collect();
        let blocks = blocks
            .chunks_exact(BLOCK_WORDS)
            .map(|b| Block { addr: b[0], size: b[1], requested: b[2], pending_free: b[3] != 0 })
            .collect();
        Some(State { segments, blocks })
    }
}

/// Saved states aim at this many words (32 MiB raw; a few MB compressed)...
const WORD_BUDGET: u64 = 4 << 20;
/// ...but K stays at most this (a query undoes fewer than K events, so K bounds its time:
/// docs/performance.md, Answers) while the states fit 4× the budget; past that the budget wins
/// and queries slow down with the trace.
const MAX_EVERY: u64 = 8192;
const MIN_EVERY: u64 = 256;

fn words(st: &State) -> u64 {
    (2 + st.segments.len() * SEGMENT_WORDS + st.blocks.len() * BLOCK_WORDS) as u64
}

/// Which stretch of a device's backward pass one call of [`pass`] runs. A long pass runs as two
/// parts side by side, cut after the last `undone` events are undone: the late part hands over
/// the figures of the actions at or after the cut and saves the states before it; the early part
/// undoes the same events with no figures at all, its blocks in a hash map (about a tenth of a
/// tracked undo's cost), then, from the state at the
/// cut, tracks the figures, hands over the actions before the cut and saves the states from it
/// on. The figures at the cut are derived afresh from the state there, which is what the whole
/// pass's running figures equal. The late part starts before its cut is settled ([`Cut`]); one
/// that reaches the first event first was the whole pass.
#[derive(Debug, Clone, Copy)]
pub enum Part<'c> {
    Whole,
    Late(&'c Cut),
    Early { undone: usize },
}

/// One backward pass over a device's trace (or a [`Part`] of it), from the dump: hands
/// `keep(words)` the state every `every` undone events (the checkpoints [`Undo`] resumes from)
/// and `at_action(k, figures)` the allocator's figures (the largest free block tracked) right
/// after each action, last action first. `action_event(k)` is the absolute event of action `k`
/// (ascending in `k`; `NONE` for the one synthetic action of a trace without actions, which gets
/// the dump's figures).
#[allow(clippy::too_many_arguments)]
pub fn pass(
    snap: &Snapshot,
    events: &dyn EventColumns,
    device: DeviceId,
    actions: usize,
    action_event: impl Fn(usize) -> u32,
    every: u32,
    part: Part<'_>,
    at_action: impl FnMut(usize, &Figures),
    keep: impl FnMut(&[u64]),
) {
    let mut undo = Undo::at_dump_over(snap, events, device);
    let n = undo.n;
    let mut k = actions;
    if let Part::Early { undone } = part {
        // The early part starts from the state at the cut and hands over the actions before it.
        undo.undone = undone.min(n);
        undo.state = std::mem::take(&mut undo.state).undo_untracked(events, snap.trace(device), undo.undone);
        let cut = (undo.first + n - undo.undone) as u32;
        k = partition(actions as u32, |k| action_event(k as usize) < cut) as usize;
    }
    undo.figures = Figures::of(&undo.state, true);
    let mut replay = WithFigures { undo, k, next_event: None, action_event, at_action };
    // The states after every `every` undone events: the late part saves those before the cut,
    // the early part the others; a late part is the whole pass until its cut is settled.
    let (mut saved, mut end) = match part {
        Part::Whole | Part::Late(_) => (0..n + 1, n),
        Part::Early { undone } => (undone.min(n)..n + 1, n),
    };
    let mut keep = keep;
    let mut words = Vec::new();
    loop {
        let undone = replay.undo.undone;
        if let Part::Late(cut) = part
            && (undone.is_multiple_of(cut::CHECK) || undone == n)
            && let Some(settled) = cut.report(undone)
            && settled < n
        {
            (saved, end) = (0..settled, settled);
        }
        if undone.is_multiple_of(every.max(1) as usize) && saved.contains(&undone) {
            words.clear();
            replay.save(&mut words);
            keep(&words);
        }
        if undone >= end || !replay.step() {
            break;
        }
    }
    // Every action at or after a late part's cut was handed over before the cut's event was
    // undone; the rest go now.
    if end == n {
        replay.hand_over(None);
    }
}

/// An [`Undo`] that hands over each action's figures as the replay passes its event.
struct WithFigures<'s, A, F> {
    undo: Undo<'s>,
    /// Actions not handed over yet: `0..k`.
    k: usize,
    /// The event of action `k − 1`, once looked up (`action_event` reads two element columns at
    /// random; most undone events hand nothing over, and each asked for it again).
    next_event: Option<u32>,
    action_event: A,
    at_action: F,
}

impl<A: Fn(usize) -> u32, F: FnMut(usize, &Figures)> WithFigures<'_, A, F> {
    /// Hands over the actions whose event is at or after `newest` (the newest event not undone
    /// yet: the state now is the one right after it); `None`: all that are left.
    fn hand_over(&mut self, newest: Option<u32>) {
        while self.k > 0 {
            let e = *self.next_event.get_or_insert_with(|| (self.action_event)(self.k - 1));
            if newest.is_some_and(|newest| e != crate::model::NONE && e < newest) {
                return;
            }
            self.k -= 1;
            self.next_event = None;
            (self.at_action)(self.k, &self.undo.figures);
        }
    }
}

impl<A: Fn(usize) -> u32, F: FnMut(usize, &Figures)> Replay for WithFigures<'_, A, F> {
    type Word = u64;
    fn applied(&self) -> usize {
        self.undo.undone
    }
    fn step(&mut self) -> bool {
        let u = &self.undo;
        if u.undone >= u.n {
            return false;
        }
        self.hand_over(Some((u.first + u.n - 1 - u.undone) as u32));
        self.undo.step()
    }
    fn save(&self, out: &mut Vec<u64>) {
        self.undo.save(out);
    }
}

/// The summed size of the states after every event, in words, estimated from the event kinds
/// alone (a block or a segment appears or goes per event; merges are not followed), to size the
/// checkpoints before the pass that saves them. `actions`: the snapshot's action column (a
/// slice, not [`EventColumns`]: a call through it per event showed in the derive stage).
pub fn estimate_words(snap: &Snapshot, actions: &[Action], device: DeviceId) -> u64 {
    let st = State::at_dump(snap, device);
    let (mut segs, mut blocks) = (st.segments.len() as i64, st.blocks.len() as i64);
    let mut total = words(&st);
    for &action in actions[snap.trace(device)].iter().rev() {
        match action {
            Action::Alloc => blocks -= 1,
            Action::FreeCompleted | Action::Free => blocks += 1,
            Action::SegmentAlloc => segs -= 1,
            Action::SegmentFree | Action::SegmentUnmap | Action::SegmentMap => segs += 1,
            _ => {}
        }
        total += (2 + segs.max(0) * SEGMENT_WORDS as i64 + blocks.max(0) * BLOCK_WORDS as i64) as u64;
    }
    total
}

/// K for states of this summed size.
pub fn every_for(state_words: u64) -> u32 {
    let k = |budget: u64| state_words.div_ceil(budget).max(MIN_EVERY).next_power_of_two();
    k(WORD_BUDGET).min(MAX_EVERY).max(k(4 * WORD_BUDGET)).min(1 << 30) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Checkpoints, CheckpointsRef};

    /// The allocator's state every K events from the dump backwards, K sized as `index` sizes it.
    fn checkpoints(snap: &Snapshot, device: DeviceId) -> Checkpoints<u64> {
        let every = every_for(estimate_words(snap, &snap.events.action, device));
        Checkpoints::record(Undo::at_dump(snap, device), snap.trace(device).len(), every)
    }

    /// The state after event `i` of the device (−1: before the first), from its checkpoints.
    fn state_after(snap: &Snapshot, device: DeviceId, cps: CheckpointsRef<'_, u64>, i: i64) -> State {
        let n = snap.trace(device).len() as i64;
        let undone = (n - 1 - i.clamp(-1, n - 1)) as usize;
        cps.restore(undone, |words, at| Undo::resume(&snap.events, snap.trace(device), words, at)).state
    }

    fn map(segs: &[(u64, u64)], blocks: &[(u64, u64)]) -> Summary {
        let mut st = State {
            segments: segs.iter().map(|&(addr, size)| Segment { addr, size, stream: 0, pool: None }).collect(),
            ..State::default()
        };
        for &(addr, size) in blocks {
            st.blocks.insert(Block { addr, size, requested: size, pending_free: false });
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

    /// The state from the nearest checkpoint equals the one the full backward pass gives, after
    /// every event of real traces (expandable segments included).
    #[test]
    fn checkpoints_rebuild_every_event_exactly() {
        for name in ["frag_oom", "expandable", "cudagraph"] {
            let snap = crate::fixtures::snapshot(name);
            let d = DeviceId(0);
            let n = snap.trace(d).len() as i64;
            let (all, _) = states(&snap, d, &(-1..n).collect());
            let cps = checkpoints(&snap, d);
            assert!(cps.starts.len() > 2, "{name}: several checkpoints");
            for s in &all {
                let got = state_after(&snap, d, cps.view(), s.event).summary(s.event);
                assert!(got == *s, "{name}: event {}", s.event);
            }
        }
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
