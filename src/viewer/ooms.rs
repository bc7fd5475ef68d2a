//! The OOM events of a device for the timeline's markers: where each sits and the explainer's
//! verdict, worked out once on a named thread (the action column is read to find them and the
//! allocator's state rebuilt before each) so the UI never waits for it.

use super::data::{DeviceData, Session};
use crate::analysis::oom;
use crate::model::DeviceIdx;

/// One OOM on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct OomMark {
    /// Device-relative raw event of the `oom`.
    pub event: i64,
    /// The last element-timeline action before it (−1: none): the marker's x.
    pub action: i64,
    /// The explainer's verdict in one line.
    pub verdict: String,
}

/// The marks of `d`, computed now (for `--oom N`, which needs them before the first frame).
pub fn marks(session: &Session, d: DeviceIdx) -> Vec<OomMark> {
    let Some(states) = session.oom_states(d) else { return Vec::new() };
    let expandable = oom::expandable(session.allocator_settings().as_ref());
    let events = crate::archive::events::ArchiveEvents::new(session.root());
    let data = DeviceData::new(session, d);
    let event = |e| (events.time_us(e), events.stack(e));
    let first = session.trace(d).start;
    oom::reports_in(&data.timeline(), session.root(), &states, first, event, expandable)
        .iter()
        .map(|r| OomMark { event: r.event, action: r.action, verdict: oom::one_line(r) })
        .collect()
}
