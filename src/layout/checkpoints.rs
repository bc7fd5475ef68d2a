//! Checkpoints of the live stack every K actions, so the whole stack with offsets at any action
//! is rebuilt by replaying fewer than K actions from the nearest checkpoint.
//!
//! K balances two costs: storage (one copy of the live stack per checkpoint) and the replay a
//! query needs (K steps, each a binary search plus, on a free, a memmove of the stack above).

use super::{LayoutRef, LiveStack};

/// Live stacks before actions `0, K, 2K, ...`: stack `j` is `ids[starts[j]..starts[j + 1]]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checkpoints {
    pub every: u32,
    pub starts: Vec<u32>,
    pub ids: Vec<u32>,
}

/// Borrowed checkpoints (from memory or a mapped archive).
#[derive(Debug, Clone, Copy)]
pub struct CheckpointsRef<'a> {
    pub every: u32,
    pub starts: &'a [u32],
    pub ids: &'a [u32],
}

/// Stored ids are capped near this many (32 MiB), whatever the trace.
const ID_BUDGET: u64 = 8 << 20;
/// Replay steps per query when storage allows it (measured: well under 1 ms, see README).
const MAX_EVERY: u64 = 1024;
const MIN_EVERY: u64 = 64;

/// Chooses K from the number of actions and the summed live-stack size over all actions.
pub fn checkpoint_every(actions: u64, live_sum: u64) -> u32 {
    let avg_live = live_sum / actions.max(1);
    // Storage ≈ actions / K × avg_live ids; stay within the budget.
    let for_storage = (actions * avg_live).div_ceil(ID_BUDGET).max(1);
    // Replay of a free costs a memmove of ~avg_live / 2 ids; keep K × that bounded.
    let for_time = (MAX_EVERY * 2048 / avg_live.max(2048)).max(MIN_EVERY);
    for_time.max(for_storage).next_power_of_two().min(1 << 30) as u32
}

impl Checkpoints {
    /// Replays the whole layout once, recording the stack every K actions.
    pub fn build(layout: LayoutRef<'_>) -> Checkpoints {
        let live_sum = {
            let mut stack = layout.replay();
            let mut sum = 0u64;
            while stack.step().is_some() {
                sum += stack.ids.len() as u64;
            }
            sum
        };
        Checkpoints::build_every(layout, checkpoint_every(layout.actions.len() as u64, live_sum))
    }

    /// Records the stack every `every` actions.
    pub fn build_every(layout: LayoutRef<'_>, every: u32) -> Checkpoints {
        let mut cps = Checkpoints { every, starts: vec![0], ids: Vec::new() };
        let mut stack = layout.replay();
        loop {
            cps.ids.extend_from_slice(&stack.ids);
            cps.starts.push(cps.ids.len() as u32);
            let target = stack.next_action + every as usize;
            if target > layout.actions.len() {
                break;
            }
            stack.advance_to(target);
        }
        cps
    }

    pub fn view(&self) -> CheckpointsRef<'_> {
        CheckpointsRef { every: self.every, starts: &self.starts, ids: &self.ids }
    }
}

impl CheckpointsRef<'_> {
    /// The live stack after `applied` actions (0 = the initial state).
    pub fn stack_at<'a>(&self, layout: LayoutRef<'a>, applied: usize) -> LiveStack<'a> {
        let applied = applied.min(layout.actions.len());
        let j = (applied / self.every as usize).min(self.starts.len() - 2);
        let ids = &self.ids[self.starts[j] as usize..self.starts[j + 1] as usize];
        let mut stack = LiveStack::resume(layout, ids, j * self.every as usize);
        stack.advance_to(applied);
        stack
    }

    /// The live stack right after action `k` (`k = -1`: before the first action).
    pub fn stack_after<'a>(&self, layout: LayoutRef<'a>, k: i64) -> LiveStack<'a> {
        self.stack_at(layout, (k + 1).max(0) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_adapts_to_size() {
        assert_eq!(checkpoint_every(1_000_000, 1_000_000 * 500), 1024);
        // Huge live stacks: storage wins over replay time.
        let k = checkpoint_every(9_000_000, 9_000_000 * 100_000);
        assert!(9_000_000 / k as u64 * 100_000 <= 2 * ID_BUDGET, "{k}");
        assert!(checkpoint_every(10, 0) >= MIN_EVERY as u32);
    }
}
