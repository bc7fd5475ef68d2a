//! Command-line interface: clap definitions, turned into calls of the library's commands.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

use crate::analysis::groups::GroupBy;

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
    /// What is live at one instant: total, count, and a table by site, frame, annotation or size.
    At(AtArgs),
    /// What the actions A..B did: allocated, freed, net growth, churn, leak candidates, sizes.
    Range(RangeArgs),
    /// Per annotation span (e.g. training steps): peak and net growth, and a verdict on growth.
    Steps(StepsArgs),
    /// Two snapshots compared by allocation site: peaks, bytes per site at the peak, new and gone
    /// sites. Exits 3 when B's peak grew more than --threshold percent over A's.
    Diff(DiffArgs),
    /// The allocator's memory map at an instant: every segment, its blocks and holes, the totals
    /// and fragmentation.
    Segments(SegmentsArgs),
    /// Why each out-of-memory happened: the state before it, a verdict, what filled it, advice.
    Oom(OomArgs),
    /// One row per rank of a job (a folder of per-rank snapshots or archives, or the files):
    /// peak, reserved, OOMs, growth per step; the spread and the outlier ranks, with the sites
    /// that make them differ. Exits 3 when an outlier's peak is more than --threshold % over the
    /// median.
    Ranks(RanksArgs),
    /// Find allocations: every one that ever covered an address, or whose stack has a frame
    /// matching a text (substring, or /regex/).
    Find(FindArgs),
    /// A Model Context Protocol server over stdio: memviz's answers as tools for an agent
    /// (stats, at, range, steps, diff, find, segments, oom, ranks), returning their --json.
    Mcp,
    /// An HTTP server for a browser (over `ssh -L` from a laptop): lists the snapshots and
    /// archives under the paths given and serves their archives (a snapshot is indexed into the
    /// cache when first asked for), with Range requests. Loopback by default.
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Files or folders to serve (nothing outside them is served).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// The port (0: any free one; the URL printed says which).
    #[arg(long, default_value_t = 8090)]
    pub port: u16,
    /// The address to listen on. Anything but loopback puts a random token in the URL, and every
    /// request must carry it.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("query").required(true).args(["addr", "frame"])))]
pub struct FindArgs {
    /// Print each site's whole stack under it (the frames MemoryViz shows, innermost first, with
    /// full paths); --json carries it as `frames`.
    #[arg(long)]
    pub stacks: bool,
    /// A snapshot (pickle or JSON, optionally gzip / zstd / xz / bzip2 / lz4 compressed) or a
    /// .memviz archive.
    pub input: PathBuf,
    /// An address (hex, with or without 0x): every allocation that ever covered it.
    #[arg(long, value_name = "HEX")]
    pub addr: Option<String>,
    /// Frame text: a substring of any frame's `name file:line` (any case), or /regex/.
    #[arg(long, value_name = "TEXT")]
    pub frame: Option<String>,
    #[command(flatten)]
    pub common: AnswerArgs,
}

#[derive(Debug, Args)]
pub struct RanksArgs {
    /// A folder of per-rank snapshots or archives, or the files themselves.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The step annotations, as for `steps` (default: the steps memviz finds, as `steps` does).
    #[arg(long, value_name = "PATTERN")]
    pub annotation: Option<String>,
    /// An outlier whose peak is more than this many percent over the median: exit 3 (and a rank
    /// this far over is an outlier whatever its z-score).
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub threshold: Option<f64>,
    /// Print JSON (a stable schema for scripts) instead of text.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the table of ranks as CSV.
    #[arg(long)]
    pub csv: bool,
    /// Rows and sites shown.
    #[arg(long, default_value_t = DEFAULT_TOP)]
    pub top: usize,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("instant").required(true).args(["event", "action", "time", "oom", "end"])))]
pub struct SegmentsArgs {
    /// A snapshot (pickle or JSON, optionally gzip / zstd / xz / bzip2 / lz4 compressed) or a
    /// .memviz archive.
    pub input: PathBuf,
    /// After this raw trace event of the device (-1: before the first).
    #[arg(long, allow_negative_numbers = true, value_name = "K")]
    pub event: Option<i64>,
    /// After the event behind this action (as printed: 1,077, last).
    #[arg(long, allow_negative_numbers = true, value_name = "K", value_parser = parse_action)]
    pub action: Option<ActionArg>,
    /// At this time since the snapshot's start (the last action at or before it).
    #[arg(long, value_name = "T", value_parser = parse_time)]
    pub time: Option<TimeArg>,
    /// Just before the N-th OOM event (1 = the first; without N, the last).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "0")]
    pub oom: Option<usize>,
    /// After the last event (the dump).
    #[arg(long)]
    pub end: bool,
    #[command(flatten)]
    pub common: AnswerArgs,
}

#[derive(Debug, Args)]
pub struct OomArgs {
    /// Print each site's whole stack under it (the frames MemoryViz shows, innermost first, with
    /// full paths); --json carries it as `frames`.
    #[arg(long)]
    pub stacks: bool,
    /// A snapshot (pickle or JSON, optionally gzip / zstd / xz / bzip2 / lz4 compressed) or a
    /// .memviz archive.
    pub input: PathBuf,
    #[command(flatten)]
    pub common: AnswerArgs,
}

#[derive(Debug, Args)]
pub struct OpenArgs {
    /// A .memviz archive, or a snapshot (pickle or JSON, optionally gzip / zstd / xz / bzip2 /
    /// lz4 compressed); a folder of per-rank snapshots or archives, or several files, opens the
    /// rank strip.
    #[arg(required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    /// Render one frame offscreen (no window) to this PNG and exit.
    #[arg(long, value_name = "OUT.png")]
    pub screenshot: Option<PathBuf>,
    /// Window or screenshot size in pixels.
    #[arg(long, default_value = "1600x900", value_parser = parse_size)]
    pub size: (u32, u32),
    /// Replay a fixed zoom/pan/hover script offscreen and print frame-time percentiles as JSON:
    /// frame_ms (UI and GPU), ui_ms (the UI thread's CPU time, the GPU's work and wait excluded)
    /// and ui_thread_chunks (chunks the UI thread decompressed after the first frame).
    #[arg(long)]
    pub bench: bool,
    /// --bench in this view: timeline, pools, segments, state (also steps 1,000 events with →)
    /// or ranks (the rank strip of a folder or several files).
    #[arg(long, value_enum, value_name = "VIEW", conflicts_with = "view")]
    pub bench_view: Option<BenchViewArg>,
    /// Draw a GPU's memory capacity: h100, a100 (or a100-80), a100-40, h200, a10g, l40s, v100 (or
    /// v100-32), v100-16, 4090 (or rtx4090).
    #[arg(long, value_name = "NAME")]
    pub gpu: Option<String>,
    /// Close the window after this many frames (for automated tests).
    #[arg(long, hide = true)]
    pub exit_after_frames: Option<u64>,
    /// Draw only the N largest allocations individually; the rest form one summarized band.
    #[arg(long, value_name = "N")]
    pub max_entries: Option<usize>,
    /// The view shown first (also for --screenshot): timeline, pools, segments, state (the
    /// memory map at the selected event), settings. --oom alone opens the state view.
    #[arg(long, value_enum, value_name = "VIEW")]
    pub view: Option<ViewArg>,
    /// Colour the timeline by allocation site (the default), by allocation, or by category
    /// (parameter, gradient, optimizer_state, activation, …, with a legend).
    #[arg(long, value_enum, value_name = "BY")]
    pub colour: Option<ColourArg>,
    /// Open at this raw trace event (device-relative; the memory map's instant).
    #[arg(long, allow_negative_numbers = true, value_name = "K", group = "open_at")]
    pub event: Option<i64>,
    /// Open at this action of the timeline.
    #[arg(long, value_name = "K", group = "open_at")]
    pub action: Option<i64>,
    /// Open just before the N-th OOM event (1 = the first; 0 = the last).
    #[arg(long, value_name = "N", group = "open_at")]
    pub oom: Option<usize>,
    /// Open at this time since the snapshot's start (the last action at or before it), as
    /// printed: 686.2ms, 1.5s.
    #[arg(long, value_name = "T", value_parser = parse_time, group = "open_at")]
    pub time: Option<TimeArg>,
    /// Show these actions across the plot (fractional, as "copy link" writes them).
    #[arg(long, value_name = "A..B", value_parser = crate::analysis::range::parse_x_range)]
    pub x: Option<(f64, f64)>,
    /// Pin the allocation covering this address (hex) at the instant shown.
    #[arg(long, value_name = "ADDR", group = "pin_what")]
    pub pin: Option<String>,
    /// Pin this element (and show its lifetime unless --x or an instant is given).
    #[arg(long, value_name = "ID", group = "pin_what")]
    pub element: Option<u32>,
    /// Show this device (ordinal, or `host`).
    #[arg(long, value_name = "D")]
    pub device: Option<crate::model::DeviceId>,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// `open --bench-view`: the views a bench script runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchViewArg {
    Timeline,
    Pools,
    Segments,
    State,
    Ranks,
}

impl BenchViewArg {
    /// The view of one file it opens (the rank strip is not one).
    pub fn view(self) -> Option<ViewArg> {
        match self {
            BenchViewArg::Timeline => Some(ViewArg::Timeline),
            BenchViewArg::Pools => Some(ViewArg::Pools),
            BenchViewArg::Segments => Some(ViewArg::Segments),
            BenchViewArg::State => Some(ViewArg::State),
            BenchViewArg::Ranks => None,
        }
    }
}

/// `open --colour`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColourArg {
    Site,
    Allocation,
    Category,
}

/// `open --view`: the viewer's views by their short names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ViewArg {
    /// The Active Memory Timeline.
    Timeline,
    /// Allocated Memory (incl. Private Pools): each private pool one band.
    Pools,
    /// The Active Cached Segment Timeline.
    Segments,
    /// The Allocator State: the memory map at the selected event.
    State,
    /// The Allocator Settings.
    Settings,
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

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (i, n) = s.split_once('/').ok_or("expected I/N, e.g. 0/4 (slice I of N, counting from 0)")?;
    match (i.trim().parse::<usize>(), n.trim().parse::<usize>()) {
        (Ok(i), Ok(n)) if n > 0 && i < n => Ok((i, n)),
        _ => Err("expected I/N with 0 ≤ I < N, e.g. 0/4".into()),
    }
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    /// A snapshot (pickle or JSON, optionally gzip / zstd / xz / bzip2 / lz4 compressed), or a
    /// folder of them (one per rank: every snapshot under it, told from other files by its first
    /// bytes, indexed in parallel, one archive each).
    pub input: PathBuf,
    /// Where to write the archive (default: the snapshot's name with `.memviz`); for a folder,
    /// the folder the archives go under (default: beside each snapshot).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// For a folder: index only slice I of N (0-based; every N-th file from the I-th), so N
    /// machines of a cluster share a folder of thousands of ranks.
    #[arg(long, value_parser = parse_shard, value_name = "I/N")]
    pub shard: Option<(usize, usize)>,
    /// Threads to use (default: `MEMVIZ_THREADS`, else the CPUs this process may use, a
    /// cgroup's quota respected; at most one per 32 MiB of the memory budget, 32 by default); a
    /// folder's snapshots are indexed up to 8 at once, sharing them. The archive's bytes are the
    /// same at any count.
    #[arg(long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub jobs: Option<usize>,
    /// Print `read BYTES` lines to standard output as the snapshot is read (how `memviz serve`
    /// follows the index it runs in a child process).
    #[arg(long, hide = true)]
    pub progress_lines: bool,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// A snapshot (pickle or JSON, optionally gzip / zstd / xz / bzip2 / lz4 compressed) or a
    /// .memviz archive.
    pub input: PathBuf,
    /// Print JSON (a stable schema for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Your own category rules (TOML: ordered `[[rule]]` with `category` and a regex on `frame`,
    /// `file`, `annotation` or `metadata`), tried before the built-in ones.
    #[arg(long, value_name = "FILE")]
    pub categories: Option<PathBuf>,
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
    /// The allocator's segments and blocks after raw trace events (and after the last event and
    /// just before each OOM): the schema of allocator_oracle.py.
    #[command(group(ArgGroup::new("which").required(true).args(["every", "events"])))]
    State {
        #[command(flatten)]
        args: ExportArgs,
        /// After events N-1, 2N-1, ... of each device's trace.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        every: Option<u64>,
        /// After these events (device-relative indices, -1: before the first), e.g. 0,10,99.
        #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
        events: Vec<i64>,
    },
    /// The Active Cached Segment Timeline: segments stacked like the element layout.
    Segments(ExportArgs),
    /// The bytes live at one instant as folded stacks (`frame;frame;frame bytes`, outermost
    /// first) for inferno, speedscope or Perfetto; --svg draws the flame graph.
    Flamegraph(FlamegraphArgs),
    /// One self-contained page — the viewer, its wasm and the archive — that opens from
    /// `file://` in Chromium or Firefox with no server: a small snapshot to send in a chat.
    /// Archives above 256 MiB are refused (`memviz serve` shows those in a browser).
    Html(HtmlArgs),
}

#[derive(Debug, Args)]
pub struct HtmlArgs {
    /// A snapshot (pickle or JSON, optionally compressed) or a .memviz archive.
    pub input: PathBuf,
    /// The page to write (default: the input's name with `.html`, in the current folder).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("instant").required(true).args(["action", "peak", "oom", "end"])))]
pub struct FlamegraphArgs {
    #[command(flatten)]
    pub export: ExportArgs,
    /// Right after this action (-1: before the first; `last`: after the last).
    #[arg(long, value_name = "K", value_parser = parse_action, allow_negative_numbers = true)]
    pub action: Option<ActionArg>,
    /// At each device's peak.
    #[arg(long)]
    pub peak: bool,
    /// Just before the N-th OOM event (1 = the first; without N, the last).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "0")]
    pub oom: Option<usize>,
    /// After the last action.
    #[arg(long)]
    pub end: bool,
    /// Draw the flame graph as an SVG (inferno) instead of writing the folded stacks.
    #[arg(long)]
    pub svg: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A snapshot (pickle or JSON, optionally gzip / zstd / xz / bzip2 / lz4 compressed) or a
    /// .memviz archive.
    pub input: PathBuf,
    /// Only this device (default: every device with trace events or segments).
    #[arg(long)]
    pub device: Option<crate::model::DeviceId>,
    /// Write here instead of standard output (atomically: all or nothing).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("instant").required(true).args(["action", "time", "peak", "end"])))]
pub struct AtArgs {
    /// Print each site's whole stack under it (the frames MemoryViz shows, innermost first, with
    /// full paths); --json carries it as `frames`.
    #[arg(long)]
    pub stacks: bool,
    /// A snapshot (pickle or JSON, optionally gzip / zstd / xz / bzip2 / lz4 compressed) or a
    /// .memviz archive.
    pub input: PathBuf,
    /// Right after this action (-1: before the first action; `last`: after the last; commas
    /// as printed are fine: 1,077).
    #[arg(long, allow_negative_numbers = true, value_name = "K", value_parser = parse_action)]
    pub action: Option<ActionArg>,
    /// At this time since the snapshot's start (the last action at or before it), as printed:
    /// µs, or with a unit: 250ms, 686.2 ms, 1.5s, 2min.
    #[arg(long, value_name = "T", value_parser = parse_time)]
    pub time: Option<TimeArg>,
    /// At each device's peak.
    #[arg(long)]
    pub peak: bool,
    /// After the last action (what is live at the dump): `--action last`.
    #[arg(long)]
    pub end: bool,
    /// What the rows of the table are.
    #[arg(long, value_enum, default_value_t = GroupByArg::Stack)]
    pub group_by: GroupByArg,
    /// List every live allocation (element, address, size, site, category), largest first.
    #[arg(long)]
    pub list: bool,
    #[command(flatten)]
    pub common: AnswerArgs,
}

/// Rows per table in an answer's text unless `--top` says otherwise.
pub const DEFAULT_TOP: usize = 20;

/// Options every answer takes.
#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// Print JSON (a stable schema for scripts) instead of text.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the table as CSV (raw numbers, a header row; the device first).
    #[arg(long)]
    pub csv: bool,
    /// Only this device (default: every device with trace events or segments).
    #[arg(long)]
    pub device: Option<crate::model::DeviceId>,
    /// Rows per table in the text output (JSON has them all).
    #[arg(long, default_value_t = DEFAULT_TOP, value_name = "N")]
    pub top: usize,
    /// Your own category rules (TOML: ordered `[[rule]]` with `category` and a regex on `frame`,
    /// `file`, `annotation` or `metadata`), tried before the built-in ones.
    #[arg(long, value_name = "FILE")]
    pub categories: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GroupByArg {
    /// Allocation site (the stack), shown by its best frame (also: site).
    #[value(alias = "site")]
    Stack,
    /// The site's best frame (sites sharing it merge).
    Frame,
    /// The innermost record_function span open when each allocation was made.
    Annotation,
    /// Power-of-two size buckets.
    Size,
    /// The CUDA stream of each allocation.
    Stream,
    /// The private memory pool (CUDA graphs, MemPool).
    Pool,
    /// torch.compile's compile_context (also: compile-context).
    #[value(name = "compile_context", alias = "compile-context")]
    CompileContext,
    /// The annotate label (torch.cuda.memory._annotate_tensor), else user_metadata.
    Metadata,
    /// What kind of memory: parameter, gradient, optimizer_state, activation, temporary, …
    Category,
}

impl From<GroupByArg> for GroupBy {
    fn from(g: GroupByArg) -> GroupBy {
        match g {
            GroupByArg::Stack => GroupBy::Stack,
            GroupByArg::Frame => GroupBy::Frame,
            GroupByArg::Annotation => GroupBy::Annotation,
            GroupByArg::Size => GroupBy::Size,
            GroupByArg::Stream => GroupBy::Stream,
            GroupByArg::Pool => GroupBy::Pool,
            GroupByArg::CompileContext => GroupBy::CompileContext,
            GroupByArg::Metadata => GroupBy::Metadata,
            GroupByArg::Category => GroupBy::Category,
        }
    }
}

#[derive(Debug, Args)]
pub struct RangeArgs {
    /// A snapshot (pickle or JSON, optionally gzip / zstd / xz / bzip2 / lz4 compressed) or a
    /// .memviz archive.
    pub input: PathBuf,
    /// Actions A..B: from A to before B; `..B` from the first, `A..` to the last.
    #[arg(value_name = "A..B", value_parser = parse_range)]
    pub range: ActionRange,
    #[command(flatten)]
    pub common: AnswerArgs,
}

/// `A..B` with either end open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActionRange {
    pub start: Option<u32>,
    pub end: Option<u32>,
}

#[derive(Debug, Args)]
pub struct StepsArgs {
    /// A snapshot (pickle or JSON, optionally gzip / zstd / xz / bzip2 / lz4 compressed) or a
    /// .memviz archive.
    pub input: PathBuf,
    /// Spans whose name matches: a substring (e.g. "## step"), or a whole name with `*`
    /// wildcards, as --annotation-filter (default: memviz finds the steps — a span family that
    /// tiles the trace, the optimizer's spans, or the trace's own loop — and says which rule).
    #[arg(long, value_name = "PATTERN")]
    pub annotation: Option<String>,
    #[command(flatten)]
    pub common: AnswerArgs,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Print each site's whole stack under it (the frames MemoryViz shows, innermost first, with
    /// full paths); --json carries it as `frames`.
    #[arg(long)]
    pub stacks: bool,
    /// The baseline: a snapshot (pickle or JSON, optionally gzip / zstd / xz / bzip2 / lz4
    /// compressed) or a .memviz archive.
    pub a: PathBuf,
    /// The one compared with it.
    pub b: PathBuf,
    /// Exit 3 when B's peak exceeds A's by more than this many percent (default: never).
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub threshold: Option<f64>,
    /// B's device to compare with A's `--device` (default: the same ordinal).
    #[arg(long, value_name = "D")]
    pub device_b: Option<crate::model::DeviceId>,
    #[command(flatten)]
    pub common: AnswerArgs,
}

/// `--action`: an index as printed, or `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionArg {
    Index(i64),
    Last,
}

/// `1077`, `1,077`, `1_077`, `-1`, `last`. Indices too large for any trace saturate, so the
/// command says "out of range" rather than the parser "not an index".
pub fn parse_action(s: &str) -> Result<ActionArg, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("last") {
        return Ok(ActionArg::Last);
    }
    let digits = t.replace([',', '_'], "");
    let (neg, body) = digits.strip_prefix('-').map_or((false, digits.as_str()), |b| (true, b));
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("expected an action index (e.g. 1,077, -1 or last), got `{s}`"));
    }
    let v = body.parse::<i64>().unwrap_or(i64::MAX);
    Ok(ActionArg::Index(if neg { -v } else { v }))
}

/// `--time`: µs since the snapshot's start, and half the unit of its last digit, so that a
/// time pasted as printed (`686.2 ms`) selects the action printed with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeArg {
    pub us: i64,
    pub half_step_us: i64,
}

/// `300us`, `250ms`, `686.213 ms`, `1.5s`, `2min`, `1,200us`; a number needs its unit.
pub fn parse_time(s: &str) -> Result<TimeArg, String> {
    let t = s.trim().replace([',', '_'], "");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "" => return Err(format!("time `{s}` has no unit: give us, ms, s or min (e.g. {s}us or {s}ms)")),
        "us" | "µs" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "min" | "m" => 60e6,
        other => return Err(format!("unknown unit `{other}` (use us, ms, s or min, e.g. 250ms)")),
    };
    let v: f64 = num.parse().map_err(|_| format!("expected a time such as 1200us, 250ms or 1.5s, got `{s}`"))?;
    let us = (v * scale).round();
    if !us.is_finite() || us > i64::MAX as f64 / 2.0 {
        return Err(format!("time `{s}` is too large"));
    }
    let decimals = num.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    let half_step_us = (0.5 * scale / 10f64.powi(decimals)).floor() as i64;
    Ok(TimeArg { us: us as i64, half_step_us })
}

/// `A..B`, `..B`, `A..`, `..`.
pub fn parse_range(s: &str) -> Result<ActionRange, String> {
    let (a, b) =
        s.split_once("..").ok_or_else(|| format!("expected actions A..B (e.g. 100..200, ..500, 1000..), got `{s}`"))?;
    let end = |v: &str| -> Result<Option<u32>, String> {
        let v = v.trim();
        if v.is_empty() {
            return Ok(None);
        }
        match parse_action(v)? {
            ActionArg::Index(i) if i >= 0 => Ok(Some(u32::try_from(i).unwrap_or(u32::MAX))),
            ActionArg::Index(_) => Err(format!("`{v}`: a range starts at action 0")),
            ActionArg::Last => Err(format!("`{v}`: leave the end open (`A..`) to run to the last action")),
        }
    };
    Ok(ActionRange { start: end(a)?, end: end(b)? })
}

/// `5`, `5%`, `2.5` → percent.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().trim_end_matches('%').parse().map_err(|_| format!("expected a percentage, got `{s}`"))?;
    if v.is_finite() && v >= 0.0 { Ok(v) } else { Err(format!("expected a percentage ≥ 0, got `{s}`")) }
}

/// The first argument that is not the global `--no-cache`: where a command's name goes.
fn first_word(args: &[std::ffi::OsString]) -> Option<(usize, String)> {
    args.iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| !a.to_string_lossy().starts_with("--no-cache"))
        .map(|(i, a)| (i, a.to_string_lossy().into_owned()))
}

/// Every command's name and alias (and `help`).
fn command_names() -> Vec<String> {
    use clap::CommandFactory as _;
    let cli = Cli::command();
    let mut names: Vec<String> = cli
        .get_subcommands()
        .flat_map(|c| std::iter::once(c.get_name()).chain(c.get_all_aliases()))
        .map(str::to_owned)
        .collect();
    names.push("help".to_owned());
    names
}

/// `memviz FILE` means `memviz open FILE`: inserts `open` when the first argument is not a
/// subcommand or a flag.
pub fn with_open_default(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = args.collect();
    if let Some((at, word)) = first_word(&args)
        && !word.starts_with('-')
        && !command_names().contains(&word)
    {
        args.insert(at, "open".into());
    }
    args
}

/// `memviz stat x`: a first word that is no command, names no existing file and is close to a
/// command's name (one or two letters off, and not shaped like a path) is a mistyped command,
/// not a file to open. The one-line message, as clap would put it, for exit code 2.
pub fn unknown_command(args: &[std::ffi::OsString]) -> Option<String> {
    let (_, word) = first_word(args)?;
    let names = command_names();
    let path_like = word.contains(['.', '/', '\\']) || std::path::Path::new(&word).exists();
    if word.starts_with('-') || names.contains(&word) || path_like {
        return None;
    }
    let (distance, name) = names.iter().map(|n| (edit_distance(&word, n), n)).min()?;
    let close = distance <= if name.len() >= 4 { 2 } else { 1 };
    close.then(|| format!("unknown command '{word}' — did you mean '{name}'?"))
}

/// Levenshtein distance over chars: insertions, deletions and substitutions.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_ranges_parse() {
        let us = |s: &str| parse_time(s).map(|t| t.us);
        assert!(us("1200").unwrap_err().contains("no unit: give us, ms, s or min"));
        assert_eq!(us("1200us"), Ok(1200));
        assert_eq!(us("250ms"), Ok(250_000));
        assert_eq!(us("1.5s"), Ok(1_500_000));
        assert_eq!(us("2min"), Ok(120_000_000));
        assert_eq!(us("40 µs"), Ok(40));
        assert_eq!(parse_time("686.2 ms"), Ok(TimeArg { us: 686_200, half_step_us: 50 }));
        assert_eq!(parse_time("3.20 s"), Ok(TimeArg { us: 3_200_000, half_step_us: 5_000 }));
        assert_eq!(parse_time("850 µs").unwrap().half_step_us, 0);
        assert!(parse_time("5 parsecs").is_err());
        assert!(parse_time("-5").is_err());
        assert_eq!(parse_action("1,077"), Ok(ActionArg::Index(1077)));
        assert_eq!(parse_action("-1"), Ok(ActionArg::Index(-1)));
        assert_eq!(parse_action("LAST"), Ok(ActionArg::Last));
        assert_eq!(parse_action("99999999999999999999999"), Ok(ActionArg::Index(i64::MAX)));
        assert!(parse_action("1.5").is_err());
        assert_eq!(parse_range("1,000..2,000"), Ok(ActionRange { start: Some(1000), end: Some(2000) }));
        assert_eq!(parse_range("0..99999999999"), Ok(ActionRange { start: Some(0), end: Some(u32::MAX) }));
        assert_eq!(parse_range("10..20"), Ok(ActionRange { start: Some(10), end: Some(20) }));
        assert_eq!(parse_range("..20"), Ok(ActionRange { start: None, end: Some(20) }));
        assert_eq!(parse_range("1,000.."), Ok(ActionRange { start: Some(1000), end: None }));
        assert_eq!(parse_range(".."), Ok(ActionRange { start: None, end: None }));
        assert!(parse_range("10-20").is_err());
        assert!(parse_range("a..b").is_err());
        assert_eq!(parse_percent("5%"), Ok(5.0));
    }

    #[test]
    fn a_mistyped_command_is_told_from_a_file() {
        let said = |line: &str| unknown_command(&line.split(' ').map(std::ffi::OsString::from).collect::<Vec<_>>());
        assert_eq!(said("memviz stat x").as_deref(), Some("unknown command 'stat' — did you mean 'stats'?"));
        assert_eq!(
            said("memviz --no-cache rnaks d").as_deref(),
            Some("unknown command 'rnaks' — did you mean 'ranks'?")
        );
        assert_eq!(said("memviz idnex d").as_deref(), Some("unknown command 'idnex' — did you mean 'index'?"));
        assert_eq!(said("memviz stats x"), None);
        assert_eq!(said("memviz stat.pickle"), None, "shaped like a file: opened (or missing)");
        assert_eq!(said("memviz run42"), None, "not close to a command");
        assert_eq!(said("memviz --help"), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "oom"), 3);
    }
}
