//! `memviz stats`: what happened on each device, where the peak is, and what fills it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::annotations::AnnotationFilter;
use super::shapes::{self, Candidates, ModelDims};
use super::{annotations, frames, units};
use crate::allocator::SavedStates;
use crate::derive::reserved;
use crate::derive::sites::element_stack;
use crate::layout::{LayoutRef, Origin};
use crate::model::{Action, ActionIdx, ElementId, EventIdx, NO_TIME, Snapshot, StackId};

/// How many live allocations at the peak are listed.
pub const TOP_AT_PEAK: usize = 10;

/// What `stats` is asked to take into account.
#[derive(Debug, Clone, Default)]
pub struct StatsOptions {
    pub annotations: AnnotationFilter,
    /// `--model`: explain allocation sizes as tensor shapes.
    pub model: Option<ModelDims>,
    /// The category of every element, per device in the order of the layouts (empty: not
    /// classified).
    pub categories: Vec<Vec<crate::model::Category>>,
}

/// Every `*_us` time in `stats` counts from the snapshot's start (the earliest timed event
/// over all devices, `start_epoch_us`); `*_epoch_us` are the recorded µs since the Unix epoch.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Stats {
    /// The input as given on the command line (set by the command).
    pub input: String,
    /// What was read: `pickle protocol 4, gzip`, or `archive of run.pickle (…)`.
    pub format: String,
    /// The snapshot's earliest timed event, µs since the Unix epoch.
    pub start_epoch_us: Option<i64>,
    /// `--model`'s dimensions (`h=… i=… v=…`), when given.
    pub model: Option<String>,
    /// Without `--model`: h / i / v guessed from the most frequent allocation sizes.
    pub shape_candidates: Option<Candidates>,
    pub devices: Vec<DeviceStats>,
    /// Keys the reader did not interpret, by context, with counts.
    pub unknown_keys: BTreeMap<String, u64>,
    /// Odd descriptive values read anyway (the reading policy), by kind, with counts.
    pub tolerated: BTreeMap<String, u64>,
    /// The same as one sentence: `"38 frame lines out of range"`.
    pub tolerated_summary: Option<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct DeviceStats {
    pub device: crate::model::DeviceId,
    pub events: u64,
    pub events_by_action: BTreeMap<String, u64>,
    pub actions: usize,
    pub elements: OriginCounts,
    pub first_time_us: Option<i64>,
    pub last_time_us: Option<i64>,
    pub first_time_epoch_us: Option<i64>,
    pub last_time_epoch_us: Option<i64>,
    pub peak: Peak,
    pub top_at_peak: Vec<LiveAlloc>,
    /// What kind of memory the peak is, largest first (`analysis::categories`).
    pub peak_by_category: Vec<super::categories::CategoryBytes>,
    pub reserved: ReservedStats,
    /// The allocator's state right after the peak action (`None` without a trace).
    pub allocator_at_peak: Option<AllocatorAtPeak>,
    pub ooms: Vec<Oom>,
    /// Frees whose alloc is missing: the ring buffer wrapped or recording started late.
    pub trace_truncated: bool,
}

#[derive(Debug, Default, Serialize, schemars::JsonSchema)]
pub struct OriginCounts {
    pub alloc: u64,
    pub free_only: u64,
    pub ghost: u64,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Peak {
    pub bytes: u64,
    /// First action at the peak; `None`: the state before the first action.
    pub action: Option<ActionIdx>,
    pub time_us: Option<i64>,
    pub time_epoch_us: Option<i64>,
    /// Annotation spans open at the peak, outermost first.
    pub annotation: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct LiveAlloc {
    pub element: ElementId,
    pub size: u64,
    pub addr: u64,
    pub origin: &'static str,
    pub frame: Option<String>,
    pub category: Option<crate::model::Category>,
    /// Tensor shapes that account for the size (with `--model`).
    pub shapes: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ReservedStats {
    /// Highest reserved (segment) memory over the trace.
    pub peak_bytes: u64,
    pub peak_time_us: Option<i64>,
    pub peak_time_epoch_us: Option<i64>,
    /// Reserved at the dump: the sum of the segments' sizes.
    pub final_bytes: u64,
    pub segments: usize,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Oom {
    pub event: EventIdx,
    pub time_us: Option<i64>,
    pub time_epoch_us: Option<i64>,
    pub requested_bytes: u64,
    pub device_free_bytes: Option<u64>,
    pub stream: u64,
    pub frame: Option<String>,
    /// Why it happened, from the allocator's state before it (`memviz oom` has the rest).
    pub kind: Option<super::oom::Kind>,
    pub verdict: Option<String>,
}

/// The allocator at the timeline's peak: what was reserved for what was allocated.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct AllocatorAtPeak {
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub reserved_unallocated_bytes: u64,
    pub largest_free_bytes: u64,
}

fn time(t: i64) -> Option<i64> {
    (t != NO_TIME).then_some(t)
}

fn frame_text(snap: &Snapshot, stack: StackId) -> Option<String> {
    frames::top_frame(snap, stack).map(|f| frames::describe(snap, f, true))
}

/// The statistics of `snap`; the allocator's states at the peak and before each OOM come from
/// `saved` when it has them (an archive), else from a replay of the model.
pub fn compute(snap: &Snapshot, layouts: &[LayoutRef<'_>], options: &StatsOptions, saved: &dyn SavedStates) -> Stats {
    let spans = annotations::spans_filtered(snap, &options.annotations);
    let base = snap.start_time_us();
    let devices = layouts
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            let cats = options.categories.get(i).map(Vec::as_slice).filter(|c| c.len() == l.elements.len());
            device_stats(snap, l, &spans, (options.model.as_ref(), cats), base, saved)
        })
        .collect();
    let shape_candidates = options.model.is_none().then(|| {
        let allocations: Vec<(u64, u32)> = layouts
            .iter()
            .flat_map(|&l| {
                shapes::long_lived(l, usize::MAX)
                    .into_iter()
                    .map(ElementId::at)
                    .map(move |i| (l.elements.size[i.index()], element_stack(snap, l, i)))
            })
            .collect();
        shapes::infer_allocations(snap, &allocations)
    });
    Stats {
        input: String::new(),
        format: String::new(),
        start_epoch_us: base,
        model: options.model.as_ref().map(ModelDims::summary),
        shape_candidates,
        devices,
        unknown_keys: snap.unknown_keys.clone(),
        tolerated: snap.tolerated.iter().map(|(o, n)| (o.key().to_owned(), n)).collect(),
        tolerated_summary: (!snap.tolerated.is_empty()).then(|| snap.tolerated.summary()),
    }
}

fn device_stats(
    snap: &Snapshot,
    layout: LayoutRef<'_>,
    spans: &[annotations::Span],
    (model, cats): (Option<&ModelDims>, Option<&[crate::model::Category]>),
    base: Option<i64>,
    saved: &dyn SavedStates,
) -> DeviceStats {
    let since = |t: Option<i64>| Some(t? - base?);
    let trace = snap.trace(layout.device);
    let events = trace_events(snap, trace.clone(), &since);
    let elements = origin_counts(layout);
    let peak = peak_of(snap, layout, spans, &since);
    let peak_k = layout.peak_action.map_or(-1, ActionIdx::signed);
    let mut live = layout.live_after(peak_k);
    let peak_by_category =
        cats.map(|c| super::categories::breakdown(layout.elements.size, c, live.iter().copied())).unwrap_or_default();
    live.sort_by_key(|&id| (std::cmp::Reverse(layout.elements.size[id.index()]), id));
    let top_at_peak = live.into_iter().take(TOP_AT_PEAK).map(|id| live_alloc(snap, layout, id, model, cats)).collect();
    let (allocator_at_peak, ooms) = allocator_states(snap, layout, spans, saved, events.ooms);
    DeviceStats {
        device: layout.device,
        events: trace.len() as u64,
        events_by_action: events.by_action,
        actions: layout.actions.len(),
        trace_truncated: elements.free_only > 0,
        elements,
        first_time_us: since(events.first),
        last_time_us: since(events.last),
        first_time_epoch_us: events.first,
        last_time_epoch_us: events.last,
        peak,
        top_at_peak,
        peak_by_category,
        reserved: reserved_stats(snap, layout.device, &since),
        allocator_at_peak,
        ooms,
    }
}

/// What one pass over a device's trace events counts: each action, the first and last times,
/// the OOM events.
struct TraceEvents {
    by_action: BTreeMap<String, u64>,
    first: Option<i64>,
    last: Option<i64>,
    ooms: Vec<Oom>,
}

fn trace_events(
    snap: &Snapshot,
    trace: std::ops::Range<usize>,
    since: &dyn Fn(Option<i64>) -> Option<i64>,
) -> TraceEvents {
    let ev = &snap.events;
    let mut out = TraceEvents { by_action: BTreeMap::new(), first: None, last: None, ooms: Vec::new() };
    for e in trace {
        *out.by_action.entry(ev.action_name(e as u32, &snap.strings).to_owned()).or_default() += 1;
        if let Some(t) = time(ev.time_us[e]) {
            out.first.get_or_insert(t);
            out.last = Some(t);
        }
        if ev.action[e] == Action::Oom {
            out.ooms.push(Oom {
                event: EventIdx::at(e),
                time_us: since(time(ev.time_us[e])),
                time_epoch_us: time(ev.time_us[e]),
                requested_bytes: ev.size[e],
                device_free_bytes: ev.device_free_of(e as u32),
                stream: ev.stream.get(e as u32),
                frame: frame_text(snap, ev.stack[e]),
                kind: None,
                verdict: None,
            });
        }
    }
    out
}

fn origin_counts(layout: LayoutRef<'_>) -> OriginCounts {
    let mut elements = OriginCounts::default();
    for &o in layout.elements.origin {
        match Origin::from_u8(o) {
            Origin::Alloc => elements.alloc += 1,
            Origin::FreeOnly => elements.free_only += 1,
            Origin::Ghost => elements.ghost += 1,
        }
    }
    elements
}

/// The peak: its bytes, action, time and the annotations open then.
fn peak_of(
    snap: &Snapshot,
    layout: LayoutRef<'_>,
    spans: &[annotations::Span],
    since: &dyn Fn(Option<i64>) -> Option<i64>,
) -> Peak {
    let peak_time = layout
        .peak_action
        .and_then(|k| layout.action_event(k).get())
        .and_then(|e| time(snap.events.time_us[e.index()]));
    let annotation = peak_time
        .map(|t| annotations::in_effect(spans, layout.device, t))
        .unwrap_or_default()
        .into_iter()
        .map(|s| snap.str(s).to_owned())
        .collect();
    Peak {
        bytes: layout.peak_bytes,
        action: layout.peak_action,
        time_us: since(peak_time),
        time_epoch_us: peak_time,
        annotation,
    }
}

/// One of the largest allocations live at the peak.
fn live_alloc(
    snap: &Snapshot,
    layout: LayoutRef<'_>,
    id: ElementId,
    model: Option<&ModelDims>,
    cats: Option<&[crate::model::Category]>,
) -> LiveAlloc {
    let el = layout.element(id);
    LiveAlloc {
        element: id,
        size: el.size,
        addr: el.addr,
        origin: el.origin.name(),
        frame: frame_text(snap, element_stack(snap, layout, id)),
        category: cats.and_then(|c| c.get(id.index()).copied()),
        shapes: model.map(|m| m.explain(el.size, 3).into_iter().map(|f| f.text).collect()).unwrap_or_default(),
    }
}

/// The allocator's state at the peak, and each OOM's kind and verdict from the state before
/// it: one backward pass gives both.
fn allocator_states(
    snap: &Snapshot,
    layout: LayoutRef<'_>,
    spans: &[annotations::Span],
    saved: &dyn SavedStates,
    mut ooms: Vec<Oom>,
) -> (Option<AllocatorAtPeak>, Vec<Oom>) {
    let trace = snap.trace(layout.device);
    let peak_event = layout.peak_action.and_then(|k| layout.action_event(k).get());
    let peak_rel = peak_event.map(|e| e.index() as i64 - trace.start as i64);
    let wanted = peak_rel.into_iter().collect();
    let (states, oom_states) =
        saved.states(layout.device, &wanted).unwrap_or_else(|| crate::allocator::states(snap, layout.device, &wanted));
    for (o, r) in ooms.iter_mut().zip(super::oom::reports(snap, layout, spans, &oom_states)) {
        (o.kind, o.verdict) = (Some(r.kind), Some(r.verdict));
    }
    let at_peak = peak_rel.map(|rel| {
        let s = states.iter().find(|s| s.event == rel).expect("the asked-for state is computed");
        AllocatorAtPeak {
            reserved_bytes: s.reserved,
            allocated_bytes: s.allocated,
            reserved_unallocated_bytes: s.free(),
            largest_free_bytes: s.largest_free,
        }
    });
    (at_peak, ooms)
}

fn reserved_stats(
    snap: &Snapshot,
    device: crate::model::DeviceId,
    since: &dyn Fn(Option<i64>) -> Option<i64>,
) -> ReservedStats {
    let reserved = reserved::timeline(snap, &snap.events, device);
    let (peak_bytes, peak_time) = reserved.peak();
    ReservedStats {
        peak_bytes,
        peak_time_us: since(peak_time),
        peak_time_epoch_us: peak_time,
        final_bytes: reserved.final_bytes,
        segments: snap.device_segments(device).count(),
    }
}

/// The aligned human report.
pub fn render_text(stats: &Stats, title: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{title}");
    if let Some(m) = &stats.model {
        let _ = writeln!(out, "model: {m}");
    }
    if let Some(c) = &stats.shape_candidates {
        let dim = |n: &str, v: Option<u64>| v.map(|v| format!("{n}={v}"));
        let known: Vec<String> = [dim("h", c.h), dim("i", c.i), dim("v", c.v)].into_iter().flatten().collect();
        if !known.is_empty() {
            let _ = writeln!(
                out,
                "shape candidates from frequent sizes: {} (pass --model for exact shapes)",
                known.join(" ")
            );
        }
    }
    for d in &stats.devices {
        render_device(&mut out, d);
    }
    if !stats.unknown_keys.is_empty() {
        let keys: Vec<String> =
            stats.unknown_keys.iter().map(|(k, n)| format!("{k} ×{}", units::thousands(*n))).collect();
        let _ = writeln!(out, "\nkeys not interpreted: {}", keys.join(", "));
    }
    if let Some(t) = &stats.tolerated_summary {
        let _ = writeln!(out, "tolerated: {t}");
    }
    out
}

fn render_device(out: &mut String, d: &DeviceStats) {
    let _ = writeln!(out, "\ndevice {}", d.device);
    let by_action: Vec<String> =
        d.events_by_action.iter().map(|(a, n)| format!("{a} {}", units::thousands(*n))).collect();
    row(out, "events", format!("{}  ({})", units::thousands(d.events), by_action.join(" · ")));
    let e = &d.elements;
    row(
        out,
        "elements",
        format!(
            "{} alloc · {} free_only · {} ghost",
            units::thousands(e.alloc),
            units::thousands(e.free_only),
            units::thousands(e.ghost)
        ),
    );
    row(out, "actions", units::thousands(d.actions as u64));
    if let (Some(a), Some(b)) = (d.first_time_us, d.last_time_us) {
        row(out, "wall time", units::duration_us(b - a));
    }
    render_peak(out, d);
    render_memory(out, d);
    render_trace(out, d);
    render_top_at_peak(out, &d.top_at_peak);
}

/// One labelled line of a device's report.
fn row(out: &mut String, label: &str, value: String) {
    let _ = writeln!(out, "  {label:<18}{value}");
}

fn render_peak(out: &mut String, d: &DeviceStats) {
    let mut peak = format!("{} ({} B)", units::bytes(d.peak.bytes), units::thousands(d.peak.bytes));
    match d.peak.action {
        Some(k) => {
            let _ = write!(peak, " at action {}", units::thousands(u64::from(k.0)));
        }
        None => peak.push_str(" before the first action"),
    }
    if let Some(t) = d.peak.time_us {
        let _ = write!(peak, ", {} into the trace", units::instant_us(t));
    }
    row(out, "peak", peak);
    if !d.peak.annotation.is_empty() {
        row(out, "  during", d.peak.annotation.join(" › "));
    }
    if !d.peak_by_category.is_empty() {
        row(out, "  by category", super::categories::one_line(&d.peak_by_category));
    }
}

/// Reserved memory, and the allocator's state at the peak.
fn render_memory(out: &mut String, d: &DeviceStats) {
    let r = &d.reserved;
    row(
        out,
        "reserved peak",
        format!(
            "{} (at the dump: {} in {})",
            units::bytes(r.peak_bytes),
            units::bytes(r.final_bytes),
            units::count(r.segments as u64, "segment", "segments")
        ),
    );
    if let Some(a) = &d.allocator_at_peak {
        row(
            out,
            "  at the peak",
            format!(
                "{} reserved for {} allocated ({} reserved but unallocated; largest free block {})",
                units::bytes(a.reserved_bytes),
                units::bytes(a.allocated_bytes),
                units::bytes(a.reserved_unallocated_bytes),
                units::bytes(a.largest_free_bytes)
            ),
        );
    }
}

/// Whether the trace is whole, and its OOMs.
fn render_trace(out: &mut String, d: &DeviceStats) {
    let e = &d.elements;
    row(
        out,
        "trace",
        if d.events == 0 {
            "none recorded: segments only (what was live at the dump)".into()
        } else if d.trace_truncated {
            format!(
                "truncated: {} without {} alloc (ring buffer wrapped or recording started late)",
                units::count(e.free_only, "free", "frees"),
                if e.free_only == 1 { "its" } else { "their" }
            )
        } else {
            "complete: every free has its alloc".into()
        },
    );
    if d.ooms.is_empty() {
        row(out, "out of memory", "no OOM event".into());
    }
    for o in &d.ooms {
        let free = o.device_free_bytes.map_or("unknown".into(), units::bytes);
        let why = o.verdict.as_ref().map_or(String::new(), |v| format!(" — {v}"));
        row(
            out,
            "out of memory",
            format!(
                "requested {} with {} free on the device{}{why}",
                units::bytes(o.requested_bytes),
                free,
                o.frame.as_ref().map(|f| format!(", at {f}")).unwrap_or_default()
            ),
        );
    }
}

fn render_top_at_peak(out: &mut String, top: &[LiveAlloc]) {
    if top.is_empty() {
        return;
    }
    let _ = writeln!(out, "  largest live allocations at the peak:");
    let _ = writeln!(out, "    {:>10}  {:<18}  {:<9}  {:<15}  frame", "size", "address", "origin", "category");
    for a in top {
        let shapes = if a.shapes.is_empty() { String::new() } else { format!("  [{}]", a.shapes.join(" | ")) };
        let _ = writeln!(
            out,
            "    {:>10}  {:<18}  {:<9}  {:<15}  {}{shapes}",
            units::bytes(a.size),
            format!("{:#x}", a.addr),
            a.origin,
            a.category.map_or("", |c| c.name()),
            a.frame.as_deref().unwrap_or("(no stack recorded)")
        );
    }
}
