//! The facts of a training loop's steps: the spans of one *family* (the same name with its
//! numbers taken out: `## step 3 ##` and `## step 4 ##` are one family; `Optimizer.step#AdamW.step`,
//! nested inside them, another) — or the steps [`super::step_rules`] finds without such spans —
//! each with its actions and totals, and the sites that keep memory from one step to the next.
//! The archive stores the default steps (so a table of a thousand ranks reads no event);
//! `analysis::steps` computes them for a pattern and judges them either way.
//!
//! A span covers the actions whose time `t` has `start ≤ t < end` ([`TimelineRef::span_actions`]).
//! Within a family a span that starts before the previous one ended is not a step of its own.

use std::collections::{BTreeSet, HashMap};

pub use super::step_rules::StepRule;
use super::timeline::{NamedSpan, TimelineRef};
use crate::layout::{BEFORE_TRACE, NEVER};
use crate::model::ElementId;

/// The fewest spans a family needs to be the default steps.
pub const MIN_STEPS: usize = 3;
/// Sites named as retaining memory, at most.
pub const RETAINERS: usize = 5;

/// The family of a span name: the name with every run of digits replaced by `#`
/// (`## step 12 ##` → `## step # ##`), so the spans of one loop share it.
pub fn family(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_digits = false;
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// One step: a span of the family and what the timeline did inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRow {
    /// Index into the device's spans (`None`: found in the trace, [`StepRule::Trace`]).
    pub span: Option<usize>,
    /// The step's actions are `start_action .. end_action`.
    pub start_action: u32,
    pub end_action: u32,
    /// Live bytes before its first action and after its last.
    pub total_start: u64,
    pub total_end: u64,
    /// Highest total inside (the start total when it has no action) and its first action.
    pub peak_bytes: u64,
    pub peak_action: Option<u32>,
    /// It ended before the trace's first event: nothing of it was recorded (not judged).
    pub before_trace: bool,
}

/// A site that keeps memory step after step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retained {
    /// Stack id of the allocation site (`u32::MAX`: none recorded).
    pub stack: u32,
    pub bytes_per_step: u64,
    /// In how many of the judged steps it kept memory.
    pub steps: usize,
}

/// The steps of one family.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FamilySteps {
    pub family: String,
    /// How the steps were found.
    pub rule: StepRule,
    pub rows: Vec<StepRow>,
    /// Largest first, at most [`RETAINERS`].
    pub retaining: Vec<Retained>,
}

/// The families of the spans whose name `keep` accepts, in order of their first span, each with
/// its steps (indices into `spans`, sorted by start): a span that starts before the previous step
/// ended is left out.
pub fn families(spans: &[NamedSpan<'_>], keep: impl Fn(&str) -> bool) -> Vec<(String, Vec<usize>)> {
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, s) in spans.iter().enumerate().filter(|(_, s)| !s.is_point() && keep(s.name)) {
        let f = family(s.name);
        let steps = match out.iter_mut().find(|(g, _)| *g == f) {
            Some((_, steps)) => steps,
            None => {
                out.push((f, Vec::new()));
                &mut out.last_mut().expect("just pushed").1
            }
        };
        let overlaps = steps.last().is_some_and(|&p| spans[p].end_us.is_none_or(|e| e > s.start_us));
        if !overlaps {
            steps.push(i);
        }
    }
    out
}

/// The default steps ([`super::step_rules`]), if the timeline shows a loop.
pub fn default_steps(t: &TimelineRef<'_>) -> Option<FamilySteps> {
    super::step_rules::find(t)
}

/// The rows of the spans `steps` (indices into `t.spans`) and the sites they retain.
pub fn family_steps(t: &TimelineRef<'_>, family: String, steps: &[usize]) -> FamilySteps {
    let names_differ = steps.windows(2).any(|w| t.spans[w[0]].name != t.spans[w[1]].name);
    let rule = if names_differ { StepRule::Numbered } else { StepRule::Repeated };
    let rows: Vec<(Option<usize>, u32, u32)> = steps
        .iter()
        .map(|&i| {
            let (a, b) = t.span_actions(&t.spans[i]);
            (Some(i), a, b)
        })
        .collect();
    family_steps_of(t, family, rule, &rows)
}

/// The rows of the steps `(span, start action, end action)` and the sites they retain.
pub fn family_steps_of(
    t: &TimelineRef<'_>,
    family: String,
    rule: StepRule,
    steps: &[(Option<usize>, u32, u32)],
) -> FamilySteps {
    let l = t.layout;
    let rows: Vec<StepRow> = steps
        .iter()
        .map(|&(span, a0, a1)| {
            let total_start = l.total_after(i64::from(a0) - 1);
            let (mut peak_bytes, mut peak_action) = (total_start, None);
            for (k, &total) in (a0..a1).zip(&l.totals[a0 as usize..a1 as usize]) {
                crate::pace::at(k as usize);
                if peak_action.is_none() || total > peak_bytes {
                    (peak_bytes, peak_action) = (total, Some(k));
                }
            }
            let ended = span.and_then(|i| t.spans[i].end_us);
            StepRow {
                span,
                start_action: a0,
                end_action: a1,
                total_start,
                total_end: l.total_after(i64::from(a1) - 1),
                peak_bytes,
                peak_action,
                before_trace: t.trace_start_us.is_some_and(|t0| ended.is_some_and(|e| e <= t0)),
            }
        })
        .collect();
    let retaining = retainers(t, &rows);
    FamilySteps { family, rule, rows, retaining }
}

/// The sites whose allocations of a step after the first (from its start to the next one's: what
/// "retained" measures) are still live when the next step starts, summed over those steps and
/// divided by their number. The first step is the warm-up (optimizer state, caches).
fn retainers(t: &TimelineRef<'_>, rows: &[StepRow]) -> Vec<Retained> {
    let e = t.layout.elements;
    let in_trace: Vec<&StepRow> = rows.iter().filter(|r| !r.before_trace).collect();
    let judged: Vec<(u32, u32)> = in_trace.windows(2).skip(1).map(|w| (w[0].start_action, w[1].start_action)).collect();
    if judged.is_empty() {
        return Vec::new();
    }
    let mut by_site: HashMap<u32, (u64, BTreeSet<usize>)> = HashMap::new();
    for id in 0..e.len() {
        crate::pace::at(id);
        let start = e.start[id];
        if start == BEFORE_TRACE {
            continue;
        }
        // The step it was allocated in (steps are in order and do not overlap).
        let j = judged.partition_point(|s| s.1 <= start);
        let Some(&(_, next)) = judged.get(j).filter(|s| s.0 <= start) else { continue };
        let end = e.end[id];
        if end == NEVER || end >= next {
            let cell = by_site.entry(t.site(ElementId::at(id))).or_default();
            cell.0 += e.size[id];
            cell.1.insert(j);
        }
    }
    let n = judged.len() as u64;
    let mut out: Vec<Retained> = by_site
        .into_iter()
        .map(|(stack, (bytes, steps))| Retained { stack, bytes_per_step: bytes / n, steps: steps.len() })
        .filter(|r| r.bytes_per_step > 0)
        .collect();
    out.sort_by(|a, b| b.bytes_per_step.cmp(&a.bytes_per_step).then(a.stack.cmp(&b.stack)));
    out.truncate(RETAINERS);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_take_the_numbers_out() {
        assert_eq!(family("## step 12 ##"), "## step # ##");
        assert_eq!(family("ProfilerStep#3"), "ProfilerStep##");
        assert_eq!(family("Optimizer.step#AdamW.step"), "Optimizer.step#AdamW.step");
    }

    #[test]
    fn overlapping_spans_of_a_family_are_one_step() {
        let span = |name, start_us, end_us| NamedSpan { name, start_us, end_us, depth: 0, actions: None };
        let spans =
            [span("step 1", 0, Some(10)), span("step 2", 5, Some(20)), span("step 3", 20, None), span("x", 1, Some(2))];
        let f = families(&spans, |n| n.starts_with("step"));
        assert_eq!(f, [("step #".to_owned(), vec![0, 2])]);
    }
}
