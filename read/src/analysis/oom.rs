//! `memviz oom`: why an allocation failed, from the allocator's state just before it.
//!
//! For each `oom` event: the request and the block size the allocator would have used, the
//! state before it (allocated, reserved, reserved-but-unallocated, largest free block, pending
//! frees), the device's free memory from the event, and a verdict that follows from those
//! numbers, checked in this order:
//!
//! 1. **too large** — the block is more than the device could give even if this process
//!    returned its whole cache (`device_free + reserved`);
//! 2. **fragmentation** — the free bytes inside segments would hold the block, but no hole does;
//! 3. **cap** — the device had the memory free, yet the allocator could not get it: the process
//!    is at a limit (`set_per_process_memory_fraction`, or a reservation elsewhere);
//! 4. **full** — live tensors fill what there is.
//!
//! Then what filled it (the largest sites live at that instant, with the annotations in effect)
//! and the advice those numbers support.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::annotations::{self, AnnotationFilter, Span};
use super::frames::FrameSource;
use super::{frames, units};
use crate::allocator::OomState;
use crate::derive::sites::element_stack;
use crate::derive::timeline::{TimelineRef, open_at};
use crate::layout::LayoutRef;
use crate::model::{DeviceId, EventIdx, NO_TIME, Snapshot, StackId};

/// The allocator's smallest block: requests are rounded up to a multiple of it.
const MIN_BLOCK: u64 = 512;
/// Sites listed as "what filled it".
const TOP_SITES: usize = 5;

/// The block size torch's caching allocator gives a request (`round_size`).
pub fn rounded(size: u64) -> u64 {
    size.max(1).div_ceil(MIN_BLOCK) * MIN_BLOCK
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    TooLarge,
    Fragmentation,
    Cap,
    Full,
}

impl Kind {
    /// Its name in `--json` and `--csv`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::TooLarge => "too_large",
            Kind::Fragmentation => "fragmentation",
            Kind::Cap => "cap",
            Kind::Full => "full",
        }
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Site {
    pub frame: String,
    pub bytes: u64,
    pub count: u64,
    /// The site's stack id (`null`: no stack recorded).
    pub stack: Option<u32>,
    /// With `--stacks`: its whole (filtered) stack, innermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct OomReport {
    pub device: crate::model::DeviceId,
    /// Raw trace event index within the device.
    pub event: i64,
    pub requested_bytes: u64,
    pub rounded_bytes: u64,
    pub device_free_bytes: Option<u64>,
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
    pub reserved_unallocated_bytes: u64,
    pub largest_free_bytes: u64,
    pub pending_free_bytes: u64,
    /// 1 − largest free block / free bytes inside segments.
    pub fragmentation: f64,
    pub kind: Kind,
    /// The verdict as one sentence.
    pub verdict: String,
    /// The frame that asked, and its stack's id (`null`: none recorded).
    pub frame: Option<String>,
    pub stack: Option<u32>,
    /// With `--stacks`: the whole (filtered) stack that asked, innermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
    /// The last action before the OOM (−1: none) and the annotations open at the OOM.
    pub action: i64,
    pub annotation: Vec<String>,
    /// The largest allocation sites live then.
    pub filled_by: Vec<Site>,
    pub advice: Vec<String>,
}

/// What the explainer reads about one OOM besides the allocator's state: where the request came
/// from and what was live. Gathered from the model ([`reports`]) or from an archive's timeline
/// ([`context_in`]).
#[derive(Debug, Clone)]
pub struct Context {
    pub device: DeviceId,
    /// The stack of the `oom` event.
    pub stack: StackId,
    /// The last action before the OOM (−1: none).
    pub action: i64,
    /// The annotations open at the OOM, outermost first.
    pub annotation: Vec<String>,
    /// Per allocation site, the bytes and the count live right after `action`.
    pub live_by_site: HashMap<StackId, (u64, u64)>,
    /// `expandable_segments` was on.
    pub expandable: bool,
}

/// `expandable_segments` is on in the snapshot's `allocator_settings`.
pub fn expandable(settings: Option<&serde_json::Value>) -> bool {
    settings
        .and_then(|s| s.get("expandable_segments"))
        .is_some_and(|v| v.as_bool() == Some(true) || v.as_i64() == Some(1))
}

/// Every OOM of one device explained from the model, given the states before them
/// (`allocator::states`).
pub fn reports(snap: &Snapshot, layout: LayoutRef<'_>, spans: &[Span], ooms: &[OomState]) -> Vec<OomReport> {
    let first = snap.trace(layout.device).start;
    let expandable = expandable(snap.allocator_settings.as_ref());
    ooms.iter()
        .map(|o| {
            let e = first + o.event as usize;
            let action = last_action_before(layout, e);
            let mut live_by_site: HashMap<StackId, (u64, u64)> = HashMap::new();
            for id in layout.live_after(action) {
                let cell = live_by_site.entry(element_stack(snap, layout, id)).or_default();
                cell.0 += layout.elements.size[id.index()];
                cell.1 += 1;
            }
            let time = snap.events.time_us[e];
            let annotation = if time == NO_TIME {
                Vec::new()
            } else {
                annotations::in_effect(spans, layout.device, time).into_iter().map(|s| snap.str(s).to_owned()).collect()
            };
            let cx = Context {
                device: layout.device,
                stack: snap.events.stack[e],
                action,
                annotation,
                live_by_site,
                expandable,
            };
            report(snap, o, cx)
        })
        .collect()
}

/// Every OOM of a device explained from its timeline (read in place from an archive): `states`
/// from the archive's saved states, `event(e)` the time and stack of absolute event `e`, `first`
/// the device's first absolute event.
pub fn reports_in<F: FrameSource>(
    t: &TimelineRef<'_>,
    frames: &F,
    states: &[OomState],
    first: usize,
    event: impl Fn(usize) -> (Option<i64>, StackId),
    expandable: bool,
) -> Vec<OomReport> {
    let filter = AnnotationFilter::default();
    states
        .iter()
        .map(|o| {
            let e = first + o.event as usize;
            let (time, stack) = event(e);
            report(frames, o, context_in(t, EventIdx::at(e), time, stack, &filter, expandable))
        })
        .collect()
}

/// The context of the OOM at absolute event `e` from a device's timeline (read in place from an
/// archive: the live set from the nearest checkpoint); `time` and `stack` are the event's.
pub fn context_in(
    t: &TimelineRef<'_>,
    e: EventIdx,
    time: Option<i64>,
    stack: StackId,
    filter: &AnnotationFilter,
    expandable: bool,
) -> Context {
    let l = t.layout;
    let action = last_action_before(l, e.index());
    let mut live_by_site: HashMap<StackId, (u64, u64)> = HashMap::new();
    for (id, _) in t.checkpoints.stack_after(l, action).with_offsets() {
        let cell = live_by_site.entry(t.site(id)).or_default();
        cell.0 += l.elements.size[id.index()];
        cell.1 += 1;
    }
    let annotation = time
        .map(|time| {
            open_at(t.spans.iter().filter(|s| filter.keeps(s.name)), time).into_iter().map(str::to_owned).collect()
        })
        .unwrap_or_default();
    Context { device: l.device, stack, action, annotation, live_by_site, expandable }
}

/// The last action whose event comes before absolute event `e` (−1: none).
fn last_action_before(layout: LayoutRef<'_>, e: usize) -> i64 {
    i64::from(crate::derive::timeline::actions_before_event(layout, e)) - 1
}

/// One OOM explained: the verdict from the state before it, what filled the memory, advice.
pub fn report<F: FrameSource>(frames: &F, o: &OomState, cx: Context) -> OomReport {
    let b = &o.before;
    let block = rounded(o.requested);
    let free_inside = b.free();
    let kind = if o.device_free.is_some_and(|f| block > f.saturating_add(b.reserved)) {
        Kind::TooLarge
    } else if free_inside >= block && b.largest_free < block {
        Kind::Fragmentation
    } else if o.device_free.is_some_and(|f| f >= block) {
        Kind::Cap
    } else {
        Kind::Full
    };
    let bytes = units::bytes;
    let device_free = o.device_free.map_or("an unknown amount".to_owned(), bytes);
    let verdict = match kind {
        Kind::TooLarge => format!(
            "too large: {} is more than the device could give even with this process's cache returned ({device_free} free + {} reserved)",
            bytes(block),
            bytes(b.reserved)
        ),
        Kind::Fragmentation => {
            let cap = if o.device_free.is_some_and(|f| f >= block) {
                format!("; the device had {device_free} free, so the process was also at a limit")
            } else {
                String::new()
            };
            format!(
                "fragmentation: {} are free inside segments, but the largest hole is {} and the request needs {}{cap}",
                bytes(free_inside),
                bytes(b.largest_free),
                bytes(block)
            )
        }
        Kind::Cap => format!(
            "a cap: the device had {device_free} free, but the process could not reserve {} more (a per-process memory fraction or a limit)",
            bytes(block)
        ),
        Kind::Full => format!(
            "full: live tensors hold {} of {} reserved, and the device had {device_free} free",
            bytes(b.allocated),
            bytes(b.reserved)
        ),
    };
    let mut sites: Vec<(StackId, (u64, u64))> = cx.live_by_site.into_iter().collect();
    sites.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
    let frame_of = |stack| frames::top_frame(frames, stack).map(|f| frames::describe(frames, f, true));
    let filled_by: Vec<Site> = sites
        .iter()
        .take(TOP_SITES)
        .map(|&(stack, (bytes, count))| Site {
            frame: frame_of(stack).unwrap_or_else(|| super::groups::NO_STACK.to_owned()),
            bytes,
            count,
            stack: Some(stack).filter(|&s| s != crate::model::NONE),
            frames: Vec::new(),
        })
        .collect();
    let advice = advice(kind, o, block, cx.expandable, filled_by.first(), b.allocated);
    OomReport {
        device: cx.device,
        event: o.event,
        requested_bytes: o.requested,
        rounded_bytes: block,
        device_free_bytes: o.device_free,
        allocated_bytes: b.allocated,
        reserved_bytes: b.reserved,
        reserved_unallocated_bytes: free_inside,
        largest_free_bytes: b.largest_free,
        pending_free_bytes: b.pending_free,
        fragmentation: b.fragmentation(),
        kind,
        verdict,
        frame: frame_of(cx.stack),
        stack: Some(cx.stack).filter(|&s| s != crate::model::NONE),
        frames: Vec::new(),
        action: cx.action,
        annotation: cx.annotation,
        filled_by,
        advice,
    }
}

fn advice(kind: Kind, o: &OomState, block: u64, expandable: bool, top: Option<&Site>, allocated: u64) -> Vec<String> {
    let b = &o.before;
    let mut v = Vec::new();
    let cut = |v: &mut Vec<String>| {
        if let Some(s) = top {
            v.push(format!(
                "cut the peak of the largest site: {} holds {} ({:.0}% of what is allocated) in {}",
                s.frame,
                units::bytes(s.bytes),
                super::groups::share(s.bytes, allocated),
                units::count(s.count, "allocation", "allocations")
            ));
        }
    };
    match kind {
        Kind::TooLarge => {
            v.push(format!(
                "the request itself is the problem: {} in one block; split or shard the tensor",
                units::bytes(block)
            ));
        }
        Kind::Fragmentation => fragmentation_advice(&mut v, b, block, expandable),
        Kind::Cap => {
            v.push(format!(
                "raise the process's limit (torch.cuda.set_per_process_memory_fraction) or free memory: the device had {} free",
                o.device_free.map_or("memory".to_owned(), units::bytes)
            ));
            cut(&mut v);
        }
        Kind::Full => cut(&mut v),
    }
    if b.pending_free >= block {
        v.push(format!(
            "{} are freed but pending on another stream: synchronize (or record_stream less) before the allocation",
            units::bytes(b.pending_free)
        ));
    }
    v
}

/// PyTorch refuses a `max_split_size_mb` of 20 or less at start-up (`kLargeBuffer`, 20 MiB: the
/// setting only concerns the blocks above it).
const MIN_MAX_SPLIT_MB: u64 = 21;

/// Where a fragmentation OOM's holes are, and what would remove them: each piece of advice
/// derived from the state before the OOM (segments entirely free or not, the holes' sizes,
/// expandable segments on or off) and valid for PyTorch's settings.
fn fragmentation_advice(v: &mut Vec<String>, b: &crate::allocator::Summary, block: u64, expandable: bool) {
    let bytes = units::bytes;
    let empty: Vec<&crate::allocator::SegmentMap> = b.segments.iter().filter(|m| m.blocks.is_empty()).collect();
    let empty_bytes: u64 = empty.iter().map(|m| m.segment.size).sum();
    let holding = b.segments.len() - empty.len();
    let held_holes = b.free().saturating_sub(empty_bytes);
    v.push(format!(
        "where the holes are: {} of the {} free sit inside {} that still hold live blocks (the largest hole {}); they go away only when the blocks around them are freed (allocating the long-lived tensors before the short-lived ones keeps them from forming)",
        bytes(held_holes),
        bytes(b.free()),
        units::count(holding as u64, "segment", "segments"),
        bytes(b.largest_free)
    ));
    if empty.is_empty() {
        v.push(format!(
            "torch.cuda.empty_cache() would not help: none of the {} is entirely free, and it returns only whole free segments (the allocator already returns those itself before it raises an OOM)",
            units::count(b.segments.len() as u64, "segment", "segments")
        ));
    } else {
        v.push(format!(
            "torch.cuda.empty_cache() before the large allocation returns the {} entirely free ({}), not the holes inside the others",
            units::count(empty.len() as u64, "segment", "segments"),
            bytes(empty_bytes)
        ));
    }
    if !expandable {
        v.push(
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: one segment per stream grows in place, so freed space at its end joins the next allocation instead of staying a hole in a fixed-size segment"
                .into(),
        );
    }
    let mb = block.div_ceil(1 << 20);
    if mb >= MIN_MAX_SPLIT_MB {
        v.push(format!(
            "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:{mb}: cached blocks of more than {mb} MiB are no longer split for smaller tensors, so a hole that large survives for this request"
        ));
    }
}

/// One line for `stats`: the request and the verdict.
pub fn one_line(r: &OomReport) -> String {
    format!("requested {}: {}", units::bytes(r.requested_bytes), r.verdict)
}

/// The text report of one OOM.
impl OomReport {
    /// `--stacks`: the whole stack that asked, and each filling site's.
    pub fn with_stacks<F: FrameSource>(&mut self, frames: &F) {
        self.frames = super::frames::full_stack(frames, self.stack);
        for s in &mut self.filled_by {
            s.frames = super::frames::full_stack(frames, s.stack);
        }
    }
}

pub fn render_text(out: &mut String, r: &OomReport, index: usize, of: usize) {
    let b = units::bytes;
    let _ = writeln!(
        out,
        "device {} — OOM {} of {} (event {}): tried to allocate {} (a {} block)",
        r.device,
        index + 1,
        of,
        units::thousands(r.event as u64),
        b(r.requested_bytes),
        b(r.rounded_bytes)
    );
    let row = |out: &mut String, label: &str, value: String| {
        let _ = writeln!(out, "  {label:<16}{value}");
    };
    if let Some(f) = &r.frame {
        row(out, "asked by", f.clone());
    }
    super::frames::render_stack(out, &r.frames, 18);
    if !r.annotation.is_empty() {
        row(out, "during", r.annotation.join(" › "));
    }
    row(
        out,
        "before it",
        format!(
            "allocated {} · reserved {} · reserved but unallocated {} · largest free block {} · pending frees {}",
            b(r.allocated_bytes),
            b(r.reserved_bytes),
            b(r.reserved_unallocated_bytes),
            b(r.largest_free_bytes),
            b(r.pending_free_bytes)
        ),
    );
    row(out, "device", format!("{} free", r.device_free_bytes.map_or("unknown".to_owned(), b)));
    row(out, "verdict", r.verdict.clone());
    if !r.filled_by.is_empty() {
        let after = if r.action < 0 {
            "before the first action".to_owned()
        } else {
            format!("after action {}", units::thousands(r.action as u64))
        };
        let _ = writeln!(out, "  what filled it (live {after}):");
        for s in &r.filled_by {
            let _ = writeln!(
                out,
                "    {:>10}  {:>7}  {}",
                b(s.bytes),
                units::thousands(s.count),
                super::groups::clip(&s.frame)
            );
            super::frames::render_stack(out, &s.frames, 25);
        }
    }
    if !r.advice.is_empty() {
        let _ = writeln!(out, "  advice:");
        for a in &r.advice {
            let _ = writeln!(out, "    - {a}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::rounded;

    #[test]
    fn requests_round_to_blocks() {
        assert_eq!(rounded(1), 512);
        assert_eq!(rounded(512), 512);
        assert_eq!(rounded(513), 1024);
        assert_eq!(rounded(64 << 20), 64 << 20);
    }
}
