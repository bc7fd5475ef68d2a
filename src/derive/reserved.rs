//! Reserved (segment) memory over time, from `segment_alloc` / `segment_map` (+size) and
//! `segment_free` / `segment_unmap` (−size) events.
//!
//! The trace says how reserved memory changed, the dump says where it ended (the segments'
//! total size), so the level before the trace is the end minus every change (never below 0).

use crate::model::{DeviceId, NO_TIME, Snapshot};

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reserved {
    /// Reserved before the first event.
    pub initial: u64,
    /// `(time_us, bytes)` after each segment event, in trace order.
    pub points: Vec<(i64, u64)>,
    /// Reserved at the dump: the sum of the device's segment sizes.
    pub final_bytes: u64,
}

pub fn timeline(snap: &Snapshot, device: DeviceId) -> Reserved {
    let ev = &snap.events;
    let mut delta: i128 = 0;
    let mut path = Vec::new();
    for e in snap.trace(device) {
        let sign = ev.action[e].reserved_sign();
        if sign != 0 {
            delta += i128::from(sign) * ev.size[e] as i128;
            path.push((ev.time_us[e], delta));
        }
    }
    let final_bytes: u64 = snap.device_segments(device).map(|s| s.total_size).sum();
    let initial = (final_bytes as i128 - delta).max(0);
    let clamp = |v: i128| v.clamp(0, u64::MAX as i128) as u64;
    Reserved {
        initial: clamp(initial),
        points: path.into_iter().map(|(t, d)| (t, clamp(initial + d))).collect(),
        final_bytes,
    }
}

impl Reserved {
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
