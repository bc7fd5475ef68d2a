//! The annotation lane's spans, placed once per device on a worker: each span's start and end in
//! both axis units (actions and µs), by depth and start, so a frame finds what it shows by binary
//! search and visits a bounded number of spans per pixel column, whatever the trace holds.

use super::data::Session;
use crate::analysis::annotations::AnnotationFilter;
use crate::model::DeviceIdx;

/// The x units of the plot: actions, or µs on the wall-time axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    Actions = 0,
    Micros = 1,
}

/// One span on both axes; an end that never came is `f64::INFINITY`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mark {
    pub x0: [f64; 2],
    pub x1: [f64; 2],
    /// The span's name (a string of the archive).
    pub name: u32,
    pub point: bool,
}

impl Mark {
    pub fn start(&self, axis: Axis) -> f64 {
        self.x0[axis as usize]
    }

    pub fn end(&self, axis: Axis) -> f64 {
        self.x1[axis as usize]
    }
}

/// The spans of one nesting depth, by start.
#[derive(Debug, Default, PartialEq)]
pub struct Depth {
    pub depth: u32,
    pub marks: Vec<Mark>,
    /// The furthest end of the marks up to each one (on each axis): where a view's first
    /// visible mark is found by binary search, since spans of one depth rarely overlap.
    reach: [Vec<f64>; 2],
}

impl Depth {
    fn new(depth: u32, mut marks: Vec<Mark>) -> Depth {
        marks.sort_by(by_start);
        let reach = [0, 1].map(|a| {
            let mut far = f64::NEG_INFINITY;
            marks
                .iter()
                .map(|m| {
                    far = far.max(m.x1[a]);
                    far
                })
                .collect()
        });
        Depth { depth, marks, reach }
    }

    /// The marks that overlap `[x0, x1]` on `axis`, at most one starting in each `step` of x
    /// (a pixel's width): the first that starts there. Marks starting before `x0` that a later
    /// overlapping one hides (same depth) may be left out.
    pub fn visible(&self, axis: Axis, x0: f64, x1: f64, step: f64) -> Vec<&Mark> {
        let a = axis as usize;
        let mut i = self.reach[a].partition_point(|&r| r < x0);
        let mut out = Vec::new();
        while let Some(m) = self.marks.get(i) {
            if m.x0[a] > x1 {
                break;
            }
            if m.x1[a] >= x0 {
                out.push(m);
            }
            let next = m.x0[a].max(x0) + step.max(0.0);
            i = (i + 1).max(gallop(&self.marks, i, |m| m.x0[a] < next));
        }
        out
    }

    /// The mark open at `x` on `axis` that starts last (of this depth), if any.
    pub fn open_at(&self, axis: Axis, x: f64) -> Option<&Mark> {
        let a = axis as usize;
        let after = self.marks.partition_point(|m| m.x0[a] <= x);
        self.marks[..after].iter().rev().take(64).find(|m| !m.point && x < m.x1[a])
    }
}

/// The order of a depth's marks: by start on the µs axis, then on the action axis.
fn by_start(a: &Mark, b: &Mark) -> std::cmp::Ordering {
    a.x0[1].total_cmp(&b.x0[1]).then(a.x0[0].total_cmp(&b.x0[0]))
}

/// The first index at or after `from` whose mark `before` is false (`marks` sorted so that `before`
/// holds for a prefix): steps of 1, 2, 4, … from `from`, then a binary search in the last one. The
/// next mark a pixel column wants is usually a few marks on, so the probes stay near each other
/// instead of halving the whole tail of a million marks from afar, a cache miss each.
fn gallop(marks: &[Mark], from: usize, before: impl Fn(&Mark) -> bool) -> usize {
    let (mut lo, mut step) = (from, 1);
    while lo + step < marks.len() && before(&marks[lo + step]) {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step + 1).min(marks.len());
    lo + marks[lo..hi].partition_point(before)
}

/// A device's annotation spans kept by the filter, by depth (outermost first).
#[derive(Debug, Default, PartialEq)]
pub struct SpanMarks {
    pub depths: Vec<Depth>,
}

impl SpanMarks {
    /// Device `d`'s spans that `filter` keeps. The action positions are the archive's (each
    /// span's actions, stored in its summary); an archive without them has them worked out from
    /// the action times, read chunk by chunk in time order.
    pub fn compute(session: &Session, d: DeviceIdx, filter: &AnnotationFilter) -> SpanMarks {
        let dev = session.device(d);
        let spans = session.named_spans(d);
        let ids = dev.spans.iter().map(|s| s.name.to_native());
        let kept: Vec<_> = spans.into_iter().zip(ids).filter(|(s, _)| filter.keeps(s.name)).collect();
        let mut order: Vec<usize> = (0..kept.len()).collect();
        let missing = kept.iter().any(|(s, _)| s.actions.is_none());
        // Times to place when the archive does not store the actions, in time order.
        let mut placed = std::collections::HashMap::new();
        if missing {
            let mut times: Vec<i64> = kept.iter().flat_map(|(s, _)| [Some(s.start_us), s.end_us]).flatten().collect();
            times.sort_unstable();
            times.dedup();
            let axis = session.time_axis_now(d);
            for t in times {
                placed.insert(t, axis.partition_point(|a| a < t) as f64);
            }
        }
        order.sort_by_key(|&i| kept[i].0.depth);
        let mut depths: Vec<Depth> = Vec::new();
        let mut current: Vec<Mark> = Vec::new();
        let mut depth = None;
        for i in order {
            let (s, name) = &kept[i];
            if depth != Some(s.depth) {
                if let Some(d) = depth {
                    depths.push(Depth::new(d, std::mem::take(&mut current)));
                }
                depth = Some(s.depth);
            }
            let (a0, a1) = match s.actions {
                Some((a0, a1)) => (f64::from(a0), s.end_us.map_or(f64::INFINITY, |_| f64::from(a1))),
                None => (placed[&s.start_us], s.end_us.map_or(f64::INFINITY, |e| placed[&e])),
            };
            let us1 = s.end_us.map_or(f64::INFINITY, |e| e as f64);
            current.push(Mark { x0: [a0, s.start_us as f64], x1: [a1, us1], name: *name, point: s.is_point() });
        }
        if let Some(d) = depth {
            depths.push(Depth::new(d, current));
        }
        SpanMarks { depths }
    }

    /// As a web worker sends them back ([`Self::decode`]): the depth count; each depth's
    /// number and mark count, then each mark's two starts and two ends (`f64` bits), its name
    /// and 1 for a point (else 0). The reaches are worked out again.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = crate::wire::Writer::default();
        w.u64(self.depths.len() as u64);
        for d in &self.depths {
            w.u64(u64::from(d.depth));
            w.u64(d.marks.len() as u64);
            for m in &d.marks {
                m.x0.iter().chain(&m.x1).for_each(|x| w.u64(x.to_bits()));
                w.u64(u64::from(m.name));
                w.u64(u64::from(m.point));
            }
        }
        w.0
    }

    /// [`Self::encode`]'s bytes (each depth's marks by start, as a depth keeps them); `None` for
    /// anything else.
    pub fn decode(bytes: &[u8]) -> Option<SpanMarks> {
        let mut r = crate::wire::Reader(bytes);
        let n = r.count(16)?;
        let mut depths = Vec::with_capacity(n);
        for _ in 0..n {
            let depth = u32::try_from(r.u64()?).ok()?;
            let count = r.count(48)?;
            let mut marks = Vec::with_capacity(count);
            for _ in 0..count {
                let [a0, u0, a1, u1] = [(); 4].map(|()| r.u64().map(f64::from_bits));
                let name = u32::try_from(r.u64()?).ok()?;
                let point = match r.u64()? {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                marks.push(Mark { x0: [a0?, u0?], x1: [a1?, u1?], name, point });
            }
            if !marks.is_sorted_by(|a, b| by_start(a, b).is_le()) {
                return None;
            }
            depths.push(Depth::new(depth, marks));
        }
        r.end()?;
        Some(SpanMarks { depths })
    }

    /// Names of the spans open at `x` on `axis`, outermost first.
    pub fn open_at(&self, axis: Axis, x: f64) -> Vec<u32> {
        self.depths.iter().filter_map(|d| d.open_at(axis, x)).map(|m| m.name).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(a: f64, b: f64) -> Mark {
        Mark { x0: [a, a * 10.0], x1: [b, b * 10.0], name: a as u32, point: a == b }
    }

    #[test]
    fn visible_marks_are_those_overlapping_the_view_one_per_step() {
        let marks: Vec<Mark> = (0..1000).map(|i| mark(f64::from(i), f64::from(i) + 1.0)).collect();
        let d = Depth::new(0, marks.clone());
        // Fine steps: every mark overlapping [100.5, 110.5].
        let names: Vec<u32> = d.visible(Axis::Actions, 100.5, 110.5, 0.1).iter().map(|m| m.name).collect();
        assert_eq!(names, (100..=110).collect::<Vec<_>>());
        // The same on the µs axis (ten times the x).
        let names: Vec<u32> = d.visible(Axis::Micros, 1005.0, 1105.0, 1.0).iter().map(|m| m.name).collect();
        assert_eq!(names, (100..=110).collect::<Vec<_>>());
        // A step of 10 per mark visits a tenth of them, whatever the number of marks.
        assert_eq!(d.visible(Axis::Actions, 0.0, 999.0, 10.0).len(), 100);
        // Nothing outside.
        assert!(d.visible(Axis::Actions, 2000.0, 3000.0, 1.0).is_empty());
    }

    #[test]
    fn galloping_finds_what_a_binary_search_finds() {
        let marks: Vec<Mark> = (0..300).map(|i| mark(f64::from(i / 3), f64::from(i / 3) + 1.0)).collect();
        for from in [0, 1, 7, 150, 298, 299, 300] {
            for x in [-1.0, 0.0, 0.5, 3.0, 50.0, 99.0, 99.5, 100.0, 1e9] {
                let want = from.max(from.min(300) + marks[from.min(300)..].partition_point(|m| m.x0[0] < x));
                assert_eq!(gallop(&marks, from.min(300), |m| m.x0[0] < x), want, "from {from}, x {x}");
            }
        }
    }

    #[test]
    fn a_long_span_before_the_view_is_visible_and_open() {
        let d = Depth::new(0, vec![mark(0.0, 500.0), mark(600.0, 700.0)]);
        let names: Vec<u32> = d.visible(Axis::Actions, 100.0, 200.0, 1.0).iter().map(|m| m.name).collect();
        assert_eq!(names, vec![0]);
        assert_eq!(d.open_at(Axis::Actions, 650.0).map(|m| m.name), Some(600));
        assert_eq!(d.open_at(Axis::Actions, 550.0), None);
        let open = Mark { x1: [f64::INFINITY; 2], ..mark(800.0, 800.0) };
        let d = Depth::new(0, vec![Mark { point: false, ..open }]);
        assert_eq!(d.visible(Axis::Actions, 900.0, 1000.0, 1.0).len(), 1);
    }
}
