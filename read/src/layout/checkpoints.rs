//! Checkpoints: a replayed state saved every K steps, so the state after any step is rebuilt by
//! replaying fewer than K steps from the nearest one. One mechanism ([`Replay`], [`Checkpoints`])
//! for any state; its user here is the live stack, every K actions.
//!
//! For the live stack K balances two costs: storage (one copy of the live stack per checkpoint)
//! and the replay a query needs (K steps, each a binary search; a free marks its entry dead, see
//! [`LazyStack`], and the stack is compacted once when read).
//!
//! The live stack's checkpoints are recorded in parts side by side on the rayon pool: a part
//! starts from the stack worked out from the elements' lifetimes (those pushed before it and not
//! yet removed, by slot), and the parts are kept only where each one's replay ends in the stack
//! the next one started from — else the whole is replayed on one thread. Either way the
//! checkpoints are the one replay's, at any thread count.

use rayon::prelude::*;

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

    /// Records the live stack every `every` actions: in parts on the current rayon pool where it
    /// has threads and the trace is long enough, else in one replay.
    pub fn build_every(layout: LayoutRef<'_>, every: u32) -> Checkpoints {
        let saves = layout.actions.len() / every.max(1) as usize + 1;
        let parts = rayon::current_num_threads().min(saves / MIN_SAVES_A_PART);
        if parts >= 2
            && let Some(cps) = Checkpoints::record_in_parts(layout, every, parts)
        {
            return cps;
        }
        Checkpoints::record(LazyStack::new(layout), layout.actions.len(), every)
    }

    /// [`Checkpoints::record`] of the live stack in `parts` parts side by side, or `None` where
    /// a part's replay did not end in the stack the next part started from (a layout whose
    /// lifetimes and actions disagree: never one [`super::Layout::build`] makes).
    fn record_in_parts(layout: LayoutRef<'_>, every: u32, parts: usize) -> Option<Checkpoints> {
        let saves = layout.actions.len() / every.max(1) as usize + 1;
        let firsts: Vec<usize> = (0..=parts).map(|p| saves * p / parts).collect();
        let outs: Vec<Part> = firsts.par_windows(2).map(|w| Part::record(layout, every, w[0], w[1])).collect();
        if outs.windows(2).any(|w| w[0].end.as_slice() != w[1].first()) {
            return None;
        }
        // The parts' states copied in side by side into one allocation (gen9m: 7.4 M ids, 18 ms
        // appended one part after another, growing as they came).
        let ids = vec![0; outs.iter().map(|p| p.ids.len()).sum()];
        let mut cps = Checkpoints { every, starts: vec![0], ids };
        let (mut rest, mut base, mut into) = (cps.ids.as_mut_slice(), 0, Vec::with_capacity(outs.len()));
        for part in &outs {
            cps.starts.extend(part.ends.iter().map(|&e| base + e));
            base += part.ids.len() as u32;
            let (here, after) = std::mem::take(&mut rest).split_at_mut(part.ids.len());
            into.push(here);
            rest = after;
        }
        into.into_par_iter().zip(&outs).for_each(|(here, part)| here.copy_from_slice(&part.ids));
        Some(cps)
    }
}

/// A part of the live stack's checkpoints should save at least this many states (~64 K actions
/// replayed at K = 1024 beside a pass over the element columns for its first).
const MIN_SAVES_A_PART: usize = 64;

/// The states a part saved, and the stack its replay ended in (empty for the last part).
struct Part {
    ids: Vec<u32>,
    /// Where each saved state ends in `ids`.
    ends: Vec<u32>,
    end: Vec<u32>,
}

impl Part {
    /// Saves the states before actions `from·every, …, (to − 1)·every`, from the first worked out
    /// from the elements' lifetimes; then replays on to `to·every` when that is not the last.
    fn record(layout: LayoutRef<'_>, every: u32, from: usize, to: usize) -> Part {
        let at = from * every as usize;
        let mut stack = match from {
            0 => LazyStack::new(layout),
            _ => LazyStack::resume(layout, &live_before(layout, at), at),
        };
        // Not the last part: the next one starts `to·every` actions in.
        let next = to * every as usize <= layout.actions.len();
        let mut part = Part { ids: Vec::new(), ends: Vec::with_capacity(to - from), end: Vec::new() };
        for j in from..to {
            crate::pace::tick();
            stack.save(&mut part.ids);
            part.ends.push(part.ids.len() as u32);
            if j + 1 < to || next {
                stack.advance_to((j + 1) * every as usize);
            }
        }
        if next {
            part.end = stack.ids().to_vec();
        }
        part
    }

    /// The first state it saved.
    fn first(&self) -> &[u32] {
        &self.ids[..self.ends.first().map_or(0, |&e| e as usize)]
    }
}

/// The live stack before action `at` from the elements' lifetimes: pushed by an earlier action
/// or live before the trace, and not removed by an earlier action; by slot.
fn live_before(layout: LayoutRef<'_>, at: usize) -> Vec<u32> {
    let (start, end) = (layout.elements.start, layout.elements.end);
    let at = at as u32;
    let live = |i: usize| (start[i] == NONE || start[i] < at) && (end[i] == NONE || end[i] >= at);
    let mut ids: Vec<u32> = (0..start.len()).filter(|&i| live(i)).map(|i| i as u32).collect();
    ids.sort_unstable_by_key(|&i| layout.elements.slot[i as usize]);
    ids
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

    /// The live stack's checkpoints in parts are the one replay's, on real traces (frees,
    /// ghosts, free-only elements, pools, graphs), at any part count — and where lifetimes and
    /// actions disagree, the one replay is what is kept.
    #[test]
    fn checkpoints_in_parts_are_the_one_replays() {
        use crate::layout::Layout;
        let mut disagreed = 0;
        for name in ["gpt2_small", "oom_streams", "cudagraph", "expandable", "frag_oom", "resnet"] {
            let snap = crate::fixtures::snapshot(name);
            for device in snap.device_ids() {
                let l = Layout::build(&snap, device);
                let view = l.view();
                for every in [1, 2, 64] {
                    let one = Checkpoints::record(LazyStack::new(view), view.actions.len(), every);
                    let saves = view.actions.len() / every as usize + 1;
                    for parts in [2, 3, 16].into_iter().filter(|&p| p <= saves) {
                        let got = Checkpoints::record_in_parts(view, every, parts);
                        assert_eq!(got.as_ref(), Some(&one), "{name} {device:?} every {every}, {parts} parts");
                    }
                }
                // An element removed earlier than its action says: the parts disagree.
                let mut bad = l.clone();
                let Some(id) =
                    (0..bad.elements.end.len()).find(|&i| bad.elements.end[i] > 2 && bad.elements.end[i] != NONE)
                else {
                    continue;
                };
                bad.elements.end[id] = 0;
                let one = Checkpoints::record(LazyStack::new(bad.view()), bad.actions.len(), 1);
                disagreed += usize::from(Checkpoints::record_in_parts(bad.view(), 1, 4).is_none());
                let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
                assert_eq!(pool.install(|| Checkpoints::build_every(bad.view(), 1)), one, "{name}");
            }
        }
        assert!(disagreed > 0, "no damaged layout's parts disagreed: the one replay's path untested");
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
