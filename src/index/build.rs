//! Model + layouts → the archive root: derives what the viewer needs (checkpoints, tiles,
//! minimap, spans, reserved memory) per device in parallel, and moves the model's columns in.

use std::sync::Arc;

use rayon::prelude::*;

use memviz_format::schema as f;
use memviz_format::{TILE_H, TILE_W};

use super::columns::{Columns, CompressedEvents};
use super::reading::{MadeWhileReading, Walked};
use super::series::{self, Plan};
use super::share;
use crate::allocator;
use crate::archive::chunks::{self, CHUNK_ROWS};
use crate::derive::timeline::{NamedSpan, TimelineRef, model_action_times};
use crate::derive::{reserved, sites, spans, steps};
use crate::file::write::{FirstLods, Heads};
use crate::ingest::SourceInfo;
use crate::layout::{Checkpoints, CheckpointsRef, ElementsRef, Layout, LayoutRef};
use crate::lod::{self, minimap};
use crate::model::{Action, ActionIdx, BlockState, DeviceId, EventValues, Events, NO_TIME, NONE, Snapshot, Stage};

// The texels lod writes are the texels FORMAT.md documents.
const _: () = assert!(lod::raster::EMPTY == memviz_format::TEXEL_EMPTY);
const _: () = assert!(lod::raster::AGGREGATED == memviz_format::TEXEL_AGGREGATED);

/// Tiles are precomputed for levels whose columns cover at least this many actions; finer
/// views rasterise from checkpoints on the fly (the crossover measured in docs/performance.md).
pub const FINEST_TILE_ACTIONS: u64 = 256;

/// Stages of building, for progress reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildStage {
    /// The allocator's pass beside checkpoints, tiles and the event table's compression.
    Derive,
}

/// Builds the archive of `snap`. Consumes the model and layouts so their columns move in
/// without copies.
///
/// Everything that needs the raw event columns (the layouts, given; spans, action times,
/// element sites, reserved memory, the segment timeline, the summary's first time and OOM
/// events) is derived first, where the reader's workers did not already (`made`: the event
/// table compressed, a walked trace's action times and element sites) — beside the passes'
/// plans and their spans' starting states, the live stacks' checkpoints (recorded in parts) and
/// the minimaps, which need only the layouts and the compressed columns; then the raw large
/// columns are freed and what exists of the archive — the root's fields before its devices,
/// each device's element columns, actions and totals: the [`Heads`] — goes to `begin`, to be
/// written meanwhile (`begin` gives back where the first device's checkpoints and tiles go,
/// written next as soon as they exist). Then the allocator's backward pass — one long sequential
/// walk per device, reading the compressed chunks, in parts side by side on a long trace —
/// runs beside the tiles, so a 2-core machine stays busy. Returns each device's
/// remaining fields (its others default, and the first's checkpoints and tiles, handed over
/// already) once the heads are no longer read.
pub fn build_root(
    mut snap: Snapshot,
    source: &SourceInfo,
    name: &str,
    layouts: Vec<Layout>,
    made: Option<MadeWhileReading>,
    stage: &dyn Fn(BuildStage),
    begin: &mut dyn FnMut(Arc<Heads>) -> FirstLods,
) -> Vec<f::Device> {
    let (columns, mut walked, held) = match made {
        Some(m) => (Some(m.columns), m.walked, m.held),
        None => (None, Vec::new(), None),
    };
    walked.resize(layouts.len(), None);
    let columns = columns.unwrap_or_else(|| Columns::compress(&snap.events));
    // The allocator passes' plans (K, from a walk over the actions) and the states their spans
    // start from; the live stacks' checkpoints (in parts on the pool) and minimaps: beside the
    // rest.
    let ((spans, mut from_events), ((plans, starts), (checkpoints, minimaps))) = rayon::join(
        || {
            crate::timings::timed("spans and what needs the raw events", || {
                let spans = spans::spans(&snap);
                // The events' values: the model's, or those the reader held where it let go of
                // the walked trace's block events.
                let rows: &(dyn EventValues + Sync) = match &held {
                    Some(h) => h,
                    None => &snap.events,
                };
                let from_events: Vec<FromEvents> =
                    layouts.iter().zip(walked).map(|(l, w)| event_derived(&snap, rows, &spans, l, w)).collect();
                (spans, from_events)
            })
        },
        || {
            rayon::join(
                || {
                    let plans = crate::timings::timed("the passes' plans", || {
                        let threads = rayon::current_num_threads();
                        let room = super::pipeline::room();
                        layouts.iter().map(|l| Plan::new(&snap, &l.view(), threads, room)).collect::<Vec<Plan>>()
                    });
                    let events = || CompressedEvents::of_columns(&columns, &snap.events);
                    let starts = |(l, p): (&Layout, &Plan)| match p.spans().is_empty() {
                        true => Vec::new(),
                        false => crate::timings::timed("allocator pass, the spans' starts", || {
                            series::span_starts(&snap, &events, &l.view(), p)
                        }),
                    };
                    let starts: Vec<Vec<allocator::State>> = layouts.iter().zip(&plans).map(starts).collect();
                    (plans, starts)
                },
                || {
                    rayon::join(
                        || {
                            crate::timings::timed("checkpoints", || {
                                layouts.iter().map(|l| Checkpoints::build(l.view())).collect::<Vec<_>>()
                            })
                        },
                        || layouts.iter().map(|l| minimap::build(&l.totals)).collect::<Vec<_>>(),
                    )
                },
            )
        },
    );
    let event_count = snap.events.len();
    drop(held);
    snap.events.drop_rows();
    let devices = crate::timings::timed("device heads", || {
        let heads = layouts.into_iter().zip(&mut from_events).zip(minimaps);
        heads.map(|((l, fe), minimap)| device_head(l, fe, minimap)).collect()
    });
    let heads = Arc::new(Heads { root: root_head(&mut snap, source, name, event_count, columns), devices });
    let first_lods = begin(heads.clone());
    stage(BuildStage::Derive);
    let views: Vec<LayoutRef<'_>> = heads.devices.iter().map(layout_view).collect();
    // The allocator's pass of each device beside its tiles: this worker runs the late parts of
    // the long traces' passes, from the start (on three threads or more: all their spans, on
    // every other worker); another makes the tiles and the summaries, then each device's early
    // part (or its whole pass, when it is short), its cut settled so that both parts end
    // together (`series::Plan`; had the tiles waited for the first part to end instead, their
    // one core's work would come after both parts).
    let parts = || views.iter().zip(&plans);
    // Each worker reads the chunks through its own cursor.
    let events = || CompressedEvents::new(&heads.root.events, &snap.events);
    let (late, (lods, summaries, early)) = rayon::join(
        || {
            let late = |((l, p), starts): ((&LayoutRef<'_>, &Plan), Vec<allocator::State>)| -> Vec<series::PartOut> {
                let spans = p.spans();
                if spans.is_empty() {
                    return series::late_part(&snap, &events(), l, p).into_iter().collect();
                }
                let spans = spans.into_iter().zip(starts).collect();
                share::take_each(spans, |(s, start)| series::span_part(&snap, &events(), l, p, s, Some(&start)))
            };
            parts().zip(starts).map(late).collect::<Vec<_>>()
        },
        || {
            // Each device's tiles beside its summary (which reads the checkpoints, not the
            // tiles): on a long trace the summary's pass over the action times no longer waits
            // for the pyramid (gen10g: 1.1 s after it, on this one thread).
            let lod = |(((l, d), fe), cps): (((&LayoutRef<'_>, &f::Device), &FromEvents), Checkpoints)| {
                let (tiles, summary) = rayon::join(
                    || {
                        // This thread takes no span while it makes the tiles (`share`).
                        let _busy = share::Elsewhere::start();
                        crate::timings::timed("tiles", || Lod::tiles(*l, cps.view(), Some(&d.elements.stack)))
                    },
                    || {
                        crate::timings::timed("summary", || {
                            summary(&snap, &spans, *l, &d.elements.stack, fe, cps.view())
                        })
                    },
                );
                ((Lod::of_parts(cps, tiles), Lod::of(fe.segments.0.view(), None)), summary)
            };
            let lods = views.par_iter().zip(&heads.devices).zip(&from_events).zip(checkpoints);
            let (mut lods, summaries): (Vec<(Lod, Lod)>, Vec<f::Summary>) =
                crate::timings::timed("tiles and summaries", || lods.map(lod).unzip());
            // What follows the heads in the archive is written while the passes run.
            if let Some((first, _)) = lods.first_mut() {
                first_lods.hand(std::mem::take(&mut first.checkpoints), std::mem::take(&mut first.tiles));
            }
            let events = events();
            let early = parts().map(|(l, p)| series::early_part(&snap, &events, l, p)).collect::<Vec<_>>();
            (lods, summaries, early)
        },
    );
    let allocators: Vec<f::AllocatorSection> = crate::timings::timed("allocator sections", || {
        let sections = parts().zip(early.into_iter().zip(late));
        sections.map(|((l, p), (e, la))| series::section(&snap, l, p, la.into_iter().chain(e).collect())).collect()
    });
    let parts = from_events.into_iter().zip(allocators).zip(lods).zip(summaries);
    crate::timings::timed("devices", || parts.map(|(((fe, a), lod), s)| device_tail(fe, a, lod, s)).collect())
}

/// The root's fields before `devices`, moved out of `snap` where the derive stage no longer
/// reads them, copied where it does (the strings a summary names its spans with; the dump's
/// segments and blocks, the traces' ranges and the stream and pool columns the allocator's pass
/// reads).
fn root_head(snap: &mut Snapshot, source: &SourceInfo, name: &str, event_count: usize, columns: Columns) -> f::Root {
    let frames = std::mem::take(&mut snap.frames);
    f::Root {
        source: f::Source {
            name: name.to_owned(),
            format: source.to_string(),
            file_bytes: source.file_bytes,
            decoded_bytes: source.decoded_bytes,
        },
        strings: snap.strings.iter().map(str::to_owned).collect(),
        frames: f::FrameTable {
            name: frames.iter().map(|f| f.name).collect(),
            filename: frames.iter().map(|f| f.filename).collect(),
            line: frames.iter().map(|f| f.line).collect(),
            fx: frames
                .iter()
                .enumerate()
                .filter(|(_, f)| !f.fx.is_none())
                .map(|(i, f)| (i as u32, f.fx.to_array()))
                .collect(),
        },
        stacks: f::StackTable {
            offsets: std::mem::take(&mut snap.stacks.offsets),
            frames: std::mem::take(&mut snap.stacks.frames),
        },
        events: event_table(event_count, &mut snap.events, columns),
        traces: snap.traces.iter().map(|r| (r.start, r.end)).collect(),
        host_trace: (snap.host_trace.start, snap.host_trace.end),
        segments: snap
            .segments
            .iter()
            .map(|s| f::Segment {
                device: s.device.0,
                address: s.address,
                total_size: s.total_size,
                allocated_size: s.allocated_size,
                active_size: s.active_size,
                requested_size: s.requested_size,
                stream: s.stream,
                segment_type: s.segment_type,
                pool_id: s.pool_id,
                is_expandable: s.is_expandable,
                stack: s.stack,
                forward_stack: s.forward_stack,
                blocks: (s.blocks.start, s.blocks.end),
            })
            .collect(),
        blocks: snap
            .blocks
            .iter()
            .map(|b| {
                let (state, state_str) = match b.state {
                    BlockState::ActiveAllocated => (0, NONE),
                    BlockState::ActivePendingFree => (1, NONE),
                    BlockState::Inactive => (2, NONE),
                    BlockState::Other(s) => (3, s),
                };
                f::Block {
                    address: b.address,
                    size: b.size,
                    requested_size: b.requested_size,
                    state,
                    state_str,
                    stack: b.stack,
                    forward_stack: b.forward_stack,
                }
            })
            .collect(),
        annotations: std::mem::take(&mut snap.annotations)
            .into_iter()
            .map(|a| {
                let (stage, stage_str) = match a.stage {
                    Stage::Start => (0, NONE),
                    Stage::End => (1, NONE),
                    Stage::Other(s) => (2, s),
                };
                f::Annotation { name: a.name, stage, stage_str, device: a.device, time_us: a.time_us }
            })
            .collect(),
        allocator_settings: snap.allocator_settings.take().map(|v| v.to_string()),
        legacy: snap.legacy,
        unknown_keys: std::mem::take(&mut snap.unknown_keys).into_iter().collect(),
        tolerated: snap.tolerated.iter().map(|(o, n)| (o.key().to_owned(), n)).collect(),
        devices: Vec::new(),
    }
}

/// What a device's archive needs from the raw events and annotations.
struct FromEvents {
    /// `time_us` of the device's first event with a time.
    first_event_time: Option<i64>,
    /// Index within the device's trace of every `oom` event.
    oom_events: Vec<u32>,
    spans: Vec<f::Span>,
    reserved: f::Reserved,
    action_time_us: Vec<i64>,
    /// The first chunks of `action_time_us`, encoded while the reader read (moved into the
    /// device's head).
    action_time_chunks: Vec<f::Chunk>,
    /// Each element's stack (moved into the device's head, [`device_head`]).
    stack: Vec<u32>,
    /// The segment timeline and the stack of each of its segments.
    segments: (Layout, Vec<u32>),
}

/// `walked`: the columns the layout's walk made beside the reader, else they are made here;
/// `rows`: where the events' values are.
fn event_derived(
    snap: &Snapshot,
    rows: &(dyn EventValues + Sync),
    spans: &[spans::Span],
    l: &Layout,
    walked: Option<Walked>,
) -> FromEvents {
    let device = l.device;
    let view = l.view();
    let trace = snap.trace(device);
    let (action_time_us, action_time_chunks, stack, first_event_time) = match walked {
        Some(w) => (w.action_time_us, w.action_time_chunks, w.element_stack, w.first_time_us),
        None => {
            let first = trace.clone().map(|e| rows.values(e).map_or(NO_TIME, |v| v.time_us)).find(|&t| t != NO_TIME);
            (model_action_times(snap, view), Vec::new(), sites::element_stacks(snap, view), first)
        }
    };
    // The reserved series and OOM events beside the segment timeline and its sites.
    let ((reserved, oom_events), (segments, segment_stacks)) = rayon::join(
        || {
            let ooms = trace.clone().filter(|&e| snap.events.action[e] == Action::Oom);
            (reserved::timeline(snap, rows, device), ooms.map(|e| (e - trace.start) as u32).collect())
        },
        || {
            let segments = Layout::segments(snap, rows, device);
            let stacks = sites::segment_stacks(snap, rows, segments.view());
            (segments, stacks)
        },
    );
    let spans = spans
        .iter()
        .filter(|s| s.on(device))
        .map(|s| f::Span { name: s.name, start_us: s.start_us, end_us: s.end_us.unwrap_or(i64::MIN), depth: s.depth })
        .collect();
    let reserved = f::Reserved {
        initial: reserved.initial,
        time_us: reserved.points.iter().map(|p| p.0).collect(),
        bytes: reserved.points.iter().map(|p| p.1).collect(),
    };
    FromEvents {
        first_event_time,
        oom_events,
        spans,
        reserved,
        action_time_us,
        action_time_chunks,
        stack,
        segments: (segments, segment_stacks),
    }
}

/// What `ranks` and the default steps read without a pass over the events (FORMAT.md: Summary).
fn summary(
    snap: &Snapshot,
    all: &[spans::Span],
    l: LayoutRef<'_>,
    stack: &[u32],
    fe: &FromEvents,
    checkpoints: CheckpointsRef<'_>,
) -> f::Summary {
    let trace_start_us = fe.first_event_time.or_else(|| fe.action_time_us.iter().copied().find(|&t| t != NO_TIME));
    let spans: Vec<NamedSpan<'_>> = all.iter().filter(|s| s.on(l.device)).map(|s| s.named(snap)).collect();
    let t = TimelineRef {
        layout: l,
        checkpoints,
        sites: stack,
        spans: &spans,
        times: &fe.action_time_us,
        trace_start_us,
        time_base_us: None,
        attrs: &(),
        steps: None,
        categories: None,
        pools: None,
    };
    let steps = steps::default_steps(&t).map(|found| f::Steps {
        family: found.family,
        rows: found
            .rows
            .iter()
            .map(|r| f::StepRow {
                span: r.span.map_or(NONE, |i| i as u32),
                start_action: r.start_action,
                end_action: r.end_action,
                total_start: r.total_start,
                total_end: r.total_end,
                peak_bytes: r.peak_bytes,
                peak_action: r.peak_action.unwrap_or(NONE),
                before_trace: r.before_trace,
            })
            .collect(),
        retaining: found
            .retaining
            .iter()
            .map(|r| f::Retaining { stack: r.stack, bytes_per_step: r.bytes_per_step, steps: r.steps as u32 })
            .collect(),
    });
    f::Summary {
        trace_start_us: trace_start_us.unwrap_or(NO_TIME),
        oom_events: fe.oom_events.clone(),
        reserved_peak: fe.reserved.bytes.iter().copied().chain([fe.reserved.initial]).max().unwrap_or(0),
        span_actions: spans.iter().map(|s| t.span_actions(s)).collect(),
        steps,
    }
}

/// A device's fields before `checkpoints` (FORMAT.md: the element timeline's columns), the
/// layout's and the element stacks moved in; the later fields default.
fn device_head(l: Layout, fe: &mut FromEvents, minimap: Vec<minimap::MinMax>) -> f::Device {
    let Layout { device, elements, actions, initial, initial_total, totals, peak_bytes, peak_action } = l;
    f::Device {
        device: device.0,
        elements: archived_elements(elements, std::mem::take(&mut fe.stack)),
        actions,
        action_time_us: {
            // The chunks the walk did not encode yet.
            let mut done = std::mem::take(&mut fe.action_time_chunks);
            let rest = fe.action_time_us.get(done.len() * CHUNK_ROWS..).unwrap_or_default();
            done.par_extend(rest.par_chunks(CHUNK_ROWS).map(chunks::encode_deltas));
            done
        },
        initial,
        initial_total,
        totals,
        peak_bytes,
        peak_action: peak_action.map_or(-1, ActionIdx::signed),
        minimap: minimap
            .into_iter()
            .map(|m| f::MinMax { actions_per_bucket: m.actions_per_bucket, min: m.min, max: m.max })
            .collect(),
        ..f::Device::default()
    }
}

/// The layout a device head holds, as the derive stage reads it.
fn layout_view(d: &f::Device) -> LayoutRef<'_> {
    let e = &d.elements;
    LayoutRef {
        device: DeviceId(d.device),
        elements: ElementsRef {
            addr: &e.addr,
            size: &e.size,
            start: &e.start,
            end: &e.end,
            origin: &e.origin,
            alloc_event: &e.alloc_event,
            free_event: &e.free_event,
            block: &e.block,
            slot: &e.slot,
            annotated: &e.annotated,
            annotation: &e.annotation,
        },
        actions: &d.actions,
        initial: &d.initial,
        initial_total: d.initial_total,
        totals: &d.totals,
        peak_bytes: d.peak_bytes,
        peak_action: u32::try_from(d.peak_action).ok().map(ActionIdx),
    }
}

/// A device's fields from `checkpoints` on (the earlier ones default).
fn device_tail(fe: FromEvents, allocator: f::AllocatorSection, lods: (Lod, Lod), summary: f::Summary) -> f::Device {
    let FromEvents { spans, reserved, segments, .. } = fe;
    let s = stacked(segments.0, segments.1, lods.1);
    f::Device {
        checkpoints: lods.0.checkpoints,
        tiles: lods.0.tiles,
        spans,
        reserved,
        allocator,
        segment_timeline: f::SegmentTimeline {
            elements: s.elements,
            actions: s.actions,
            initial: s.initial,
            initial_total: s.initial_total,
            totals: s.totals,
            peak_bytes: s.peak_bytes,
            peak_action: s.peak_action,
            checkpoints: s.checkpoints,
            tiles: s.tiles,
        },
        summary: Some(summary),
        ..f::Device::default()
    }
}

/// A timeline's checkpoints and tiles (the coarse levels' with their texels' colour keys).
struct Lod {
    checkpoints: f::Checkpoints,
    tiles: Vec<f::TileLevel>,
}

impl Lod {
    /// `stack`: each element's stack id, for the keys of the levels of at most
    /// [`KEYED_LEVEL_TILES`] tiles, after their texel chunks (FORMAT.md §5; none for the segment
    /// timeline, whose keys the viewer makes).
    fn of(view: crate::layout::LayoutRef<'_>, stack: Option<&[u32]>) -> Lod {
        let cps = crate::timings::timed("checkpoints", || Checkpoints::build(view));
        let tiles = Lod::tiles(view, cps.view(), stack);
        Lod::of_parts(cps, tiles)
    }

    fn of_parts(cps: Checkpoints, tiles: Vec<f::TileLevel>) -> Lod {
        Lod { checkpoints: f::Checkpoints { every: cps.every, starts: cps.starts, ids: cps.ids }, tiles }
    }

    /// The tile levels, from the checkpoints.
    fn tiles(view: crate::layout::LayoutRef<'_>, cps: CheckpointsRef<'_>, stack: Option<&[u32]>) -> Vec<f::TileLevel> {
        let min_level = FINEST_TILE_ACTIONS.trailing_zeros();
        let keyed = |level: u32| {
            let columns = view.actions.len().div_ceil(1 << level);
            stack.filter(|_| columns.div_ceil(TILE_W as usize) <= KEYED_LEVEL_TILES)
        };
        let encode = |level: u32, texels: &[u32]| {
            // A tile's raster paged through the layout's spilled columns.
            crate::spill::help_drop();
            let keys = keyed(level).map(|stack| chunks::encode_fast::<u32>(&memviz_format::texel_keys(texels, stack)));
            (chunks::encode_fast::<u32>(texels), keys)
        };
        // The finest tiles' rasters share a quarter of the budget: each holds a column stack of
        // the live set (~16 bytes an entry: its id, its drawn size in a Fenwick tree) and its
        // texels. With millions of allocations live at once, 64 side by side held gigabytes.
        let live = cps.starts.windows(2).map(|w| (w[1] - w[0]) as u64).max().unwrap_or(0);
        let raster = live * 16 + u64::from(TILE_W * TILE_H) * 4;
        let at_once = usize::try_from(super::pipeline::room() / raster.max(1)).unwrap_or(usize::MAX).max(2);
        let levels = lod::build_pyramid(view, cps, min_level, (TILE_W, TILE_H), at_once, encode);
        levels
            .into_iter()
            .map(|t| {
                let (mut chunks, keys): (Vec<f::Chunk>, Vec<Option<f::Chunk>>) = t.tiles.into_iter().unzip();
                chunks.extend(keys.into_iter().flatten());
                f::TileLevel { level: t.level, columns: t.columns, sample: t.sample, tiles: chunks }
            })
            .collect()
    }
}

/// Tile levels of at most this many tiles carry their texels' colour keys: every
/// whole-trace view up to a 4K screen's width draws from those levels, whose texels show
/// elements from the whole trace — the sites of which, read at random from a cold 10 GB
/// archive, were most of the first frame. Finer levels show fewer, neighbouring elements.
const KEYED_LEVEL_TILES: usize = 16;

/// What the element timeline and the segment timeline both store: the layout's columns with
/// the stack of each element, its checkpoints and its tiles.
struct Stacked {
    elements: f::Elements,
    actions: Vec<u32>,
    initial: Vec<u32>,
    initial_total: u64,
    totals: Vec<u64>,
    peak_bytes: u64,
    peak_action: i64,
    checkpoints: f::Checkpoints,
    tiles: Vec<f::TileLevel>,
}

fn stacked(l: Layout, stack: Vec<u32>, lod: Lod) -> Stacked {
    let Layout { device: _, elements, actions, initial, initial_total, totals, peak_bytes, peak_action } = l;
    Stacked {
        elements: archived_elements(elements, stack),
        actions,
        initial,
        initial_total,
        totals,
        peak_bytes,
        peak_action: peak_action.map_or(-1, ActionIdx::signed),
        checkpoints: lod.checkpoints,
        tiles: lod.tiles,
    }
}

/// A layout's element columns with each element's stack, as the archive stores them.
fn archived_elements(e: crate::layout::Elements, stack: Vec<u32>) -> f::Elements {
    f::Elements {
        addr: e.addr,
        size: e.size,
        start: e.start,
        end: e.end,
        origin: e.origin,
        alloc_event: e.alloc_event,
        free_event: e.free_event,
        block: e.block,
        slot: e.slot,
        stack,
        annotated: e.annotated,
        annotation: e.annotation,
    }
}

/// The event table: the compressed columns and the run-length and sparse columns moved in (the
/// raw columns are dropped).
/// `ev`'s run-length and sparse columns move in, but for the stream and pool columns, which the
/// allocator's pass still reads from `ev`.
fn event_table(len: usize, ev: &mut Events, c: Columns) -> f::EventTable {
    fn runs<T: Copy>(r: &crate::model::Runs<T>) -> Vec<(u32, T)> {
        r.starts.iter().copied().zip(r.values.iter().copied()).collect()
    }
    f::EventTable {
        len: len as u32,
        chunk_rows: CHUNK_ROWS as u32,
        action: c.action,
        addr: c.addr,
        size: c.size,
        time_us: c.time_us,
        stack: c.stack,
        stream: runs(&ev.stream),
        compile_context: runs(&std::mem::take(&mut ev.compile_context)),
        user_metadata: runs(&std::mem::take(&mut ev.user_metadata)),
        internal_metadata: runs(&std::mem::take(&mut ev.internal_metadata)),
        category: runs(&std::mem::take(&mut ev.category)),
        other_action: std::mem::take(&mut ev.other_action),
        device_free: std::mem::take(&mut ev.device_free),
        forward_stack: std::mem::take(&mut ev.forward_stack),
        pool_id: ev.pool_id.clone(),
    }
}
