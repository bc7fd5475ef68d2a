//! The archived types. Every field is documented in FORMAT.md; changing any of them means
//! bumping [`crate::FORMAT_VERSION`]. Types a version did not change are that version's own,
//! re-exported (`crate::v2`), so an older archive converts by moving them across.
//!
//! Hot data (what the viewer touches per frame or per hover: element columns, actions, totals,
//! checkpoints) is stored as plain little-endian vectors that are used in place from the mmap.
//! Cold data (the raw event table, tiles) is stored in zstd-compressed chunks that are
//! decompressed on demand, one chunk at a time.

use rkyv::{Archive, Deserialize, Serialize};

pub mod staged;

pub use crate::v2::{
    Annotation, ArchivedAnnotation, ArchivedBlock, ArchivedCheckpoints, ArchivedChunk, ArchivedElements,
    ArchivedEventTable, ArchivedFrameTable, ArchivedMinMax, ArchivedReserved, ArchivedSegment, ArchivedSource,
    ArchivedSpan, ArchivedStackTable, ArchivedTileLevel, Block, Checkpoints, Chunk, Elements, EventTable, FrameTable,
    MinMax, Reserved, Segment, Source, Span, StackTable, TileLevel,
};
pub use crate::v4::{
    AllocatorSection, ArchivedAllocatorSection, ArchivedPoolSeries, ArchivedSegmentTimeline, ArchivedSeries,
    PoolSeries, SegmentTimeline, Series,
};

/// The archive root.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Root {
    pub source: Source,
    /// Interned strings; every `*_str` / name field below indexes this.
    pub strings: Vec<String>,
    pub frames: FrameTable,
    pub stacks: StackTable,
    pub events: EventTable,
    /// Per device ordinal (index = `device_traces` position): its events, `[start, end)`.
    pub traces: Vec<(u32, u32)>,
    /// Events of `host_traces` (pinned host memory), `[start, end)`. Since version 2.
    pub host_trace: (u32, u32),
    pub segments: Vec<Segment>,
    pub blocks: Vec<Block>,
    pub annotations: Vec<Annotation>,
    /// `allocator_settings` as JSON text.
    pub allocator_settings: Option<String>,
    /// The snapshot was a legacy bare list of segments.
    pub legacy: bool,
    /// Keys the reader did not interpret, `("context.key", count)`, sorted.
    pub unknown_keys: Vec<(String, u64)>,
    /// Odd descriptive values the reader tolerated, `(kind, count)` in the reader's kind order
    /// (keys listed in FORMAT.md). Since version 2.
    pub tolerated: Vec<(String, u64)>,
    /// One timeline per device with trace events or segments, ascending.
    pub devices: Vec<Device>,
}

/// The timeline of one device.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Device {
    /// Device ordinal; `u32::MAX - 1` is the host (pinned memory, since version 2).
    pub device: u32,
    pub elements: Elements,
    /// Element id of each action.
    pub actions: Vec<u32>,
    /// `time_us` of the event behind each action (`i64::MIN`: none), for the wall-time axis;
    /// delta-coded chunks like the event table's `time_us`.
    pub action_time_us: Vec<Chunk>,
    /// Elements live before the first action, bottom first.
    pub initial: Vec<u32>,
    pub initial_total: u64,
    /// Live bytes right after each action.
    pub totals: Vec<u64>,
    pub peak_bytes: u64,
    /// First action at the peak, -1 for the initial state.
    pub peak_action: i64,
    /// Min/max of `totals` over buckets, coarsening by 4 per level (the minimap).
    pub minimap: Vec<MinMax>,
    pub checkpoints: Checkpoints,
    /// Level-of-detail tiles, finest level first.
    pub tiles: Vec<TileLevel>,
    /// Annotation spans of this device, by start time.
    pub spans: Vec<Span>,
    pub reserved: Reserved,
    /// The allocator's state over time. Since version 3.
    pub allocator: AllocatorSection,
    /// The Active Cached Segment Timeline. Since version 4.
    pub segment_timeline: SegmentTimeline,
    /// What a job's table of ranks and the default steps read, derived at index time so that
    /// they decompress nothing. Since version 5 (`None` in an upgraded older archive).
    pub summary: Option<Summary>,
}

/// A device's summary (since version 5): facts that otherwise take a pass over the event table
/// or the action times, stored so that `memviz ranks` over a thousand archives reads a few
/// hundred bytes of each.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Summary {
    /// `time_us` of the device's first event with a time (`i64::MIN`: none).
    pub trace_start_us: i64,
    /// Index within the device's trace of every `oom` event, ascending.
    pub oom_events: Vec<u32>,
    /// The highest reserved (segment) bytes over the trace, the initial ones included.
    pub reserved_peak: u64,
    /// Per span of `Device::spans` (same order): the actions it covers, `[first, end)` — those
    /// whose time `t` has `start_us ≤ t < end_us`.
    pub span_actions: Vec<(u32, u32)>,
    /// The default steps: the numbered span family with the most spans (at least 3), if any.
    pub steps: Option<Steps>,
}

/// The steps of one span family (since version 5).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Steps {
    /// The family: a span name with every run of digits replaced by `#`.
    pub family: String,
    /// The steps in start order (a span starting before the previous one ended is none).
    pub rows: Vec<StepRow>,
    /// The sites that keep memory step after step, largest first (at most 5).
    pub retaining: Vec<Retaining>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct StepRow {
    /// Index into `Device::spans`.
    pub span: u32,
    /// The step's actions are `start_action .. end_action`.
    pub start_action: u32,
    pub end_action: u32,
    /// Live bytes before the first action and after the last.
    pub total_start: u64,
    pub total_end: u64,
    /// The highest total inside (`total_start` without actions) and its first action
    /// (`u32::MAX`: none).
    pub peak_bytes: u64,
    pub peak_action: u32,
    /// The span ended before the trace's first event.
    pub before_trace: bool,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Retaining {
    /// Stack id of the allocation site (`u32::MAX`: none recorded).
    pub stack: u32,
    /// Bytes allocated in a step and still live when the next starts, per judged step.
    pub bytes_per_step: u64,
    /// In how many of the judged steps it kept memory.
    pub steps: u32,
}

impl From<crate::v4::Root> for Root {
    fn from(r: crate::v4::Root) -> Self {
        Root {
            source: r.source,
            strings: r.strings,
            frames: r.frames,
            stacks: r.stacks,
            events: r.events,
            traces: r.traces,
            host_trace: r.host_trace,
            segments: r.segments,
            blocks: r.blocks,
            annotations: r.annotations,
            allocator_settings: r.allocator_settings,
            legacy: r.legacy,
            unknown_keys: r.unknown_keys,
            tolerated: r.tolerated,
            devices: r.devices.into_iter().map(Device::from).collect(),
        }
    }
}

/// A version-4 device: everything but the summary, which readers derive when they need it.
impl From<crate::v4::Device> for Device {
    fn from(d: crate::v4::Device) -> Self {
        Device {
            device: d.device,
            elements: d.elements,
            actions: d.actions,
            action_time_us: d.action_time_us,
            initial: d.initial,
            initial_total: d.initial_total,
            totals: d.totals,
            peak_bytes: d.peak_bytes,
            peak_action: d.peak_action,
            minimap: d.minimap,
            checkpoints: d.checkpoints,
            tiles: d.tiles,
            spans: d.spans,
            reserved: d.reserved,
            allocator: d.allocator,
            segment_timeline: d.segment_timeline,
            summary: None,
        }
    }
}
