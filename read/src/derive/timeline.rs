//! What the answers (`at`, `range`, `steps`, `diff`) read: one device's timeline as borrowed
//! slices — from a mapped archive in the command, from a hand-made layout in unit tests.
//!
//! Nothing here decompresses or reads files: action times come through [`ActionTimes`], which
//! the archive implements by decompressing only the chunks a question touches.

use crate::layout::{CheckpointsRef, LayoutRef, partition};
use crate::model::{ActionIdx, ElementId, NO_TIME};

/// The time of each action (µs since the Unix epoch, as recorded).
pub trait ActionTimes {
    /// `None` when the action has no time or does not exist.
    fn time_us(&self, k: ActionIdx) -> Option<i64>;
}

impl ActionTimes for Vec<i64> {
    fn time_us(&self, k: ActionIdx) -> Option<i64> {
        self.get(k.index()).copied().filter(|&t| t != NO_TIME)
    }
}

/// The time of the event behind each action of `l` (`NO_TIME`: none): the archive's
/// `action_time_us`, from an in-memory model.
pub fn model_action_times(snap: &crate::model::Snapshot, l: LayoutRef<'_>) -> Vec<i64> {
    (0..l.actions.len())
        .map(|k| {
            let event = l.action_event(ActionIdx::at(k)).get();
            event.map_or(NO_TIME, |e| snap.events.values(e.index()).expect("an action's event row is held").time_us)
        })
        .collect()
}

/// A `record_function` span with its name (a point when `end_us == Some(start_us)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedSpan<'a> {
    pub name: &'a str,
    pub start_us: i64,
    /// `None`: never ended.
    pub end_us: Option<i64>,
    /// Spans open on the device when it started.
    pub depth: u32,
    /// The actions it covers, `[first, end)`, when known without a search (an archive's
    /// summary): see [`TimelineRef::span_actions`].
    pub actions: Option<(u32, u32)>,
}

impl NamedSpan<'_> {
    pub fn is_point(&self) -> bool {
        self.end_us == Some(self.start_us)
    }

    /// Open at `t` (the same rule as `annotations::in_effect`): started, not ended, not a point.
    pub fn open_at(&self, t: i64) -> bool {
        !self.is_point() && self.start_us <= t && self.end_us.is_none_or(|e| e > t)
    }
}

/// What a snapshot says about an element besides its place in the layout: from the event that
/// made it (a ghost: from its segment). Empty strings for what was not recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ElementAttrs<'a> {
    pub stream: Option<u64>,
    /// Private memory pool (`pool_id`, or a ghost's `segment_pool_id`).
    pub pool: Option<(i64, i64)>,
    pub compile_context: &'a str,
    pub user_metadata: &'a str,
    pub internal_metadata: &'a str,
    /// The text of the last `annotate` event on the element.
    pub annotated: &'a str,
    /// `forward_frames`: where the forward ran that this backward allocation belongs to
    /// (`u32::MAX`: none).
    pub forward_stack: u32,
    /// The `category` the snapshot recorded on the event (re-exports), `""` for none.
    pub category: &'a str,
}

impl<'a> ElementAttrs<'a> {
    pub const EMPTY: ElementAttrs<'static> = ElementAttrs {
        stream: None,
        pool: None,
        compile_context: "",
        user_metadata: "",
        internal_metadata: "",
        annotated: "",
        forward_stack: crate::model::NONE,
        category: "",
    };

    /// What `--group-by metadata` groups by: the `annotate` label, else `user_metadata`.
    pub fn metadata(&self) -> &'a str {
        if self.annotated.is_empty() { self.user_metadata } else { self.annotated }
    }
}

/// Looks up [`ElementAttrs`] by element id (the archive reads its event columns in place).
pub trait Attributes {
    fn attrs(&self, id: ElementId) -> ElementAttrs<'_>;
}

/// No attributes recorded (hand-made layouts in tests).
impl Attributes for () {
    fn attrs(&self, _: ElementId) -> ElementAttrs<'_> {
        ElementAttrs::EMPTY
    }
}

/// One device's timeline, borrowed.
#[derive(Clone, Copy)]
pub struct TimelineRef<'a> {
    pub layout: LayoutRef<'a>,
    pub checkpoints: CheckpointsRef<'a>,
    /// Element id → stack id of its allocation site (`u32::MAX`: none recorded).
    pub sites: &'a [u32],
    /// The device's annotation spans, sorted by start.
    pub spans: &'a [NamedSpan<'a>],
    pub times: &'a dyn ActionTimes,
    /// Time of this device's first timed event (spans that ended before it were not recorded).
    pub trace_start_us: Option<i64>,
    /// The snapshot's earliest timed event over all devices: every printed time, and `--time`,
    /// counts from here.
    pub time_base_us: Option<i64>,
    pub attrs: &'a dyn Attributes,
    /// The default steps, when stored (an archive's summary); else [`super::steps::default_steps`]
    /// computes them.
    pub steps: Option<&'a super::steps::FamilySteps>,
    /// The category of each element, when classified (`analysis::categories`); what grouping
    /// and listing by category read.
    pub categories: Option<&'a [crate::model::Category]>,
    /// The private pool of each element by the segment rule the pools view uses (its event's
    /// `pool_id`, else its segment's: `Session::element_pools`), when worked out; grouping by
    /// pool reads it, else the event's own `pool_id`.
    pub pools: Option<&'a [Option<(i64, i64)>]>,
}

impl<'a> TimelineRef<'a> {
    pub fn actions(&self) -> u32 {
        self.layout.actions.len() as u32
    }

    /// The site of element `id` (`u32::MAX` when unknown).
    pub fn site(&self, id: ElementId) -> u32 {
        self.sites.get(id.index()).copied().unwrap_or(crate::model::NONE)
    }

    /// Time of action `k` (`None` for the initial state `k = -1`).
    pub fn time_of(&self, k: i64) -> Option<i64> {
        u32::try_from(k).ok().and_then(|k| self.times.time_us(ActionIdx(k)))
    }

    /// µs from the snapshot's start ([`Self::time_base_us`]) to action `k`.
    pub fn since_start(&self, k: i64) -> Option<i64> {
        Some(self.time_of(k)? - self.time_base_us?)
    }

    /// The number of actions whose time is at or before `t`: the actions are in trace order,
    /// whose times never decrease; an action without a time takes the time of the last one with.
    pub fn actions_until(&self, t: i64) -> u32 {
        partition(self.actions(), |k| self.time_or_before(k).is_none_or(|x| x <= t))
    }

    /// The number of actions strictly before `t`.
    pub fn actions_before(&self, t: i64) -> u32 {
        partition(self.actions(), |k| self.time_or_before(k).is_none_or(|x| x < t))
    }

    /// The actions span `s` covers, `[first, end)`: those whose time `t` has `start ≤ t < end`
    /// (never ended: to the last action).
    pub fn span_actions(&self, s: &NamedSpan<'_>) -> (u32, u32) {
        s.actions.unwrap_or_else(|| {
            let a0 = self.actions_before(s.start_us);
            (a0, s.end_us.map_or(self.actions(), |e| self.actions_before(e)).max(a0))
        })
    }

    /// The default steps: stored, or computed from the spans.
    pub fn default_steps(&self) -> Option<std::borrow::Cow<'a, super::steps::FamilySteps>> {
        match self.steps {
            Some(s) => Some(std::borrow::Cow::Borrowed(s)),
            None => super::steps::default_steps(self).map(std::borrow::Cow::Owned),
        }
    }

    /// The time of action `k`, or of the last action before it that has one.
    fn time_or_before(&self, k: u32) -> Option<i64> {
        (0..=k).rev().find_map(|j| self.times.time_us(ActionIdx(j)))
    }

    /// Names of the spans covering action `k` ([`Self::span_actions`]), outermost first: the
    /// spans open at its time, found without reading the time when the spans know their actions.
    pub fn open_at_action(&self, k: u32) -> Vec<&'a str> {
        let mut open: Vec<&NamedSpan<'a>> = self
            .spans
            .iter()
            .filter(|s| {
                !s.is_point() && {
                    let (a0, a1) = self.span_actions(s);
                    a0 <= k && k < a1
                }
            })
            .collect();
        open.sort_by_key(|s| (s.depth, s.start_us));
        open.into_iter().map(|s| s.name).collect()
    }

    /// Names of the spans open at `t`, outermost first.
    pub fn open_at(&self, t: i64) -> Vec<&'a str> {
        open_at(self.spans.iter(), t)
    }
}

/// Names of the `spans` open at `t`, outermost first (by depth, then start).
pub fn open_at<'s, 'a: 's>(spans: impl Iterator<Item = &'s NamedSpan<'a>>, t: i64) -> Vec<&'a str> {
    let mut open: Vec<&NamedSpan<'a>> = spans.filter(|s| s.open_at(t)).collect();
    open.sort_by_key(|s| (s.depth, s.start_us));
    open.into_iter().map(|s| s.name).collect()
}

/// The number of actions of `l` whose event comes before absolute event `e` (the synthetic action
/// of a trace without actions counts as before every event): the last action before `e` is this
/// minus one.
pub fn actions_before_event(l: LayoutRef<'_>, e: usize) -> u32 {
    partition(l.actions.len() as u32, |k| l.action_event(ActionIdx(k)).get().is_none_or(|ev| ev.index() < e))
}

/// The innermost open span at any time, answered by binary search: the spans are swept once
/// into the times where the innermost one changes.
pub struct Innermost<'a> {
    /// `(from_us, index into spans or usize::MAX)`, ascending.
    changes: Vec<(i64, usize)>,
    spans: &'a [NamedSpan<'a>],
}

impl<'a> Innermost<'a> {
    pub fn new(spans: &'a [NamedSpan<'a>]) -> Self {
        let mut bounds: Vec<i64> = Vec::with_capacity(spans.len() * 2);
        for s in spans.iter().filter(|s| !s.is_point()) {
            bounds.push(s.start_us);
            bounds.extend(s.end_us);
        }
        bounds.sort_unstable();
        bounds.dedup();
        let mut by_start: Vec<usize> = (0..spans.len()).filter(|&i| !spans[i].is_point()).collect();
        by_start.sort_by_key(|&i| spans[i].start_us);
        let (mut open, mut next, mut changes) = (Vec::<usize>::new(), 0, Vec::new());
        for t in bounds {
            while next < by_start.len() && spans[by_start[next]].start_us <= t {
                open.push(by_start[next]);
                next += 1;
            }
            open.retain(|&i| spans[i].end_us.is_none_or(|e| e > t));
            let inner = open.iter().copied().max_by_key(|&i| (spans[i].depth, spans[i].start_us, i));
            let inner = inner.unwrap_or(usize::MAX);
            if changes.last().is_none_or(|&(_, was)| was != inner) {
                changes.push((t, inner));
            }
        }
        Innermost { changes, spans }
    }

    /// The innermost span open at `t`.
    pub fn at(&self, t: i64) -> Option<&NamedSpan<'a>> {
        let i = self.changes.partition_point(|&(from, _)| from <= t).checked_sub(1)?;
        self.spans.get(self.changes[i].1)
    }
}

/// Power-of-two size bucket: `b` holds sizes in `[2^(b-1), 2^b)`; bucket 0 holds size 0.
pub fn size_bucket(size: u64) -> u32 {
    64 - size.leading_zeros()
}

/// The bucket's bounds `[from, to)` (`to = None`: unbounded above).
pub fn bucket_bounds(b: u32) -> (u64, Option<u64>) {
    match b {
        0 => (0, Some(1)),
        64 => (1 << 63, None),
        _ => (1 << (b - 1), Some(1 << b)),
    }
}

/// `"1 KiB – 2 KiB"`, with exact powers of two.
pub fn bucket_label(b: u32) -> String {
    match bucket_bounds(b) {
        (0, _) => "0 B".into(),
        (from, Some(to)) => format!("{} – {}", pow2(from), pow2(to)),
        (from, None) => format!("≥ {}", pow2(from)),
    }
}

fn pow2(v: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let e = v.trailing_zeros();
    format!("{} {}", 1u64 << (e % 10), UNITS[(e / 10) as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(name: &str, start_us: i64, end_us: Option<i64>, depth: u32) -> NamedSpan<'_> {
        NamedSpan { name, start_us, end_us, depth, actions: None }
    }

    #[test]
    fn innermost_follows_nesting_and_ignores_points() {
        let spans = [
            span("step", 10, Some(100), 0),
            span("fwd", 20, Some(50), 1),
            span("mark", 30, Some(30), 0),
            span("bwd", 50, Some(90), 1),
            span("open", 95, None, 1),
        ];
        let inner = Innermost::new(&spans);
        let name = |t| inner.at(t).map(|s| s.name);
        assert_eq!(name(5), None);
        assert_eq!(name(10), Some("step"));
        assert_eq!(name(20), Some("fwd"));
        assert_eq!(name(30), Some("fwd"));
        assert_eq!(name(49), Some("fwd"));
        assert_eq!(name(50), Some("bwd"));
        assert_eq!(name(92), Some("step"));
        assert_eq!(name(99), Some("open"));
        assert_eq!(name(10_000), Some("open"));
    }

    #[test]
    fn buckets() {
        assert_eq!(size_bucket(0), 0);
        assert_eq!(size_bucket(1), 1);
        assert_eq!(size_bucket(1023), 10);
        assert_eq!(size_bucket(1024), 11);
        assert_eq!(bucket_bounds(11), (1024, Some(2048)));
        assert_eq!(bucket_label(11), "1 KiB – 2 KiB");
        assert_eq!(bucket_label(10), "512 B – 1 KiB");
        assert_eq!(bucket_label(0), "0 B");
        assert_eq!(bucket_label(64), "≥ 8 EiB");
        for s in [1u64, 5, 4096, 4097, u64::MAX] {
            let (from, to) = bucket_bounds(size_bucket(s));
            assert!(from <= s && to.is_none_or(|t| s < t), "{s}");
        }
    }

    #[test]
    fn actions_by_time() {
        let times: Vec<i64> = vec![100, 100, NO_TIME, 300];
        let layout_actions = [0u32, 1, 0, 1];
        let elements = crate::layout::Elements::default();
        let l = crate::layout::LayoutRef {
            device: crate::model::DeviceId(0),
            elements: elements.view(),
            actions: &layout_actions,
            initial: &[],
            initial_total: 0,
            totals: &[0; 4],
            peak_bytes: 0,
            peak_action: None,
        };
        let t = TimelineRef {
            layout: l,
            checkpoints: CheckpointsRef { every: 1, starts: &[0, 0], ids: &[] },
            sites: &[],
            spans: &[],
            times: &times,
            trace_start_us: Some(95),
            time_base_us: Some(90),
            attrs: &(),
            steps: None,
            categories: None,
            pools: None,
        };
        assert_eq!(t.actions_until(99), 0);
        // Action 2 has no time: it goes with action 1, before it.
        assert_eq!(t.actions_until(100), 3);
        assert_eq!(t.actions_until(250), 3);
        assert_eq!(t.actions_until(300), 4);
        assert_eq!(t.actions_before(100), 0);
        assert_eq!(t.actions_before(300), 3);
        assert_eq!(t.since_start(3), Some(210));
        assert_eq!(t.since_start(2), None);
        assert_eq!(t.since_start(-1), None);
    }
}
