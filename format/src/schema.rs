//! The archived types. Every field is documented in FORMAT.md; changing any of them means
//! bumping [`crate::FORMAT_VERSION`]. Types a version did not change are that version's own,
//! re-exported (`crate::v2`), so an older archive converts by moving them across.
//!
//! Hot data (what the viewer touches per frame or per hover: element columns, actions, totals,
//! checkpoints) is stored as plain little-endian vectors that are used in place from the mmap.
//! Cold data (the raw event table, tiles) is stored in zstd-compressed chunks that are
//! decompressed on demand, one chunk at a time.

use rkyv::{Archive, Deserialize, Serialize};

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
pub use crate::v5::{
    ArchivedRetaining, ArchivedStepRow, ArchivedSteps, ArchivedSummary, Retaining, StepRow, Steps, Summary,
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
    /// The colour keys (allocation sites) of the coarse tile levels' texels, so that the first
    /// frame reads the tiles alone, never the sites of the elements they show. Since version 7
    /// (empty in an upgraded older archive).
    pub tile_keys: Vec<TileKeys>,
}

/// The colour keys of one tile level's texels (since version 7): tile `i`'s chunk decompresses
/// to `TILE_W × TILE_H` `u32`s laid out as the tile's texels, each the texel's element's stack id
/// (`Elements::stack`, `u32::MAX` where it has none), `u32::MAX − 1` where the texel shows no
/// element (empty, or the summarised band).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct TileKeys {
    /// The tile level's `level` (ℓ) in `Device::tiles`.
    pub level: u32,
    /// One chunk per tile of that level, left to right.
    pub tiles: Vec<Chunk>,
}

impl From<crate::v5::Root> for Root {
    fn from(r: crate::v5::Root) -> Self {
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

/// A version-5 device: everything but the tiles' keys, which readers make from the sites.
impl From<crate::v5::Device> for Device {
    fn from(d: crate::v5::Device) -> Self {
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
            summary: d.summary,
            tile_keys: Vec::new(),
        }
    }
}
