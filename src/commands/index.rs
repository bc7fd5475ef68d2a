//! `memviz index`: snapshot → `.memviz`, with a progress bar on a terminal and a one-line summary.

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context as _, bail};
use indicatif::{ProgressBar, ProgressStyle};
use memviz_format::SourceStamp;

use crate::analysis::units;
use crate::index::cache::file_name;
use crate::index::pipeline::{IndexSummary, build_archive};
use crate::ingest;

/// `progress_lines`: the bytes read also as `read BYTES` lines on standard output, a line at
/// most every `PROGRESS_LINE_MS` (100 ms; `memviz serve`'s child).
pub fn index(
    input: &Path,
    output: Option<&Path>,
    jobs: Option<usize>,
    progress_lines: bool,
) -> anyhow::Result<IndexSummary> {
    let context = || input.display().to_string();
    if crate::file::is_archive(input) {
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
        None => {
            // A read-only folder (a shared dataset mount): the user's cache, where every
            // command then finds it.
            let beside = crate::index::default_path(input);
            let stamp = crate::file::write::stamp(input).with_context(context)?;
            let cached = crate::index::cache::cache_path(input, &stamp);
            if cached != beside {
                eprintln!(
                    "note: the folder of {} is read-only or others can write in it: the archive goes to {}",
                    input.display(),
                    cached.display()
                );
            }
            cached
        }
    };
    crate::output::refuse_overwriting(&out, &[input])?;
    let stamp =
        if streamed { SourceStamp::default() } else { crate::file::write::stamp(input).with_context(context)? };
    let bar = progress_bar(stamp.size);
    let message = |msg: &'static str| {
        bar.set_style(stage_style());
        bar.set_message(msg);
    };
    let threads = crate::index::threads::count_told(jobs)?;
    let started = std::time::Instant::now();
    let last_line = AtomicU64::new(0);
    let progress = |n| {
        bar.set_position(n);
        let ms = started.elapsed().as_millis() as u64;
        if progress_lines && ms >= last_line.load(Ordering::Relaxed) + PROGRESS_LINE_MS {
            last_line.store(ms, Ordering::Relaxed);
            // A parent gone (the pipe closed) does not stop the index: it still fills the cache.
            let _ = writeln!(std::io::stdout().lock(), "read {n}");
        }
    };
    let summary = crate::index::threads::on_pool(threads, || build_archive(input, stamp, &out, &progress, &message))?;
    bar.finish_and_clear();
    eprintln!(
        "indexed {}: {} device{}, {} events, {} allocations, peak {}; {}{} in {:.2} s",
        file_name(input),
        summary.devices,
        if summary.devices == 1 { "" } else { "s" },
        units::thousands(summary.events as u64),
        units::thousands(summary.allocations),
        units::bytes(summary.peak_bytes),
        out.display(),
        // Read from a pipe, the snapshot's size is not known: no ratio.
        if streamed {
            String::new()
        } else {
            format!(" ({:.2}× the snapshot)", summary.archive_bytes as f64 / summary.snapshot_bytes.max(1) as f64)
        },
        summary.seconds,
    );
    Ok(summary)
}

/// The fewest milliseconds between two `read BYTES` lines.
const PROGRESS_LINE_MS: u64 = 100;

pub(crate) fn progress_bar(len: u64) -> ProgressBar {
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

/// `memviz index DIR`: every snapshot under DIR (or one slice of them), a few at a time, one
/// progress bar over the folder, already-current archives skipped; a warning line per file that
/// is not a snapshot (skipped) or is listed apart, a line per snapshot that failed, and exit 1
/// when one did.
pub fn index_folder(args: &crate::cli::IndexArgs) -> anyhow::Result<()> {
    use crate::index::folder::{self, Outcome};
    let dir = &args.input;
    let started = std::time::Instant::now();
    let job = folder::snapshots_in(dir).with_context(|| dir.display().to_string())?;
    for w in &job.warnings {
        eprintln!("warning: {w}");
    }
    let mut files = job.files;
    if files.is_empty() {
        bail!(
            "{}: no memory snapshots in the folder (told by their first bytes: a pickle or JSON of \
             torch.cuda.memory._snapshot(), optionally gzip / zstd / xz / bzip2 / lz4 compressed)",
            dir.display()
        );
    }
    let all = files.len();
    if let Some((i, n)) = args.shard {
        files = folder::shard(files, i, n);
    }
    let bytes: u64 = files.iter().map(|f| std::fs::metadata(&f.path).map_or(0, |m| m.len())).sum();
    let bar = progress_bar(bytes);
    let threads = crate::index::threads::count_told(args.jobs)?;
    let outcomes = folder::index_all(&files, args.output.as_deref(), threads, &|n| bar.set_position(n));
    bar.finish_and_clear();
    let (mut built, mut current, mut failed) = (0, 0, 0);
    for (f, o) in files.iter().zip(&outcomes) {
        match o {
            Outcome::Indexed(_) => built += 1,
            Outcome::Current => current += 1,
            Outcome::Failed(e) => {
                failed += 1;
                eprintln!("memviz: not indexed ({}): {e}", f.label());
            }
        }
    }
    let slice = args.shard.map_or(String::new(), |(i, n)| format!(" (slice {i}/{n} of {all})"));
    let ranks = ranks_said(&files);
    eprintln!(
        "indexed {}{slice}: {} ({built} built, {current} already current){ranks} in {:.2} s",
        dir.display(),
        units::count(files.len() as u64, "snapshot", "snapshots"),
        started.elapsed().as_secs_f64()
    );
    if failed > 0 {
        bail!("{}: {failed} of {} snapshots were not indexed (listed above)", dir.display(), files.len());
    }
    Ok(())
}

/// `, ranks 0–3`, `, rank 5`, and how many files are listed apart (no rank number of their own).
fn ranks_said(files: &[crate::index::folder::RankFile]) -> String {
    let numbers = files.iter().filter_map(|f| f.rank);
    let said = match (numbers.clone().min(), numbers.max()) {
        (Some(a), Some(b)) if a != b => format!(", ranks {a}–{b}"),
        (Some(a), _) => format!(", rank {a}"),
        _ => String::new(),
    };
    match files.iter().filter(|f| f.rank.is_none()).count() {
        0 => said,
        n => format!("{said}, {n} listed apart"),
    }
}
