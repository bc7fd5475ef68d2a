//! Checkpoints: a replayed state saved every K steps, so the state after any step is rebuilt by
//! replaying fewer than K steps from the nearest one. One mechanism ([`Replay`], [`Checkpoints`])
//! for any state; its user here is the live stack, every K actions.
//!
//! For the live stack K balances two costs: storage (one copy of the live stack per checkpoint)
//! and the replay a query needs (K steps, each a binary search; a free marks its entry dead, see
//! [`LazyStack`], and the stack is compacted once when read).

use super::{LayoutRef, LazyStack, LiveStack};
use crate::model::NONE;

/// A state replayed step by step from a start, that can be saved as a flat run of words and
/// resumed from one: the live stack ([`LazyStack`]: its element ids) and the allocator's state
/// (`allocator::Undo`).
pub trait Replay {
    type Word: Copy;
    /// Steps applied so far.
    fn applied(&self) -> usize;
    /// Applies the next step; `false` when there is none.
    fn step(&mut self) -> bool;
    /// Appends the state, flat, to `out`.
    fn save(&self, out: &mut Vec<Self::Word>);
}

/// States before steps `0, K, 2K, ...`, each saved flat: state `j` is
/// `ids[starts[j]..starts[j + 1]]`. For the live stack the words are element ids.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checkpoints<T = u32> {
    pub every: u32,
    pub starts: Vec<u32>,
    pub ids: Vec<T>,
}

/// Borrowed checkpoints (from memory or a mapped archive).
#[derive(Debug, Clone, Copy)]
pub struct CheckpointsRef<'a, T = u32> {
    pub every: u32,
    pub starts: &'a [u32],
    pub ids: &'a [T],
}

impl<T: Copy> Checkpoints<T> {
    /// Replays `state` through `steps` steps, saving it every `every` steps (and at the start).
    pub fn record<R: Replay<Word = T>>(mut state: R, steps: usize, every: u32) -> Checkpoints<T> {
        let mut cps = Checkpoints { every, starts: vec![0], ids: Vec::new() };
        loop {
            state.save(&mut cps.ids);
            cps.starts.push(cps.ids.len() as u32);
            let target = state.applied() + every as usize;
            if target > steps {
                return cps;
            }
            while state.applied() < target && state.step() {}
        }
    }

    pub fn view(&self) -> CheckpointsRef<'_, T> {
        CheckpointsRef { every: self.every, starts: &self.starts, ids: &self.ids }
    }
}

impl<'a, T: Copy> CheckpointsRef<'a, T> {
    /// The state after `applied` steps: the nearest saved one before it, given to `resume` with
    /// the steps it had applied, then replayed (fewer than `every` steps).
    pub fn restore<R: Replay<Word = T>>(&self, applied: usize, resume: impl FnOnce(&'a [T], usize) -> R) -> R {
        let j = self.nearest(applied);
        let words = match (self.starts.get(j), self.starts.get(j + 1)) {
            (Some(&a), Some(&b)) if a <= b => self.ids.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        };
        let mut state = resume(words, j * self.every as usize);
        while state.applied() < applied && state.step() {}
        state
    }

    /// The saved state [`Self::restore`] starts from for `applied` steps.
    fn nearest(&self, applied: usize) -> usize {
        (applied / self.every.max(1) as usize).min(self.starts.len().saturating_sub(2))
    }

    /// Steps applied by the saved state [`Self::restore`] starts from: a replay at fewer steps
    /// than this one reaches `applied` sooner by restoring than by stepping on.
    pub fn saved_at(&self, applied: usize) -> usize {
        self.nearest(applied) * self.every as usize
    }
}

/// Stored ids are capped near this many (32 MiB), whatever the trace.
const ID_BUDGET: u64 = 8 << 20;
/// Replay steps per query when storage allows it (measured: well under 1 ms, see docs/performance.md).
const MAX_EVERY: u64 = 1024;
const MIN_EVERY: u64 = 64;

/// Chooses K from the number of actions and the summed live-stack size over all actions.
pub fn checkpoint_every(actions: u64, live_sum: u64) -> u32 {
    let avg_live = live_sum / actions.max(1);
    // Storage ≈ actions / K × avg_live ids; stay within the budget.
    let for_storage = (actions * avg_live).div_ceil(ID_BUDGET).max(1);
    // Resuming costs a copy of ~avg_live ids and the compaction of what the replay freed; keep
    // K × that bounded (K is in the archive: changing this rule changes its bytes).
    let for_time = (MAX_EVERY * 2048 / avg_live.max(2048)).max(MIN_EVERY);
    for_time.max(for_storage).next_power_of_two().min(1 << 30) as u32
}

/// The live stack's size after each action, summed over every action — what a replay would
/// count, from each element's lifetime instead (a replay pays a memmove per free): an element
/// pushed by action `s` and removed by action `e` is on the stack after `e − s` actions (to the
/// end when never removed); one live before the trace, after its first `e`.
pub fn live_sum(layout: LayoutRef<'_>) -> u64 {
    let (actions, els) = (layout.actions, &layout.elements);
    let n = actions.len() as u64;
    // The action that pushes or removes `id` at `k`, if `k` is one of its actions.
    let acts = |k: u32, id: usize| k != NONE && actions.get(k as usize) == Some(&(id as u32));
    let end = |id: usize| if acts(els.end[id], id) { u64::from(els.end[id]) } else { n };
    let pushed: u64 = (0..els.start.len())
        .filter(|&id| acts(els.start[id], id))
        .map(|id| end(id).saturating_sub(u64::from(els.start[id])))
        .sum();
    pushed + layout.initial.iter().map(|&id| end(id as usize)).sum::<u64>()
}

impl Checkpoints {
    /// The live stack's checkpoints: K sized from the elements' lifetimes, then one replay
    /// records them.
    pub fn build(layout: LayoutRef<'_>) -> Checkpoints {
        Checkpoints::build_every(layout, checkpoint_every(layout.actions.len() as u64, live_sum(layout)))
    }

    /// Records the live stack every `every` actions.
    pub fn build_every(layout: LayoutRef<'_>, every: u32) -> Checkpoints {
        Checkpoints::record(LazyStack::new(layout), layout.actions.len(), every)
    }
}

impl CheckpointsRef<'_> {
    /// The live stack after `applied` actions (0 = the initial state).
    pub fn stack_at<'a>(&self, layout: LayoutRef<'a>, applied: usize) -> LiveStack<'a> {
        self.lazy_stack_at(layout, applied).into_live()
    }

    /// [`Self::stack_at`], for a replay that goes on and reads the stack only now and then.
    pub fn lazy_stack_at<'a>(&self, layout: LayoutRef<'a>, applied: usize) -> LazyStack<'a> {
        let applied = applied.min(layout.actions.len());
        self.restore(applied, |ids, at| LazyStack::resume(layout, ids, at))
    }

    /// The live stack right after action `k` (`k = -1`: before the first action).
    pub fn stack_after<'a>(&self, layout: LayoutRef<'a>, k: i64) -> LiveStack<'a> {
        self.stack_at(layout, (k + 1).max(0) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter that saves its value: the mechanism without a layout.
    struct Count {
        at: usize,
        value: u64,
        end: usize,
    }

    impl Replay for Count {
        type Word = u64;
        fn applied(&self) -> usize {
            self.at
        }
        fn step(&mut self) -> bool {
            if self.at == self.end {
                return false;
            }
            self.at += 1;
            self.value += self.at as u64;
            true
        }
        fn save(&self, out: &mut Vec<u64>) {
            out.push(self.value);
        }
    }

    #[test]
    fn any_state_is_rebuilt_from_the_nearest_checkpoint() {
        let cps = Checkpoints::record(Count { at: 0, value: 0, end: 20 }, 20, 8);
        assert_eq!((cps.starts.as_slice(), cps.ids.as_slice()), ([0, 1, 2, 3].as_slice(), [0, 36, 136].as_slice()));
        for applied in 0..=20usize {
            let mut resumed_from = usize::MAX;
            let got = cps.view().restore(applied, |w, at| {
                resumed_from = at;
                Count { at, value: w[0], end: 20 }
            });
            assert_eq!((got.at, got.value), (applied, (applied * (applied + 1) / 2) as u64), "{applied}");
            assert!(applied - resumed_from < 8, "replayed fewer than K steps");
        }
    }

    #[test]
    fn every_adapts_to_size() {
        assert_eq!(checkpoint_every(1_000_000, 1_000_000 * 500), 1024);
        // Huge live stacks: storage wins over replay time.
        let k = checkpoint_every(9_000_000, 9_000_000 * 100_000);
        assert!(9_000_000 / k as u64 * 100_000 <= 2 * ID_BUDGET, "{k}");
        assert!(checkpoint_every(10, 0) >= MIN_EVERY as u32);
    }
}
