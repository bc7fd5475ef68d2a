//! `memviz ranks`: the rows of a job's ranks, opened one archive at a time (a snapshot through
//! its cache), the spread and the outliers; exit 3 past `--threshold`.

use super::answers::{categorize, open_input};
use super::reading::Opening;
use super::report::Answer;
use crate::analysis::diff;
use crate::analysis::ranks::{self, Outlier, RankFacts, RanksReport};
use crate::archive::DeviceData;
use crate::cli::RanksArgs;
use crate::derive::timeline::TimelineRef;
use crate::index::folder;

/// An outlier rank past `--threshold` (exit code 3).
#[derive(Debug, thiserror::Error)]
#[error(
    "{who}'s peak is {over_pct:.1}% over the median ({peak} vs {median}), more than the {threshold_pct}% threshold"
)]
pub struct RankOutlier {
    /// `rank 3`, or the path of a file listed apart.
    pub who: String,
    pub peak: String,
    pub median: String,
    pub over_pct: f64,
    pub threshold_pct: f64,
}

pub fn ranks(args: &RanksArgs, opening: &Opening<'_>) -> anyhow::Result<Answer<RanksReport>> {
    let job = folder::job(&args.inputs).map_err(anyhow::Error::msg)?;
    for w in &job.warnings {
        eprintln!("warning: {w}");
    }
    let files = job.files;
    let pattern = args.annotation.as_deref();
    // One archive open at a time: a row reads the archive's summary (nothing decompressed unless
    // `--annotation` asks for other steps), so a thousand ranks take a thousand small reads.
    let mut rows = Vec::with_capacity(files.len());
    for f in &files {
        let session = open_input(&f.path, opening)?;
        let d = session.main_device();
        let facts = RankFacts::new(f.rank, &f.path, f.label(), session.reserved_peak(d), session.oom_events(d).len());
        rows.push(ranks::row(&DeviceData::new(&session, d).timeline(), session.root(), facts, pattern));
    }
    let peaks: Vec<u64> = rows.iter().map(|r| r.peak_bytes).collect();
    let rule: Vec<ranks::RankPeak> = rows.iter().map(ranks::RankPeak::from).collect();
    let (found, median) = ranks::outliers(&rule, args.threshold);
    let base = ranks::closest_to_median(&peaks, median);
    let opened_base = if found.is_empty() { None } else { Some(open_input(&files[base].path, opening)?) };
    let mut outliers: Vec<Outlier> = Vec::with_capacity(found.len());
    for &(i, z, over) in &found {
        let sa = opened_base.as_ref().expect("opened when there are outliers");
        let sb = open_input(&files[i].path, opening)?;
        let (da, db) = (sa.main_device(), sb.main_device());
        let (xa, xb) = (DeviceData::new(sa, da), DeviceData::new(&sb, db));
        let (ta, tb) = (xa.timeline(), xb.timeline());
        let none = crate::analysis::category_rules::UserRules::default();
        let (ca, cb) = (categorize(sa, da, &ta, &none), categorize(&sb, db, &tb, &none));
        let side_a = diff::Side {
            name: rows[base].file.clone(),
            timeline: TimelineRef { categories: Some(&ca), ..ta },
            frames: sa.root(),
        };
        let side_b = diff::Side {
            name: rows[i].file.clone(),
            timeline: TimelineRef { categories: Some(&cb), ..tb },
            frames: sb.root(),
        };
        let report = diff::diff(&side_a, &side_b);
        let categories = report.categories.unwrap_or_default();
        let mut sites = report.sites;
        sites.retain(|s| s.delta_bytes != 0);
        sites.sort_by_key(|s| std::cmp::Reverse(s.delta_bytes.unsigned_abs()));
        sites.truncate(args.top.max(1));
        outliers.push(Outlier {
            rank: rows[i].rank,
            file: rows[i].file.clone(),
            peak_bytes: rows[i].peak_bytes,
            over_median_pct: over,
            z,
            compared_with: rows[base].rank,
            compared_with_file: rows[base].file.clone(),
            categories,
            sites,
        });
    }
    let max = peaks.iter().copied().max().unwrap_or(0);
    let report = RanksReport {
        spread: if median > 0.0 { max as f64 / median } else { 0.0 },
        median_peak_bytes: median as u64,
        threshold_pct: args.threshold,
        outliers,
        ranks: rows,
    };
    let units = crate::analysis::units::bytes;
    let verdict = match (
        args.threshold,
        report.outliers.iter().find(|o| args.threshold.is_some_and(|t| o.over_median_pct > t)),
    ) {
        (Some(t), Some(o)) => Some(RankOutlier {
            who: report.label_of(&o.file).to_owned(),
            peak: units(o.peak_bytes),
            median: units(report.median_peak_bytes),
            over_pct: o.over_median_pct,
            threshold_pct: t,
        }),
        _ => None,
    };
    let top = args.top;
    let text = move |report: &RanksReport| {
        let mut out = format!("{} ranks\n", report.ranks.len());
        ranks::render_text(&mut out, report, top);
        out
    };
    let answer = Answer::new(report, text).with_csv(|report: &RanksReport| vec![report]);
    Ok(answer.with_verdict(verdict.map(anyhow::Error::from)))
}
