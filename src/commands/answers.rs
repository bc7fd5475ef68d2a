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
use super::load::open_session;
use crate::analysis::{diff, live, range, steps, units};
use crate::archive::{self, Archive, DeviceData, Session};
use crate::cli::{AnswerArgs, AtArgs, DiffArgs, RangeArgs, StepsArgs};
use crate::model::DeviceId;

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
pub fn open_input(path: &Path, cache: bool) -> anyhow::Result<Session> {
    let context = || path.display().to_string();
    if archive::is_archive(path) {
        return Ok(Session::from_archive(Archive::open_verified(path).with_context(context)?));
    }
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let bar = std::cell::OnceCell::new();
    let progress = |n| bar.get_or_init(|| progress_bar(size)).set_position(n);
    let opened = open_session(path, cache, &progress);
    if let Some(b) = bar.get() {
        b.finish_and_clear();
    }
    opened
}

/// Indices of the devices asked for: all, or the one with ordinal `want`.
fn devices(s: &Session, want: Option<DeviceId>, input: &Path) -> anyhow::Result<Vec<usize>> {
    let ordinals: Vec<DeviceId> = (0..s.devices()).map(|d| DeviceId(s.device(d).device.to_native())).collect();
    match want {
        None if ordinals.is_empty() => bail!("{}: no device has trace events or segments", input.display()),
        None => Ok((0..ordinals.len()).collect()),
        Some(w) => match ordinals.iter().position(|&o| o == w) {
            Some(d) => Ok(vec![d]),
            None => {
                let have: Vec<String> = ordinals.iter().map(DeviceId::to_string).collect();
                bail!(
                    "{}: device {w} has no trace events or segments (devices with data: {})",
                    input.display(),
                    have.join(", ")
                )
            }
        },
    }
}

/// Every answer's JSON: the input and one entry per device.
#[derive(Serialize)]
struct PerDevice<'a, T: Serialize> {
    input: String,
    devices: &'a [T],
}

fn print<T: Serialize>(input: &Path, json: bool, reports: &[T], text: impl Fn(&mut String, &T)) -> anyhow::Result<()> {
    crate::output::write_to(None, |w| {
        if json {
            serde_json::to_writer_pretty(&mut *w, &PerDevice { input: input.display().to_string(), devices: reports })?;
            writeln!(w)?;
        } else {
            let mut out = format!("{}\n", input.display());
            for r in reports {
                out.push('\n');
                text(&mut out, r);
            }
            w.write_all(out.as_bytes())?;
        }
        Ok(())
    })
}

pub fn at_cmd(args: &AtArgs, cache: bool) -> anyhow::Result<()> {
    let input = &args.input;
    let session = open_input(input, cache)?;
    let mut reports = Vec::new();
    for d in devices(&session, args.common.device, input)? {
        let data = DeviceData::new(&session, d);
        let t = data.timeline();
        let (n, device) = (i64::from(t.actions()), t.layout.device);
        let k = if let Some(k) = args.action {
            if !(-1..n).contains(&k) {
                bail!(
                    "{}: action {k} is out of range: device {device} has actions -1..={} (-1: before the first action)",
                    input.display(),
                    n - 1
                );
            }
            k
        } else if let Some(us) = args.time {
            let Some(start) = t.trace_start_us else {
                bail!("{}: device {device} recorded no times (time_us); use --action", input.display());
            };
            i64::from(t.actions_until(start.saturating_add(us))) - 1
        } else {
            t.layout.peak_action.map_or(-1, i64::from)
        };
        reports.push(live::at(&t, session.root(), k, args.group_by.into()));
    }
    print(input, args.common.json, &reports, |out, r| live::render_text(out, r, args.common.top))
}

pub fn range_cmd(args: &RangeArgs, cache: bool) -> anyhow::Result<()> {
    let input = &args.input;
    let session = open_input(input, cache)?;
    let mut reports = Vec::new();
    for d in devices(&session, args.common.device, input)? {
        let data = DeviceData::new(&session, d);
        let t = data.timeline();
        let n = t.actions();
        let (a, b) = (args.range.start.unwrap_or(0), args.range.end.unwrap_or(n));
        if a > b || b > n {
            bail!(
                "{}: actions {a}..{b} are out of range: device {} has actions 0..{n} (A..B runs from A to before B, A ≤ B)",
                input.display(),
                t.layout.device
            );
        }
        reports.push(range::range(&t, session.root(), a, b));
    }
    print(input, args.common.json, &reports, |out, r| range::render_text(out, r, args.common.top))
}

pub fn steps_cmd(args: &StepsArgs, cache: bool) -> anyhow::Result<()> {
    let input = &args.input;
    let session = open_input(input, cache)?;
    let mut reports = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for d in devices(&session, args.common.device, input)? {
        let data = DeviceData::new(&session, d);
        names.extend(data.spans.iter().map(|s| s.name.to_owned()));
        reports.push(steps::steps(&data.timeline(), &args.annotation));
    }
    if reports.iter().all(|r| r.steps.is_empty()) {
        let mut seen: Vec<String> = names.into_iter().take(12).map(|n| format!("\"{n}\"")).collect();
        if seen.is_empty() {
            seen.push("none: the snapshot has no record_function annotations".into());
        }
        bail!("{}: no annotation span matches \"{}\" (spans: {})", input.display(), args.annotation, seen.join(", "));
    }
    print(input, args.common.json, &reports, steps::render_text)
}

/// `memviz diff`'s JSON.
#[derive(Serialize)]
struct DiffOutput<'a> {
    a: String,
    b: String,
    threshold_pct: Option<f64>,
    /// True when some device's peak grew more than the threshold (exit code 3).
    regressed: bool,
    devices: &'a [diff::DiffReport],
}

pub fn diff_cmd(args: &DiffArgs, cache: bool) -> anyhow::Result<()> {
    let (sa, sb) = (open_input(&args.a, cache)?, open_input(&args.b, cache)?);
    let pairs = diff_pairs(&sa, &sb, &args.common, &args.a, &args.b)?;
    let mut reports = Vec::new();
    for (da, db) in pairs {
        let (xa, xb) = (DeviceData::new(&sa, da), DeviceData::new(&sb, db));
        let side_a = diff::Side { name: args.a.display().to_string(), timeline: xa.timeline(), frames: sa.root() };
        let side_b = diff::Side { name: args.b.display().to_string(), timeline: xb.timeline(), frames: sb.root() };
        reports.push(diff::diff(&side_a, &side_b));
    }
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
    crate::output::write_to(None, |w| {
        if args.common.json {
            let doc = DiffOutput {
                a: args.a.display().to_string(),
                b: args.b.display().to_string(),
                threshold_pct: args.threshold,
                regressed: grew.is_some(),
                devices: &reports,
            };
            serde_json::to_writer_pretty(&mut *w, &doc)?;
            writeln!(w)?;
        } else {
            let mut out = format!("A = {}\nB = {}\n", args.a.display(), args.b.display());
            for r in &reports {
                out.push('\n');
                diff::render_text(&mut out, r, args.common.top);
            }
            if let Some(limit) = args.threshold {
                let verdict = if grew.is_some() { "over" } else { "within" };
                let _ = writeln!(out, "\nthreshold {limit}%: B's peak is {verdict} it");
            }
            w.write_all(out.as_bytes())?;
        }
        Ok(())
    })?;
    match grew {
        Some(g) => Err(g.into()),
        None => Ok(()),
    }
}

/// Which device of A is compared with which of B: the one asked for, else every ordinal both
/// have, else (one device each) those two.
fn diff_pairs(
    sa: &Session,
    sb: &Session,
    common: &AnswerArgs,
    a: &Path,
    b: &Path,
) -> anyhow::Result<Vec<(usize, usize)>> {
    if let Some(want) = common.device {
        return Ok(vec![(devices(sa, Some(want), a)?[0], devices(sb, Some(want), b)?[0])]);
    }
    let ordinal = |s: &Session, d: usize| s.device(d).device.to_native();
    let pairs: Vec<(usize, usize)> = (0..sa.devices())
        .filter_map(|da| (0..sb.devices()).find(|&db| ordinal(sb, db) == ordinal(sa, da)).map(|db| (da, db)))
        .collect();
    match (pairs.is_empty(), sa.devices(), sb.devices()) {
        (false, _, _) => Ok(pairs),
        (true, 1, 1) => Ok(vec![(0, 0)]),
        _ => bail!("{} and {} have no device in common; pick one with --device", a.display(), b.display()),
    }
}
