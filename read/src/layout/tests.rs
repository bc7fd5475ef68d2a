//! Hand-written 5–20 event traces checked against SPEC §2 by hand.

use super::*;
use crate::model::{EventRow, Snapshot};
use crate::schema::builder::{Builder, TraceList};
use crate::schema::{BlockRow, SegmentRow};

/// `events`: `(action, addr, size)`; `"annotate:TEXT"` is an `annotate` event labelling `addr`.
fn snap(events: &[(&str, u64, u64)], ghosts: &[(u64, u64)]) -> Snapshot {
    let mut b = Builder::default();
    for &(action, addr, size) in events {
        let (action, text) = action.split_once(':').unwrap_or((action, ""));
        let name = b.intern_str(action);
        let user_metadata = if text.is_empty() { NONE } else { b.intern_str(text) };
        let row = EventRow {
            action: Action::from_name(action.as_bytes()),
            other_action: name,
            addr: Some(addr),
            size: Some(size),
            user_metadata,
            ..EventRow::default()
        };
        b.push_event(&row);
    }
    if !ghosts.is_empty() {
        let seg = SegmentRow { address: Some(ghosts[0].0), ..SegmentRow::default() };
        let blocks: Vec<BlockRow> = ghosts
            .iter()
            .map(|&(addr, size)| BlockRow {
                address: Some(addr),
                size: Some(size),
                requested_size: Some(size),
                state: Some(BlockState::ActiveAllocated),
                ..BlockRow::default()
            })
            .collect();
        b.push_segment(&seg, &blocks, false).unwrap();
    }
    let n = events.len() as u32;
    b.finish(vec![TraceList::Range(0, n)], None, false).unwrap()
}

#[test]
fn alloc_free_moves_elements_above_down() {
    let s = snap(
        &[("alloc", 1, 10), ("alloc", 2, 20), ("alloc", 3, 30), ("free_requested", 1, 10), ("free_completed", 1, 10)],
        &[],
    );
    let l = Layout::build(&s, DeviceId(0));
    assert_eq!(l.actions, vec![0, 1, 2, 0]);
    assert_eq!(l.totals, vec![10, 30, 60, 50]);
    assert_eq!((l.peak_bytes, l.peak_action), (60, Some(ActionIdx(2))));
    let mut r = l.view().replay();
    while r.step().is_some() {}
    assert_eq!(r.with_offsets().collect::<Vec<_>>(), vec![(ElementId(1), 0), (ElementId(2), 20)]);
}

#[test]
fn annotate_labels_the_live_element_and_is_not_an_action() {
    let s = snap(
        &[
            ("alloc", 1, 10),
            ("annotate:kv", 1, 0),
            ("annotate:kv v2", 1, 0), // the last label wins
            ("free_completed", 1, 10),
            ("alloc", 1, 4),          // a new alloc at the address does not inherit it
            ("annotate:early", 7, 0), // nothing live at 7 yet: waits for the free_only there
            ("free_completed", 7, 3),
            ("annotate:weights", 100, 0), // the ghost at 100
            ("annotate:stale", 5, 0),     // never anything at 5: dropped
            ("annotate:gone", 9, 0),      // dropped by the alloc at 9
            ("alloc", 9, 2),
        ],
        &[(100, 40)],
    );
    let l = Layout::build(&s, DeviceId(0));
    assert_eq!(l.actions.len(), 5, "annotate events are not actions");
    let text = |id: u32| l.view().elements.annotation_of(ElementId(id)).map(|t| s.str(t).to_owned());
    let by_addr = |addr: u64, origin: Origin| {
        (0..l.elements.addr.len() as u32)
            .find(|&i| l.elements.addr[i as usize] == addr && Origin::from_u8(l.elements.origin[i as usize]) == origin)
            .unwrap()
    };
    assert_eq!(text(0), Some("kv v2".into()));
    assert_eq!(text(1), None, "re-allocated at the same address");
    assert_eq!(text(by_addr(7, Origin::FreeOnly)), Some("early".into()));
    assert_eq!(text(by_addr(100, Origin::Ghost)), Some("weights".into()));
    assert_eq!(text(by_addr(9, Origin::Alloc)), None);
    assert_eq!(l.elements.annotated.len(), 3);
}

#[test]
fn free_only_sits_above_ghosts_first_freed_on_top() {
    let s = snap(&[("free_completed", 7, 5), ("alloc", 1, 10), ("free_completed", 8, 3)], &[(100, 40), (200, 50)]);
    let l = Layout::build(&s, DeviceId(0));
    let origins: Vec<_> = l.elements.origin.iter().map(|&o| Origin::from_u8(o)).collect();
    assert_eq!(origins, [Origin::FreeOnly, Origin::Alloc, Origin::FreeOnly, Origin::Ghost, Origin::Ghost]);
    // Bottom to top: ghosts in reverse segment order, then free_only in reverse trace order.
    assert_eq!(l.initial, vec![4, 3, 2, 0]);
    assert_eq!(l.initial_total, 98);
    assert_eq!(l.totals, vec![93, 103, 100]);
    assert_eq!(l.view().element(ElementId(0)).start_i64(), -1);
    assert_eq!(l.view().element(ElementId(0)).end_opt(), Some(ActionIdx(0)));
}

#[test]
fn pending_free_is_still_live_until_completed() {
    let s = snap(&[("alloc", 1, 10), ("free_requested", 1, 10), ("alloc", 2, 5), ("free_completed", 1, 10)], &[]);
    let l = Layout::build(&s, DeviceId(0));
    assert_eq!(l.totals, vec![10, 15, 5]);
}

#[test]
fn no_actions_makes_top_initial_element_action_zero() {
    let s = snap(&[], &[(100, 40), (200, 50)]);
    let l = Layout::build(&s, DeviceId(0));
    // initial (bottom→top) would be [1, 0]; 0 becomes action 0.
    assert_eq!(l.actions, vec![0]);
    assert_eq!(l.initial, vec![1]);
    assert_eq!(l.elements.start[0], 0);
    assert_eq!(l.totals, vec![90]);
}

#[test]
fn checkpoints_rebuild_the_stack_at_every_action() {
    let mut events = Vec::new();
    for i in 0..300u64 {
        events.push(("alloc", 1000 + i, 1 + i % 7));
        if i % 3 == 2 {
            events.push(("free_completed", 1000 + i - 1, 1 + (i - 1) % 7));
        }
    }
    let s = snap(&events, &[(1, 5), (2, 6)]);
    let l = Layout::build(&s, DeviceId(0));
    // Every 64 actions, to get several checkpoints out of this small trace.
    let cps = Checkpoints::build_every(l.view(), 64);
    assert!(cps.starts.len() > 5);
    let mut replay = l.view().replay();
    for k in -1..l.actions.len() as i64 {
        if k >= 0 {
            replay.step();
        }
        let got = cps.view().stack_after(l.view(), k);
        assert_eq!(got.ids, replay.ids, "stack after action {k}");
        assert_eq!(got.total, l.view().total_after(k));
    }
}

/// K is sized from the live stack summed over every action: from the elements' lifetimes it is
/// what a replay counts, on real traces (frees, ghosts, free-only elements, pools, graphs).
#[test]
fn live_sum_from_lifetimes_is_the_replays() {
    for name in ["gpt2_small", "oom_streams", "cudagraph", "expandable", "frag_oom", "resnet"] {
        let snap = crate::fixtures::snapshot(name);
        for device in snap.device_ids() {
            let l = Layout::build(&snap, device);
            let mut stack = l.view().replay();
            let mut replayed = 0u64;
            while stack.step().is_some() {
                replayed += stack.ids.len() as u64;
            }
            assert!(replayed > 0, "{name}");
            assert_eq!(super::checkpoints::live_sum(l.view()), replayed, "{name} device {device:?}");
        }
    }
}
