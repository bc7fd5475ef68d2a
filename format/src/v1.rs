//! The archived types of format version 1, frozen: archives written by memviz 0.1 keep opening
//! through these types (see `memviz::archive::open`, which upgrades them to the current schema
//! in memory). Never change its bytes: what is defined here, or re-exported from v2 (itself
//! frozen), stays as memviz 0.1 wrote it.
//!
//! Hot data (what the viewer touches per frame or per hover: element columns, actions, totals,
//! checkpoints) is stored as plain little-endian vectors that are used in place from the mmap.
//! Cold data (the raw event table, tiles) is stored in zstd-compressed chunks that are
//! decompressed on demand, one chunk at a time.

use rkyv::{Archive, Deserialize, Serialize};

// Types version 2 did not change are version 1's own: version 2 keeps them byte for byte, so
// they are shared rather than copied, and an archive converts by moving them across.
pub use crate::v2::{Annotation, Checkpoints, Chunk, MinMax, Reserved, Source, Span, StackTable, TileLevel};

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
    pub segments: Vec<Segment>,
    pub blocks: Vec<Block>,
    pub annotations: Vec<Annotation>,
    /// `allocator_settings` as JSON text.
    pub allocator_settings: Option<String>,
    /// The snapshot was a legacy bare list of segments.
    pub legacy: bool,
    /// Keys the reader did not interpret, `("context.key", count)`, sorted.
    pub unknown_keys: Vec<(String, u64)>,
    /// One timeline per device with trace events or segments, ascending.
    pub devices: Vec<Device>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct FrameTable {
    pub name: Vec<u32>,
    pub filename: Vec<u32>,
    pub line: Vec<i64>,
}

/// Every trace event of every device, column by column, in chunks of `chunk_rows` rows.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct EventTable {
    pub len: u32,
    pub chunk_rows: u32,
    /// `u8` action codes (see FORMAT.md).
    pub action: Vec<Chunk>,
    pub addr: Vec<Chunk>,
    pub size: Vec<Chunk>,
    /// `i64` µs; within a chunk, the first value then wrapping differences.
    pub time_us: Vec<Chunk>,
    /// `u32` stack ids (`u32::MAX`: none).
    pub stack: Vec<Chunk>,
    /// Run-length columns: `(first event, value)`.
    pub stream: Vec<(u32, u64)>,
    pub compile_context: Vec<(u32, u32)>,
    pub user_metadata: Vec<(u32, u32)>,
    /// Sparse columns, sorted by event.
    pub other_action: Vec<(u32, u32)>,
    pub device_free: Vec<(u32, u64)>,
    pub forward_stack: Vec<(u32, u32)>,
    pub pool_id: Vec<(u32, (i64, i64))>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Segment {
    pub device: u32,
    pub address: u64,
    pub total_size: u64,
    pub allocated_size: u64,
    pub active_size: u64,
    pub requested_size: u64,
    pub stream: u64,
    pub segment_type: u32,
    pub pool_id: Option<(i64, i64)>,
    pub is_expandable: bool,
    pub stack: u32,
    pub blocks: (u32, u32),
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Block {
    pub address: u64,
    pub size: u64,
    pub requested_size: u64,
    /// 0 active_allocated, 1 active_pending_free, 2 inactive, 3 other (`state_str`).
    pub state: u8,
    pub state_str: u32,
    pub stack: u32,
}

/// The timeline of one device.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Device {
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
}

/// Element columns, indexed by element id.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Elements {
    pub addr: Vec<u64>,
    pub size: Vec<u64>,
    /// Action that pushed it; `u32::MAX`: live before the trace.
    pub start: Vec<u32>,
    /// Action that removed it; `u32::MAX`: never.
    pub end: Vec<u32>,
    /// 0 alloc, 1 free_only, 2 ghost.
    pub origin: Vec<u8>,
    /// Event index of the alloc / of the ending free; `u32::MAX`: none.
    pub alloc_event: Vec<u32>,
    pub free_event: Vec<u32>,
    /// Block index of a ghost; `u32::MAX` otherwise.
    pub block: Vec<u32>,
    /// Stack id that explains the element (its allocation site; `u32::MAX`: none): the alloc
    /// event's stack, a free_only's free event stack, or a ghost block's stack.
    pub stack: Vec<u32>,
    /// Position in push order; the live stack is sorted by it.
    pub slot: Vec<u32>,
}

/// The version-2 root with the same content (then upgraded on, `v2::Root` → the current one): every field carries over, the sections added in
/// version 2 start empty (no host trace, no tolerated counts, no fx keys, no `annotate`
/// labels, no `internal_metadata` or `category`, no `forward_frames` on segments and blocks).
impl From<Root> for crate::v2::Root {
    fn from(r: Root) -> Self {
        use crate::v2 as s;
        s::Root {
            source: r.source,
            strings: r.strings,
            frames: s::FrameTable { name: r.frames.name, filename: r.frames.filename, line: r.frames.line, fx: vec![] },
            stacks: r.stacks,
            events: s::EventTable {
                len: r.events.len,
                chunk_rows: r.events.chunk_rows,
                action: r.events.action,
                addr: r.events.addr,
                size: r.events.size,
                time_us: r.events.time_us,
                stack: r.events.stack,
                stream: r.events.stream,
                compile_context: r.events.compile_context,
                user_metadata: r.events.user_metadata,
                internal_metadata: vec![(0, u32::MAX)],
                category: vec![(0, u32::MAX)],
                other_action: r.events.other_action,
                device_free: r.events.device_free,
                forward_stack: r.events.forward_stack,
                pool_id: r.events.pool_id,
            },
            traces: r.traces,
            host_trace: (0, 0),
            segments: r
                .segments
                .into_iter()
                .map(|g| s::Segment {
                    device: g.device,
                    address: g.address,
                    total_size: g.total_size,
                    allocated_size: g.allocated_size,
                    active_size: g.active_size,
                    requested_size: g.requested_size,
                    stream: g.stream,
                    segment_type: g.segment_type,
                    pool_id: g.pool_id,
                    is_expandable: g.is_expandable,
                    stack: g.stack,
                    forward_stack: u32::MAX,
                    blocks: g.blocks,
                })
                .collect(),
            blocks: r
                .blocks
                .into_iter()
                .map(|b| s::Block {
                    address: b.address,
                    size: b.size,
                    requested_size: b.requested_size,
                    state: b.state,
                    state_str: b.state_str,
                    stack: b.stack,
                    forward_stack: u32::MAX,
                })
                .collect(),
            annotations: r.annotations,
            allocator_settings: r.allocator_settings,
            legacy: r.legacy,
            unknown_keys: r.unknown_keys,
            tolerated: vec![],
            devices: r.devices.into_iter().map(device).collect(),
        }
    }
}

fn device(d: Device) -> crate::v2::Device {
    use crate::v2 as s;
    let e = d.elements;
    s::Device {
        device: d.device,
        elements: s::Elements {
            addr: e.addr,
            size: e.size,
            start: e.start,
            end: e.end,
            origin: e.origin,
            alloc_event: e.alloc_event,
            free_event: e.free_event,
            block: e.block,
            stack: e.stack,
            slot: e.slot,
            annotated: vec![],
            annotation: vec![],
        },
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
    }
}
