//! `memviz steps --annotation PATTERN`: one row per matching annotation span (a training step,
//! say) — its actions, its peak, its net growth — and a one-line verdict on steady growth.
//!
//! Steps are the spans of one *family* (`derive::steps`: its rows are stored in the archive for
//! the default family and computed for a pattern). A pattern (a substring, or a whole name with
//! `*`, as `--annotation-filter`) that matches several families gives one report per family,
//! each judged on its own. Spans that ended before the trace's first event (a truncated ring
//! buffer) are listed as "before the trace" and left out of the verdict.
//!
//! Net growth is the total after the span's last action minus the total before its first;
//! *retained* is what the next step starts with minus what this one started with.
//!
//! The verdict looks at retained memory, not net growth: a training step typically ends holding
//! its gradients, which `zero_grad` frees between two step spans (gpt2_small grows +40 MiB in
//! every step and is flat from one step to the next). Memory "grows steadily" when at least
//! [`GROWTH_RUN`] consecutive steps retain memory, or when the steps' starting totals rise along a
//! line (least squares with R² ≥ [`TREND_R2`], rising by ≥ [`TREND_SHARE`] of the peak overall).
//! A first step that allocates the optimizer state and then levels off is neither.

use std::fmt::Write as _;

use serde::Serialize;

use super::annotations::glob_match;
use super::frames::FrameSource;
use super::units;
use crate::derive::steps::{FamilySteps, StepRule, families, family_steps};
use crate::derive::timeline::TimelineRef;

/// Why a device has no default steps.
pub const NO_LOOP: &str =
    "no span family tiles the trace, no optimizer spans mark it, and no allocation site repeats at even intervals";

/// Consecutive growing steps that make a verdict of steady growth.
pub const GROWTH_RUN: usize = 3;
/// How well the starting totals must fit a rising line.
pub const TREND_R2: f64 = 0.9;
/// How much the line must rise over all the steps, as a share of the device's peak.
pub const TREND_SHARE: f64 = 0.01;

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Step {
    pub name: String,
    /// µs from the trace start to the span's start and end (`null`: never ended).
    pub start_us: Option<i64>,
    pub end_us: Option<i64>,
    /// The span's actions are `start_action .. end_action` (pass them to `memviz range`).
    pub start_action: u32,
    pub end_action: u32,
    /// Live bytes before its first action and after its last.
    pub total_start: u64,
    pub total_end: u64,
    /// Highest total inside (the start total when it has no action) and its first action.
    pub peak_bytes: u64,
    pub peak_action: Option<u32>,
    pub net_bytes: i64,
    /// The next step's `total_start` minus this one's (`null` for the last step).
    pub retained_bytes: Option<i64>,
    /// It ended before the trace's first event: nothing of it was recorded (not judged).
    pub before_trace: bool,
    /// What is live at its peak, by category (when classified).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_by_category: Option<Vec<super::categories::CategoryBytes>>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Verdict {
    pub steady_growth: bool,
    /// Longest run of consecutive steps that retained memory, and the index of its first step.
    pub longest_growth_run: usize,
    pub growth_run_from: Option<usize>,
    /// Least-squares slope of the starting totals (bytes per step) and its R² (`null`: fewer
    /// than two steps, or flat).
    pub trend_bytes_per_step: f64,
    pub trend_r2: Option<f64>,
    /// The verdict as one sentence.
    pub text: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct StepsReport {
    pub device: crate::model::DeviceId,
    /// The pattern given, or `null` when the steps are the default family.
    pub pattern: Option<String>,
    /// How the steps were found (`numbered`, `repeated`, `optimizer_marks`, `trace`: docs/guide.md
    /// "How memviz finds steps"), and that rule as a sentence.
    pub rule: StepRule,
    pub found_by: String,
    /// The span family these steps belong to (`## step # ##`; for the trace's own loop
    /// `(the trace's loop)`).
    pub family: String,
    /// Every family the pattern matched on this device (this one among them).
    pub families: Vec<String>,
    pub steps: Vec<Step>,
    /// What the first step left for the next (optimizer state, caches: the warm-up), and the
    /// median of what each later step left.
    pub warmup_bytes: Option<i64>,
    pub retained_per_step_bytes: Option<i64>,
    /// The sites that keep memory step after step: allocated in a step after the first and still
    /// live when the next one starts, summed over those steps, per step; largest first.
    pub retaining: Vec<Retainer>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Retainer {
    pub frame: String,
    pub bytes_per_step: u64,
    /// In how many of the judged steps it kept memory.
    pub steps: usize,
}

/// The spans matching `pattern` (by default: the numbered family with the most spans, which
/// an archive stores), one report per span family, families in order of their first span; steps
/// in start order.
pub fn steps<F: FrameSource>(t: &TimelineRef<'_>, frames: &F, pattern: Option<&str>) -> Vec<StepsReport> {
    match pattern {
        None => match t.default_steps() {
            Some(found) => vec![family_report(t, frames, None, &found, std::slice::from_ref(&found.family))],
            // Reported all the same: a device without a loop is an answer too.
            None => vec![family_report(t, frames, None, &FamilySteps::default(), &[])],
        },
        Some(p) => {
            let found = families(t.spans, |name| glob_match(p, name));
            let names: Vec<String> = found.iter().map(|f| f.0.clone()).collect();
            found
                .into_iter()
                .map(|(f, spans)| family_report(t, frames, pattern, &family_steps(t, f, &spans), &names))
                .collect()
        }
    }
}

fn family_report<F: FrameSource>(
    t: &TimelineRef<'_>,
    frames: &F,
    pattern: Option<&str>,
    found: &FamilySteps,
    families: &[String],
) -> StepsReport {
    let since = |us: i64| t.time_base_us.map(|s0| us - s0);
    let mut steps: Vec<Step> = found
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            // A span's own name and times when it is the step; else the step's number and the
            // times of its first and last actions.
            let own =
                r.span.map(|i| &t.spans[i]).filter(|_| matches!(found.rule, StepRule::Numbered | StepRule::Repeated));
            let name = match own {
                Some(s) if found.rule == StepRule::Numbered => s.name.to_owned(),
                _ => format!("step {i}"),
            };
            let (start_us, end_us) = match own {
                Some(s) => (since(s.start_us), s.end_us.and_then(since)),
                None => (
                    t.since_start(i64::from(r.start_action)),
                    t.since_start(i64::from(r.end_action) - 1).filter(|_| r.end_action > r.start_action),
                ),
            };
            Step {
                name,
                start_us,
                end_us,
                start_action: r.start_action,
                end_action: r.end_action,
                total_start: r.total_start,
                total_end: r.total_end,
                peak_bytes: r.peak_bytes,
                peak_action: r.peak_action,
                net_bytes: units::change(r.total_start, r.total_end),
                retained_bytes: None,
                before_trace: r.before_trace,
                peak_by_category: t.categories.map(|of| {
                    let k = r.peak_action.map_or(i64::from(r.start_action) - 1, i64::from);
                    let live = t.checkpoints.stack_after(t.layout, k);
                    super::categories::breakdown(t.layout.elements.size, of, live.elements())
                }),
            }
        })
        .collect();
    let judged: Vec<usize> = (0..steps.len()).filter(|&i| !steps[i].before_trace).collect();
    for w in judged.windows(2) {
        steps[w[0]].retained_bytes = Some(units::change(steps[w[0]].total_start, steps[w[1]].total_start));
    }
    let in_trace: Vec<&Step> = steps.iter().filter(|s| !s.before_trace).collect();
    let verdict = verdict(&in_trace, t.layout.peak_bytes);
    let warmup_bytes = in_trace.first().and_then(|s| s.retained_bytes);
    let mut later: Vec<i64> = in_trace.iter().skip(1).filter_map(|s| s.retained_bytes).collect();
    later.sort_unstable();
    let retained_per_step_bytes = later.get(later.len() / 2).copied();
    let retaining = found
        .retaining
        .iter()
        .map(|r| Retainer {
            frame: super::frames::top_frame(frames, r.stack)
                .map_or_else(|| super::groups::NO_STACK.to_owned(), |f| super::frames::describe(frames, f, true)),
            bytes_per_step: r.bytes_per_step,
            steps: r.steps,
        })
        .collect();
    StepsReport {
        device: t.layout.device,
        pattern: pattern.map(str::to_owned),
        rule: found.rule,
        found_by: if found.rows.is_empty() && pattern.is_none() {
            NO_LOOP.to_owned()
        } else {
            found.rule.describe(&found.family)
        },
        family: found.family.clone(),
        families: families.to_vec(),
        steps,
        warmup_bytes,
        retained_per_step_bytes,
        retaining,
        verdict,
    }
}

/// Judged after the warm-up: the first step (optimizer state, caches) counts in neither the runs
/// of growing steps nor the trend.
fn verdict(steps: &[&Step], peak_bytes: u64) -> Verdict {
    let (mut best, mut best_from, mut run) = (0usize, None, 0usize);
    for (i, s) in steps.iter().enumerate().skip(1) {
        run = if s.retained_bytes.is_some_and(|r| r > 0) { run + 1 } else { 0 };
        if run > best {
            (best, best_from) = (run, Some(i + 1 - run));
        }
    }
    let starts: Vec<f64> = steps.iter().skip(1).map(|s| s.total_start as f64).collect();
    let (slope, r2) = fit(&starts);
    let rise = slope * (starts.len().saturating_sub(1)) as f64;
    let trending = starts.len() >= GROWTH_RUN
        && slope > 0.0
        && r2.is_some_and(|r| r >= TREND_R2)
        && rise >= TREND_SHARE * peak_bytes as f64;
    let steady = best >= GROWTH_RUN || trending;
    let per_step = units::signed_bytes(slope.round() as i128);
    let text = if steps.len() < GROWTH_RUN {
        format!("not enough steps to judge a trend ({} span{} in the trace)", steps.len(), plural(steps.len()))
    } else if best >= GROWTH_RUN {
        let from = best_from.unwrap_or(0);
        let grown: i64 = steps[from..from + best].iter().filter_map(|s| s.retained_bytes).sum();
        format!(
            "steady growth after the warm-up: {best} steps in a row ({} to {}) each left more live memory for the next, {} in all; step starts trend {per_step} per step",
            steps[from].name,
            steps[from + best - 1].name,
            units::signed_bytes(i128::from(grown)),
        )
    } else if trending {
        format!(
            "steady growth: step starts rise {per_step} per step (R² {:.2}) over {} steps",
            r2.unwrap_or(0.0),
            steps.len()
        )
    } else {
        let later: Vec<i64> = steps.iter().skip(1).filter_map(|s| s.retained_bytes).collect();
        let (lo, hi) = (later.iter().copied().min().unwrap_or(0), later.iter().copied().max().unwrap_or(0));
        let change = if lo == hi {
            units::signed_bytes(i128::from(lo))
        } else {
            format!("{} … {}", units::signed_bytes(i128::from(lo)), units::signed_bytes(i128::from(hi)))
        };
        format!(
            "no steady growth: after the first step, each step starts {change} from the one before (longest run of rises: {best})"
        )
    };
    Verdict {
        steady_growth: steady,
        longest_growth_run: best,
        growth_run_from: best_from,
        trend_bytes_per_step: slope,
        trend_r2: r2,
        text,
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Least-squares line through `(i, y[i])`: its slope and R² (`None` when undefined).
fn fit(y: &[f64]) -> (f64, Option<f64>) {
    let n = y.len() as f64;
    if y.len() < 2 {
        return (0.0, None);
    }
    let mx = (n - 1.0) / 2.0;
    let my = y.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (i, &v) in y.iter().enumerate() {
        let (dx, dy) = (i as f64 - mx, v - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    let slope = sxy / sxx;
    let r2 = (syy > 0.0).then(|| (sxy * sxy) / (sxx * syy));
    (slope, r2)
}

/// One site that keeps memory, as a line of a text report.
pub fn render_retainer(out: &mut String, s: &Retainer) {
    let _ = writeln!(
        out,
        "    {:>10} per step  ({} of the steps)  {}",
        units::bytes(s.bytes_per_step),
        s.steps,
        super::groups::clip(&s.frame)
    );
}

/// The aligned text report of one device and family: at most `top` rows, then a count of the rest.
pub fn render_text(out: &mut String, r: &StepsReport, top: usize) {
    let n = r.steps.len();
    let _ = match &r.pattern {
        Some(p) => writeln!(out, "device {} — {n} span{} of \"{}\" matching \"{p}\"", r.device, plural(n), r.family),
        None if n == 0 => writeln!(out, "device {} — no steps found: {NO_LOOP}", r.device),
        None => writeln!(out, "device {} — {n} step{}: {}", r.device, plural(n), r.found_by),
    };
    if r.families.len() > 1 && r.families.first() == Some(&r.family) {
        let _ = writeln!(
            out,
            "  the pattern matches {} span families ({}); each is judged on its own",
            r.families.len(),
            r.families.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(", ")
        );
    }
    if !r.steps.is_empty() {
        let width = r.steps.iter().map(|s| s.name.chars().count()).max().unwrap_or(0).max(4);
        let classified = r.steps.iter().any(|s| s.peak_by_category.is_some());
        let _ = writeln!(
            out,
            "    {:<width$}  {:>17}  {:>10}  {:>10}  {:>10}  {:>11}  {:>11}{}",
            "span",
            "actions",
            "start",
            "duration",
            "peak",
            "net growth",
            "retained",
            if classified { "  the peak by category" } else { "" }
        );
        let top = if r.steps.len() == top + 1 { r.steps.len() } else { top };
        for s in r.steps.iter().take(top) {
            let duration = match (s.start_us, s.end_us) {
                (Some(a), Some(b)) => units::duration_us(b - a),
                _ => "—".into(),
            };
            // The three largest categories at the step's peak, by share.
            let cats = s.peak_by_category.as_ref().map_or(String::new(), |b| {
                let parts: Vec<String> =
                    b.iter().take(3).map(|c| format!("{} {:.0}%", c.category.name(), c.share_pct)).collect();
                format!("  {}", parts.join(" · "))
            });
            let _ = writeln!(
                out,
                "    {:<width$}  {:>17}  {:>10}  {:>10}  {:>10}  {:>11}  {:>11}{cats}",
                s.name,
                format!("{}..{}", s.start_action, s.end_action),
                s.start_us.map_or("—".into(), units::duration_us),
                duration,
                units::bytes(s.peak_bytes),
                units::signed_bytes(i128::from(s.net_bytes)),
                match (s.before_trace, s.retained_bytes) {
                    (true, _) => "before the trace".into(),
                    (false, r) => r.map_or("—".into(), |r| units::signed_bytes(i128::from(r))),
                },
            );
        }
        if r.steps.len() > top {
            let rest = r.steps.len() - top;
            let _ = writeln!(
                out,
                "    … {} more span{} (--top, or --json for all)",
                units::thousands(rest as u64),
                plural(rest)
            );
        }
    }
    let _ = writeln!(out, "  verdict: {}", r.verdict.text);
    if let (Some(w), Some(p)) = (r.warmup_bytes, r.retained_per_step_bytes) {
        let _ = writeln!(
            out,
            "  warm-up: the first step left {}; each later step {} (median)",
            units::signed_bytes(i128::from(w)),
            units::signed_bytes(i128::from(p))
        );
    }
    if !r.retaining.is_empty() && r.verdict.steady_growth {
        let _ = writeln!(out, "  kept step after step by:");
        for s in &r.retaining {
            render_retainer(out, s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps with these start and end totals, `retained` filled in as `steps` does.
    fn chain(v: &[(u64, u64)]) -> Vec<Step> {
        let mut s: Vec<Step> = v.iter().map(|&(a, b)| step(a, b)).collect();
        for i in 1..s.len() {
            s[i - 1].retained_bytes = Some(s[i].total_start as i64 - s[i - 1].total_start as i64);
        }
        s
    }

    fn step(total_start: u64, total_end: u64) -> Step {
        Step {
            name: format!("s{total_start}"),
            start_us: None,
            end_us: None,
            start_action: 0,
            end_action: 0,
            total_start,
            total_end,
            peak_bytes: total_end.max(total_start),
            peak_action: None,
            net_bytes: total_end as i64 - total_start as i64,
            retained_bytes: None,
            before_trace: false,
            peak_by_category: None,
        }
    }

    fn verdict(steps: &[Step], peak: u64) -> Verdict {
        super::verdict(&steps.iter().collect::<Vec<_>>(), peak)
    }

    #[test]
    fn warm_up_then_flat_is_not_growth() {
        let s = chain(&[(0, 100), (100, 100), (100, 100), (100, 100)]);
        let v = verdict(&s, 1000);
        assert!(!v.steady_growth, "{}", v.text);
        assert_eq!(v.longest_growth_run, 0, "the first step's growth is the warm-up, not a run");
        assert!(v.text.starts_with("no steady growth"), "{}", v.text);
    }

    #[test]
    fn three_growing_steps_are_growth() {
        let s = chain(&[(100, 100), (100, 110), (110, 120), (120, 130), (130, 140)]);
        let v = verdict(&s, 1 << 20);
        assert!(v.steady_growth);
        assert_eq!((v.longest_growth_run, v.growth_run_from), (3, Some(1)));
        assert!(v.text.starts_with("steady growth after the warm-up: 3 steps in a row (s100 to s120)"), "{}", v.text);
    }

    #[test]
    fn growth_freed_between_steps_is_not_growth() {
        // Every step ends 40 higher (its gradients), freed before the next starts.
        let s = chain(&[(100, 140), (100, 140), (100, 140), (100, 140)]);
        let v = verdict(&s, 1000);
        assert!(!v.steady_growth, "{}", v.text);
        assert_eq!(v.longest_growth_run, 0);
    }

    #[test]
    fn a_rising_line_of_starts_is_growth_even_with_dips() {
        // Every third step starts a little lower, so no run of three: the line alone decides.
        let starts = [100u64, 200, 300, 290, 390, 490, 480, 580, 680];
        let s = chain(&starts.map(|a| (a, a + 40)));
        let v = verdict(&s, 1000);
        assert_eq!(v.longest_growth_run, 2);
        assert!(v.steady_growth, "{}", v.text);
        assert!(v.text.starts_with("steady growth: step starts rise"), "{}", v.text);
        assert!(v.trend_r2.unwrap() >= TREND_R2);
        // Too small a rise against the peak is noise.
        assert!(!verdict(&s, 1 << 40).steady_growth);
    }

    #[test]
    fn one_step_cannot_be_judged() {
        let v = verdict(&chain(&[(0, 10), (10, 20)]), 10);
        assert!(!v.steady_growth);
        assert!(v.text.starts_with("not enough steps"), "{}", v.text);
        assert_eq!(fit(&[1.0, 1.0, 1.0]), (0.0, None));
    }
}
