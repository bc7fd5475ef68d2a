//! `memviz ranks`: which rank of a job is different. One row per rank, the spread of the peaks,
//! and the outliers: a robust z-score of the peak (on the median and the median absolute
//! deviation: one odd rank cannot drag the yardstick with it, as it drags a mean and a standard
//! deviation) of at least 3.5, or a peak more than `--threshold` % over the median. Many ranks of
//! a job are byte-identical, so the deviation is often 0: it is floored at 1 % of the median
//! peak, and a rank a few percent over identical peers is no outlier. A rank that grows step
//! after step is reported by its growth verdict, not as a peak outlier (unless past
//! `--threshold`). For each outlier, the allocation sites that differ most from the rank closest
//! to the median (`diff`), those with a difference only.

use serde::Serialize;

use super::diff::SiteDelta;
use super::frames::FrameSource;
use super::steps::{self, Retainer};
use crate::derive::timeline::TimelineRef;

/// One rank's row.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RankRow {
    /// The number in the file's name; `None` for a file listed apart (no number, or a taken one).
    pub rank: Option<u64>,
    pub file: String,
    /// `rank 3`, or the file's path under the folder .
    #[serde(skip)]
    pub label: String,
    pub peak_bytes: u64,
    /// First action at the peak (−1: the state before the first).
    pub peak_action: i64,
    /// The step span holding the peak, and the annotations open then (outermost first; the
    /// compiler's internal ones left out, as in `stats`).
    pub peak_step: Option<String>,
    pub peak_annotation: Vec<String>,
    pub reserved_peak_bytes: u64,
    pub oom_events: usize,
    /// What each step after the first left live for the next (median), and the steps verdict.
    pub retained_per_step_bytes: Option<i64>,
    pub steady_growth: bool,
    /// With steady growth: the sites that keep memory step after step (`steps`' culprits).
    pub retaining: Vec<Retainer>,
    pub verdict: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Outlier {
    pub rank: Option<u64>,
    pub file: String,
    pub peak_bytes: u64,
    /// Over the median peak, in %.
    pub over_median_pct: f64,
    /// The robust z-score of its peak (`None` when the median peak is 0: then any difference
    /// stands out).
    pub z: Option<f64>,
    /// The rank it was compared with (closest to the median peak), what differs at the two
    /// peaks by category, and the sites that differ most (none whose difference is 0).
    pub compared_with: Option<u64>,
    pub compared_with_file: String,
    pub categories: Vec<super::diff::CategoryDelta>,
    pub sites: Vec<SiteDelta>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct RanksReport {
    pub ranks: Vec<RankRow>,
    pub median_peak_bytes: u64,
    /// max / median peak.
    pub spread: f64,
    pub threshold_pct: Option<f64>,
    pub outliers: Vec<Outlier>,
}

/// Robust z-scores need at least this many ranks to mean anything.
const MIN_RANKS: usize = 3;
pub const Z_OUTLIER: f64 = 3.5;
/// The median absolute deviation's floor, as a fraction of the median peak (SPEC §3).
pub const MAD_FLOOR: f64 = 0.01;

/// What the outlier rule reads of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankPeak {
    pub peak_bytes: u64,
    /// Its steps verdict: steady growth (then its growth verdict reports it, not its peak).
    pub steady_growth: bool,
}

impl From<&RankRow> for RankPeak {
    fn from(row: &RankRow) -> RankPeak {
        RankPeak { peak_bytes: row.peak_bytes, steady_growth: row.steady_growth }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The outlier ranks among `ranks`: `(index, z, over_median_pct)`, and the median peak. A rank
/// is one when its peak's z-score is ≥ 3.5 and it does not grow step after step, or its peak is
/// more than `threshold` % over the median. The deviation is floored at [`MAD_FLOOR`] of the
/// median, so identical peers do not make any difference an outlier (with a median of 0, any
/// difference is).
pub fn outliers(ranks: &[RankPeak], threshold: Option<f64>) -> (Vec<(usize, Option<f64>, f64)>, f64) {
    let peaks: Vec<f64> = ranks.iter().map(|r| r.peak_bytes as f64).collect();
    let med = median(&mut peaks.clone());
    let mut dev: Vec<f64> = peaks.iter().map(|&p| (p - med).abs()).collect();
    let mad = median(&mut dev).max(MAD_FLOOR * med);
    let found = ranks
        .iter()
        .zip(&peaks)
        .enumerate()
        .filter_map(|(i, (r, &p))| {
            let over = if med > 0.0 { 100.0 * (p - med) / med } else { 0.0 };
            let z = (mad > 0.0).then(|| 0.6745 * (p - med) / mad);
            let stands_out = z.map_or(p != med, |z| z.abs() >= Z_OUTLIER);
            let by_z = ranks.len() >= MIN_RANKS && stands_out && !r.steady_growth;
            let by_pct = threshold.is_some_and(|t| over > t);
            (by_z || by_pct).then_some((i, z, over))
        })
        .collect();
    (found, med)
}

/// The index of the rank whose peak is closest to the median (ties: the lower rank).
pub fn closest_to_median(peaks: &[u64], median: f64) -> usize {
    (0..peaks.len())
        .min_by(|&a, &b| (peaks[a] as f64 - median).abs().total_cmp(&(peaks[b] as f64 - median).abs()))
        .unwrap_or(0)
}

/// What a rank's row says besides its timeline: which file it is, and the archive's reserved peak
/// and OOM count for the device.
pub struct RankFacts {
    pub rank: Option<u64>,
    pub file: String,
    /// `rank 3`, or the file's path under the folder.
    pub label: String,
    pub reserved_peak_bytes: u64,
    pub oom_events: usize,
}

impl RankFacts {
    /// The facts of the file at `path`, numbered `rank` (`None`: listed apart, under `label`).
    pub fn new(
        rank: Option<u64>,
        path: &std::path::Path,
        label: String,
        reserved_peak_bytes: u64,
        ooms: usize,
    ) -> Self {
        RankFacts { rank, file: path.display().to_string(), label, reserved_peak_bytes, oom_events: ooms }
    }
}

/// One rank's row, from the timeline of its main device (steps from the stored summary; those
/// matching `pattern` computed).
pub fn row<F: FrameSource>(t: &TimelineRef<'_>, frames: &F, facts: RankFacts, pattern: Option<&str>) -> RankRow {
    let l = t.layout;
    let peak_k = l.peak_k();
    let report = steps::steps(t, frames, pattern).into_iter().max_by_key(|r| r.steps.len());
    let peak = u32::try_from(peak_k).ok();
    let peak_step = report.as_ref().and_then(|r| {
        let k = peak?;
        r.steps.iter().find(|st| st.start_action <= k && k < st.end_action).map(|st| st.name.clone())
    });
    // The annotations a user wrote (not the compiler's), as `stats` shows them at the peak.
    let shown = super::annotations::AnnotationFilter::default();
    let peak_annotation = peak
        .map(|k| t.open_at_action(k).into_iter().filter(|a| shown.keeps(a)).map(str::to_owned).collect())
        .unwrap_or_default();
    let retained = report.as_ref().and_then(|r| r.retained_per_step_bytes);
    let steady = report.as_ref().is_some_and(|r| r.verdict.steady_growth);
    RankRow {
        rank: facts.rank,
        file: facts.file,
        label: facts.label,
        peak_bytes: l.peak_bytes,
        peak_action: peak_k,
        peak_step,
        peak_annotation,
        reserved_peak_bytes: facts.reserved_peak_bytes,
        oom_events: facts.oom_events,
        retained_per_step_bytes: retained,
        steady_growth: steady,
        retaining: report.as_ref().filter(|_| steady).map(|r| r.retaining.clone()).unwrap_or_default(),
        verdict: report.map_or_else(
            || pattern.map_or(format!("no steps found: {}", steps::NO_LOOP), |p| format!("no steps matching {p:?}")),
            |r| r.verdict.text,
        ),
    }
}

/// The text of `memviz ranks`: the table (numbered ranks, then the files listed apart), the
/// growing ranks' verdicts, the spread and the outliers with the sites that differ most.
pub fn render_text(out: &mut String, r: &RanksReport, top: usize) {
    use std::fmt::Write as _;
    let shown = top.max(1);
    render_table(out, r, shown);
    for row in r.ranks.iter().filter(|row| row.steady_growth).take(shown) {
        let _ = writeln!(out, "\n{} grows step after step: {}", row.label, row.verdict);
        for s in row.retaining.iter().take(3) {
            steps::render_retainer(out, s);
        }
    }
    let b = super::units::bytes;
    let _ = writeln!(out, "\nspread: the highest peak is {:.2}× the median ({})", r.spread, b(r.median_peak_bytes));
    if r.outliers.is_empty() {
        let _ = writeln!(out, "no outlier rank");
    }
    if r.outliers.len() > shown {
        let _ = writeln!(out, "{} outlier ranks; the first {shown} (--top, or --json for all):", r.outliers.len());
    }
    for o in r.outliers.iter().take(shown) {
        render_outlier(out, r, o, top);
    }
}

/// One row per rank (the first `shown`); the files listed apart under a line of their own.
fn render_table(out: &mut String, r: &RanksReport, shown: usize) {
    use std::fmt::Write as _;
    let b = super::units::bytes;
    let _ = writeln!(
        out,
        "  {:>5}  {:>10}  {:>10}  {:>4}  {:>12}  {:<22}  file",
        "rank", "peak", "reserved", "OOMs", "retained/step", "peak during"
    );
    for (i, row) in r.ranks.iter().enumerate().take(shown) {
        if row.rank.is_none() && r.ranks[..i].iter().all(|p| p.rank.is_some()) {
            let _ = writeln!(out, "  listed apart (no rank number of their own in the file name):");
        }
        let retained = row.retained_per_step_bytes.map_or("—".to_owned(), |v| {
            if v >= 0 { format!("+{}", b(v as u64)) } else { format!("-{}", b(v.unsigned_abs())) }
        });
        let mark = if row.steady_growth { "  (steady growth)" } else { "" };
        let during = row.peak_step.clone().or_else(|| row.peak_annotation.last().cloned()).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:>5}  {:>10}  {:>10}  {:>4}  {:>12}  {:<22}  {}{mark}",
            row.rank.map_or("—".to_owned(), |n| n.to_string()),
            b(row.peak_bytes),
            b(row.reserved_peak_bytes),
            row.oom_events,
            retained,
            super::groups::clip(&during),
            row.file
        );
    }
    if r.ranks.len() > shown {
        let _ = writeln!(out, "  … {} more ranks (--top, or --json for all)", r.ranks.len() - shown);
    }
}

/// An outlier: its peak against the median, and what differs from the rank it was compared with.
fn render_outlier(out: &mut String, r: &RanksReport, o: &Outlier, top: usize) {
    use std::fmt::Write as _;
    let b = super::units::bytes;
    let z = o.z.map_or("any difference, the median being 0".to_owned(), |z| format!("z = {z:.1}"));
    let _ = writeln!(
        out,
        "\noutlier: {} — peak {} ({:+.1}% over the median; {z}); against {}, the sites that differ most:",
        r.label_of(&o.file),
        b(o.peak_bytes),
        o.over_median_pct,
        r.label_of(&o.compared_with_file)
    );
    let cats: Vec<String> = o
        .categories
        .iter()
        .filter(|c| c.delta_bytes != 0)
        .take(3)
        .map(|c| format!("{} {}", c.category.name(), crate::analysis::units::signed_bytes(i128::from(c.delta_bytes))))
        .collect();
    if !cats.is_empty() {
        let _ = writeln!(out, "    by category: {}", cats.join(", "));
    }
    if o.sites.is_empty() {
        let _ = writeln!(out, "    no site holds a different amount at the two peaks");
    }
    for s in o.sites.iter().take(top.clamp(1, 8)) {
        let sign = if s.delta_bytes >= 0 { "+" } else { "-" };
        let _ = writeln!(
            out,
            "    {sign}{:>10}  {} → {}  {}",
            b(s.delta_bytes.unsigned_abs()),
            b(s.a_bytes),
            b(s.b_bytes),
            super::groups::clip(&s.frame)
        );
    }
}

impl RanksReport {
    /// What the text calls the row of `file`: `rank 3`, or its path for a file listed apart.
    pub fn label_of<'a>(&'a self, file: &'a str) -> &'a str {
        self.ranks.iter().find(|row| row.file == file).map_or(file, |row| row.label.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Peaks without growth.
    fn flat(peaks: &[u64]) -> Vec<RankPeak> {
        peaks.iter().map(|&peak_bytes| RankPeak { peak_bytes, steady_growth: false }).collect()
    }

    fn found(peaks: &[RankPeak], threshold: Option<f64>) -> Vec<usize> {
        outliers(peaks, threshold).0.iter().map(|f| f.0).collect()
    }

    #[test]
    fn one_odd_rank_is_the_outlier() {
        let mib = 1u64 << 20;
        let (found, med) = outliers(&flat(&[378 * mib, 384 * mib, 378 * mib, 631 * mib]), None);
        assert_eq!(med, 381.0 * mib as f64);
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), [3]);
        assert!(found[0].1.unwrap() > 3.5);
        // A threshold catches what the z-score does not; two ranks are too few for a z-score.
        assert_eq!(self::found(&flat(&[100, 106, 101, 99, 102]), Some(4.0)), [1]);
        assert!(self::found(&flat(&[100, 106, 101, 99, 102]), None).is_empty(), "z = 3.3");
        assert!(self::found(&flat(&[100, 200]), None).is_empty());
        assert_eq!(closest_to_median(&[378, 384, 378, 631], 381.0), 0);
    }

    /// Identical peers make the deviation 0; floored at 1 % of the median, a rank 2 % over them
    /// is no outlier, one 20 % over is (z = 13.5).
    #[test]
    fn the_deviation_is_floored_at_one_percent_of_the_median() {
        assert!(found(&flat(&[100, 100, 100, 100]), None).is_empty());
        assert!(found(&flat(&[100, 100, 100, 102]), None).is_empty(), "z = 1.35");
        assert!(found(&flat(&[1000, 1000, 980, 1000]), None).is_empty(), "2 % under");
        let (hit, _) = outliers(&flat(&[10, 10, 10, 12]), None);
        assert_eq!(hit.len(), 1);
        assert_eq!(hit[0].0, 3);
        assert!((hit[0].1.unwrap() - 13.49).abs() < 0.01, "{:?}", hit[0].1);
        // A median of 0 leaves nothing to floor: any difference stands out.
        assert_eq!(outliers(&flat(&[0, 0, 0, 5]), None).0.iter().map(|f| (f.0, f.1)).collect::<Vec<_>>(), [(3, None)]);
    }

    /// A rank 6 % over identical peers because it grows is reported by its growth verdict; past
    /// `--threshold` it is an outlier all the same.
    #[test]
    fn a_growing_rank_is_no_peak_outlier() {
        let mut peaks = flat(&[378, 378, 378, 402]);
        assert_eq!(found(&peaks, None), [3], "z = 4.3 without its growth");
        peaks[3].steady_growth = true;
        assert!(found(&peaks, None).is_empty());
        assert_eq!(found(&peaks, Some(5.0)), [3]);
    }
}
