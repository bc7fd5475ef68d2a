//! Every command as a library function, so tests and benches call them directly.

use std::path::Path;

use anyhow::{Context as _, bail};
use rayon::prelude::*;

use crate::analysis::{export, stats};
use crate::cli::{Cli, Command, ExportArgs, ExportCommand, StatsArgs};
use crate::ingest::{self, SourceInfo};
use crate::layout::Layout;
use crate::model::Snapshot;

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Stats(args) => stats_cmd(&args),
        Command::Export(ExportCommand::Layout(args)) => export_layout(&args),
        Command::Export(ExportCommand::Sampled { args, every }) => {
            export_sampled(&args, every as usize)
        }
    }
}

/// True when `err` is a closed standard output (`memviz ... | head`): not a failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain()
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

/// A loaded input with the layouts of the devices asked for.
pub struct Loaded {
    pub snapshot: Snapshot,
    pub source: SourceInfo,
    pub layouts: Vec<Layout>,
}

/// Reads `path` and lays out `device` (or every device with data).
pub fn load(path: &Path, device: Option<u32>) -> anyhow::Result<Loaded> {
    let (snapshot, source) = ingest::read_path(path).with_context(|| path.display().to_string())?;
    let all = snapshot.device_ids();
    let devices = match device {
        None => all,
        Some(d) if all.contains(&d) => vec![d],
        Some(d) => {
            let have: Vec<String> = all.iter().map(u32::to_string).collect();
            bail!(
                "{}: device {d} has no trace events or segments (devices with data: {})",
                path.display(),
                have.join(", ")
            )
        }
    };
    let layouts = devices
        .par_iter()
        .map(|&d| Layout::build(&snapshot, d))
        .collect();
    Ok(Loaded {
        snapshot,
        source,
        layouts,
    })
}

pub fn stats_cmd(args: &StatsArgs) -> anyhow::Result<()> {
    let loaded = load(&args.input, None)?;
    let s = stats::compute(&loaded.snapshot, &loaded.layouts);
    crate::output::write_to(None, |w| {
        if args.json {
            serde_json::to_writer_pretty(&mut *w, &s)?;
            writeln!(w)?;
        } else {
            let title = format!(
                "{} — {}, {} bytes, {} device{}",
                args.input.display(),
                loaded.source,
                crate::analysis::units::thousands(loaded.source.file_bytes),
                s.devices.len(),
                if s.devices.len() == 1 { "" } else { "s" }
            );
            w.write_all(stats::render_text(&s, &title).as_bytes())?;
        }
        Ok(())
    })
}

pub fn export_layout(args: &ExportArgs) -> anyhow::Result<()> {
    let loaded = load(&args.input, args.device)?;
    let devices = loaded.layouts.iter().map(export::device_layout).collect();
    let doc = export::LayoutExport { devices };
    crate::output::write_to(args.output.as_deref(), |w| {
        serde_json::to_writer(&mut *w, &doc)?;
        Ok(())
    })
}

pub fn export_sampled(args: &ExportArgs, every: usize) -> anyhow::Result<()> {
    let loaded = load(&args.input, args.device)?;
    let devices = loaded
        .layouts
        .par_iter()
        .map(|l| export::device_sampled(l, every))
        .collect();
    let doc = export::SampledExport { devices };
    crate::output::write_to(args.output.as_deref(), |w| {
        serde_json::to_writer(&mut *w, &doc)?;
        Ok(())
    })
}
