//! `memviz at`: what is live at one instant — its total, and a table grouped by site, frame,
//! annotation or size.
//!
//! The live set comes from the checkpoints: the stack saved before the nearest multiple of K
//! actions, replayed forward (< K actions), so any instant costs well under a millisecond.

use std::fmt::Write as _;

use serde::Serialize;

use super::frames::FrameSource;
use super::groups::{self, Group, GroupBy, SiteNames};
use super::units;
use crate::derive::timeline::TimelineRef;

/// The live set right after one action.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct LiveSet {
    pub device: crate::model::DeviceId,
    /// The action (−1: the initial state, before the first action).
    pub action: i64,
    /// Actions in the device's timeline: valid actions are −1 ..= actions − 1.
    pub actions: u32,
    /// True when this is the device's peak.
    pub is_peak: bool,
    /// µs from the trace start to the action.
    pub time_us: Option<i64>,
    /// Annotation spans open at that moment, outermost first.
    pub annotation: Vec<String>,
    pub total_bytes: u64,
    pub count: u64,
    /// The device's peak, for scale.
    pub peak_bytes: u64,
    pub group_by: GroupBy,
    pub groups: Vec<Group>,
    /// The live bytes by category, when the allocations were classified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_category: Option<Vec<super::categories::CategoryBytes>>,
    /// `--list`: every live allocation, largest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocations: Option<Vec<LiveAllocation>>,
}

/// One live allocation of `at --list`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct LiveAllocation {
    pub element: crate::model::ElementId,
    pub addr: u64,
    pub size: u64,
    /// Its allocation site: the best frame (and the innermost Python one), as in the tables.
    pub site: String,
    /// The site's stack id in this archive (`null`: no stack recorded).
    pub stack: Option<u32>,
    pub category: crate::model::Category,
    /// The action that allocated it (`null`: live before the trace).
    pub alloc_action: Option<u32>,
    /// With `--stacks`: the site's whole (filtered) stack, innermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
}

impl LiveSet {
    /// `--stacks`: each site row's and each listed allocation's whole stack.
    pub fn with_stacks<F: FrameSource>(&mut self, frames: &F) {
        for g in &mut self.groups {
            g.frames = super::frames::full_stack(frames, g.stack);
        }
        for a in self.allocations.iter_mut().flatten() {
            a.frames = super::frames::full_stack(frames, a.stack);
        }
    }
}

/// The live set right after action `k` (−1 ..= actions − 1; the caller checks the range).
pub fn at<F: FrameSource>(t: &TimelineRef<'_>, frames: &F, k: i64, by: GroupBy) -> LiveSet {
    let l = t.layout;
    let stack = t.checkpoints.stack_after(l, k);
    let mut names = SiteNames::new(frames);
    let groups = groups::group(t, &mut names, stack.elements(), by);
    let annotation = t.time_of(k).map(|at| t.open_at(at)).unwrap_or_default();
    let by_category = t.categories.map(|of| super::categories::breakdown(l.elements.size, of, stack.elements()));
    LiveSet {
        device: l.device,
        action: k,
        actions: t.actions(),
        is_peak: l.peak_k() == k,
        time_us: t.since_start(k),
        annotation: annotation.into_iter().map(str::to_owned).collect(),
        total_bytes: stack.total,
        count: stack.ids.len() as u64,
        peak_bytes: l.peak_bytes,
        group_by: by,
        groups,
        by_category,
        allocations: None,
    }
}

/// Every allocation live right after action `k`, largest first (ties: by address).
pub fn list<F: FrameSource>(t: &TimelineRef<'_>, frames: &F, k: i64) -> Vec<LiveAllocation> {
    let l = t.layout;
    let stack = t.checkpoints.stack_after(l, k);
    let mut names = SiteNames::new(frames);
    let mut out: Vec<LiveAllocation> = stack
        .elements()
        .map(|id| {
            let el = l.element(id);
            let site = t.site(id);
            LiveAllocation {
                element: id,
                addr: el.addr,
                size: el.size,
                site: names.label(site),
                stack: (site != crate::model::NONE).then_some(site),
                category: t
                    .categories
                    .and_then(|c| c.get(id.index()).copied())
                    .unwrap_or(crate::model::Category::Unknown),
                alloc_action: el.start_opt().map(|a| a.0),
                frames: Vec::new(),
            }
        })
        .collect();
    out.sort_by(|a, b| b.size.cmp(&a.size).then(a.addr.cmp(&b.addr)));
    out
}

/// The aligned text report of one device.
pub fn render_text(out: &mut String, s: &LiveSet, top: usize) {
    let mut when = match s.action {
        -1 => "before the first action".to_owned(),
        k => format!("after action {}", units::thousands(k as u64)),
    };
    if s.is_peak {
        when.push_str(" (the peak)");
    }
    if let Some(t) = s.time_us {
        let _ = write!(when, ", {} into the trace", units::instant_us(t));
    }
    let _ = writeln!(out, "device {} — {when}", s.device);
    if !s.annotation.is_empty() {
        let _ = writeln!(out, "  during    {}", s.annotation.join(" › "));
    }
    let exact = if s.total_bytes < 1000 { String::new() } else { format!(" ({} B)", units::thousands(s.total_bytes)) };
    let _ = writeln!(
        out,
        "  live      {}{exact} in {}; the peak is {}",
        units::bytes(s.total_bytes),
        units::count(s.count, "allocation", "allocations"),
        units::bytes(s.peak_bytes)
    );
    if let Some(b) = s.by_category.as_ref().filter(|_| s.group_by != GroupBy::Category) {
        let _ = writeln!(out, "  by category: {}", super::categories::one_line(b));
    }
    if !s.groups.is_empty() {
        let _ = writeln!(out, "  by {}:", s.group_by.name());
        groups::render(out, &s.groups, s.group_by, top);
    }
    if let Some(list) = &s.allocations {
        let _ = writeln!(out, "  live allocations, largest first:");
        let _ = writeln!(out, "    {:>18}  {:>10}  {:<15}  site", "address", "size", "category");
        for a in list.iter().take(top) {
            let _ = writeln!(
                out,
                "    {:>#18x}  {:>10}  {:<15}  {}",
                a.addr,
                units::bytes(a.size),
                a.category.name(),
                groups::clip(&a.site)
            );
            super::frames::render_stack(out, &a.frames, 52);
        }
        if list.len() > top {
            let _ =
                writeln!(out, "    … {} more (--top, or --json for all)", units::thousands((list.len() - top) as u64));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::tiny::{Tiny, tiny};
    use crate::derive::timeline::NamedSpan;

    const LINEAR: &[(&str, &str, i64)] =
        &[("linear", "/site-packages/torch/nn/functional.py", 10), ("train", "train.py", 5), ("main", "run.py", 1)];
    const EMBED: &[(&str, &str, i64)] = &[("train", "train.py", 6)];
    const ADAM: &[(&str, &str, i64)] = &[("step", "train.py", 9)];

    /// Sizes 100, 30, 1000, then the 100 is freed and 5 allocated; "fwd" covers the first three.
    pub(crate) fn sample() -> Tiny {
        tiny(
            &[
                ("alloc", 1, 100, 0),
                ("alloc", 2, 30, 1),
                ("alloc", 3, 1000, 0),
                ("free_completed", 1, 100, 0),
                ("alloc", 4, 5, 2),
            ],
            &[LINEAR, EMBED, ADAM],
            &[
                NamedSpan { name: "fwd", start_us: 95, end_us: Some(125), depth: 0, actions: None },
                NamedSpan { name: "opt", start_us: 135, end_us: Some(200), depth: 0, actions: None },
            ],
        )
    }

    fn rows(s: &LiveSet) -> Vec<(String, u64, u64)> {
        s.groups.iter().map(|g| (g.label.clone(), g.bytes, g.count)).collect()
    }

    #[test]
    fn live_set_by_site_frame_annotation_and_size() {
        let t = sample();
        let src = &t.snap;
        let s = at(&t.timeline(), src, 3, GroupBy::Stack);
        assert_eq!((s.total_bytes, s.count, s.is_peak), (1030, 2, false));
        assert_eq!(
            rows(&s),
            [("train (train.py:5) › linear (functional.py:10)".into(), 1000, 1), ("train (train.py:6)".into(), 30, 1)]
        );
        assert_eq!(s.groups[0].top_frame.as_deref(), Some("train (train.py:5)"));
        assert!((s.groups[0].share_pct - 100_000.0 / 1030.0).abs() < 1e-9);

        let s = at(&t.timeline(), src, 4, GroupBy::Annotation);
        assert_eq!(rows(&s), [("fwd".into(), 1030, 2), ("opt".into(), 5, 1)]);
        assert_eq!(s.annotation, ["opt"]);
        assert_eq!(s.time_us, Some(40));

        let s = at(&t.timeline(), src, 4, GroupBy::Size);
        assert_eq!(
            rows(&s),
            [("512 B – 1 KiB".into(), 1000, 1), ("16 B – 32 B".into(), 30, 1), ("4 B – 8 B".into(), 5, 1)]
        );
        assert_eq!((s.groups[0].size_from, s.groups[0].size_to), (Some(512), Some(1024)));

        let s = at(&t.timeline(), src, 2, GroupBy::Frame);
        assert!(s.is_peak);
        assert_eq!(rows(&s), [("train (train.py:5)".into(), 1100, 2), ("train (train.py:6)".into(), 30, 1)]);

        let s = at(&t.timeline(), src, -1, GroupBy::Stack);
        assert_eq!((s.total_bytes, s.count, s.groups.len(), s.time_us), (0, 0, 0, None));
    }
}
