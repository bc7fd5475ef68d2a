//! `memviz at`, `range`, `steps` and `diff`: answers read from the archive in place.
//!
//! A snapshot input is answered through its archive: the cached one (built and cached on first
//! use), or with `--no-cache` one built into the temp folder and unlinked as soon as it is mapped.
//! Nothing decompresses the event table: the answers read the layout, checkpoints and element
//! sites in place, and decompress only the chunks of action times a question touches.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde::Serialize;

use super::index::progress_bar;
use super::reading::Opening;
use super::report::{Answer, PerDevice};
use crate::analysis::categories::{self, Category};
use crate::analysis::category_rules::UserRules;
use crate::analysis::table::Table;
use crate::analysis::{diff, find, live, range, steps, units};
use crate::archive::{DeviceData, Session};
use crate::cli::{ActionArg, AtArgs, DiffArgs, FindArgs, RangeArgs, StepsArgs, TimeArg};
use crate::derive::timeline::TimelineRef;
use crate::index::cache::open_session;
use crate::model::{DeviceId, DeviceIdx};

/// `memviz diff` found B's peak above A's by more than the threshold: exit code 3.
#[derive(Debug, thiserror::Error)]
#[error(
    "B's peak grew {grew_pct:.1}% over A's on device {device} ({a} → {b}), more than the {threshold_pct}% threshold"
)]
pub struct PeakGrew {
    pub device: crate::model::DeviceId,
    pub a: String,
    pub b: String,
    pub grew_pct: f64,
    pub threshold_pct: f64,
}

/// The archive of `path`, opened: `path` itself, or the archive of the snapshot (a progress bar
/// on a terminal while one is built).
pub fn open_input(path: &Path, opening: &Opening<'_>) -> anyhow::Result<std::sync::Arc<Session>> {
    if let Some(kept) = opening.kept(path) {
        opening.opened(&kept);
        return Ok(kept);
    }
    let context = || path.display().to_string();
    let opened = if crate::file::is_archive(path) {
        // Read in place and checked as read (`reading`): only an archive without a block table
        // (format 5 and older) is checked in full first.
        let a = crate::file::open_scattered(path).with_context(context)?;
        if !a.checks_blocks() {
            a.verify().with_context(context)?;
        }
        Session::from_archive(a)
    } else {
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let bar = std::cell::OnceCell::new();
        let progress = |n| bar.get_or_init(|| progress_bar(size)).set_position(n);
        let opened = open_session(path, opening.cache, &progress);
        if let Some(b) = bar.get() {
            b.finish_and_clear();
        }
        opened?
    };
    let session = std::sync::Arc::new(opened);
    opening.opened(&session);
    opening.keep(path, &session);
    Ok(session)
}

/// Indices of the devices asked for: all, or the one with ordinal `want`.
pub(super) fn devices(s: &Session, want: Option<DeviceId>, input: &Path) -> anyhow::Result<Vec<DeviceIdx>> {
    let ordinals: Vec<DeviceId> = s.device_indices().map(|d| s.ordinal(d)).collect();
    let picked =
        crate::model::pick_devices(&ordinals, want).map_err(|e| anyhow::anyhow!("{}: {e}", input.display()))?;
    Ok(picked.into_iter().map(DeviceIdx).collect())
}

/// The answer of a command with one report per device: the input's name, then each report's
/// text ([`PerDevice`]).
pub(super) fn per_device<T: Serialize + Table + 'static>(
    input: &Path,
    reports: Vec<T>,
    text: impl Fn(&mut String, &T) + 'static,
) -> Answer<PerDevice<T>> {
    let doc = PerDevice { input: input.display().to_string(), devices: reports };
    Answer::new(doc, move |doc: &PerDevice<T>| {
        let mut out = format!("{}\n", doc.input);
        for r in &doc.devices {
            out.push('\n');
            text(&mut out, r);
        }
        out
    })
    .with_csv(|doc: &PerDevice<T>| doc.devices.iter().collect())
}

pub fn at(args: &AtArgs, opening: &Opening<'_>) -> anyhow::Result<Answer<PerDevice<live::LiveSet>>> {
    let input = &args.input;
    let rules = user_rules(args.common.categories.as_deref())?;
    let session = open_input(input, opening)?;
    let chosen = devices(&session, args.common.device, input)?;
    if let Some(ActionArg::Index(k)) = args.action {
        check_action_exists(&session, &chosen, k, input)?;
    }
    let mut reports = Vec::new();
    for d in chosen {
        let data = DeviceData::new(&session, d);
        let t = data.timeline();
        let (n, device) = (i64::from(t.actions()), t.layout.device);
        let k = match (args.action, args.time) {
            _ if args.end => n - 1,
            (Some(ActionArg::Index(k)), _) => k,
            (Some(ActionArg::Last), _) => n - 1,
            (None, Some(time)) => action_at_time(&t, time, input)?,
            (None, None) => t.layout.peak_k(),
        };
        debug_assert!((-1..n).contains(&k), "device {device}: action {k}");
        let by: crate::analysis::groups::GroupBy = args.group_by.into();
        let of = (by == crate::analysis::groups::GroupBy::Category || args.list)
            .then(|| categorize(&session, d, &t, &rules));
        let pools = (by == crate::analysis::groups::GroupBy::Pool).then(|| session.element_pools(d));
        let t = TimelineRef { categories: of.as_deref(), pools: pools.as_deref(), ..t };
        let mut report = live::at(&t, session.root(), k, by);
        if args.list {
            report.allocations = Some(live::list(&t, session.root(), k));
        }
        if args.stacks {
            report.with_stacks(session.root());
        }
        reports.push(report);
    }
    let top = args.common.top;
    Ok(per_device(input, reports, move |out, r| live::render_text(out, r, top)))
}

/// `--categories FILE`, read and parsed (no file: no user rules).
pub fn user_rules(path: Option<&Path>) -> anyhow::Result<UserRules> {
    let Some(path) = path else { return Ok(UserRules::default()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read the rules", path.display()))?;
    UserRules::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The category of every element of device `d` (its timeline `t`), the user's rules first.
pub fn categorize(session: &Session, d: DeviceIdx, t: &TimelineRef<'_>, rules: &UserRules) -> Vec<Category> {
    categories::classify(t, session.root(), &session.element_pools(d), rules).of
}

/// `--action K` must exist on every device answered. One that exists only on another device
/// says which `--device` has it.
pub(super) fn check_action_exists(s: &Session, chosen: &[DeviceIdx], k: i64, input: &Path) -> anyhow::Result<()> {
    let actions = |d: DeviceIdx| i64::from(s.layout(d).actions.len() as u32);
    let label = |d: DeviceIdx| s.ordinal(d);
    let Some(&missing) = chosen.iter().find(|&&d| !(-1..actions(d)).contains(&k)) else { return Ok(()) };
    let elsewhere: Vec<String> = s
        .device_indices()
        .filter(|&d| d != missing && (-1..actions(d)).contains(&k))
        .map(|d| format!("--device {}", label(d)))
        .collect();
    let hint = if elsewhere.is_empty() { String::new() } else { format!("; it exists with {}", elsewhere.join(", ")) };
    bail!(
        "{}: action {} is out of range on device {} (-1..{}: -1 is before the first action){hint}",
        input.display(),
        thousands_signed(k),
        label(missing),
        units::thousands(actions(missing) as u64)
    )
}

fn thousands_signed(k: i64) -> String {
    if k < 0 { format!("-{}", units::thousands(k.unsigned_abs())) } else { units::thousands(k as u64) }
}

/// The last action at or before `--time` (counted from the snapshot's start, as printed).
fn action_at_time(t: &TimelineRef<'_>, time: TimeArg, input: &Path) -> anyhow::Result<i64> {
    let device = t.layout.device;
    let Some(base) = t.time_base_us else {
        bail!("{}: device {device} recorded no times (time_us); use --action", input.display());
    };
    let n = t.actions();
    let last = (0..n).rev().find_map(|k| t.since_start(i64::from(k)));
    if let Some(end) = last
        && time.us - time.half_step_us > end
    {
        bail!(
            "{}: {} is past the end of device {device}'s trace (its last action is at {})",
            input.display(),
            units::duration_us(time.us),
            units::duration_us(end)
        );
    }
    Ok(i64::from(t.actions_until(base.saturating_add(time.us + time.half_step_us))) - 1)
}

pub fn range(args: &RangeArgs, opening: &Opening<'_>) -> anyhow::Result<Answer<PerDevice<range::RangeReport>>> {
    let input = &args.input;
    let rules = user_rules(args.common.categories.as_deref())?;
    let session = open_input(input, opening)?;
    let mut reports = Vec::new();
    for d in devices(&session, args.common.device, input)? {
        let data = DeviceData::new(&session, d);
        let t = data.timeline();
        let n = t.actions();
        let (a, b) = (args.range.start.unwrap_or(0), args.range.end.unwrap_or(n));
        if a > b || b > n {
            bail!(
                "{}: actions {}..{} are out of range (0..{} on device {}; A..B runs from A to before B, A ≤ B)",
                input.display(),
                units::thousands(a.into()),
                units::thousands(b.into()),
                units::thousands(n.into()),
                t.layout.device
            );
        }
        let of = categorize(&session, d, &t, &rules);
        reports.push(range::range(&TimelineRef { categories: Some(&of), ..t }, session.root(), a, b));
    }
    let top = args.common.top;
    Ok(per_device(input, reports, move |out, r| range::render_text(out, r, top)))
}

pub fn steps(args: &StepsArgs, opening: &Opening<'_>) -> anyhow::Result<Answer<PerDevice<steps::StepsReport>>> {
    let input = &args.input;
    let rules = user_rules(args.common.categories.as_deref())?;
    let session = open_input(input, opening)?;
    let mut reports = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for d in devices(&session, args.common.device, input)? {
        let data = DeviceData::new(&session, d);
        names.extend(data.spans.iter().map(|s| s.name.to_owned()));
        let t = data.timeline();
        let of = categorize(&session, d, &t, &rules);
        let t = TimelineRef { categories: Some(&of), ..t };
        reports.extend(steps::steps(&t, session.root(), args.annotation.as_deref()));
    }
    if reports.iter().all(|r| r.steps.is_empty()) {
        let mut seen: Vec<String> = names.into_iter().take(12).map(|n| format!("\"{n}\"")).collect();
        if seen.is_empty() {
            seen.push("none: the snapshot has no record_function annotations".into());
        }
        match &args.annotation {
            Some(p) => bail!("{}: no annotation span matches \"{p}\" (spans: {})", input.display(), seen.join(", ")),
            None => bail!(
                "{}: no steps found: {}; give --annotation (spans: {})",
                input.display(),
                steps::NO_LOOP,
                seen.join(", ")
            ),
        }
    }
    let top = args.common.top;
    Ok(per_device(input, reports, move |out, r| steps::render_text(out, r, top)))
}

pub fn find(args: &FindArgs, opening: &Opening<'_>) -> anyhow::Result<Answer<PerDevice<find::FindReport>>> {
    let input = &args.input;
    let query = match (&args.addr, &args.frame) {
        (Some(a), _) => find::Query::addr(a),
        (_, Some(f)) => find::Query::frame(f),
        _ => unreachable!("clap requires one"),
    }
    .map_err(|e| super::UsageError(format!("{}: {e}", input.display())))?;
    let session = open_input(input, opening)?;
    let reports: Vec<find::FindReport> = devices(&session, args.common.device, input)?
        .into_iter()
        .map(|d| {
            let mut r = find::find(&DeviceData::new(&session, d).timeline(), session.root(), &query);
            if args.stacks {
                r.with_stacks(session.root());
            }
            r
        })
        .collect();
    let top = args.common.top;
    Ok(per_device(input, reports, move |out, r| find::render_text(out, r, top)))
}

/// `memviz diff`'s document.
#[derive(Serialize, schemars::JsonSchema)]
pub struct DiffOutput {
    a: String,
    b: String,
    threshold_pct: Option<f64>,
    /// True when some device's peak grew more than the threshold (exit code 3).
    regressed: bool,
    devices: Vec<diff::DiffReport>,
    /// Devices of A (of B) that nothing was compared with.
    unmatched_a: Vec<DeviceId>,
    unmatched_b: Vec<DeviceId>,
}

pub fn diff(args: &DiffArgs, opening: &Opening<'_>) -> anyhow::Result<Answer<DiffOutput>> {
    let rules = user_rules(args.common.categories.as_deref())?;
    let (sa, sb) = (open_input(&args.a, opening)?, open_input(&args.b, opening)?);
    let pairs = diff_pairs(&sa, &sb, args)?;
    let mut reports = Vec::new();
    for &(da, db) in &pairs {
        let (xa, xb) = (DeviceData::new(&sa, da), DeviceData::new(&sb, db));
        let (ta, tb) = (xa.timeline(), xb.timeline());
        let (ca, cb) = (categorize(&sa, da, &ta, &rules), categorize(&sb, db, &tb, &rules));
        let side_a = diff::Side {
            name: args.a.display().to_string(),
            timeline: TimelineRef { categories: Some(&ca), ..ta },
            frames: sa.root(),
        };
        let side_b = diff::Side {
            name: args.b.display().to_string(),
            timeline: TimelineRef { categories: Some(&cb), ..tb },
            frames: sb.root(),
        };
        let mut report = diff::diff(&side_a, &side_b);
        if args.stacks {
            report.with_stacks(sa.root(), sb.root());
        }
        reports.push(report);
    }
    let unmatched_a: Vec<DeviceId> =
        sa.device_indices().filter(|d| !pairs.iter().any(|p| p.0 == *d)).map(|d| sa.ordinal(d)).collect();
    let unmatched_b: Vec<DeviceId> =
        sb.device_indices().filter(|d| !pairs.iter().any(|p| p.1 == *d)).map(|d| sb.ordinal(d)).collect();
    // A pair picked with --device / --device-b leaves the other devices out on purpose: the
    // text does not list them as if the other side lacked them.
    let picked = args.common.device.is_some() || args.device_b.is_some();
    let grew = args.threshold.and_then(|limit| {
        reports.iter().find_map(|r| {
            let pct = r.peak_delta_pct.unwrap_or(if r.b.peak_bytes > 0 { f64::INFINITY } else { 0.0 });
            (pct > limit).then(|| PeakGrew {
                device: r.b.device,
                a: units::bytes(r.a.peak_bytes),
                b: units::bytes(r.b.peak_bytes),
                grew_pct: pct,
                threshold_pct: limit,
            })
        })
    });
    let doc = DiffOutput {
        a: args.a.display().to_string(),
        b: args.b.display().to_string(),
        threshold_pct: args.threshold,
        regressed: grew.is_some(),
        devices: reports,
        unmatched_a,
        unmatched_b,
    };
    let top = args.common.top;
    let text = move |doc: &DiffOutput| {
        let mut out = format!("A = {}\nB = {}\n", doc.a, doc.b);
        for r in &doc.devices {
            out.push('\n');
            diff::render_text(&mut out, r, top);
        }
        for (side, list, other) in [("A", &doc.unmatched_a, "B"), ("B", &doc.unmatched_b, "A")] {
            for d in list.iter().filter(|_| !picked) {
                let _ = writeln!(
                    out,
                    "\n{side}'s device {d}: not compared ({other} has no device {d}; pick a pair with --device and --device-b)"
                );
            }
        }
        if let Some(limit) = doc.threshold_pct {
            let verdict = if doc.regressed { "over" } else { "within" };
            let _ = writeln!(out, "\nthreshold {limit}%: B's peak is {verdict} it");
        }
        out
    };
    let answer = Answer::new(doc, text).with_csv(|doc: &DiffOutput| doc.devices.iter().collect());
    Ok(answer.with_verdict(grew.map(anyhow::Error::from)))
}

/// Which device of A is compared with which of B: the pair asked for (`--device` for A,
/// `--device-b` for B, which defaults to `--device`), else every ordinal both have, else (one
/// device each) those two. Devices left out are listed as unmatched by the caller.
fn diff_pairs(sa: &Session, sb: &Session, args: &DiffArgs) -> anyhow::Result<Vec<(DeviceIdx, DeviceIdx)>> {
    let (a, b) = (args.a.as_path(), args.b.as_path());
    if args.common.device.is_some() || args.device_b.is_some() {
        let want_a = args.common.device.or(args.device_b);
        let want_b = args.device_b.or(args.common.device);
        return Ok(vec![(devices(sa, want_a, a)?[0], devices(sb, want_b, b)?[0])]);
    }
    let pairs: Vec<(DeviceIdx, DeviceIdx)> = sa
        .device_indices()
        .filter_map(|da| sb.device_indices().find(|&db| sb.ordinal(db) == sa.ordinal(da)).map(|db| (da, db)))
        .collect();
    match (pairs.is_empty(), sa.devices(), sb.devices()) {
        (false, _, _) => Ok(pairs),
        (true, 1, 1) => Ok(vec![(DeviceIdx(0), DeviceIdx(0))]),
        _ => bail!(
            "{} and {} have no device in common; pick a pair with --device and --device-b",
            a.display(),
            b.display()
        ),
    }
}
