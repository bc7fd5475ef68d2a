//! Every command as a library function, so tests and benches call them directly.

mod allocator;
mod answers;
mod flamegraph;
mod html;
mod index;
pub mod mcp;
mod ranks;
mod reading;
pub mod report;
pub use ranks::RankOutlier;

use crate::cli::ViewArg;
use crate::viewer::tabs::{OpenAt, Tab};
use std::time::Instant;

use rayon::prelude::*;

pub use allocator::{oom, segments};
pub use answers::{DiffOutput, PeakGrew, at, diff, find, open_input, range, steps};
pub use index::index;
pub use ranks::ranks;
pub use reading::{Kept, Opening, guarded};
pub use report::{Answer, Format, PerDevice};

use crate::index::cache::{Loaded, load};
use crate::index::pipeline::write_archive;

use crate::analysis::annotations::AnnotationFilter;
use crate::analysis::shapes::ModelDims;
use crate::analysis::{export, stats};
use crate::cli::{Cli, Command, ExportArgs, ExportCommand, StatsArgs};
use crate::layout::{Layout, LayoutRef};

/// Runs a command: an answer is worked out under [`guarded`] (what it read is checked before
/// it leaves), then printed in the format asked for.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    // Every command but the viewer stays within the memory budget, spilling into the temp
    // folder, and stops with one line at a hard limit (`spill`).
    let _bounded = (!matches!(cli.command, Command::Open(_))).then(|| crate::spill::guard(&std::env::temp_dir()));
    crate::index::threads::size_global(crate::index::threads::count(None)?);
    // An archive or pickle truncated while it is mapped is one error line, not a crash.
    crate::temp_files::report_bus_errors();
    let opening = Opening::new(!cli.no_cache);
    let o = &opening;
    match cli.command {
        // The viewer checks what it opens itself; the MCP server guards each call.
        Command::Open(args) => open(&args, opening.cache),
        Command::Mcp => mcp::serve(),
        Command::Serve(args) => crate::serve::serve(&args.paths, args.bind, args.port),
        Command::Index(args) if args.input.is_dir() => guarded(o, |_| index::index_folder(&args)),
        Command::Index(args) => {
            guarded(o, |_| index(&args.input, args.output.as_deref(), args.jobs, args.progress_lines).map(drop))
        }
        Command::Stats(args) => guarded(o, |o| stats(&args, o))?.print(Format::of(args.json, false)),
        Command::Export(ExportCommand::Layout(args)) => guarded(o, |_| export_layout(&args, opening.cache)),
        Command::Export(ExportCommand::Sampled { args, every }) => {
            guarded(o, |_| export_sampled(&args, every as usize, opening.cache))
        }
        Command::Export(ExportCommand::State { args, every, events }) => {
            guarded(o, |_| export_state(&args, every, &events, opening.cache))
        }
        Command::Export(ExportCommand::Segments(args)) => guarded(o, |o| export_segments(&args, o)),
        Command::Export(ExportCommand::Flamegraph(args)) => guarded(o, |o| flamegraph::flamegraph_cmd(&args, o)),
        Command::Export(ExportCommand::Html(args)) => html::export_html(&args, opening.cache),
        Command::At(args) => guarded(o, |o| at(&args, o))?.print(format(&args.common)),
        Command::Range(args) => guarded(o, |o| range(&args, o))?.print(format(&args.common)),
        Command::Steps(args) => guarded(o, |o| steps(&args, o))?.print(format(&args.common)),
        Command::Diff(args) => guarded(o, |o| diff(&args, o))?.print(format(&args.common)),
        Command::Segments(args) => guarded(o, |o| segments(&args, o))?.print(format(&args.common)),
        Command::Oom(args) => guarded(o, |o| oom(&args, o))?.print(format(&args.common)),
        Command::Ranks(args) => guarded(o, |o| ranks(&args, o))?.print(Format::of(args.json, args.csv)),
        Command::Find(args) => guarded(o, |o| find(&args, o))?.print(format(&args.common)),
    }
}

fn format(common: &crate::cli::AnswerArgs) -> Format {
    Format::of(common.json, common.csv)
}

/// Annotation filter and model dimensions from the shared flags.
fn model_options(m: &crate::cli::ModelArgs) -> anyhow::Result<(AnnotationFilter, Option<ModelDims>)> {
    let filter = AnnotationFilter { all: m.all_annotations, pattern: m.annotation_filter.clone() };
    let model = match &m.model {
        Some(spec) => Some(crate::hub::model_dims(spec, m.vocab_size, m.quantized)?),
        None if m.vocab_size.is_some() || m.quantized => {
            let flag = if m.vocab_size.is_some() { "--vocab-size" } else { "--quantized" };
            return Err(UsageError(format!("{flag} refines --model's shapes: give --model ID|PATH too")).into());
        }
        None => None,
    };
    Ok((filter, model))
}

pub fn open(args: &crate::cli::OpenArgs, cache: bool) -> anyhow::Result<()> {
    let job = match args.inputs.as_slice() {
        [one] if !one.is_dir() => None,
        many => {
            let one_file = [args.event.is_some(), args.action.is_some(), args.oom.is_some(), args.time.is_some()]
                .into_iter()
                .chain([args.view.is_some(), args.x.is_some(), args.pin.is_some(), args.element.is_some()])
                .chain([args.device.is_some()])
                .any(|b| b);
            if one_file {
                return Err(UsageError(
                    "--view, --device, --event, --action, --oom, --time, --x, --pin and --element open one file, not a job's ranks"
                        .into(),
                )
                .into());
            }
            let job = crate::index::folder::job(many).map_err(anyhow::Error::msg)?;
            for w in &job.warnings {
                eprintln!("warning: {w}");
            }
            Some(job.files)
        }
    };
    let ranks_bench = args.bench_view == Some(crate::cli::BenchViewArg::Ranks);
    if ranks_bench != job.is_some() && args.bench_view.is_some() {
        let why = if ranks_bench {
            "--bench-view ranks runs in the rank strip: give a folder of ranks or several files"
        } else {
            "a job's ranks open the rank strip: --bench-view ranks (or --bench) is the view to bench"
        };
        return Err(UsageError(why.into()).into());
    }
    let input = &args.inputs[0];
    // Say what is wrong with the file here, in one line, rather than in a window.
    for f in job.iter().flatten() {
        std::fs::File::open(&f.path).map_err(|e| anyhow::anyhow!("{}: cannot read the file: {e}", f.path.display()))?;
    }
    if job.is_none() {
        open_file_check(input)?;
    }
    crate::viewer::open(&crate::viewer::OpenArgs {
        path: input.clone(),
        job,
        screenshot: args.screenshot.clone(),
        size: args.size,
        bench: args.bench || args.bench_view.is_some(),
        exit_after_frames: args.exit_after_frames,
        options: crate::viewer::ViewerOptions { no_cache: !cache, ..viewer_options(args)? },
    })
}

/// What `open`'s arguments ask the viewer to show (also what "copy link" round-trips through).
pub fn viewer_options(args: &crate::cli::OpenArgs) -> anyhow::Result<crate::viewer::ViewerOptions> {
    let (annotations, model) = model_options(&args.model)?;
    let gpu = match &args.gpu {
        None => None,
        Some(name) => Some(crate::viewer::axis::gpu_capacity(name).ok_or_else(|| {
            UsageError(format!("unknown GPU `{name}` for --gpu (known: {})", crate::viewer::axis::GPU_NAMES))
        })?),
    };
    let pin = match (&args.pin, args.element) {
        (Some(a), _) => Some(crate::viewer::tabs::Pin::Addr(
            crate::analysis::find::parse_addr(a).map_err(|e| UsageError(format!("--pin: {e}")))?,
        )),
        (None, Some(id)) => Some(crate::viewer::tabs::Pin::Element(id)),
        (None, None) => None,
    };
    Ok(crate::viewer::ViewerOptions {
        platform: crate::native::platform(),
        gpu,
        annotations,
        model,
        max_entries: args.max_entries,
        no_cache: false,
        tab: match args.view.or(args.bench_view.and_then(crate::cli::BenchViewArg::view)) {
            Some(ViewArg::Timeline) => Tab::Timeline,
            Some(ViewArg::Pools) => Tab::Pools,
            Some(ViewArg::Segments) => Tab::Segments,
            Some(ViewArg::State) => Tab::State,
            Some(ViewArg::Settings) => Tab::Settings,
            None if args.oom.is_some() => Tab::State,
            None => Tab::Timeline,
        },
        at: match (args.event, args.action, args.oom, args.time) {
            (Some(e), _, _, _) => Some(OpenAt::Event(e)),
            (_, Some(k), _, _) => Some(OpenAt::Action(k)),
            (_, _, Some(n), _) => Some(OpenAt::Oom(n)),
            (_, _, _, Some(t)) => Some(OpenAt::Time(t.us + t.half_step_us)),
            _ => None,
        },
        by_category: args.colour == Some(crate::cli::ColourArg::Category),
        by_allocation: args.colour == Some(crate::cli::ColourArg::Allocation),
        device: args.device,
        x_range: args.x,
        pin,
    })
}

/// One file to open: readable, and an archive that opens.
fn open_file_check(input: &std::path::Path) -> anyhow::Result<()> {
    std::fs::File::open(input).map_err(|e| anyhow::anyhow!("{}: cannot read the file: {e}", input.display()))?;
    if crate::file::is_archive(input) {
        // The checksum is checked in the background and said in the window; a screenshot or
        // bench has no window to say it in, so it checks every block before it writes anything.
        crate::file::open(input).map_err(|e| anyhow::anyhow!("{}: {e}", input.display()))?;
    }
    Ok(())
}

/// A command line that asks for something it must not, or cannot be done as given: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// True when `err` is a usage error (exit code 2).
pub fn is_usage_error(err: &anyhow::Error) -> bool {
    err.is::<crate::output::WouldOverwriteInput>() || err.is::<UsageError>() || err.is::<crate::output::NotAnOutput>()
}

/// True when `err` is a closed standard output (`memviz ... | head`): not a failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().filter_map(|e| e.downcast_ref::<std::io::Error>()).any(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Writes the archive of a snapshot that had none, after the command answered. A cache that
/// cannot be written costs the next run time, not this run its answer: warn and go on.
fn save_cache(loaded: Loaded) {
    let Some(pending) = loaded.pending_cache else { return };
    if let Err(e) = write_archive(&pending, loaded.snapshot, loaded.layouts, None, &|_| {}, Instant::now()) {
        eprintln!("warning: could not cache the archive: {e:#}");
    }
}

/// The layouts to answer about: all, or the one device asked for.
pub(crate) fn select<'a>(
    loaded: &'a Loaded,
    device: Option<crate::model::DeviceId>,
    input: &std::path::Path,
) -> anyhow::Result<Vec<LayoutRef<'a>>> {
    let all: Vec<LayoutRef<'a>> = loaded.layouts.iter().map(Layout::view).collect();
    let ordinals: Vec<_> = all.iter().map(|l| l.device).collect();
    let picked =
        crate::model::pick_devices(&ordinals, device).map_err(|e| anyhow::anyhow!("{}: {e}", input.display()))?;
    Ok(picked.into_iter().map(|i| all[i]).collect())
}

/// `memviz stats`: what happened on each device. A snapshot read afresh is cached once the answer
/// is out.
pub fn stats(args: &StatsArgs, opening: &Opening<'_>) -> anyhow::Result<Answer<stats::Stats>> {
    let (annotations, model) = model_options(&args.model)?;
    let rules = answers::user_rules(args.categories.as_deref())?;
    let mut loaded = load(&args.input, opening.cache)?;
    let archive = loaded.archive.take();
    let views = select(&loaded, None, &args.input)?;
    // An archive (the input, or the snapshot's cache) answers the allocator's states from its
    // saved ones and classifies the peak with its pools; a snapshot read afresh replays them and
    // is classified from the model.
    let session = archive.map(crate::archive::Session::from_archive);
    let categories: Vec<Vec<crate::model::Category>> = match &session {
        Some(s) if s.devices() == views.len() => s
            .device_indices()
            .map(|d| {
                let data = crate::archive::DeviceData::new(s, d);
                answers::categorize(s, d, &data.timeline(), &rules)
            })
            .collect(),
        _ => views.iter().map(|&l| crate::analysis::categories::classify_model(&loaded.snapshot, l, &rules)).collect(),
    };
    let saved: Box<dyn crate::allocator::SavedStates> = match session {
        Some(s) => Box::new(s),
        None => Box::new(crate::allocator::Replayed),
    };
    let options = stats::StatsOptions { annotations, model, categories };
    let mut s = stats::compute(&loaded.snapshot, &views, &options, saved.as_ref());
    s.input = args.input.display().to_string();
    s.format = loaded.described.clone();
    let title = format!(
        "{} — {}, {} bytes, {}",
        args.input.display(),
        loaded.described,
        crate::analysis::units::thousands(loaded.file_bytes),
        crate::analysis::units::count(s.devices.len() as u64, "device", "devices")
    );
    Ok(Answer::new(s, move |s: &stats::Stats| stats::render_text(s, &title)).then(move || save_cache(loaded)))
}

/// Every `export`: refuses an output that is the input, loads it, writes the JSON `write` makes
/// from the devices asked for, then caches the archive.
fn export_with(
    args: &ExportArgs,
    cache: bool,
    write: impl FnOnce(&Loaded, Vec<LayoutRef<'_>>, &mut dyn std::io::Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if let Some(out) = &args.output {
        crate::output::refuse_overwriting(out, &[&args.input])?;
    }
    let loaded = load(&args.input, cache)?;
    {
        let views = select(&loaded, args.device, &args.input)?;
        crate::output::write_to(args.output.as_deref(), |w| write(&loaded, views, w))?;
    }
    save_cache(loaded);
    Ok(())
}

pub fn export_layout(args: &ExportArgs, cache: bool) -> anyhow::Result<()> {
    export_with(args, cache, |_, views, w| {
        let doc = export::LayoutExport { devices: views.into_iter().map(export::device_layout).collect() };
        Ok(serde_json::to_writer(w, &doc)?)
    })
}

pub fn export_sampled(args: &ExportArgs, every: usize, cache: bool) -> anyhow::Result<()> {
    export_with(args, cache, |_, views, w| {
        let doc = export::SampledExport {
            devices: views.into_par_iter().map(|l| export::device_sampled(l, every)).collect(),
        };
        Ok(serde_json::to_writer(w, &doc)?)
    })
}

/// The allocator's state after events: `--every N` (N−1, 2N−1, …) and `--events`.
pub fn export_state(args: &ExportArgs, every: Option<u64>, events: &[i64], cache: bool) -> anyhow::Result<()> {
    export_with(args, cache, |loaded, views, w| {
        let snap = &loaded.snapshot;
        let devices: Vec<serde_json::Value> = views
            .iter()
            .map(|l| {
                let n = snap.trace(l.device).len() as i64;
                let mut wanted: std::collections::BTreeSet<i64> = events.iter().copied().collect();
                if let Some(every) = every.map(|e| e as i64) {
                    wanted.extend((every - 1..n).step_by(every as usize));
                }
                export::device_state(snap, l.device, &wanted)
            })
            .collect();
        Ok(serde_json::to_writer(w, &serde_json::json!({ "devices": devices }))?)
    })
}

/// The Active Cached Segment Timeline in the layout's schema: an archive's stored one (format 4
/// on), else laid out from the snapshot.
pub fn export_segments(args: &ExportArgs, opening: &Opening<'_>) -> anyhow::Result<()> {
    let cache = opening.cache;
    if crate::file::is_archive(&args.input) {
        if let Some(out) = &args.output {
            crate::output::refuse_overwriting(out, &[&args.input])?;
        }
        let session = answers::open_input(&args.input, opening)?;
        let chosen = answers::devices(&session, args.device, &args.input)?;
        let stored: Option<Vec<LayoutRef<'_>>> =
            chosen.iter().map(|&d| session.stacked(d, crate::archive::Plane::Segments).map(|s| s.layout)).collect();
        if let Some(stored) = stored {
            let doc = export::LayoutExport { devices: stored.into_iter().map(export::device_layout).collect() };
            opening.check_what_was_read()?;
            return crate::output::write_to(args.output.as_deref(), |w| Ok(serde_json::to_writer(w, &doc)?));
        }
    }
    export_with(args, cache, |loaded, views, w| {
        let layouts: Vec<Layout> =
            views.iter().map(|l| Layout::segments(&loaded.snapshot, &loaded.snapshot.events, l.device)).collect();
        let doc = export::LayoutExport { devices: layouts.iter().map(|l| export::device_layout(l.view())).collect() };
        Ok(serde_json::to_writer(w, &doc)?)
    })
}
