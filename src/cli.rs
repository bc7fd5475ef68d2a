//! Command-line interface: clap definitions, turned into calls of the library's commands.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// See where your GPU memory went: PyTorch CUDA memory snapshots, natively.
#[derive(Debug, Parser)]
#[command(name = "memviz", version, about, long_about = None)]
pub struct Cli {
    /// Neither read nor write the cached `.memviz` archive of a snapshot.
    #[arg(long, global = true)]
    pub no_cache: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Convert a snapshot into a .memviz archive (default: beside the snapshot).
    Index(IndexArgs),
    /// Summarise a snapshot: events, peak, what is live at the peak, reserved memory, OOMs.
    Stats(StatsArgs),
    /// Write the timeline layout as JSON (the golden schemas of timeline_oracle.py).
    #[command(subcommand)]
    Export(ExportCommand),
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// A snapshot: pickle (optionally gzip / zstd compressed) or JSON.
    pub input: PathBuf,
    /// Where to write the archive (default: the snapshot's name with `.memviz`).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// A snapshot (pickle, optionally gzip / zstd compressed, or JSON) or a .memviz archive.
    pub input: PathBuf,
    /// Print JSON (a stable schema for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// Every element, its start and end action and every change of its offset.
    Layout(ExportArgs),
    /// The whole live stack with offsets after every N-th action.
    Sampled {
        #[command(flatten)]
        args: ExportArgs,
        /// Sample after actions N-1, 2N-1, ...
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        every: u64,
    },
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A snapshot (pickle, optionally gzip / zstd compressed, or JSON) or a .memviz archive.
    pub input: PathBuf,
    /// Only this device (default: every device with trace events or segments).
    #[arg(long)]
    pub device: Option<u32>,
    /// Write here instead of standard output (atomically: all or nothing).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}
