//! The snapshot model: plain columnar data, no I/O.
//!
//! A [`Snapshot`] is what every reader (pickle, JSON) produces and what layout, analysis and the
//! archive consume. It mirrors PyTorch's `torch.cuda.memory._snapshot()` schema, but flattened:
//!
//! ```text
//!   strings  ──┐            one copy of every distinct string
//!   frames   ──┤ interned   (name, filename, line) → FrameId
//!   stacks   ──┘            [FrameId] → StackId (innermost frame first)
//!   events                  one column per field, all devices back to back
//!   devices                 per device ordinal: the range of `events` holding its trace
//!   segments / blocks       the allocator state at dump time
//!   annotations             record_function START / END markers
//! ```
//!
//! Invariants: ids index their tables; `NONE` sentinels mark absent optional values; every
//! device's trace is one contiguous range of `events`, in trace order.

mod category;
mod events;
mod intern;

mod device;
mod ids;
mod job;
mod tolerated;

pub use category::Category;
pub use device::{DeviceId, pick_devices};
pub use events::{Action, EventRow, EventValues, Events, RowValues, Runs, is_block_event};
pub use ids::{ActionIdx, DeviceIdx, ElementId, EventIdx};
pub use intern::{Frame, FrameInterner, FxInfo, Stacks, Strings};
pub use job::{COMPRESSED_SUFFIXES, Job, RankFile, SNAPSHOT_SUFFIXES, rank_in_name, ranked, snapshot_stem};
pub use tolerated::{Oddity, Tolerated};

/// Index into [`Strings`].
pub type StrId = u32;
/// Index into `Snapshot::frames`.
pub type FrameId = u32;
/// Index into [`Stacks`].
pub type StackId = u32;

/// Marks an absent optional id (no stack captured, no compile context, ...).
pub const NONE: u32 = u32::MAX;
/// Marks an event without `time_us`.
pub const NO_TIME: i64 = i64::MIN;
/// Marks a frame whose `line` was missing, negative or out of range (shown as `?`).
pub const NO_LINE: i64 = i64::MIN;

/// One whole snapshot, every device.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    pub strings: Strings,
    pub frames: Vec<Frame>,
    pub stacks: Stacks,
    pub events: Events,
    /// Index = device ordinal in `device_traces`; each entry is a range of `events`.
    pub traces: Vec<std::ops::Range<u32>>,
    /// `host_traces` (pinned host memory): the events of the [`DeviceId::HOST`] device.
    pub host_trace: std::ops::Range<u32>,
    pub segments: Vec<Segment>,
    pub blocks: Vec<Block>,
    pub annotations: Vec<Annotation>,
    /// `allocator_settings` as written by PyTorch (keys sorted).
    pub allocator_settings: Option<serde_json::Value>,
    /// True for a legacy snapshot that was a bare list of segments.
    pub legacy: bool,
    /// Keys we do not interpret, by context (`"event.foo"`), with how often they appeared.
    pub unknown_keys: std::collections::BTreeMap<String, u64>,
    /// Descriptive values that were odd and read anyway (the reading policy), by kind.
    pub tolerated: Tolerated,
}

/// A CUDA caching-allocator segment at dump time.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub device: DeviceId,
    pub address: u64,
    pub total_size: u64,
    pub allocated_size: u64,
    pub active_size: u64,
    pub requested_size: u64,
    pub stream: u64,
    pub segment_type: StrId,
    pub pool_id: Option<(i64, i64)>,
    pub is_expandable: bool,
    pub stack: StackId,
    /// `forward_frames` of the segment, or [`NONE`].
    pub forward_stack: StackId,
    /// Range of `Snapshot::blocks`.
    pub blocks: std::ops::Range<u32>,
}

/// A block inside a segment. `address` is resolved (running sum when the pickle had none).
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub address: u64,
    pub size: u64,
    pub requested_size: u64,
    pub state: BlockState,
    pub stack: StackId,
    /// `forward_frames` of the block, or [`NONE`].
    pub forward_stack: StackId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockState {
    ActiveAllocated,
    ActivePendingFree,
    Inactive,
    Other(StrId),
}

/// A `record_function` marker.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    pub name: StrId,
    pub stage: Stage,
    pub device: i64,
    pub time_us: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Start,
    End,
    Other(StrId),
}

impl Snapshot {
    /// Devices that have trace events or segments, ascending; the host (pinned memory) last
    /// (SPEC §3).
    pub fn device_ids(&self) -> Vec<DeviceId> {
        let mut ids: Vec<DeviceId> =
            (0..self.traces.len() as u32).filter(|&d| !self.traces[d as usize].is_empty()).map(DeviceId).collect();
        if !self.host_trace.is_empty() {
            ids.push(DeviceId::HOST);
        }
        ids.extend(self.segments.iter().map(|s| s.device));
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The event range of one device (empty when the device has no trace).
    pub fn trace(&self, device: DeviceId) -> std::ops::Range<usize> {
        let r = if device == DeviceId::HOST { Some(&self.host_trace) } else { self.traces.get(device.0 as usize) };
        r.map_or(0..0, |r| r.start as usize..r.end as usize)
    }

    /// Segments of one device, in snapshot order.
    pub fn device_segments(&self, device: DeviceId) -> impl Iterator<Item = &Segment> {
        self.segments.iter().filter(move |s| s.device == device)
    }

    pub fn segment_blocks(&self, segment: &Segment) -> &[Block] {
        &self.blocks[segment.blocks.start as usize..segment.blocks.end as usize]
    }

    /// Frames of a stack, innermost first; empty for `NONE`.
    pub fn stack_frames(&self, stack: StackId) -> impl Iterator<Item = &Frame> {
        self.stacks.get(stack).iter().map(|&f| &self.frames[f as usize])
    }

    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(id)
    }

    /// The earliest `time_us` of any event (µs since the Unix epoch): what every printed time
    /// counts from.
    pub fn start_time_us(&self) -> Option<i64> {
        assert!(self.events.holds_values(), "the start time of a model whose rows an index read kept elsewhere");
        self.events.time_us.iter().copied().filter(|&t| t != NO_TIME).min()
    }

    /// Total number of trace events over all devices (the host included).
    pub fn event_count(&self) -> usize {
        self.traces.iter().chain([&self.host_trace]).map(|r| (r.end - r.start) as usize).sum()
    }
}
