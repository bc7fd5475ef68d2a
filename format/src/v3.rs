//! The archived types of format version 3, frozen: archives written in that format keep opening
//! through these types (upgraded to the current schema in memory on open). Never change the
//! types; only the conversions follow the schemas around them. Types version 3 shares with
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
}

/// The caching allocator's state over the device's trace (since version 3): saved states to
/// rebuild the segments and blocks after any event by undoing fewer than `every` events, and the
/// reserved and allocated bytes after each action.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct AllocatorSection {
    /// Raw trace events of the device.
    pub events: u32,
    /// State `j` is the one after undoing `j × every` events from the dump (0: none stored).
    pub every: u32,
    /// State `j` as `u64` words in one zstd chunk (layout in FORMAT.md).
    pub states: Vec<Chunk>,
    /// Reserved and allocated bytes right after each action, in chunks of `i64` delta-coded
    /// like `EventTable::time_us`.
    pub reserved: Vec<Chunk>,
    pub allocated: Vec<Chunk>,
}

impl From<crate::v2::Root> for Root {
    fn from(r: crate::v2::Root) -> Self {
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

impl From<crate::v2::Device> for Device {
    fn from(d: crate::v2::Device) -> Self {
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
            allocator: AllocatorSection::default(),
        }
    }
}
