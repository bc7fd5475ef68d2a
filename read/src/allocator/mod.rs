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
mod pass;
mod replay;
mod state;

pub use blocks::{Blocks, Set};
pub use cut::Cut;
pub use figures::Figures;
pub use pass::{Part, estimate_words, every_for, pass};
pub use replay::{Replayed, SavedStates, Undo, states};
pub use state::{Block, EventColumns, OomState, Segment, SegmentMap, State, Stretch, Summary};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Checkpoints, CheckpointsRef};
    use crate::model::{DeviceId, Snapshot};

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

    /// Undoing a trace stretch by stretch, each stretch read without the state before it
    /// ([`Stretch::of`]), gives the state an untracked undo of the same events gives, at every
    /// cut, on real traces (pending frees, expandable segments, private pools).
    #[test]
    fn stretches_undone_one_after_another_give_the_untracked_undos_state() {
        for name in ["frag_oom", "expandable", "cudagraph", "oom_streams"] {
            let snap = crate::fixtures::snapshot(name);
            let d = DeviceId(0);
            let trace = snap.trace(d);
            let n = trace.len();
            for parts in [1, 2, 7, 50] {
                let cuts: Vec<usize> = (0..=parts).map(|i| n * i / parts).collect();
                let mut state = State::at_dump(&snap, d);
                for w in cuts.windows(2) {
                    let stretch = Stretch::of(&snap.events, trace.end - w[1]..trace.end - w[0]);
                    state = state.undo_stretch(&snap.events, &stretch);
                    let want = State::at_dump(&snap, d).undo_untracked(&snap.events, trace.clone(), w[1]);
                    assert!(state == want, "{name}: {parts} stretches, {} undone", w[1]);
                }
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
