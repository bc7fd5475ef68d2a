//! The snapshot schema, shared by the pickle and JSON readers.
//!
//! Readers walk their own syntax and hand each `key: value` of a dict to one of the `set_*`
//! functions below as a [`Field`] and a [`Scalar`]. Containers that the schema nests (frame
//! lists, blocks, pairs) are turned into ids or pairs by the reader first. Type checks and their
//! error messages live here once, so both readers accept and reject exactly the same snapshots.

pub mod builder;

use crate::model::{
    Action, Annotation, BlockState, DeviceId, EventRow, FxInfo, NO_LINE, NO_TIME, NONE, Oddity, StackId, Stage, StrId,
    Strings, Tolerated,
};

/// A dict key the schema knows. Keys are matched by bytes once per distinct string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Field {
    Unknown,
    Action,
    Addr,
    Size,
    Stream,
    TimeUs,
    Frames,
    CompileContext,
    UserMetadata,
    PoolId,
    ForwardFrames,
    DeviceFree,
    Name,
    Filename,
    Line,
    Device,
    Address,
    TotalSize,
    AllocatedSize,
    ActiveSize,
    RequestedSize,
    SegmentType,
    SegmentPoolId,
    IsExpandable,
    Blocks,
    State,
    Stage,
    Segments,
    DeviceTraces,
    AllocatorSettings,
    ExternalAnnotations,
    InternalMetadata,
    HostSegments,
    HostTraces,
    FxNodeOp,
    FxNodeName,
    FxNodeTarget,
    FxOriginalTrace,
    FxNodeInfo,
    Category,
    /// Keys other viewers add to a re-export (`version`, `idx`, `ghost`, `max_allocated_mem`,
    /// `categories`, `segment_version`, `block_version`): derived, read and skipped.
    Derived,
    /// `annotations` of a re-export: the same records as `external_annotations`.
    Annotations,
}

impl Field {
    pub fn of(key: &[u8]) -> Field {
        match key {
            b"action" => Field::Action,
            b"addr" => Field::Addr,
            b"size" => Field::Size,
            b"stream" => Field::Stream,
            b"time_us" => Field::TimeUs,
            b"frames" => Field::Frames,
            b"compile_context" => Field::CompileContext,
            b"user_metadata" => Field::UserMetadata,
            b"pool_id" => Field::PoolId,
            b"forward_frames" => Field::ForwardFrames,
            b"device_free" => Field::DeviceFree,
            b"name" => Field::Name,
            b"filename" => Field::Filename,
            b"line" => Field::Line,
            b"device" => Field::Device,
            b"address" => Field::Address,
            b"total_size" => Field::TotalSize,
            b"allocated_size" => Field::AllocatedSize,
            b"active_size" => Field::ActiveSize,
            b"requested_size" => Field::RequestedSize,
            b"segment_type" => Field::SegmentType,
            b"segment_pool_id" => Field::SegmentPoolId,
            b"is_expandable" => Field::IsExpandable,
            b"blocks" => Field::Blocks,
            b"state" => Field::State,
            b"stage" => Field::Stage,
            b"segments" => Field::Segments,
            b"device_traces" => Field::DeviceTraces,
            b"allocator_settings" => Field::AllocatorSettings,
            b"external_annotations" => Field::ExternalAnnotations,
            b"internal_metadata" => Field::InternalMetadata,
            b"host_segments" => Field::HostSegments,
            b"host_traces" => Field::HostTraces,
            b"fx_node_op" => Field::FxNodeOp,
            b"fx_node_name" => Field::FxNodeName,
            b"fx_node_target" => Field::FxNodeTarget,
            b"fx_original_trace" => Field::FxOriginalTrace,
            b"fx_node_info" => Field::FxNodeInfo,
            b"category" => Field::Category,
            b"version" | b"idx" | b"ghost" | b"max_allocated_mem" | b"categories" | b"segment_version"
            | b"block_version" => Field::Derived,
            b"annotations" => Field::Annotations,
            _ => Field::Unknown,
        }
    }

    /// A dict holding one of these keys is a trace event.
    pub fn marks_event(self) -> bool {
        self == Field::Action
    }

    /// Keys of a frame dict `{name, filename, line}` and its fx keys.
    pub fn is_frame_key(self) -> bool {
        matches!(self, Field::Name | Field::Filename | Field::Line) || self.is_fx_key()
    }

    pub fn is_fx_key(self) -> bool {
        matches!(
            self,
            Field::FxNodeOp | Field::FxNodeName | Field::FxNodeTarget | Field::FxOriginalTrace | Field::FxNodeInfo
        )
    }

    /// Free-form descriptive text: a reader turns any value here that is not a string or None
    /// into compact JSON text ([`Scalar::Text`]).
    pub fn is_text(self) -> bool {
        matches!(self, Field::CompileContext | Field::UserMetadata | Field::InternalMetadata | Field::Category)
            || self.is_fx_key()
    }
}

/// A dict value reduced to what the schema can use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    None,
    Bool(bool),
    /// Any integer up to 128 bits (pickle LONG1/LONG4 of up to 16 bytes).
    Int(i128),
    /// An integer wider than 128 bits: valid pickle, never a valid snapshot number.
    HugeInt,
    Float(f64),
    Str(StrId),
    /// A frame list, already interned.
    Stack(StackId),
    /// A two-element list or tuple of integers (`pool_id`).
    Pair(i128, i128),
    /// A dict, list or number under a text field ([`Field::is_text`]), as compact JSON text.
    Text(StrId),
    /// Anything else, by its type name (`"dict"`, `"list"`, ...).
    Other(&'static str),
}

impl Scalar {
    pub fn type_name(&self) -> &'static str {
        match self {
            Scalar::None => "None",
            Scalar::Bool(_) => "bool",
            Scalar::Int(_) => "int",
            Scalar::HugeInt => "an integer wider than 128 bits",
            Scalar::Float(_) => "float",
            Scalar::Str(_) => "str",
            Scalar::Stack(_) => "list of frames",
            Scalar::Pair(..) => "pair",
            Scalar::Text(_) => "JSON text",
            Scalar::Other(t) => t,
        }
    }
}

/// A value of the wrong type (or out of range) under a known key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("key `{key}` of a {context}: expected {expected}, found {found}")]
pub struct SchemaError {
    pub context: &'static str,
    pub key: &'static str,
    pub expected: &'static str,
    pub found: &'static str,
}

fn err(context: &'static str, key: &'static str, expected: &'static str, v: Scalar) -> SchemaError {
    SchemaError { context, key, expected, found: v.type_name() }
}

// ---- strict: what the layout needs --------------------------------------------------------

fn u64_of(context: &'static str, key: &'static str, v: Scalar) -> Result<u64, SchemaError> {
    match v {
        Scalar::Int(i) if (0..=u64::MAX as i128).contains(&i) => Ok(i as u64),
        Scalar::Int(_) => {
            Err(SchemaError { context, key, expected: "an unsigned 64-bit integer", found: "an out-of-range int" })
        }
        v => Err(err(context, key, "an unsigned 64-bit integer", v)),
    }
}

fn i64_of(context: &'static str, key: &'static str, v: Scalar) -> Result<i64, SchemaError> {
    match v {
        Scalar::Int(i) => i64::try_from(i).map_err(|_| SchemaError {
            context,
            key,
            expected: "a 64-bit integer",
            found: "an out-of-range int",
        }),
        v => Err(err(context, key, "a 64-bit integer", v)),
    }
}

/// A string the layout reads (`action`, a block's `state`).
fn strict_str(context: &'static str, key: &'static str, v: Scalar) -> Result<StrId, SchemaError> {
    match v {
        Scalar::Str(s) => Ok(s),
        v => Err(err(context, key, "a string", v)),
    }
}

// ---- tolerant: descriptive fields degrade and count ---------------------------------------

/// A descriptive value of the wrong type: counted, and read as `default`.
fn ignored<T>(tol: &mut Tolerated, default: T) -> T {
    tol.add(Oddity::WrongTypeIgnored);
    default
}

/// A descriptive integer (`stream`, a segment's summary sizes): anything else is ignored.
fn lenient_u64(v: Scalar, tol: &mut Tolerated) -> Option<u64> {
    match v {
        // Streams are `cudaStream_t` handles written as Python ints; keep their 64 bits.
        Scalar::Int(i) if (i64::MIN as i128..=u64::MAX as i128).contains(&i) => Some(i as u64),
        Scalar::None => None,
        Scalar::Bool(b) => Some(b as u64),
        _ => ignored(tol, None),
    }
}

/// A time in µs: floats are truncated, anything that is not a number means "no time".
fn time_of(v: Scalar, tol: &mut Tolerated) -> i64 {
    match v {
        Scalar::Int(i) => match i64::try_from(i) {
            Ok(t) if t != NO_TIME => t,
            _ => {
                tol.add(Oddity::TimeNotNumber);
                NO_TIME
            }
        },
        Scalar::Float(f) if f.is_finite() && f.abs() < 9.2e18 => {
            tol.add(Oddity::FloatTime);
            f.trunc() as i64
        }
        Scalar::None => NO_TIME,
        _ => {
            tol.add(Oddity::TimeNotNumber);
            NO_TIME
        }
    }
}

/// Descriptive text: strings as they are, [`Scalar::Text`] (JSON of a dict, list or number)
/// counted, anything else ignored.
fn text_of(v: Scalar, tol: &mut Tolerated) -> StrId {
    match v {
        Scalar::Str(s) => s,
        Scalar::None => NONE,
        Scalar::Text(s) => {
            tol.add(Oddity::MetadataAsJson);
            s
        }
        _ => ignored(tol, NONE),
    }
}

/// A descriptive string that is not free-form (`segment_type`, an annotation's `name`).
fn lenient_str(v: Scalar, tol: &mut Tolerated) -> StrId {
    match v {
        Scalar::Str(s) => s,
        Scalar::None => NONE,
        _ => ignored(tol, NONE),
    }
}

fn stack_of(v: Scalar, tol: &mut Tolerated) -> StackId {
    match v {
        Scalar::Stack(s) => s,
        Scalar::None => NONE,
        _ => ignored(tol, NONE),
    }
}

fn pair_of(v: Scalar, tol: &mut Tolerated) -> Option<(i64, i64)> {
    match v {
        Scalar::Pair(a, b) => match (i64::try_from(a), i64::try_from(b)) {
            (Ok(a), Ok(b)) => Some((a, b)),
            _ => ignored(tol, None),
        },
        Scalar::None => None,
        _ => ignored(tol, None),
    }
}

/// Applies one key of a trace event. Returns `Ok(false)` for a key the event does not use.
pub fn set_event(
    row: &mut EventRow,
    field: Field,
    v: Scalar,
    strings: &Strings,
    tol: &mut Tolerated,
) -> Result<bool, SchemaError> {
    const C: &str = "trace event";
    let done = match v {
        Scalar::Int(i) => i64::try_from(i).is_ok_and(|i| set_event_int(row, field, i)),
        Scalar::Str(s) => set_event_str(row, field, s, || Action::from_name(strings.get(s).as_bytes())),
        _ => false,
    };
    if done {
        return Ok(true);
    }
    match field {
        Field::Action => {
            let s = strict_str(C, "action", v)?;
            row.action = Action::from_name(strings.get(s).as_bytes());
            row.other_action = s;
        }
        Field::Addr => row.addr = Some(u64_of(C, "addr", v)?),
        Field::Size => row.size = Some(u64_of(C, "size", v)?),
        Field::Stream => row.stream = lenient_u64(v, tol).unwrap_or(0),
        Field::TimeUs => row.time_us = time_of(v, tol),
        Field::Frames => row.stack = stack_of(v, tol),
        Field::ForwardFrames => row.forward_stack = stack_of(v, tol),
        Field::CompileContext => row.compile_context = text_of(v, tol),
        Field::UserMetadata => row.user_metadata = text_of(v, tol),
        Field::InternalMetadata => row.internal_metadata = text_of(v, tol),
        Field::Category => row.category = text_of(v, tol),
        Field::DeviceFree => row.device_free = lenient_u64(v, tol),
        Field::PoolId => row.pool_id = pair_of(v, tol),
        // MemoryViz adds these to the entries it turned into elements.
        Field::Derived | Field::Annotations | Field::SegmentPoolId => {}
        _ => return Ok(false),
    }
    Ok(true)
}

/// The common case of [`set_event`], an integer under an integer key, without building a
/// [`Scalar`]. `false` leaves the key to [`set_event`] (other keys, negative sizes).
#[inline]
pub fn set_event_int(row: &mut EventRow, field: Field, i: i64) -> bool {
    match field {
        Field::Addr if i >= 0 => row.addr = Some(i as u64),
        Field::Size if i >= 0 => row.size = Some(i as u64),
        Field::Stream => row.stream = i as u64,
        Field::TimeUs if i != NO_TIME => row.time_us = i,
        Field::DeviceFree if i >= 0 => row.device_free = Some(i as u64),
        _ => return false,
    }
    true
}

/// The common case of [`set_event`] for a string; `action` names the action of `s` (a reader
/// may cache it per string). `false` leaves the key to [`set_event`].
#[inline]
pub fn set_event_str(row: &mut EventRow, field: Field, s: StrId, action: impl FnOnce() -> Action) -> bool {
    match field {
        Field::Action => {
            row.action = action();
            row.other_action = s;
        }
        Field::CompileContext => row.compile_context = s,
        Field::UserMetadata => row.user_metadata = s,
        Field::InternalMetadata => row.internal_metadata = s,
        Field::Category => row.category = s,
        _ => return false,
    }
    true
}

/// Checks that an event has what its action needs.
pub fn finish_event(row: &EventRow, tol: &mut Tolerated) -> Result<(), SchemaError> {
    let missing = |key| SchemaError { context: "trace event", key, expected: "a value", found: "nothing (missing)" };
    if row.other_action == NONE {
        return Err(missing("action"));
    }
    let needs_addr = matches!(row.action, Action::Alloc | Action::FreeRequested | Action::FreeCompleted | Action::Free);
    if needs_addr && row.addr.is_none() {
        return Err(missing("addr"));
    }
    if needs_addr && row.size.is_none() {
        return Err(missing("size"));
    }
    if row.action == Action::Free {
        tol.add(Oddity::MergedFree);
    }
    Ok(())
}

/// A frame dict being read. `odd` collects what was tolerated; the builder counts it once per
/// distinct frame, so a frame shared through the pickle memo and the same frame repeated in
/// JSON count alike.
#[derive(Debug, Default, Clone, Copy)]
pub struct FrameRow {
    pub name: Option<StrId>,
    pub filename: Option<StrId>,
    pub line: i64,
    pub fx: FxInfo,
    pub odd: [Option<Oddity>; 3],
}

impl FrameRow {
    pub fn new() -> FrameRow {
        FrameRow { line: NO_LINE, ..FrameRow::default() }
    }
}

/// Reads one key of a frame. Nothing here is fatal: a frame is descriptive.
pub fn set_frame(row: &mut FrameRow, field: Field, v: Scalar) -> bool {
    let name = |v: Scalar, odd: Oddity, slot: &mut Option<Oddity>| match v {
        Scalar::Str(s) => s,
        _ => {
            *slot = Some(odd);
            NONE
        }
    };
    match field {
        Field::Name => row.name = Some(name(v, Oddity::NameNotStr, &mut row.odd[0])),
        Field::Filename => row.filename = Some(name(v, Oddity::FilenameNotStr, &mut row.odd[1])),
        Field::Line => {
            let (line, odd) = match v {
                Scalar::Int(i) if (0..=i64::MAX as i128).contains(&i) => (i as i64, None),
                Scalar::Int(i) if i < 0 => (NO_LINE, Some(Oddity::LineNegative)),
                Scalar::Int(_) | Scalar::HugeInt => (NO_LINE, Some(Oddity::LineOutOfRange)),
                Scalar::None => (NO_LINE, Some(Oddity::LineNone)),
                Scalar::Float(f) if (0.0..9.2e18).contains(&f) => (f as i64, Some(Oddity::LineNotInt)),
                _ => (NO_LINE, Some(Oddity::LineNotInt)),
            };
            row.line = line;
            row.odd[2] = odd;
        }
        Field::FxNodeOp | Field::FxNodeName | Field::FxNodeTarget | Field::FxOriginalTrace | Field::FxNodeInfo => {
            let text = match v {
                Scalar::Str(s) | Scalar::Text(s) => s,
                _ => NONE,
            };
            match field {
                Field::FxNodeOp => row.fx.node_op = text,
                Field::FxNodeName => row.fx.node_name = text,
                Field::FxNodeTarget => row.fx.node_target = text,
                Field::FxOriginalTrace => row.fx.original_trace = text,
                _ => row.fx.node_info = text,
            }
        }
        _ => return false,
    }
    true
}

/// A segment dict being read; its blocks are collected by the reader.
#[derive(Debug, Clone)]
pub struct SegmentRow {
    pub device: DeviceId,
    pub address: Option<u64>,
    pub total_size: Option<u64>,
    pub allocated_size: u64,
    pub active_size: u64,
    pub requested_size: u64,
    pub stream: u64,
    pub segment_type: StrId,
    pub pool_id: Option<(i64, i64)>,
    pub is_expandable: bool,
    pub stack: StackId,
    pub forward_stack: StackId,
}

impl Default for SegmentRow {
    fn default() -> Self {
        SegmentRow {
            device: DeviceId(0),
            address: None,
            total_size: None,
            allocated_size: 0,
            active_size: 0,
            requested_size: 0,
            stream: 0,
            segment_type: NONE,
            pool_id: None,
            is_expandable: false,
            stack: NONE,
            forward_stack: NONE,
        }
    }
}

pub fn set_segment(row: &mut SegmentRow, field: Field, v: Scalar, tol: &mut Tolerated) -> Result<bool, SchemaError> {
    const C: &str = "segment";
    match field {
        Field::Device => {
            let d = i64_of(C, "device", v)?;
            // Pinned host segments say −1; the reader of `host_segments` sets the device itself.
            row.device = match u32::try_from(d) {
                Ok(d) if d < DeviceId::HOST.0 => DeviceId(d),
                _ if d == -1 => DeviceId::HOST,
                _ => {
                    return Err(SchemaError {
                        context: C,
                        key: "device",
                        expected: "a device ordinal",
                        found: "an out-of-range int",
                    });
                }
            };
        }
        Field::Address => row.address = Some(u64_of(C, "address", v)?),
        Field::TotalSize => row.total_size = Some(u64_of(C, "total_size", v)?),
        Field::AllocatedSize => row.allocated_size = lenient_u64(v, tol).unwrap_or(0),
        Field::ActiveSize => row.active_size = lenient_u64(v, tol).unwrap_or(0),
        Field::RequestedSize => row.requested_size = lenient_u64(v, tol).unwrap_or(0),
        Field::Stream => row.stream = lenient_u64(v, tol).unwrap_or(0),
        Field::SegmentType => row.segment_type = lenient_str(v, tol),
        Field::SegmentPoolId => row.pool_id = pair_of(v, tol),
        Field::IsExpandable => {
            row.is_expandable = match v {
                Scalar::Bool(b) => b,
                Scalar::Int(i) => i != 0,
                Scalar::None => false,
                _ => ignored(tol, false),
            }
        }
        Field::Frames => row.stack = stack_of(v, tol),
        Field::ForwardFrames => row.forward_stack = stack_of(v, tol),
        Field::Derived => {}
        _ => return Ok(false),
    }
    Ok(true)
}

/// The segment's address, which the layout needs.
pub fn finish_segment(row: &SegmentRow) -> Result<u64, SchemaError> {
    row.address.ok_or(SchemaError {
        context: "segment",
        key: "address",
        expected: "a value",
        found: "nothing (missing)",
    })
}

/// A block dict being read.
#[derive(Debug, Clone)]
pub struct BlockRow {
    pub address: Option<u64>,
    pub size: Option<u64>,
    pub requested_size: Option<u64>,
    pub state: Option<BlockState>,
    pub stack: StackId,
    pub forward_stack: StackId,
}

impl Default for BlockRow {
    fn default() -> Self {
        BlockRow { address: None, size: None, requested_size: None, state: None, stack: NONE, forward_stack: NONE }
    }
}

pub fn set_block(
    row: &mut BlockRow,
    field: Field,
    v: Scalar,
    strings: &Strings,
    tol: &mut Tolerated,
) -> Result<bool, SchemaError> {
    const C: &str = "block";
    match field {
        Field::Address => row.address = Some(u64_of(C, "address", v)?),
        // MemoryViz re-exports name a block's address `addr`.
        Field::Addr => {
            let a = u64_of(C, "addr", v)?;
            row.address.get_or_insert(a);
        }
        Field::Size => row.size = Some(u64_of(C, "size", v)?),
        Field::RequestedSize => {
            row.requested_size = if v == Scalar::None { None } else { Some(u64_of(C, "requested_size", v)?) }
        }
        Field::State => {
            let s = strict_str(C, "state", v)?;
            row.state = Some(match strings.get(s) {
                "active_allocated" => BlockState::ActiveAllocated,
                "active_pending_free" => BlockState::ActivePendingFree,
                "inactive" => BlockState::Inactive,
                _ => BlockState::Other(s),
            });
        }
        Field::Frames => row.stack = stack_of(v, tol),
        Field::ForwardFrames => row.forward_stack = stack_of(v, tol),
        // MemoryViz copies its segment's pool onto each block.
        Field::Derived | Field::SegmentPoolId => {}
        _ => return Ok(false),
    }
    Ok(true)
}

/// An annotation dict being read.
#[derive(Debug, Clone)]
pub struct AnnotationRow(pub Annotation);

impl Default for AnnotationRow {
    fn default() -> Self {
        AnnotationRow(Annotation { name: NONE, stage: Stage::Other(NONE), device: 0, time_us: NO_TIME })
    }
}

/// Reads one key of an annotation; annotations are descriptive, so nothing here is fatal.
pub fn set_annotation(
    row: &mut AnnotationRow,
    field: Field,
    v: Scalar,
    strings: &Strings,
    tol: &mut Tolerated,
) -> Result<bool, SchemaError> {
    let a = &mut row.0;
    match field {
        Field::Name => a.name = lenient_str(v, tol),
        Field::Stage => {
            let s = lenient_str(v, tol);
            a.stage = match strings.get(s) {
                "START" => Stage::Start,
                "END" => Stage::End,
                _ => Stage::Other(s),
            };
        }
        Field::Device => {
            a.device = match v {
                Scalar::Int(i) => i64::try_from(i).unwrap_or_else(|_| ignored(tol, 0)),
                _ => ignored(tol, 0),
            }
        }
        Field::TimeUs => a.time_us = time_of(v, tol),
        Field::Derived => {}
        _ => return Ok(false),
    }
    Ok(true)
}

/// The contexts unknown keys are counted under.
pub const CTX_SNAPSHOT: &str = "snapshot";
pub const CTX_EVENT: &str = "event";
pub const CTX_FRAME: &str = "frame";
pub const CTX_SEGMENT: &str = "segment";
pub const CTX_BLOCK: &str = "block";
pub const CTX_ANNOTATION: &str = "annotation";

#[cfg(test)]
mod tests {
    use super::*;

    fn event(keys: &[(Field, Scalar)], strings: &Strings, tol: &mut Tolerated) -> Result<EventRow, SchemaError> {
        let mut row = EventRow::default();
        for &(field, v) in keys {
            assert!(set_event(&mut row, field, v, strings, tol)?, "{field:?} is an event key");
        }
        Ok(row)
    }

    #[test]
    fn event_keys_fast_and_slow() {
        let mut strings = Strings::default();
        let alloc = strings.intern("alloc");
        let odd = strings.intern("odd_action");
        let json = strings.intern(r#"{"a":1}"#);
        let mut tol = Tolerated::default();
        let row = event(
            &[
                (Field::Action, Scalar::Str(alloc)),
                (Field::Addr, Scalar::Int(u64::MAX as i128)),
                (Field::Size, Scalar::Int(0)),
                (Field::Stream, Scalar::Int(-1)),
                (Field::TimeUs, Scalar::Int(-5)),
                (Field::CompileContext, Scalar::None),
                (Field::UserMetadata, Scalar::Str(odd)),
                (Field::InternalMetadata, Scalar::Text(json)),
                (Field::DeviceFree, Scalar::Int(7)),
            ],
            &strings,
            &mut tol,
        )
        .unwrap();
        assert_eq!((row.action, row.other_action), (Action::Alloc, alloc));
        assert_eq!((row.addr, row.size), (Some(u64::MAX), Some(0)));
        assert_eq!((row.stream, row.time_us), (u64::MAX, -5));
        assert_eq!((row.compile_context, row.user_metadata, row.internal_metadata), (NONE, odd, json));
        assert_eq!(row.device_free, Some(7));
        assert_eq!(tol.summary(), "1 metadata value kept as JSON text");
        let row = event(&[(Field::Action, Scalar::Str(odd))], &strings, &mut tol).unwrap();
        assert_eq!((row.action, row.other_action), (Action::Unknown, odd));

        let mut tol = Tolerated::default();
        let bad = |field, v| event(&[(field, v)], &strings, &mut Tolerated::default()).unwrap_err().to_string();
        assert_eq!(
            bad(Field::Size, Scalar::Int(-1)),
            "key `size` of a trace event: expected an unsigned 64-bit integer, found an out-of-range int"
        );
        assert_eq!(bad(Field::Action, Scalar::None), "key `action` of a trace event: expected a string, found None");
        // Descriptive keys degrade and count instead.
        let row = event(
            &[
                (Field::TimeUs, Scalar::Float(12.75)),
                (Field::Frames, Scalar::Int(1)),
                (Field::Stream, Scalar::Str(odd)),
                (Field::PoolId, Scalar::Other("dict")),
            ],
            &strings,
            &mut tol,
        )
        .unwrap();
        assert_eq!((row.time_us, row.stack, row.stream, row.pool_id), (12, NONE, 0, None));
        assert_eq!(tol.get(Oddity::FloatTime), 1);
        assert_eq!(tol.get(Oddity::WrongTypeIgnored), 3);
        let row = event(&[(Field::TimeUs, Scalar::Int(1 << 64))], &strings, &mut tol).unwrap();
        assert_eq!((row.time_us, tol.get(Oddity::TimeNotNumber)), (NO_TIME, 1));
        let mut row = EventRow::default();
        assert!(!set_event(&mut row, Field::Line, Scalar::Int(1), &strings, &mut tol).unwrap());
        assert!(!set_event(&mut row, Field::Unknown, Scalar::Str(odd), &strings, &mut tol).unwrap());
        assert!(set_event(&mut row, Field::Derived, Scalar::Int(3), &strings, &mut tol).unwrap());
    }

    #[test]
    fn frame_lines_and_names_degrade() {
        let cases = [
            (Scalar::Int(u64::MAX as i128), NO_LINE, Some(Oddity::LineOutOfRange)),
            (Scalar::HugeInt, NO_LINE, Some(Oddity::LineOutOfRange)),
            (Scalar::Int(-1), NO_LINE, Some(Oddity::LineNegative)),
            (Scalar::None, NO_LINE, Some(Oddity::LineNone)),
            (Scalar::Other("str"), NO_LINE, Some(Oddity::LineNotInt)),
            (Scalar::Int(42), 42, None),
        ];
        for (v, line, odd) in cases {
            let mut row = FrameRow::new();
            assert!(set_frame(&mut row, Field::Line, v));
            assert_eq!((row.line, row.odd[2]), (line, odd), "{v:?}");
        }
        let mut row = FrameRow::new();
        set_frame(&mut row, Field::Name, Scalar::None);
        set_frame(&mut row, Field::Filename, Scalar::Int(3));
        assert_eq!((row.name, row.filename), (Some(NONE), Some(NONE)));
        assert_eq!(row.odd[..2], [Some(Oddity::NameNotStr), Some(Oddity::FilenameNotStr)]);
        assert_eq!(row.line, NO_LINE, "a frame without `line` has none");
    }
}
