//! Reserved (segment) memory over time, from `segment_alloc` / `segment_map` (+size) and
//! `segment_free` / `segment_unmap` (−size) events.
//!
//! The trace says how reserved memory changed, the dump says where it ended (the segments'
//! total size), so the level before the trace is the end minus every change (never below 0).

use crate::model::{DeviceId, EventValues, NO_TIME, Snapshot};

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReservedTimeline {
    /// Reserved before the first event.
    pub initial: u64,
    /// `(time_us, bytes)` after each segment event, in trace order.
    pub points: Vec<(i64, u64)>,
    /// Reserved at the dump: the sum of the device's segment sizes.
    pub final_bytes: u64,
}

/// `rows`: where the events' values are (`&snap.events` but for an index read's model).
pub fn timeline(snap: &Snapshot, rows: &dyn EventValues, device: DeviceId) -> ReservedTimeline {
    let ev = &snap.events;
    let mut delta: i128 = 0;
    let mut path = Vec::new();
    for e in snap.trace(device) {
        let sign = ev.action[e].reserved_sign();
        if sign != 0 {
            // A segment event's row is held even where an index read let go of the block events'.
            let v = rows.values(e).expect("segment events' rows are kept");
            delta += i128::from(sign) * v.size as i128;
            path.push((v.time_us, delta));
        }
    }
    let final_bytes: u64 = snap.device_segments(device).map(|s| s.total_size).sum();
    let initial = (final_bytes as i128 - delta).max(0);
    let clamp = |v: i128| v.clamp(0, u64::MAX as i128) as u64;
    ReservedTimeline {
        initial: clamp(initial),
        points: path.into_iter().map(|(t, d)| (t, clamp(initial + d))).collect(),
        final_bytes,
    }
}

impl ReservedTimeline {
    /// The highest level and when it was first reached (`None`: before the trace).
    pub fn peak(&self) -> (u64, Option<i64>) {
        let mut best = (self.initial, None);
        for &(t, b) in &self.points {
            if b > best.0 {
                best = (b, (t != NO_TIME).then_some(t));
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Action, DeviceId, EventRow};
    use crate::schema::builder::{Builder, TraceList};
    use crate::schema::{BlockRow, SegmentRow};

    #[test]
    fn reserved_memory_follows_segment_events_back_from_the_dump() {
        let mut b = Builder::default();
        for (action, size, t) in
            [("segment_alloc", 100, 10), ("alloc", 8, 15), ("segment_map", 50, 20), ("segment_free", 100, 30)]
        {
            let name = b.intern_str(action);
            let row = EventRow {
                action: Action::from_name(action.as_bytes()),
                other_action: name,
                addr: Some(1 << 20),
                size: Some(size),
                time_us: t,
                ..EventRow::default()
            };
            b.push_event(&row);
        }
        // At the dump: 150 bytes in two segments (so 100 were reserved before the trace).
        for (address, total) in [(0u64, 120u64), (4096, 30)] {
            let seg = SegmentRow { address: Some(address), total_size: Some(total), ..SegmentRow::default() };
            b.push_segment(&seg, &[BlockRow::default()].map(|r| BlockRow { size: Some(total), ..r }), false).unwrap();
        }
        let snap = b.finish(vec![TraceList::Range(0, 4)], None, false).unwrap();
        let r = timeline(&snap, &snap.events, DeviceId(0));
        assert_eq!(
            r,
            ReservedTimeline { initial: 100, points: vec![(10, 200), (20, 250), (30, 150)], final_bytes: 150 }
        );
        assert_eq!(r.peak(), (250, Some(20)));
        // A device with no segment events: flat at what the dump holds.
        assert_eq!(
            timeline(&snap, &snap.events, DeviceId(1)),
            ReservedTimeline { initial: 0, points: vec![], final_bytes: 0 }
        );
    }
}
