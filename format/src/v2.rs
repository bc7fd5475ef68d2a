//! The archived types of format version 2, frozen: archives written in that format keep opening
//! through these types (upgraded to the current schema in memory on open). Never change the
//! types; only the conversion at the end follows the current schema.
//!
//! Hot data (what the viewer touches per frame or per hover: element columns, actions, totals,
//! checkpoints) is stored as plain little-endian vectors that are used in place from the mmap.
//! Cold data (the raw event table, tiles) is stored in zstd-compressed chunks that are
//! decompressed on demand, one chunk at a time.

use rkyv::{Archive, Deserialize, Serialize};

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

/// Where the archive came from.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Source {
    /// File name of the snapshot (no directories).
    pub name: String,
    /// How it was stored, e.g. `pickle protocol 4, gzip`.
    pub format: String,
    pub file_bytes: u64,
    pub decoded_bytes: u64,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct FrameTable {
    pub name: Vec<u32>,
    pub filename: Vec<u32>,
    /// `i64::MIN`: no usable line (shown as `?`).
    pub line: Vec<i64>,
    /// `(frame, [fx_node_op, fx_node_name, fx_node_target, fx_original_trace, fx_node_info])`
    /// string ids (`u32::MAX`: absent) of frames that carry fx keys, sorted by frame. Since
    /// version 2.
    pub fx: Vec<(u32, [u32; 5])>,
}

/// Stack `i` is `frames[offsets[i]..offsets[i + 1]]`, innermost frame first.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct StackTable {
    pub offsets: Vec<u32>,
    pub frames: Vec<u32>,
}

/// One zstd frame holding `rows` values of a column, little-endian.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Chunk {
    pub rows: u32,
    pub data: Vec<u8>,
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
    /// Since version 2.
    pub internal_metadata: Vec<(u32, u32)>,
    /// `category` of re-exported snapshots. Since version 2.
    pub category: Vec<(u32, u32)>,
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
    /// `forward_frames` stack id (`u32::MAX`: none). Since version 2.
    pub forward_stack: u32,
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
    /// Since version 2.
    pub forward_stack: u32,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Annotation {
    pub name: u32,
    /// 0 START, 1 END, 2 other (`stage_str`).
    pub stage: u8,
    pub stage_str: u32,
    pub device: i64,
    pub time_us: i64,
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
    /// Elements labelled by an `annotate` event, ascending, and the string id of each one's
    /// last label. Since version 2.
    pub annotated: Vec<u32>,
    pub annotation: Vec<u32>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct MinMax {
    pub actions_per_bucket: u64,
    pub min: Vec<u64>,
    pub max: Vec<u64>,
}

/// The live stack before action `j * every`: `ids[starts[j]..starts[j + 1]]`, bottom first.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Checkpoints {
    pub every: u32,
    pub starts: Vec<u32>,
    pub ids: Vec<u32>,
}

/// One level of the tile pyramid: each column covers `2^level` actions.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct TileLevel {
    pub level: u32,
    pub columns: u32,
    /// The action each column shows: the one with the highest total inside it.
    pub sample: Vec<u32>,
    /// `ceil(columns / TILE_W)` tiles, left to right.
    pub tiles: Vec<Chunk>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Span {
    pub name: u32,
    pub start_us: i64,
    /// `i64::MIN`: never ended.
    pub end_us: i64,
    pub depth: u32,
}

/// Reserved (segment) memory over time: `initial`, then `bytes[i]` from `time_us[i]` on.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Reserved {
    pub initial: u64,
    pub time_us: Vec<i64>,
    pub bytes: Vec<u64>,
}
