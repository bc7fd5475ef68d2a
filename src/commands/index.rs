//! `memviz index`: snapshot → `.memviz`, with a progress bar on a terminal and a one-line summary.

use std::path::Path;

use anyhow::{Context as _, bail};
use indicatif::{ProgressBar, ProgressStyle};
use memviz_format::SourceStamp;

use crate::analysis::units;
use crate::archive::cache::file_name;
use crate::archive::pipeline::{IndexSummary, build_archive};
use crate::archive::{self};
use crate::ingest;

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
