//! Replaying a layout action by action while keeping the live stack in order.

use super::Layout;

/// The live stack at some point of the replay, bottom to top (sorted by slot).
pub struct LiveStack<'a> {
    layout: &'a Layout,
    /// Live element ids, bottom first.
    pub ids: Vec<u32>,
    /// Number of actions applied so far.
    pub next_action: usize,
    pub total: u64,
}

/// What one action did to the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Pushed on top.
    Pushed { id: u32 },
    /// Removed from position `pos`; everything from `pos` on moved down by its size.
    Removed { id: u32, pos: usize },
}

impl<'a> LiveStack<'a> {
    pub fn new(layout: &'a Layout) -> Self {
        LiveStack {
            layout,
            ids: layout.initial.clone(),
            next_action: 0,
            total: layout.initial_total,
        }
    }

    /// Applies the next action; `None` after the last one.
    pub fn step(&mut self) -> Option<Step> {
        let k = self.next_action;
        let &id = self.layout.actions.get(k)?;
        self.next_action += 1;
        let el = &self.layout.elements[id as usize];
        if el.start == k as u32 {
            self.ids.push(id);
            self.total += el.size;
            Some(Step::Pushed { id })
        } else {
            let slots = &self.layout.elements;
            let pos = self
                .ids
                .binary_search_by_key(&el.slot, |&i| slots[i as usize].slot)
                .expect("an ending action removes a live element");
            self.ids.remove(pos);
            self.total -= el.size;
            Some(Step::Removed { id, pos })
        }
    }

    /// `(id, offset)` of every live element, bottom first.
    pub fn with_offsets(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let mut off = 0u64;
        self.ids.iter().map(move |&id| {
            let here = off;
            off += self.layout.elements[id as usize].size;
            (id, here)
        })
    }
}
