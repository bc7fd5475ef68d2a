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
    /// Open the viewer on a .memviz archive or a snapshot (indexed and cached first).
    Open(OpenArgs),
    /// Convert a snapshot into a .memviz archive (default: beside the snapshot).
    Index(IndexArgs),
    /// Summarise a snapshot: events, peak, what is live at the peak, reserved memory, OOMs.
    Stats(StatsArgs),
    /// Write the timeline layout as JSON (the golden schemas of timeline_oracle.py).
    #[command(subcommand)]
    Export(ExportCommand),
}

#[derive(Debug, Args)]
pub struct OpenArgs {
    /// A .memviz archive, or a snapshot (pickle, gzip / zstd, JSON).
    pub input: PathBuf,
    /// Render one frame offscreen (no window) to this PNG and exit.
    #[arg(long, value_name = "OUT.png")]
    pub screenshot: Option<PathBuf>,
    /// Window or screenshot size in pixels.
    #[arg(long, default_value = "1600x900", value_parser = parse_size)]
    pub size: (u32, u32),
    /// Replay a fixed zoom/pan/hover script offscreen and print frame-time percentiles as JSON.
    #[arg(long)]
    pub bench: bool,
    /// Draw a GPU's memory capacity: h100, a100, a100-40, h200, a10g, l40s, v100, v100-16, 4090.
    #[arg(long, value_name = "NAME")]
    pub gpu: Option<String>,
    /// Close the window after this many frames (for automated tests).
    #[arg(long, hide = true)]
    pub exit_after_frames: Option<u64>,
    /// Draw only the N largest allocations individually; the rest form one summarized band.
    #[arg(long, value_name = "N")]
    pub max_entries: Option<usize>,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Tensor shapes and annotations, shared by `open` and `stats`.
#[derive(Debug, Args, Clone, Default)]
pub struct ModelArgs {
    /// A model's config.json (file or folder), or a Hugging Face model id (fetched once, cached):
    /// explains allocation sizes as tensor shapes such as `v×h fp32`.
    #[arg(long, value_name = "ID|PATH")]
    pub model: Option<String>,
    /// Use this vocabulary size instead of the config's (padded vocabularies).
    #[arg(long, value_name = "V")]
    pub vocab_size: Option<u64>,
    /// Also try int8 and 4-bit element sizes.
    #[arg(long)]
    pub quantized: bool,
    /// Show PyTorch's internal annotations too (dynamo, inductor, ...), hidden by default.
    #[arg(long)]
    pub all_annotations: bool,
    /// Only annotations whose name matches: a substring, or a whole-name pattern with `*` wildcards.
    #[arg(long, value_name = "PATTERN")]
    pub annotation_filter: Option<String>,
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s.split_once(['x', 'X']).ok_or("expected WIDTHxHEIGHT, e.g. 1600x900")?;
    let parse = |v: &str| v.trim().parse::<u32>().ok().filter(|&n| (16..=8192).contains(&n));
    match (parse(w), parse(h)) {
        (Some(w), Some(h)) => Ok((w, h)),
        _ => Err("expected WIDTHxHEIGHT with sides between 16 and 8192".into()),
    }
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
    #[command(flatten)]
    pub model: ModelArgs,
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

/// `memviz FILE` means `memviz open FILE`: inserts `open` when the first argument is not a
/// subcommand or a flag.
pub fn with_open_default(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    use clap::CommandFactory as _;
    let mut args: Vec<std::ffi::OsString> = args.collect();
    let first = args.iter().skip(1).find(|a| !a.to_string_lossy().starts_with("--no-cache"));
    if let Some(first) = first {
        let s = first.to_string_lossy();
        let known = Cli::command().get_subcommands().any(|c| c.get_name() == s || c.get_all_aliases().any(|a| a == s));
        if !known && !s.starts_with('-') && s != "help" {
            let at = args.iter().position(|a| a == first).unwrap_or(1);
            args.insert(at, "open".into());
        }
    }
    args
}
