//! The state after any event, by undoing the events after it from the dump: every state a
//! question wants in one backward pass ([`states`]), or as a checkpointed replay ([`Undo`]: the
//! words a saved state is kept in).

use std::collections::{BTreeMap, BTreeSet};

use crate::layout::Replay;
use crate::model::{Action, DeviceId, Snapshot};

use super::{Block, EventColumns, Figures, OomState, Segment, State, Summary};

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
    pub(super) events: &'s dyn EventColumns,
    pub(super) first: usize,
    pub(super) n: usize,
    pub(super) undone: usize,
    pub state: State,
    pub figures: Figures,
}

pub(super) const SEGMENT_WORDS: usize = 6;
pub(super) const BLOCK_WORDS: usize = 4;

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
