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

/// A device's OOM marks with where each sits on either x axis, sorted once on the marks' thread:
/// a frame searches the visible range ([`super::marks`]) instead of walking every mark.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OomMarks {
    pub marks: Vec<OomMark>,
    /// On the action axis: each mark's x (after its action), ascending, and which mark it is.
    by_action: Placed,
    /// On the wall-time axis: the time of each mark's action (marks without one left out).
    by_time: Placed,
}

/// Marks' x positions, ascending, and the index in [`OomMarks::marks`] of each.
#[derive(Debug, Clone, PartialEq, Default)]
struct Placed {
    xs: Vec<f64>,
    mark: Vec<u32>,
}

impl Placed {
    fn new(mut at: Vec<(f64, u32)>) -> Placed {
        at.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let (xs, mark) = at.into_iter().unzip();
        Placed { xs, mark }
    }
}

impl OomMarks {
    /// The marks of `d` and their places (the time axis reads the time of each mark's action).
    pub fn compute(session: &Session, d: DeviceIdx) -> OomMarks {
        let marks = self::marks(session, d);
        let time =
            |_, m: &OomMark| session.action_time(d, crate::model::ActionIdx(m.action.max(0) as u32)).map(|t| t as f64);
        OomMarks::place(marks, time)
    }

    /// `marks` placed on both axes: after its action on the action axis, at the time `time` gives
    /// its action (the mark's index, the mark) on the wall-time axis.
    pub fn place(marks: Vec<OomMark>, time: impl Fn(usize, &OomMark) -> Option<f64>) -> OomMarks {
        let by_action = Placed::new(marks.iter().enumerate().map(|(i, m)| (m.action as f64 + 1.0, i as u32)).collect());
        let by_time =
            Placed::new(marks.iter().enumerate().filter_map(|(i, m)| Some((time(i, m)?, i as u32))).collect());
        OomMarks { marks, by_action, by_time }
    }

    /// As a web worker sends them back ([`Self::decode`]): the mark count, then each mark's
    /// event, action, verdict (length, UTF-8) and its action's time (1 and the time's `f64`
    /// bits, or 0).
    pub fn encode(&self) -> Vec<u8> {
        let mut times = vec![None; self.marks.len()];
        for (&x, &m) in self.by_time.xs.iter().zip(&self.by_time.mark) {
            times[m as usize] = Some(x);
        }
        let mut w = crate::wire::Writer::default();
        w.u64(self.marks.len() as u64);
        for (m, time) in self.marks.iter().zip(times) {
            w.i64(m.event);
            w.i64(m.action);
            w.bytes(m.verdict.as_bytes());
            match time {
                Some(t) => {
                    w.u64(1);
                    w.u64(t.to_bits());
                }
                None => w.u64(0),
            }
        }
        w.0
    }

    /// [`Self::encode`]'s bytes, placed again; `None` for anything else.
    pub fn decode(bytes: &[u8]) -> Option<OomMarks> {
        let mut r = crate::wire::Reader(bytes);
        let n = r.count(32)?;
        let mut marks = Vec::with_capacity(n);
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let (event, action) = (r.i64()?, r.i64()?);
            let verdict = std::str::from_utf8(r.bytes()?).ok()?.to_owned();
            times.push(match r.u64()? {
                0 => None,
                1 => Some(f64::from_bits(r.u64()?)),
                _ => return None,
            });
            marks.push(OomMark { event, action, verdict });
        }
        r.end()?;
        Some(OomMarks::place(marks, |i, _| times[i]))
    }

    fn placed(&self, time_axis: bool) -> &Placed {
        if time_axis { &self.by_time } else { &self.by_action }
    }

    /// The marks drawn in data x `[lo, hi]` on either axis, at most one per `gap`: `(x, mark)`.
    pub fn visible(&self, time_axis: bool, lo: f64, hi: f64, gap: f64) -> impl Iterator<Item = (f64, &OomMark)> {
        let p = self.placed(time_axis);
        super::marks::thinned(&p.xs, lo, hi, gap).into_iter().map(move |i| (p.xs[i], &self.marks[p.mark[i] as usize]))
    }

    /// The mark a pointer over data x `[lo, hi]` shows: the last one there.
    pub fn under(&self, time_axis: bool, lo: f64, hi: f64) -> Option<&OomMark> {
        let p = self.placed(time_axis);
        super::marks::last_within(&p.xs, lo, hi).map(|i| &self.marks[p.mark[i] as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(event: i64, action: i64) -> OomMark {
        OomMark { event, action, verdict: format!("oom {event}") }
    }

    /// Marks sit after their action (−1: at 0) or at its time; a view finds those it shows, one
    /// per gap, and the pointer the last one under it.
    #[test]
    fn a_view_finds_the_marks_it_shows() {
        let marks = vec![mark(10, -1), mark(20, 4), mark(21, 4), mark(30, 9), mark(40, 50)];
        let time = |_, m: &OomMark| (m.action != 9).then_some(1000.0 + 10.0 * m.action as f64);
        let o = OomMarks::place(marks, time);
        let events = |it: &mut dyn Iterator<Item = (f64, &OomMark)>| it.map(|(x, m)| (x, m.event)).collect::<Vec<_>>();
        assert_eq!(events(&mut o.visible(false, 0.0, 10.0, 0.5)), [(0.0, 10), (5.0, 20), (10.0, 30)]);
        assert_eq!(events(&mut o.visible(false, 4.0, 60.0, 20.0)), [(5.0, 20), (51.0, 40)]);
        // The third mark has no time: not on the time axis.
        assert_eq!(events(&mut o.visible(true, 0.0, 2000.0, 1.0)), [(990.0, 10), (1040.0, 20), (1500.0, 40)]);
        assert_eq!(o.under(false, 4.5, 5.5).map(|m| m.event), Some(21));
        assert_eq!(o.under(false, 6.0, 9.0), None);
        assert_eq!(o.under(true, 1030.0, 1045.0).map(|m| m.event), Some(21));
        // As a web worker sends them back: the same marks in the same places; cut short, refused.
        let sent = o.encode();
        assert_eq!(OomMarks::decode(&sent).as_ref(), Some(&o));
        assert_eq!(OomMarks::decode(&sent[..sent.len() - 1]), None);
        assert_eq!(OomMarks::decode(&OomMarks::default().encode()), Some(OomMarks::default()));
    }
}
