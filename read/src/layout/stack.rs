//! Replaying a layout action by action while keeping the live stack in order.

use super::LayoutRef;
use super::checkpoints::Replay;
use crate::model::ElementId;

/// The live stack at some point of the replay, bottom to top (sorted by slot).
#[derive(Debug, Clone)]
pub struct LiveStack<'a> {
    layout: LayoutRef<'a>,
    /// Live element ids (raw, as the checkpoints store them), bottom first.
    pub ids: Vec<u32>,
    /// `slot` of each live element (ascending), kept beside `ids` so that finding an element to
    /// remove is a binary search over contiguous memory.
    slots: Vec<u32>,
    /// Number of actions applied so far.
    pub next_action: usize,
    pub total: u64,
}

/// What one action did to the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackChange {
    /// Pushed on top.
    Pushed { id: ElementId },
    /// Removed from position `pos`; everything from `pos` on moved down by its size.
    Removed { id: ElementId, pos: usize },
}

impl<'a> LiveStack<'a> {
    /// Before the first action.
    pub fn new(layout: LayoutRef<'a>) -> Self {
        let slots = layout.initial.iter().map(|&i| layout.elements.slot[i as usize]).collect();
        LiveStack { layout, ids: layout.initial.to_vec(), slots, next_action: 0, total: layout.initial_total }
    }

    /// Applies the next action; `None` after the last one.
    pub fn step(&mut self) -> Option<StackChange> {
        let k = self.next_action;
        let &id = self.layout.actions.get(k)?;
        self.next_action += 1;
        let els = &self.layout.elements;
        let size = els.size[id as usize];
        if els.start[id as usize] == k as u32 {
            self.ids.push(id);
            self.slots.push(els.slot[id as usize]);
            self.total += size;
            Some(StackChange::Pushed { id: ElementId(id) })
        } else {
            // A consistent layout always finds it; a corrupted archive must not panic the viewer.
            let Ok(pos) = self.slots.binary_search(&els.slot[id as usize]) else {
                return Some(StackChange::Removed { id: ElementId(id), pos: self.ids.len() });
            };
            self.ids.remove(pos);
            self.slots.remove(pos);
            self.total -= size;
            Some(StackChange::Removed { id: ElementId(id), pos })
        }
    }

    /// `(id, offset)` of every live element, bottom first.
    pub fn with_offsets(&self) -> impl Iterator<Item = (ElementId, u64)> + '_ {
        let mut off = 0u64;
        self.ids.iter().map(move |&id| {
            let here = off;
            off += self.layout.elements.size[id as usize];
            (ElementId(id), here)
        })
    }

    /// The live element ids, bottom first.
    pub fn elements(&self) -> impl Iterator<Item = ElementId> + '_ {
        self.ids.iter().map(|&id| ElementId(id))
    }
}

/// An id [`LazyStack`] leaves where an element was removed.
pub const DEAD: u32 = u32::MAX;

/// What one action did to a [`LazyStack`]'s entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LazyChange {
    /// Element `id` pushed as the last entry.
    Pushed { id: u32 },
    /// Element `id`'s entry at `pos` marked [`DEAD`].
    Removed { id: u32, pos: usize },
    /// Nothing (a free the stack does not hold: only in a corrupted archive).
    Unchanged,
}

/// The live stack for replays that read it only now and then (recording checkpoints, drawing
/// tile columns): removing an element marks its entry dead instead of moving everything above
/// it down — [`LiveStack`] pays a memmove of half the stack per free, which showed in indexing
/// a long trace. Dead entries keep their slot, so the slots stay sorted for the binary search; they go
/// once they are half the entries, and whenever the stack is read whole.
#[derive(Debug, Clone)]
pub struct LazyStack<'a> {
    layout: LayoutRef<'a>,
    /// Element ids bottom first, [`DEAD`] where one was removed.
    ids: Vec<u32>,
    /// `slot` of each entry, dead ones included (ascending).
    slots: Vec<u32>,
    dead: usize,
    pub next_action: usize,
}

impl<'a> LazyStack<'a> {
    /// Before the first action.
    pub fn new(layout: LayoutRef<'a>) -> Self {
        LazyStack::resume(layout, layout.initial, 0)
    }

    /// A stack known to be `ids` after `applied` actions (a checkpoint).
    pub fn resume(layout: LayoutRef<'a>, ids: &[u32], applied: usize) -> Self {
        let slots = ids.iter().map(|&i| layout.elements.slot[i as usize]).collect();
        LazyStack { layout, ids: ids.to_vec(), slots, dead: 0, next_action: applied }
    }

    /// Applies the next action; `false` after the last one.
    pub fn step(&mut self) -> bool {
        let Some(change) = self.step_lazily() else { return false };
        if matches!(change, LazyChange::Removed { .. }) {
            self.compact_if_sparse();
        }
        true
    }

    /// Drops the dead entries once they are more than 64 and half the entries; whether it did.
    pub fn compact_if_sparse(&mut self) -> bool {
        let sparse = self.dead > 64 && 2 * self.dead > self.ids.len();
        if sparse {
            self.compact();
        }
        sparse
    }

    /// Applies the next action without ever compacting: what changed at which entry of
    /// [`Self::entries`]; `None` after the last one.
    pub fn step_lazily(&mut self) -> Option<LazyChange> {
        let k = self.next_action;
        let &id = self.layout.actions.get(k)?;
        self.next_action += 1;
        let els = &self.layout.elements;
        if els.start[id as usize] == k as u32 {
            self.ids.push(id);
            self.slots.push(els.slot[id as usize]);
            return Some(LazyChange::Pushed { id });
        }
        // (A consistent layout always finds it; a corrupted archive must not panic the viewer.)
        match self.slots.binary_search(&els.slot[id as usize]) {
            Ok(pos) if self.ids[pos] != DEAD => {
                self.ids[pos] = DEAD;
                self.dead += 1;
                Some(LazyChange::Removed { id, pos })
            }
            _ => Some(LazyChange::Unchanged),
        }
    }

    /// The entries bottom first, [`DEAD`] where an element was removed since the last
    /// compaction.
    pub fn entries(&self) -> &[u32] {
        &self.ids
    }

    /// Applies actions until `applied` actions are done (or the trace ends).
    pub fn advance_to(&mut self, applied: usize) {
        while self.next_action < applied && self.step() {}
    }

    fn compact(&mut self) {
        if self.dead == 0 {
            return;
        }
        let mut keep = self.ids.iter().map(|&id| id != DEAD);
        self.slots.retain(|_| keep.next().unwrap_or(false));
        self.ids.retain(|&id| id != DEAD);
        self.dead = 0;
    }

    /// The live element ids, bottom first.
    pub fn ids(&mut self) -> &[u32] {
        self.compact();
        &self.ids
    }

    /// The same stack as a [`LiveStack`].
    pub fn into_live(mut self) -> LiveStack<'a> {
        self.compact();
        let total = self.ids.iter().map(|&i| self.layout.elements.size[i as usize]).sum();
        LiveStack { layout: self.layout, ids: self.ids, slots: self.slots, next_action: self.next_action, total }
    }
}

/// The live stack as a checkpointed state: its words are the live element ids, bottom first.
impl Replay for LazyStack<'_> {
    type Word = u32;
    fn applied(&self) -> usize {
        self.next_action
    }
    fn step(&mut self) -> bool {
        LazyStack::step(self)
    }
    fn save(&self, out: &mut Vec<u32>) {
        out.extend(self.ids.iter().copied().filter(|&id| id != DEAD));
    }
}
