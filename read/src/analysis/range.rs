//! `memviz range A..B`: what the actions `A ≤ k < B` did — bytes allocated and freed, net
//! growth, churn, a size histogram, and the allocations made there that are still live after
//! it (leak candidates), by site.
//!
//! One pass over the range's actions reading the element columns in place: an action is an
//! allocation when it is its element's `start`, else a free. By construction
//! `allocated − freed = total after B − 1 − total before A`.

use std::fmt::Write as _;

use serde::Serialize;

use super::frames::FrameSource;
use super::groups::{self, Group, GroupBy, SiteNames};
use super::units;
use crate::derive::timeline::{TimelineRef, bucket_bounds, bucket_label, size_bucket};
use crate::layout::{NEVER, Origin};
use crate::model::ElementId;

/// Bytes and a count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Flow {
    pub bytes: u64,
    pub count: u64,
}

impl Flow {
    fn add(&mut self, bytes: u64) {
        self.bytes += bytes;
        self.count += 1;
    }
}

/// One power-of-two bucket of the allocations made in the range.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Bucket {
    pub label: String,
    pub size_from: u64,
    /// `null`: unbounded.
    pub size_to: Option<u64>,
    pub count: u64,
    pub bytes: u64,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct RangeReport {
    pub device: crate::model::DeviceId,
    /// First action of the range.
    pub start: u32,
    /// One past its last action.
    pub end: u32,
    /// µs from the trace start to the range's first and last actions.
    pub start_time_us: Option<i64>,
    pub end_time_us: Option<i64>,
    /// Live bytes before action `start` and after action `end − 1`.
    pub total_before: u64,
    pub total_after: u64,
    pub allocated: Flow,
    pub freed: Flow,
    /// `allocated.bytes − freed.bytes`.
    pub net_bytes: i64,
    /// Allocated plus freed.
    pub churn: Flow,
    /// Allocated and freed inside the range.
    pub transient: Flow,
    /// Live before the trace but drawn as an action (a snapshot without actions shows its top
    /// ghost as action 0): neither allocated here nor a leak. `allocated + revealed - freed`
    /// is the change of the total.
    pub revealed: Flow,
    /// Highest total inside the range and its (first) action; `None` for an empty range.
    pub peak_bytes: u64,
    pub peak_action: Option<u32>,
    /// Allocated in the range and still live after it.
    pub still_live: Flow,
    /// `still_live` by site, largest first.
    pub still_live_by_site: Vec<Group>,
    /// What was allocated, and what of it is still live, by category (when classified).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_by_category: Option<Vec<super::categories::CategoryBytes>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub still_live_by_category: Option<Vec<super::categories::CategoryBytes>>,
    /// Allocations made in the range by power-of-two size, smallest first.
    pub histogram: Vec<Bucket>,
}

/// Analyses actions `start..end` (`start ≤ end ≤ actions`; the caller checks).
pub fn range<F: FrameSource>(t: &TimelineRef<'_>, frames: &F, start: u32, end: u32) -> RangeReport {
    let l = t.layout;
    let (els_start, els_end, sizes) = (l.elements.start, l.elements.end, l.elements.size);
    let (mut allocated, mut freed, mut transient, mut still_live, mut revealed) =
        (Flow::default(), Flow::default(), Flow::default(), Flow::default(), Flow::default());
    let mut buckets = [Flow::default(); 65];
    let mut live_ids = Vec::new();
    let mut allocated_ids = Vec::new();
    for (k, &id) in (start..end).zip(&l.actions[start as usize..end as usize]) {
        let (i, size) = (id as usize, sizes[id as usize]);
        if els_start[i] == k && Origin::from_u8(l.elements.origin[i]) != Origin::Alloc {
            revealed.add(size);
        } else if els_start[i] == k {
            allocated.add(size);
            allocated_ids.push(ElementId(id));
            buckets[size_bucket(size) as usize].add(size);
            if els_end[i] == NEVER || els_end[i] >= end {
                still_live.add(size);
                live_ids.push(ElementId(id));
            } else {
                transient.add(size);
            }
        } else {
            freed.add(size);
        }
    }
    let (mut peak_bytes, mut peak_action) = (l.total_after(i64::from(start) - 1), None);
    for (k, &total) in (start..end).zip(&l.totals[start as usize..end as usize]) {
        if peak_action.is_none() || total > peak_bytes {
            (peak_bytes, peak_action) = (total, Some(k));
        }
    }
    let mut names = SiteNames::new(frames);
    let histogram = buckets
        .iter()
        .enumerate()
        .filter(|(_, f)| f.count > 0)
        .map(|(b, f)| {
            let (from, to) = bucket_bounds(b as u32);
            Bucket { label: bucket_label(b as u32), size_from: from, size_to: to, count: f.count, bytes: f.bytes }
        })
        .collect();
    let last = i64::from(end) - 1;
    let by_category =
        |ids: &[ElementId]| t.categories.map(|of| super::categories::breakdown(sizes, of, ids.iter().copied()));
    let (allocated_by_category, still_live_by_category) = (by_category(&allocated_ids), by_category(&live_ids));
    RangeReport {
        device: l.device,
        start,
        end,
        start_time_us: (start < end).then(|| t.since_start(i64::from(start))).flatten(),
        end_time_us: (start < end).then(|| t.since_start(last)).flatten(),
        total_before: l.total_after(i64::from(start) - 1),
        total_after: l.total_after(last),
        allocated,
        freed,
        net_bytes: (allocated.bytes + revealed.bytes) as i64 - freed.bytes as i64,
        churn: Flow { bytes: allocated.bytes + freed.bytes, count: allocated.count + freed.count },
        transient,
        revealed,
        peak_bytes,
        peak_action,
        still_live,
        still_live_by_site: groups::group(t, &mut names, live_ids, GroupBy::Stack),
        allocated_by_category,
        still_live_by_category,
        histogram,
    }
}

/// The aligned text report of one device.
pub fn render_text(out: &mut String, r: &RangeReport, top: usize) {
    let row = |out: &mut String, label: &str, value: String| {
        let _ = writeln!(out, "  {label:<14}{value}");
    };
    let flow =
        |f: Flow| format!("{:>10} in {}", units::bytes(f.bytes), units::count(f.count, "allocation", "allocations"));
    let mut span = format!("actions {}..{}", r.start, r.end);
    let n = r.end - r.start;
    let _ = write!(span, " ({}", units::count(u64::from(n), "action", "actions"));
    if let (Some(a), Some(b)) = (r.start_time_us, r.end_time_us) {
        let _ = write!(span, ", {} → {} into the trace", units::instant_us(a), units::instant_us(b));
    }
    span.push(')');
    let _ = writeln!(out, "device {} — {span}", r.device);
    row(out, "allocated", flow(r.allocated));
    if let Some(b) = r.allocated_by_category.as_ref().filter(|b| !b.is_empty()) {
        row(out, "  by category", super::categories::one_line(b));
    }
    row(
        out,
        "freed",
        format!("{:>10} in {}", units::bytes(r.freed.bytes), units::count(r.freed.count, "free", "frees")),
    );
    row(
        out,
        "net",
        format!(
            "{:>10} (live: {} before → {} after)",
            units::signed_bytes(i128::from(r.net_bytes)),
            units::bytes(r.total_before),
            units::bytes(r.total_after)
        ),
    );
    row(
        out,
        "churn",
        format!("{:>10} in {}", units::bytes(r.churn.bytes), units::count(r.churn.count, "action", "actions")),
    );
    row(out, "transient", format!("{} (allocated and freed inside)", flow(r.transient)));
    if r.revealed.count > 0 {
        row(out, "shown", format!("{} live before the trace (drawn as the one action)", flow(r.revealed)));
    }
    if let Some(k) = r.peak_action {
        row(out, "peak", format!("{:>10} at action {}", units::bytes(r.peak_bytes), units::thousands(u64::from(k))));
    }
    row(out, "still live", format!("{} (allocated here, live after it)", flow(r.still_live)));
    if let Some(b) = r.still_live_by_category.as_ref().filter(|b| !b.is_empty()) {
        row(out, "  by category", super::categories::one_line(b));
    }
    if !r.still_live_by_site.is_empty() {
        let _ = writeln!(out, "  still live by site (leak candidates):");
        groups::render(out, &r.still_live_by_site, GroupBy::Stack, top);
    }
    if !r.histogram.is_empty() {
        let _ = writeln!(out, "  allocation sizes:");
        let width = r.histogram.iter().map(|b| b.label.chars().count()).max().unwrap_or(0);
        let shown = if r.histogram.len() == top + 1 { r.histogram.len() } else { top };
        for b in r.histogram.iter().take(shown) {
            let _ = writeln!(
                out,
                "    {:<width$}  {:>9}  {:>10}",
                b.label,
                units::thousands(b.count),
                units::bytes(b.bytes)
            );
        }
        if r.histogram.len() > shown {
            let rest = (r.histogram.len() - shown) as u64;
            let _ = writeln!(out, "    … {} (--top, or --json for all)", units::count(rest, "more size", "more sizes"));
        }
    }
}

/// `100.5..400`: the actions across a view (`memviz open --x`, a page's `x=`), fractional.
pub fn parse_x_range(s: &str) -> Result<(f64, f64), String> {
    let bad = || format!("expected actions A..B (e.g. 100..420.5), got `{s}`");
    let (a, b) = s.split_once("..").ok_or_else(bad)?;
    let num = |v: &str| v.trim().replace([',', '_'], "").parse::<f64>().map_err(|_| bad());
    let (a, b) = (num(a)?, num(b)?);
    if a.is_finite() && b.is_finite() && a < b { Ok((a, b)) } else { Err(bad()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::live::tests::sample;

    #[test]
    fn flows_add_up_to_the_change_of_total() {
        let t = sample();
        let tl = t.timeline();
        let l = t.layout.view();
        for (a, b) in [(0, 5), (1, 4), (0, 4), (3, 3), (4, 5)] {
            let r = range(&tl, &t.snap, a, b);
            let change = l.total_after(i64::from(b) - 1) as i64 - l.total_after(i64::from(a) - 1) as i64;
            assert_eq!(r.net_bytes, change, "{a}..{b}");
            assert_eq!(r.allocated.bytes as i64 - r.freed.bytes as i64, change, "{a}..{b}");
            assert_eq!(r.transient.count + r.still_live.count, r.allocated.count);
        }
        let r = range(&tl, &t.snap, 0, 4);
        assert_eq!((r.allocated, r.freed), (Flow { bytes: 1130, count: 3 }, Flow { bytes: 100, count: 1 }));
        assert_eq!(r.transient, Flow { bytes: 100, count: 1 });
        assert_eq!((r.peak_bytes, r.peak_action), (1130, Some(2)));
        let sites: Vec<(u64, u64)> = r.still_live_by_site.iter().map(|g| (g.bytes, g.count)).collect();
        assert_eq!(sites, [(1000, 1), (30, 1)]);
        let hist: Vec<(&str, u64)> = r.histogram.iter().map(|b| (b.label.as_str(), b.count)).collect();
        assert_eq!(hist, [("16 B – 32 B", 1), ("64 B – 128 B", 1), ("512 B – 1 KiB", 1)]);
        let empty = range(&tl, &t.snap, 3, 3);
        assert_eq!((empty.churn.count, empty.peak_action, empty.peak_bytes), (0, None, 1130));
    }
}
