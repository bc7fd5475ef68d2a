//! The archived types of format version 4, frozen: archives written in that format keep opening
//! through these types (upgraded to the current schema in memory on open). Never change the
//! types; only the conversions follow the schemas around them. Types version 4 shares with
//! version 2 are version 2's, re-exported.

use rkyv::{Archive, Deserialize, Serialize};

pub use crate::v2::{
    Annotation, ArchivedAnnotation, ArchivedBlock, ArchivedCheckpoints, ArchivedChunk, ArchivedElements,
    ArchivedEventTable, ArchivedFrameTable, ArchivedMinMax, ArchivedReserved, ArchivedSegment, ArchivedSource,
    ArchivedSpan, ArchivedStackTable, ArchivedTileLevel, Block, Checkpoints, Chunk, Elements, EventTable, FrameTable,
    MinMax, Reserved, Segment, Source, Span, StackTable, TileLevel,
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
}

/// The caching allocator's state over the device's trace (since version 3): saved states to
/// rebuild the segments and blocks after any event by undoing fewer than `every` events, and its
/// figures after each action (the per-action series, since version 4).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct AllocatorSection {
    /// Raw trace events of the device.
    pub events: u32,
    /// State `j` is the one after undoing `j × every` events from the dump (0: none stored).
    pub every: u32,
    /// State `j` as `u64` words in one zstd chunk (layout in FORMAT.md).
    pub states: Vec<Chunk>,
    /// Bytes of segments right after each action.
    pub reserved: Series,
    /// Bytes of live blocks (allocated or pending free) right after each action.
    pub allocated: Series,
    /// Requested bytes of live blocks (`allocated − requested`: rounding waste).
    pub requested: Series,
    /// Bytes of blocks freed but waiting on another stream.
    pub pending_free: Series,
    /// `reserved − allocated`: free bytes inside segments.
    pub unallocated: Series,
    /// The largest free block inside one segment.
    pub largest_free: Series,
    /// The number of segments.
    pub segments: Series,
    /// Reserved bytes of each private pool over the actions, ascending pool id.
    pub pools: Vec<PoolSeries>,
}

/// One value per action (since version 4): the values in chunks of `i64` delta-coded like
/// `EventTable::time_us`, and their min/max over buckets of actions, coarsening by 4 per level
/// like `Device::minimap`, for drawing a zoomed-out view without reading the values.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Series {
    pub chunks: Vec<Chunk>,
    pub levels: Vec<MinMax>,
}

/// The reserved bytes of one private pool as a step function of the action (since version 4):
/// `reserved[j]` holds right after action `actions[j]` up to the next; `actions[0]` is 0.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct PoolSeries {
    /// `segment_pool_id` of the pool.
    pub pool: (i64, i64),
    pub actions: Vec<u32>,
    pub reserved: Vec<u64>,
}

/// The Active Cached Segment Timeline (since version 4): segments stacked over the segment
/// actions with the element timeline's rules (FORMAT.md), with its own checkpoints and tiles.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct SegmentTimeline {
    /// Per segment: `stack` is the stack of its `segment_alloc` (or `segment_free`) event, for a
    /// segment of the dump its recorded stack; `block`, `annotated` and `annotation` are empty.
    pub elements: Elements,
    /// Segment id of each action.
    pub actions: Vec<u32>,
    pub initial: Vec<u32>,
    pub initial_total: u64,
    /// Reserved bytes right after each action.
    pub totals: Vec<u64>,
    pub peak_bytes: u64,
    /// First action at the peak, -1 for the initial state.
    pub peak_action: i64,
    pub checkpoints: Checkpoints,
    /// Level-of-detail tiles of segment ids, finest level first.
    pub tiles: Vec<TileLevel>,
}

impl From<crate::v3::Root> for Root {
    fn from(r: crate::v3::Root) -> Self {
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

/// A version-3 device: its reserved and allocated series keep their chunks (levels are not
/// derived: a zoomed-out view of them reads the chunks); the other series and the segment
/// timeline are empty ("re-index to see this").
impl From<crate::v3::Device> for Device {
    fn from(d: crate::v3::Device) -> Self {
        let a = d.allocator;
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
            allocator: AllocatorSection {
                events: a.events,
                every: a.every,
                states: a.states,
                reserved: Series { chunks: a.reserved, levels: Vec::new() },
                allocated: Series { chunks: a.allocated, levels: Vec::new() },
                ..AllocatorSection::default()
            },
            segment_timeline: SegmentTimeline::default(),
        }
    }
}
