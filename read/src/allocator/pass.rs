//! The index's backward pass over a device's events: the states saved every K events and the
//! figures after each action, in one or two parts ([`Part`]); K sized from the states' estimated
//! size ([`estimate_words`], [`every_for`]).

use crate::layout::{Replay, partition};
use crate::model::{Action, DeviceId, Snapshot};

use super::replay::{BLOCK_WORDS, SEGMENT_WORDS};
use super::{Cut, EventColumns, Figures, State, Undo, cut};

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
/// that reaches the first event first was the whole pass. On more cores a pass runs as many
/// spans with cuts fixed beforehand: each starts as an early part does (untracked to `from`, or
/// from the state there worked out beforehand, stretch by stretch: [`super::Stretch`]) and stops
/// as a late part does (at `to`).
#[derive(Debug, Clone, Copy)]
pub enum Part<'c> {
    Whole,
    Late(&'c Cut),
    Early {
        undone: usize,
    },
    /// The stretch after `from` undone events until `to` are undone (`to` = the trace's events:
    /// to the first event), from `start` — the state after `from` undone events — where given.
    Span {
        from: usize,
        to: usize,
        start: Option<&'c State>,
    },
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
    let (from, to) = match part {
        Part::Whole | Part::Late(_) => (0, n),
        Part::Early { undone } => (undone.min(n), n),
        Part::Span { from, to, .. } => (from.min(n), to.clamp(from.min(n), n)),
    };
    let mut k = actions;
    if matches!(part, Part::Early { .. }) || from > 0 {
        // An early part (or a span) starts from the state at its cut and hands over the actions
        // before it.
        undo.undone = from;
        undo.state = match part {
            Part::Span { start: Some(state), .. } => state.clone(),
            _ => std::mem::take(&mut undo.state).undo_untracked(events, snap.trace(device), undo.undone),
        };
        let cut = (undo.first + n - undo.undone) as u32;
        k = partition(actions as u32, |k| action_event(k as usize) < cut) as usize;
    }
    undo.figures = Figures::of(&undo.state, true);
    let mut replay = WithFigures { undo, k, next_event: None, action_event, at_action };
    // The states after every `every` undone events from `from`, the last one (after every event)
    // by the part that gets to the first event; a late part is the whole pass until its cut is
    // settled.
    let (mut saved, mut end) = (from..if to == n { n + 1 } else { to }, to);
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
    for (i, &action) in actions[snap.trace(device)].iter().rev().enumerate() {
        crate::pace::at(i);
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
