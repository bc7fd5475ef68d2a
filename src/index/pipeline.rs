//! The snapshot → archive pipeline: read, lay out, derive and compress on the rayon pool it is
//! called on (`threads::on_pool`; else the global one, sized by `MEMVIZ_THREADS`), write
//! atomically. `memviz index`, the cache and the viewer all build archives
//! through [`build_archive`].

use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use memviz_format::SourceStamp;

use super::build::BuildStage;
use super::cache::{PendingCache, file_name};
use super::reading::{MadeWhileReading, WhileReading, lay_out};
use crate::file::write::Writing;
use crate::ingest;
use crate::layout::Layout;
use crate::model::Snapshot;

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

/// Builds running in this process now (a folder's ranks are indexed a few at a time): each
/// plans its share of the memory budget ([`room`]).
static RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts a build while it lives.
struct Running;

impl Running {
    fn start() -> Running {
        RUNNING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A quarter of the memory budget, this build's share of it where builds run side by side: what
/// the allocator pass's spans may hold between them, and the finest tiles' rasters theirs.
pub(super) fn room() -> u64 {
    let running = RUNNING.load(std::sync::atomic::Ordering::Relaxed).max(1);
    crate::spill::budget() / 4 / running as u64
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
    let _running = Running::start();
    crate::timings::index_started(started);
    // Past the memory budget, what grows with the input spills to a temp file beside the output.
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let _spilling = crate::spill::activate(dir);
    // The event table is compressed and the first trace walked while the decoder reads (it uses
    // one core of two), and the rows both took are let go — but from an input that cannot be
    // read twice; without a thread for that, everything is done after reading.
    let (beside, rows) = WhileReading::start(!ingest::is_stream(snapshot)).unzip();
    let read = ingest::read_path_observed(snapshot, progress, rows);
    let (mut model, mut source) = read.with_context(|| snapshot.display().to_string())?;
    crate::timings::stage("read", started);
    message("laying out");
    let (layouts, made) = match beside.map(|b| b.finish(&mut model)) {
        Some(Some((layouts, made))) => (layouts, Some(made)),
        Some(None) => {
            // A row the reader let go was asked for (a pickle that fetches an event dict long
            // after making it): read again, letting go of nothing.
            message("reading again");
            (model, source) =
                ingest::read_path_progress(snapshot, progress).with_context(|| snapshot.display().to_string())?;
            (lay_out(&model), None)
        }
        None => (lay_out(&model), None),
    };
    crate::timings::stage("layout", started);
    let pending = PendingCache { path: out.to_owned(), stamp, source, name: file_name(snapshot) };
    write_archive(&pending, model, layouts, made, message, started)
}

/// Builds and writes the archive of a snapshot already read (`made`: what was made beside the
/// reader — its event table compressed, a walked trace's columns —, else all is made here).
pub fn write_archive(
    pending: &PendingCache,
    snapshot: Snapshot,
    layouts: Vec<Layout>,
    made: Option<MadeWhileReading>,
    message: &(dyn Fn(&'static str) + Sync),
    started: Instant,
) -> anyhow::Result<IndexSummary> {
    let events = snapshot.event_count();
    let allocations = layouts.iter().map(|l| l.elements.origin.iter().filter(|&&o| o == 0).count() as u64).sum();
    let peak_bytes = layouts.iter().map(|l| l.peak_bytes).max().unwrap_or(0);
    let devices = layouts.len();
    let stage = |s: BuildStage| {
        message(match s {
            BuildStage::Derive => "allocator states, checkpoints, tiles, compressing events",
        })
    };
    // The archive's first part is written while the rest is derived.
    let mut writing = None;
    let mut begin = |heads| {
        let w = Writing::start(heads, &pending.path, pending.stamp);
        let first_lods = w.first_lods();
        writing = Some(w);
        first_lods
    };
    // On the pool this is called on (`threads::on_pool`), else rayon's global one.
    let tails = super::build::build_root(snapshot, &pending.source, &pending.name, layouts, made, &stage, &mut begin);
    crate::timings::stage("derive + compress", started);
    message("writing");
    let archive_bytes = writing.expect("the build began writing").finish(tails)?;
    crate::timings::stage("write", started);
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
