//! The Active Memory Timeline layout (SPEC §2): which allocation sits where, at every action.
//!
//! Input: one device's trace and segments from the [`Snapshot`]. Output: a [`Layout`] — element
//! columns, the action sequence, totals and the peak. No I/O. Everything downstream reads a
//! layout through [`LayoutRef`], a set of borrowed slices, so the same code runs on a layout just
//! computed and on one mapped from a `.memviz` archive.
//!
//! ```text
//!   bytes ▲            ┌──┐
//!         │      ┌─────┤e3├───┐       an element's offset = sum of sizes of the live
//!         │   ┌──┤ e2  └──┘   │       elements below it (pushed earlier); when one is
//!         │ ──┤ e1 (free_only)└──     freed, everything above drops by its size
//!         └──────────────────────────▶ action index (one per alloc / free)
//! ```
//!
//! How it works: one walk over the trace creates elements (an `alloc`, or a free whose alloc is
//! missing: `free_only`) and the action list; active blocks of the dump that nothing accounts
//! for become `ghost` elements. Every element gets a *slot*: its position in push order, initial
//! elements first. The live stack is always sorted by slot, so offsets are prefix sums over it.

mod checkpoints;
mod stack;

pub use checkpoints::{Checkpoints, CheckpointsRef, Replay, checkpoint_every};
pub use stack::{DEAD, LazyChange, LazyStack, LiveStack, StackChange};

use rustc_hash::FxHashMap;

use crate::model::{
    Action, ActionIdx, BlockState, DeviceId, ElementId, EventIdx, EventValues, Events, NONE, Snapshot, StrId,
};

/// Where an element comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Origin {
    /// An `alloc` event in the trace.
    Alloc = 0,
    /// A `free_completed` whose alloc is not in the trace: live from the start.
    FreeOnly = 1,
    /// An `active_allocated` block of the dump that no trace event explains: live throughout.
    Ghost = 2,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Alloc => "alloc",
            Origin::FreeOnly => "free_only",
            Origin::Ghost => "ghost",
        }
    }

    pub fn from_u8(v: u8) -> Origin {
        match v {
            0 => Origin::Alloc,
            1 => Origin::FreeOnly,
            _ => Origin::Ghost,
        }
    }
}

/// `start` column value of an element live before the first action ([`ActionIdx::BEFORE_TRACE`]).
pub const BEFORE_TRACE: u32 = ActionIdx::BEFORE_TRACE.0;
/// `end` column value of an element still live after the last action ([`ActionIdx::NEVER`]).
pub const NEVER: u32 = ActionIdx::NEVER.0;

/// One element, assembled from the columns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Element {
    pub addr: u64,
    pub size: u64,
    pub origin: Origin,
    /// Action that pushed it, or [`ActionIdx::BEFORE_TRACE`].
    pub start: ActionIdx,
    /// Action that removed it, or [`ActionIdx::NEVER`].
    pub end: ActionIdx,
    /// The `alloc` event, or [`EventIdx::NONE`].
    pub alloc_event: EventIdx,
    /// The event that ended it, or [`EventIdx::NONE`].
    pub free_event: EventIdx,
    /// The block of a ghost (index into `Snapshot::blocks`), or [`NONE`].
    pub block: u32,
    /// Position in push order; the live stack is sorted by it.
    pub slot: u32,
}

impl Element {
    /// Live right after action `k` (`k = -1`: the initial state).
    pub fn live_after(&self, k: i64) -> bool {
        let started = self.start == ActionIdx::BEFORE_TRACE || self.start.signed() <= k;
        let ended = self.end != ActionIdx::NEVER && self.end.signed() <= k;
        started && !ended
    }

    /// The action that pushed it, `-1` for one live before the trace.
    pub fn start_i64(&self) -> i64 {
        if self.start == ActionIdx::BEFORE_TRACE { -1 } else { self.start.signed() }
    }

    pub fn start_opt(&self) -> Option<ActionIdx> {
        (self.start != ActionIdx::BEFORE_TRACE).then_some(self.start)
    }

    pub fn end_opt(&self) -> Option<ActionIdx> {
        (self.end != ActionIdx::NEVER).then_some(self.end)
    }

    /// The event whose stack explains this element: its alloc, else the free that revealed it.
    pub fn event(&self) -> EventIdx {
        if self.alloc_event != EventIdx::NONE { self.alloc_event } else { self.free_event }
    }
}

/// Element columns, indexed by element id (creation order: trace order, then ghosts).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Elements {
    pub addr: Vec<u64>,
    pub size: Vec<u64>,
    pub start: Vec<u32>,
    pub end: Vec<u32>,
    /// [`Origin`] as `u8`.
    pub origin: Vec<u8>,
    pub alloc_event: Vec<u32>,
    pub free_event: Vec<u32>,
    pub block: Vec<u32>,
    pub slot: Vec<u32>,
    /// Elements that an `annotate` event labelled, ascending, and the text of each (the last
    /// label wins).
    pub annotated: Vec<u32>,
    pub annotation: Vec<StrId>,
}

impl Elements {
    fn push(&mut self, addr: u64, size: u64, origin: Origin, alloc_event: u32, free_event: u32, block: u32) -> u32 {
        self.addr.push(addr);
        self.size.push(size);
        self.start.push(BEFORE_TRACE);
        self.end.push(NEVER);
        self.origin.push(origin as u8);
        self.alloc_event.push(alloc_event);
        self.free_event.push(free_event);
        self.block.push(block);
        self.slot.push(NONE);
        (self.addr.len() - 1) as u32
    }

    pub fn view(&self) -> ElementsRef<'_> {
        ElementsRef {
            addr: &self.addr,
            size: &self.size,
            start: &self.start,
            end: &self.end,
            origin: &self.origin,
            alloc_event: &self.alloc_event,
            free_event: &self.free_event,
            block: &self.block,
            slot: &self.slot,
            annotated: &self.annotated,
            annotation: &self.annotation,
        }
    }
}

/// Borrowed element columns (from a [`Layout`] or a mapped archive).
#[derive(Debug, Clone, Copy)]
pub struct ElementsRef<'a> {
    pub addr: &'a [u64],
    pub size: &'a [u64],
    pub start: &'a [u32],
    pub end: &'a [u32],
    pub origin: &'a [u8],
    pub alloc_event: &'a [u32],
    pub free_event: &'a [u32],
    pub block: &'a [u32],
    pub slot: &'a [u32],
    pub annotated: &'a [u32],
    pub annotation: &'a [StrId],
}

impl ElementsRef<'_> {
    /// The `annotate` text of an element, if one labelled it.
    pub fn annotation_of(&self, id: ElementId) -> Option<StrId> {
        self.annotated.binary_search(&id.0).ok().and_then(|j| self.annotation.get(j).copied())
    }

    pub fn len(&self) -> usize {
        self.addr.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addr.is_empty()
    }

    pub fn get(&self, id: ElementId) -> Element {
        let i = id.index();
        Element {
            addr: self.addr[i],
            size: self.size[i],
            origin: Origin::from_u8(self.origin[i]),
            start: ActionIdx(self.start[i]),
            end: ActionIdx(self.end[i]),
            alloc_event: EventIdx(self.alloc_event[i]),
            free_event: EventIdx(self.free_event[i]),
            block: self.block[i],
            slot: self.slot[i],
        }
    }
}

/// The whole timeline of one device.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub device: DeviceId,
    pub elements: Elements,
    /// Element id of each action.
    pub actions: Vec<u32>,
    /// Elements live before the first action, bottom to top.
    pub initial: Vec<u32>,
    pub initial_total: u64,
    /// Total live bytes right after each action.
    pub totals: Vec<u64>,
    /// Max of the initial total and every action's total.
    pub peak_bytes: u64,
    /// First action reaching the peak; `None` when the initial state is the peak.
    pub peak_action: Option<ActionIdx>,
}

/// A borrowed layout: what every consumer of a timeline reads.
#[derive(Debug, Clone, Copy)]
pub struct LayoutRef<'a> {
    pub device: DeviceId,
    pub elements: ElementsRef<'a>,
    pub actions: &'a [u32],
    pub initial: &'a [u32],
    pub initial_total: u64,
    pub totals: &'a [u64],
    pub peak_bytes: u64,
    pub peak_action: Option<ActionIdx>,
}

impl Layout {
    /// Computes the layout of `device`: a [`TraceWalk`] over its whole trace.
    pub fn build(snap: &Snapshot, device: DeviceId) -> Layout {
        let trace = snap.trace(device);
        assert!(
            trace.is_empty() || snap.events.holds_values(),
            "a layout built from a model whose rows an index read kept elsewhere"
        );
        let mut walk = TraceWalk::new(trace.start);
        walk.walk(&snap.events, trace.end);
        walk.finish(snap, device)
    }

    /// The Active Cached Segment Timeline (SPEC §2): the same layout over segments.
    /// `segment_alloc` pushes a segment, `segment_free` ends the one at its address (one whose
    /// alloc is missing is `free_only`), and a segment of the dump the trace never allocated is a
    /// ghost of its `total_size`. `segment_map` / `segment_unmap` (expandable segments) are not
    /// actions: they grow and shrink a segment in place, which this view does not draw.
    /// `rows`: where the events' values are (`&snap.events` but for an index read's model).
    pub fn segments(snap: &Snapshot, rows: &dyn EventValues, device: DeviceId) -> Layout {
        let ev = &snap.events;
        let mut els = Elements::default();
        let mut actions = Vec::new();
        let mut initially = Vec::new();
        let mut addr_to: FxHashMap<u64, u32> = FxHashMap::default();
        for e in snap.trace(device) {
            let action = ev.action[e];
            if !matches!(action, Action::SegmentAlloc | Action::SegmentFree) {
                continue;
            }
            // A segment event's row is held even where an index read let go of the block events'.
            let v = rows.values(e).expect("segment events' rows are kept");
            let (addr, size, e32) = (v.addr, v.size, e as u32);
            match action {
                Action::SegmentAlloc => {
                    let id = els.push(addr, size, Origin::Alloc, e32, NONE, NONE);
                    els.start[id as usize] = actions.len() as u32;
                    addr_to.insert(addr, id);
                    actions.push(id);
                }
                Action::SegmentFree => {
                    let id = addr_to.remove(&addr).unwrap_or_else(|| {
                        let id = els.push(addr, size, Origin::FreeOnly, NONE, e32, NONE);
                        initially.push(id);
                        id
                    });
                    els.end[id as usize] = actions.len() as u32;
                    els.free_event[id as usize] = e32;
                    actions.push(id);
                }
                _ => {}
            }
        }
        for seg in snap.device_segments(device) {
            if !addr_to.contains_key(&seg.address) {
                initially.push(els.push(seg.address, seg.total_size, Origin::Ghost, NONE, NONE, NONE));
            }
        }
        Layout::replay_into(device, els, actions, initially)
    }

    /// Orders the initial elements, gives every element its slot and replays the actions for the
    /// totals and the peak (the part both timelines share).
    fn replay_into(device: DeviceId, mut els: Elements, mut actions: Vec<u32>, mut initially: Vec<u32>) -> Layout {
        initially.reverse();
        if actions.is_empty()
            && let Some(top) = initially.pop()
        {
            // Nothing happened: show the top initial element as the one action (SPEC §2.4).
            els.start[top as usize] = 0;
            actions.push(top);
        }

        let mut slot = 0u32;
        let mut initial_total = 0u64;
        for &i in &initially {
            els.slot[i as usize] = slot;
            slot += 1;
            initial_total += els.size[i as usize];
        }
        let mut total = initial_total;
        let mut peak_bytes = total;
        let mut peak_action = None;
        let mut totals = Vec::with_capacity(actions.len());
        for (k, &id) in actions.iter().enumerate() {
            crate::pace::at(k);
            let i = id as usize;
            if els.start[i] == k as u32 {
                els.slot[i] = slot;
                slot += 1;
                total += els.size[i];
            } else {
                total -= els.size[i];
            }
            if total > peak_bytes {
                peak_bytes = total;
                peak_action = Some(ActionIdx::at(k));
            }
            totals.push(total);
        }

        Layout { device, elements: els, actions, initial: initially, initial_total, totals, peak_bytes, peak_action }
    }

    pub fn view(&self) -> LayoutRef<'_> {
        LayoutRef {
            device: self.device,
            elements: self.elements.view(),
            actions: &self.actions,
            initial: &self.initial,
            initial_total: self.initial_total,
            totals: &self.totals,
            peak_bytes: self.peak_bytes,
            peak_action: self.peak_action,
        }
    }
}

impl<'a> LayoutRef<'a> {
    pub fn element(&self, id: ElementId) -> Element {
        self.elements.get(id)
    }

    /// The peak as a signed action: `-1` when the initial state is the peak.
    pub fn peak_k(&self) -> i64 {
        self.peak_action.map_or(-1, ActionIdx::signed)
    }

    /// Total live bytes right after action `k` (`k = -1`: before the first action).
    pub fn total_after(&self, k: i64) -> u64 {
        if k < 0 { self.initial_total } else { self.totals[k as usize] }
    }

    /// The event that caused action `k`, or [`EventIdx::NONE`] for the synthetic action of a
    /// snapshot without actions.
    pub fn action_event(&self, k: ActionIdx) -> EventIdx {
        let id = self.actions[k.index()] as usize;
        EventIdx(if self.elements.start[id] == k.0 {
            self.elements.alloc_event[id]
        } else {
            self.elements.free_event[id]
        })
    }

    /// The element action `k` pushed or popped.
    pub fn action_element(&self, k: ActionIdx) -> ElementId {
        ElementId(self.actions[k.index()])
    }

    /// A replay cursor positioned before the first action.
    pub fn replay(&self) -> LiveStack<'a> {
        LiveStack::new(*self)
    }

    /// Element ids live right after action `k`, in stack order (bottom first). O(elements).
    pub fn live_after(&self, k: i64) -> Vec<ElementId> {
        let mut live: Vec<ElementId> =
            (0..self.elements.len()).map(ElementId::at).filter(|&i| self.elements.get(i).live_after(k)).collect();
        live.sort_by_key(|&i| self.elements.slot[i.index()]);
        live
    }
}

/// A column's `(address, bytes written, bytes of capacity)` ([`TraceWalk::growing`]).
pub fn extent<T>(v: &Vec<T>) -> (usize, usize, usize) {
    let width = std::mem::size_of::<T>();
    (v.as_ptr() as usize, v.len() * width, v.capacity() * width)
}

/// The walk over one device's trace that [`Layout::build`] makes, fed a run of events at a time,
/// so it can go on while the reader is still reading (the archive pipeline lays out on the core
/// the decoder leaves idle). Fed every event of a trace in order, [`TraceWalk::finish`] gives
/// exactly `Layout::build`'s layout.
#[derive(Debug, Default)]
pub struct TraceWalk {
    els: Elements,
    actions: Vec<u32>,
    initially: Vec<u32>,
    addr_to: FxHashMap<u64, u32>,
    labels: FxHashMap<u32, StrId>,
    waiting: FxHashMap<u64, StrId>,
    /// The event index the walk takes next.
    next: usize,
}

impl TraceWalk {
    /// A walk over the trace whose first event is `first`.
    pub fn new(first: usize) -> TraceWalk {
        TraceWalk { next: first, ..TraceWalk::default() }
    }

    /// The event index the walk takes next.
    pub fn next(&self) -> usize {
        self.next
    }

    /// The columns the walk grows, each as `(address, bytes written, bytes of capacity)`: for a
    /// caller that has their pages made ahead of the walk's writes (`memviz index`: first
    /// writes of fresh pages were a third of the walk's time).
    pub fn growing(&self) -> [(usize, usize, usize); 10] {
        let e = &self.els;
        [
            extent(&e.addr),
            extent(&e.size),
            extent(&e.start),
            extent(&e.end),
            extent(&e.origin),
            extent(&e.alloc_event),
            extent(&e.free_event),
            extent(&e.block),
            extent(&e.slot),
            extent(&self.actions),
        ]
    }

    /// Takes the events from [`Self::next`] up to `end` (exclusive).
    pub fn walk(&mut self, ev: &Events, end: usize) {
        for e in self.next..end {
            self.step(ev.action[e], ev.addr[e], ev.size[e], || ev.user_metadata.get(e as u32));
        }
    }

    /// Takes event [`Self::next`]: its action, address and size, and the text of an `annotate`.
    /// `annotate` events label the element live at their address; one that finds nothing live
    /// waits at that address for the element the rest of the walk reveals there (a free_only
    /// freed later, or a ghost at the end) and is dropped by a new alloc at the address.
    /// What the event did is returned, for a caller that derives columns as the walk goes.
    #[inline]
    pub fn step(&mut self, action: Action, addr: u64, size: u64, text: impl FnOnce() -> StrId) -> Stepped {
        let e32 = self.next as u32;
        self.next += 1;
        let els = &mut self.els;
        let before = els.addr.len();
        if action == Action::Alloc {
            let id = els.push(addr, size, Origin::Alloc, e32, NONE, NONE);
            els.start[id as usize] = self.actions.len() as u32;
            self.addr_to.insert(addr, id);
            self.waiting.remove(&addr);
            self.actions.push(id);
        } else if action.ends_allocation() {
            let id = self.addr_to.remove(&addr).unwrap_or_else(|| {
                let id = els.push(addr, size, Origin::FreeOnly, NONE, e32, NONE);
                self.initially.push(id);
                if let Some(text) = self.waiting.remove(&addr) {
                    self.labels.insert(id, text);
                }
                id
            });
            els.end[id as usize] = self.actions.len() as u32;
            els.free_event[id as usize] = e32;
            self.actions.push(id);
        } else {
            if action == Action::Annotate {
                let text = text();
                match self.addr_to.get(&addr) {
                    Some(&id) => {
                        self.labels.insert(id, text);
                    }
                    None => {
                        self.waiting.insert(addr, text);
                    }
                }
            }
            return Stepped::default();
        }
        Stepped { action: true, new_element: els.addr.len() > before }
    }

    /// The layout of `device` once its whole trace is walked: the dump's active blocks that
    /// nothing accounts for become ghosts, then the slots, totals and peak.
    pub fn finish(self, snap: &Snapshot, device: DeviceId) -> Layout {
        let TraceWalk { mut els, actions, mut initially, addr_to, mut labels, waiting, .. } = self;
        for seg in snap.device_segments(device) {
            for (i, b) in snap.segment_blocks(seg).iter().enumerate() {
                if b.state == BlockState::ActiveAllocated && !addr_to.contains_key(&b.address) {
                    let block = seg.blocks.start + i as u32;
                    let id = els.push(b.address, b.requested_size, Origin::Ghost, NONE, NONE, block);
                    if let Some(&text) = waiting.get(&b.address) {
                        labels.insert(id, text);
                    }
                    initially.push(id);
                }
            }
        }
        let mut labels: Vec<(u32, StrId)> = labels.into_iter().filter(|&(_, t)| t != NONE).collect();
        labels.sort_unstable();
        (els.annotated, els.annotation) = labels.into_iter().unzip();
        Layout::replay_into(device, els, actions, initially)
    }
}

/// What one event did to a [`TraceWalk`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stepped {
    /// It is the next action (an alloc, or a free of any kind).
    pub action: bool,
    /// It made the next element (an alloc, or a free whose alloc is not in the trace): the
    /// element's event is this one.
    pub new_element: bool,
}

/// The first `k` in `0..n` where `pred` turns false (`pred` true then false): a binary search
/// over action (or event) indices.
pub fn partition(n: u32, pred: impl Fn(u32) -> bool) -> u32 {
    let (mut lo, mut hi) = (0u32, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) { lo = mid + 1 } else { hi = mid }
    }
    lo
}

#[cfg(test)]
mod tests;
