//! `memviz index`: snapshot → `.memviz`, with a progress bar on a terminal and a one-line summary.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, bail};
use indicatif::{ProgressBar, ProgressStyle};
use memviz_format::SourceStamp;

use super::load::{PendingCache, file_name, lay_out};
use crate::analysis::units;
use crate::archive::{self, build::BuildStage};
use crate::ingest;
use crate::layout::Layout;
use crate::model::Snapshot;

/// Worker threads that derive tiles and compress events.
const MAX_INDEX_THREADS: usize = 4;

/// What an index run produced.
#[derive(Debug, Clone)]
pub struct IndexSummary {
    pub devices: usize,
    pub events: usize,
    pub allocations: u64,
    pub peak_bytes: u64,
    pub snapshot_bytes: u64,
    pub archive_bytes: u64,
    pub seconds: f64,
}

pub fn index(input: &Path, output: Option<&Path>) -> anyhow::Result<IndexSummary> {
    let context = || input.display().to_string();
    if archive::is_archive(input) {
        bail!("{}: already a .memviz archive", input.display());
    }
    let streamed = ingest::is_stream(input);
    let out = match output {
        Some(o) => o.to_path_buf(),
        None if streamed => {
            return Err(crate::commands::UsageError(format!(
                "{}: not a regular file (standard input or a pipe): give the archive's path with -o",
                input.display()
            ))
            .into());
        }
        None => archive::default_path(input),
    };
    crate::output::refuse_overwriting(&out, &[input])?;
    let stamp = if streamed { SourceStamp::default() } else { archive::write::stamp(input).with_context(context)? };
    let bar = progress_bar(stamp.size);
    let message = |msg: &'static str| {
        bar.set_style(stage_style());
        bar.set_message(msg);
    };
    let summary = build_archive(input, stamp, &out, &|n| bar.set_position(n), &message)?;
    bar.finish_and_clear();
    eprintln!(
        "indexed {}: {} device{}, {} events, {} allocations, peak {}; {} ({:.2}× the snapshot) in {:.2} s",
        file_name(input),
        summary.devices,
        if summary.devices == 1 { "" } else { "s" },
        units::thousands(summary.events as u64),
        units::thousands(summary.allocations),
        units::bytes(summary.peak_bytes),
        out.display(),
        summary.archive_bytes as f64 / summary.snapshot_bytes.max(1) as f64,
        summary.seconds,
    );
    Ok(summary)
}

/// Reads `snapshot`, lays it out and writes its archive to `out`; `progress` gets the bytes read,
/// `message` each later stage.
pub fn build_archive(
    snapshot: &Path,
    stamp: SourceStamp,
    out: &Path,
    progress: &dyn Fn(u64),
    message: &(dyn Fn(&'static str) + Sync),
) -> anyhow::Result<IndexSummary> {
    let started = Instant::now();
    let (model, source) =
        ingest::read_path_progress(snapshot, progress).with_context(|| snapshot.display().to_string())?;
    timing("read", started);
    message("laying out");
    let layouts = lay_out(&model);
    timing("layout", started);
    let pending = PendingCache { path: out.to_owned(), stamp, source, name: file_name(snapshot) };
    write_archive(&pending, model, layouts, message, started)
}

/// Builds and writes the archive of a snapshot already read.
pub fn write_archive(
    pending: &PendingCache,
    snapshot: Snapshot,
    layouts: Vec<Layout>,
    message: &(dyn Fn(&'static str) + Sync),
    started: Instant,
) -> anyhow::Result<IndexSummary> {
    let events = snapshot.event_count();
    let allocations = layouts.iter().map(|l| l.elements.origin.iter().filter(|&&o| o == 0).count() as u64).sum();
    let peak_bytes = layouts.iter().map(|l| l.peak_bytes).max().unwrap_or(0);
    let devices = layouts.len();
    let stage = |s: BuildStage| {
        message(match s {
            BuildStage::Compress => "compressing events",
            BuildStage::Derive => "checkpoints, tiles",
        })
    };
    // Each worker holds a tile raster and a compression buffer at a time, and glibc keeps a heap
    // per thread: on a 16-core host peak RSS grew from 171 to 200 MB on the 195 MB benchmark.
    // Four workers keep index at ~1× the pickle at the same speed (the decoder is sequential).
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).min(MAX_INDEX_THREADS);
    let build = || archive::build::build_root(snapshot, &pending.source, &pending.name, layouts, &stage);
    let root =
        match rayon::ThreadPoolBuilder::new().num_threads(workers).thread_name(|i| format!("memviz-index-{i}")).build()
        {
            Ok(pool) => pool.install(build),
            Err(_) => build(),
        };
    timing("derive + compress", started);
    message("writing");
    let archive_bytes = archive::write::write(&root, &pending.path, pending.stamp)?;
    timing("write", started);
    Ok(IndexSummary {
        devices,
        events,
        allocations,
        peak_bytes,
        snapshot_bytes: pending.stamp.size,
        archive_bytes,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// With `MEMVIZ_TIMINGS` set, prints when each stage ended (for benchmarks).
fn timing(stage: &str, started: Instant) {
    if std::env::var_os("MEMVIZ_TIMINGS").is_some() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |k: &str| status.lines().find(|l| l.starts_with(k)).map_or("", |l| l[k.len()..].trim()).to_owned();
        eprintln!(
            "timing: {stage} done at {:.3} s (RSS {}, peak {})",
            started.elapsed().as_secs_f64(),
            field("VmRSS:"),
            field("VmHWM:")
        );
    }
}

pub(super) fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{spinner} reading {bytes}/{total_bytes} ({bytes_per_sec}) {wide_bar} {eta}")
            .expect("valid template"),
    );
    bar
}

fn stage_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid template")
}
