//! Which actions are a training loop's steps when nobody said (`memviz steps` without
//! `--annotation`, the archive's stored steps, the rank strip's step axis). The rules, tried in
//! order; the first that finds [`MIN_STEPS`] steps or more decides, and the report says which:
//!
//! 1. **Spans that tile the trace as a loop** ([`StepRule::Numbered`], [`StepRule::Repeated`]).
//!    A *family* is the spans whose names differ only in their numbers (`## step 3 ##`,
//!    `ProfilerStep#3`) or share one name (`Optimizer.step#Adam.step`, which Lightning's
//!    automatic optimisation wraps around the whole forward and backward). A numbered family
//!    whose numbers go back down (`FSDP::post_backward_reduce (transformer.h.3)` … `h.0`, once
//!    per layer in every step) counts layers, not steps: it is none. A family whose spans lie
//!    inside another's is not the loop; of the families left, one whose spans cover at least
//!    [`TILING`] of the actions from its first span to its last is the loop — numbered before
//!    repeated, then the one with more spans.
//! 2. **The optimizer's marks** ([`StepRule::OptimizerMarks`]). A hand-written loop records
//!    torch's own `Optimizer.step#…` and `Optimizer.zero_grad#…` spans (every optimizer wraps
//!    them in `record_function`) but they hold only the update: each step ends where an
//!    optimizer step ends (with a `zero_grad` that starts right there), the first starting at
//!    the trace's start. Gradient accumulation is one step per optimizer step, as it should be.
//! 3. **The user's own numbered spans** that do not tile (say `## forward 3 ##` only): each span
//!    is a step ([`StepRule::Numbered`]).
//! 4. **The trace itself** ([`StepRule::Trace`]): with no span to go by, the loop is what repeats.
//!    An allocation site (stack and size) that allocates once per iteration does so the same
//!    number of times, at nearly even intervals (the longest gap at most [`REGULAR`] × the
//!    shortest); sites inside a layer loop allocate several times per iteration in bunches,
//!    which is not even. The count that the most such sites share is the number of steps, and
//!    the site among them that comes first in the first step starts each step; the last step
//!    runs the median step's length (or to the trace's end). Such a site allocates at least
//!    [`MIN_STEP_ACTIONS`] actions apart and over at least [`LOOP_SHARE`] of the trace: the loop
//!    that builds a model's layers repeats too, but it is not the one that runs.

use std::collections::HashMap;

use super::steps::{FamilySteps, MIN_STEPS, family, family_steps_of};
use super::timeline::{NamedSpan, TimelineRef};
use crate::model::ElementId;

/// How much of its extent a family's spans must cover to tile it.
pub const TILING: f64 = 0.5;
/// How uneven a once-per-step site's intervals may be: longest gap over shortest.
pub const REGULAR: f64 = 2.0;
/// The fewest actions a step found in the trace has (a loop that allocates a tensor or two per
/// iteration is not a training loop's).
pub const MIN_STEP_ACTIONS: u32 = 16;
/// How much of the trace the loop found in it must span.
pub const LOOP_SHARE: f64 = 0.5;
/// What share of a family's spans must lie inside another family's spans for it to be inside.
const INSIDE: f64 = 0.9;

/// How the default steps were found (see the module's rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepRule {
    /// A family of spans whose names count the steps (`## step N ##`, `ProfilerStep#N`).
    #[default]
    Numbered,
    /// One span name repeated once per step, its spans tiling the trace.
    Repeated,
    /// Steps end where the optimizer's `Optimizer.step#…` spans end.
    OptimizerMarks,
    /// No span: allocation sites that repeat once per step.
    Trace,
}

impl StepRule {
    /// The rule as a user reads it, for the family `family`.
    pub fn describe(self, family: &str) -> String {
        match self {
            StepRule::Numbered => format!("the numbered spans \"{family}\", one per step"),
            StepRule::Repeated => format!("the spans \"{family}\", repeated once per step and covering the loop"),
            StepRule::OptimizerMarks => format!(
                "no span covers a step: each step ends where an \"{family}\" span (and a zero_grad right after it) ends"
            ),
            StepRule::Trace => {
                "no span marks the loop: allocation sites that allocate once per step, at even intervals".to_owned()
            }
        }
    }

    /// The rule of steps an archive stores: what the rows and the spans they name show.
    pub fn of_stored(found: &FamilySteps, spans: &[NamedSpan<'_>]) -> StepRule {
        let named: Vec<&NamedSpan<'_>> = found.rows.iter().filter_map(|r| r.span.and_then(|i| spans.get(i))).collect();
        if named.len() < found.rows.len() {
            StepRule::Trace
        } else if found
            .rows
            .iter()
            .zip(&named)
            .any(|(r, s)| s.actions.is_some_and(|a| a != (r.start_action, r.end_action)))
        {
            StepRule::OptimizerMarks
        } else if named.windows(2).all(|w| w[0].name == w[1].name) {
            StepRule::Repeated
        } else {
            StepRule::Numbered
        }
    }
}

/// The default steps of `t` by the module's rules (`None`: none found).
pub fn find(t: &TimelineRef<'_>) -> Option<FamilySteps> {
    let families = candidates(t);
    let outer: Vec<&Candidate> = families.iter().filter(|a| !families.iter().any(|b| b.holds(a))).collect();
    let tiling = outer
        .iter()
        .filter(|c| c.coverage() >= TILING)
        .max_by_key(|c| (c.numbered, c.ranges.len(), std::cmp::Reverse(c.first)));
    if let Some(c) = tiling {
        let rule = if c.numbered { StepRule::Numbered } else { StepRule::Repeated };
        return Some(family_steps_of(t, c.family.clone(), rule, &spans_as_steps(c)));
    }
    let optimizer = families.iter().filter(|c| c.family.starts_with("Optimizer.step#")).max_by_key(|c| c.ranges.len());
    if let Some(c) = optimizer {
        let zero_grads: Vec<(u32, u32)> = families
            .iter()
            .filter(|z| z.family.starts_with("Optimizer.zero_grad#"))
            .flat_map(|z| z.ranges.iter().copied())
            .collect();
        let mut rows = Vec::with_capacity(c.ranges.len());
        let mut from = 0;
        for (&i, &(_, end)) in c.spans.iter().zip(&c.ranges) {
            let end = zero_grads.iter().filter(|z| z.0 == end).map(|z| z.1).max().unwrap_or(end);
            if end > from {
                rows.push((Some(i), from, end));
                from = end;
            }
        }
        if rows.len() >= MIN_STEPS {
            return Some(family_steps_of(t, c.family.clone(), StepRule::OptimizerMarks, &rows));
        }
    }
    if let Some(c) = outer.iter().filter(|c| c.numbered).max_by_key(|c| c.ranges.len()) {
        return Some(family_steps_of(t, c.family.clone(), StepRule::Numbered, &spans_as_steps(c)));
    }
    let rows = trace_loop(t)?;
    Some(family_steps_of(t, "(the trace's loop)".to_owned(), StepRule::Trace, &rows))
}

fn spans_as_steps(c: &Candidate) -> Vec<(Option<usize>, u32, u32)> {
    c.spans.iter().zip(&c.ranges).map(|(&i, &(a, b))| (Some(i), a, b)).collect()
}

/// A span family that may be the loop.
struct Candidate {
    family: String,
    /// Its spans (indices into the timeline's), in start order, none overlapping the one before.
    spans: Vec<usize>,
    ranges: Vec<(u32, u32)>,
    /// The names differ only in their numbers, which never go back down.
    numbered: bool,
    /// Index of its first span (earlier first on ties).
    first: usize,
}

impl Candidate {
    /// The share of the actions from its first span's start to its last span's end that its
    /// spans cover.
    fn coverage(&self) -> f64 {
        let (Some(first), Some(last)) = (self.ranges.first(), self.ranges.last()) else { return 0.0 };
        let extent = last.1.saturating_sub(first.0);
        let covered: u64 = self.ranges.iter().map(|r| u64::from(r.1 - r.0)).sum();
        if extent == 0 { 0.0 } else { covered as f64 / f64::from(extent) }
    }

    /// Whether `other`'s spans lie inside this family's (and not the other way round: two
    /// families with the same spans keep the first).
    fn holds(&self, other: &Candidate) -> bool {
        if std::ptr::eq(self, other) || !self.contains(other) {
            return false;
        }
        !other.contains(self)
            || (self.numbered, std::cmp::Reverse(self.first)) > (other.numbered, std::cmp::Reverse(other.first))
    }

    fn contains(&self, other: &Candidate) -> bool {
        let inside = other
            .ranges
            .iter()
            .filter(|&&(a, b)| {
                let j = self.ranges.partition_point(|r| r.0 <= a);
                j > 0 && self.ranges[j - 1].1 >= b
            })
            .count();
        inside as f64 >= INSIDE * other.ranges.len() as f64
    }
}

/// The families with [`MIN_STEPS`] spans or more that are not layer counts.
fn candidates(t: &TimelineRef<'_>) -> Vec<Candidate> {
    let found = super::steps::families(t.spans, |_| true);
    let mut out = Vec::new();
    for (f, spans) in found {
        if spans.len() < MIN_STEPS {
            continue;
        }
        let names: Vec<&str> = spans.iter().map(|&i| t.spans[i].name).collect();
        let numbered = names.iter().any(|n| *n != names[0]);
        if numbered {
            let numbers: Vec<Vec<u64>> = names.iter().map(|n| numbers_in(n)).collect();
            if numbers.windows(2).any(|w| w[1] < w[0]) {
                continue; // restarts: a layer index, not a step's
            }
        }
        debug_assert_eq!(family(names[0]), f);
        let ranges = spans.iter().map(|&i| t.span_actions(&t.spans[i])).collect();
        out.push(Candidate { family: f, first: spans[0], spans, ranges, numbered });
    }
    out
}

/// The runs of digits of a name, as numbers (saturating).
fn numbers_in(name: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut current: Option<u64> = None;
    for c in name.chars() {
        match (c.to_digit(10), current) {
            (Some(d), v) => current = Some(v.unwrap_or(0).saturating_mul(10).saturating_add(u64::from(d))),
            (None, Some(v)) => {
                out.push(v);
                current = None;
            }
            (None, None) => {}
        }
    }
    out.extend(current);
    out
}

/// Rule 4: the steps `(None, start, end)` from the allocation sites that repeat once per step.
fn trace_loop(t: &TimelineRef<'_>) -> Option<Vec<(Option<usize>, u32, u32)>> {
    let l = t.layout;
    let e = l.elements;
    let mut births: HashMap<(u32, u64), Vec<u32>> = HashMap::new();
    for (k, &id) in l.actions.iter().enumerate() {
        crate::pace::at(k);
        let id = id as usize;
        if e.start[id] as usize == k {
            births.entry((t.site(ElementId::at(id)), e.size[id])).or_default().push(k as u32);
        }
    }
    // The once-per-step sites, by how many times they allocate: at even intervals of a step's
    // length at least, over most of the trace (a model's layers being built are a loop too, but
    // not the one that runs).
    let n = l.actions.len() as u32;
    let mut regular: HashMap<usize, Vec<&Vec<u32>>> = HashMap::new();
    for at in births.values().filter(|v| v.len() >= MIN_STEPS) {
        let gaps = at.windows(2).map(|w| w[1] - w[0]);
        let (lo, hi) = gaps.fold((u32::MAX, 0), |(lo, hi), g| (lo.min(g), hi.max(g)));
        let extent = at[at.len() - 1] - at[0] + lo;
        if lo >= MIN_STEP_ACTIONS
            && f64::from(hi) <= REGULAR * f64::from(lo)
            && f64::from(extent) >= LOOP_SHARE * f64::from(n)
        {
            regular.entry(at.len()).or_default().push(at);
        }
    }
    let (_, sites) = regular.into_iter().max_by_key(|(count, sites)| (sites.len(), *count))?;
    let starts = sites.into_iter().min_by_key(|at| at[0])?;
    let mut gaps: Vec<u32> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    let median = gaps[gaps.len() / 2];
    let ends = starts.iter().skip(1).copied().chain([starts[starts.len() - 1].saturating_add(median).min(n)]);
    Some(starts.iter().zip(ends).map(|(&a, b)| (None, a, b)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_in_order() {
        assert_eq!(numbers_in("## epoch 2 step 10 ##"), [2, 10]);
        assert_eq!(numbers_in("FSDP::post_backward_reduce (transformer.h.3)"), [3]);
        assert_eq!(numbers_in("Optimizer.step#Adam.step"), Vec::<u64>::new());
        assert!(numbers_in("epoch 1 step 9") < numbers_in("epoch 2 step 0"), "a new epoch is no restart");
    }
}
