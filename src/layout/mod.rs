//! The Active Memory Timeline layout (SPEC §2): which allocation sits where, at every action.
//!
//! Input: one device's trace and segments from the [`Snapshot`]. Output: a [`Layout`] — the
//! elements, the action sequence, totals and the peak. No I/O.
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

mod stack;

pub use stack::{LiveStack, Step};

use std::collections::HashMap;

use crate::model::{Action, BlockState, NONE, Snapshot};

/// Where an element comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// An `alloc` event in the trace.
    Alloc,
    /// A `free_completed` whose alloc is not in the trace: live from the start.
    FreeOnly,
    /// An `active_allocated` block of the dump that no trace event explains: live throughout.
    Ghost,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Alloc => "alloc",
            Origin::FreeOnly => "free_only",
            Origin::Ghost => "ghost",
        }
    }
}

/// `start` of an element that is live before the first action.
pub const BEFORE_TRACE: u32 = u32::MAX;
/// `end` of an element still live after the last action.
pub const NEVER: u32 = u32::MAX;

/// One rectangle-ish band of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Element {
    pub addr: u64,
    pub size: u64,
    pub origin: Origin,
    /// Action that pushed it, or [`BEFORE_TRACE`].
    pub start: u32,
    /// Action that removed it, or [`NEVER`].
    pub end: u32,
    /// The `alloc` event (absolute index into `Snapshot::events`), or [`NONE`].
    pub alloc_event: u32,
    /// The event that ended it, or [`NONE`].
    pub free_event: u32,
    /// The block of a ghost (index into `Snapshot::blocks`), or [`NONE`].
    pub block: u32,
    /// Position in push order; the live stack is sorted by it.
    pub slot: u32,
}

impl Element {
    /// Live right after action `k` (`k = -1`: the initial state).
    pub fn live_after(&self, k: i64) -> bool {
        let started = self.start == BEFORE_TRACE || i64::from(self.start) <= k;
        let ended = self.end != NEVER && i64::from(self.end) <= k;
        started && !ended
    }

    pub fn start_i64(&self) -> i64 {
        if self.start == BEFORE_TRACE {
            -1
        } else {
            i64::from(self.start)
        }
    }

    pub fn end_opt(&self) -> Option<u32> {
        (self.end != NEVER).then_some(self.end)
    }

    /// The event whose stack explains this element: its alloc, else the free that revealed it.
    pub fn event(&self) -> u32 {
        if self.alloc_event != NONE {
            self.alloc_event
        } else {
            self.free_event
        }
    }
}

/// The whole timeline of one device.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub device: u32,
    /// Indexed by element id (creation order: trace order, then ghosts).
    pub elements: Vec<Element>,
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
    pub peak_action: Option<u32>,
}

impl Layout {
    /// Computes the layout of `device`.
    pub fn build(snap: &Snapshot, device: u32) -> Layout {
        let ev = &snap.events;
        let mut elements: Vec<Element> = Vec::new();
        let mut actions = Vec::new();
        let mut initially = Vec::new();
        let mut addr_to: HashMap<u64, u32> = HashMap::new();
        let new = |addr, size, origin, alloc_event, free_event, block| Element {
            addr,
            size,
            origin,
            start: BEFORE_TRACE,
            end: NEVER,
            alloc_event,
            free_event,
            block,
            slot: NONE,
        };

        for e in snap.trace(device) {
            let action = ev.action[e];
            let (addr, size, e32) = (ev.addr[e], ev.size[e], e as u32);
            if action == Action::Alloc {
                let id = elements.len() as u32;
                let mut el = new(addr, size, Origin::Alloc, e32, NONE, NONE);
                el.start = actions.len() as u32;
                elements.push(el);
                addr_to.insert(addr, id);
                actions.push(id);
            } else if action.ends_allocation() {
                let id = match addr_to.remove(&addr) {
                    Some(id) => id,
                    None => {
                        elements.push(new(addr, size, Origin::FreeOnly, NONE, e32, NONE));
                        initially.push(elements.len() as u32 - 1);
                        elements.len() as u32 - 1
                    }
                };
                let el = &mut elements[id as usize];
                el.end = actions.len() as u32;
                el.free_event = e32;
                actions.push(id);
            }
        }

        for seg in snap.device_segments(device) {
            for (i, b) in snap.segment_blocks(seg).iter().enumerate() {
                if b.state == BlockState::ActiveAllocated && !addr_to.contains_key(&b.address) {
                    let block = seg.blocks.start + i as u32;
                    elements.push(new(
                        b.address,
                        b.requested_size,
                        Origin::Ghost,
                        NONE,
                        NONE,
                        block,
                    ));
                    initially.push(elements.len() as u32 - 1);
                }
            }
        }

        initially.reverse();
        if actions.is_empty()
            && let Some(top) = initially.pop()
        {
            // Nothing happened: show the top initial element as the one action (SPEC §2.4).
            elements[top as usize].start = 0;
            actions.push(top);
        }

        let mut slot = 0u32;
        let mut initial_total = 0u64;
        for &i in &initially {
            elements[i as usize].slot = slot;
            slot += 1;
            initial_total += elements[i as usize].size;
        }
        let mut total = initial_total;
        let mut peak_bytes = total;
        let mut peak_action = None;
        let mut totals = Vec::with_capacity(actions.len());
        for (k, &id) in actions.iter().enumerate() {
            let el = &mut elements[id as usize];
            if el.start == k as u32 {
                el.slot = slot;
                slot += 1;
                total += el.size;
            } else {
                total -= el.size;
            }
            if total > peak_bytes {
                peak_bytes = total;
                peak_action = Some(k as u32);
            }
            totals.push(total);
        }

        Layout {
            device,
            elements,
            actions,
            initial: initially,
            initial_total,
            totals,
            peak_bytes,
            peak_action,
        }
    }

    /// Total live bytes right after action `k` (`k = -1`: before the first action).
    pub fn total_after(&self, k: i64) -> u64 {
        if k < 0 {
            self.initial_total
        } else {
            self.totals[k as usize]
        }
    }

    /// The event (absolute index) that caused action `k`, or `NONE` for the synthetic action of
    /// a snapshot without actions.
    pub fn action_event(&self, k: u32) -> u32 {
        let el = &self.elements[self.actions[k as usize] as usize];
        if el.start == k {
            el.alloc_event
        } else {
            el.free_event
        }
    }

    /// A replay cursor positioned before the first action.
    pub fn replay(&self) -> LiveStack<'_> {
        LiveStack::new(self)
    }

    /// Element ids live right after action `k`, in stack order (bottom first).
    pub fn live_after(&self, k: i64) -> Vec<u32> {
        let mut live: Vec<u32> = (0..self.elements.len() as u32)
            .filter(|&i| self.elements[i as usize].live_after(k))
            .collect();
        live.sort_by_key(|&i| self.elements[i as usize].slot);
        live
    }
}

#[cfg(test)]
mod tests;
