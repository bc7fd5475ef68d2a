//! The snapshot schema, shared by the pickle and JSON readers.
//!
//! Readers walk their own syntax and hand each `key: value` of a dict to one of the `set_*`
//! functions below as a [`Field`] and a [`Scalar`]. Containers that the schema nests (frame
//! lists, blocks, pairs) are turned into ids or pairs by the reader first. Type checks and their
//! error messages live here once, so both readers accept and reject exactly the same snapshots.

use crate::model::{Action, Annotation, BlockState, EventRow, NO_TIME, NONE, StackId, Stage, StrId, Strings};

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
            _ => Field::Unknown,
        }
    }

    /// A dict holding one of these keys is a trace event.
    pub fn marks_event(self) -> bool {
        self == Field::Action
    }

    /// Keys of a frame dict `{name, filename, line}`.
    pub fn is_frame_key(self) -> bool {
        matches!(self, Field::Name | Field::Filename | Field::Line)
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

/// Streams are `cudaStream_t` handles written as Python ints; keep their 64 bits.
fn stream_of(context: &'static str, v: Scalar) -> Result<u64, SchemaError> {
    match v {
        Scalar::Int(i) if (i64::MIN as i128..=u64::MAX as i128).contains(&i) => Ok(i as u64),
        v => Err(err(context, "stream", "an integer", v)),
    }
}

fn str_of(context: &'static str, key: &'static str, v: Scalar) -> Result<StrId, SchemaError> {
    match v {
        Scalar::Str(s) => Ok(s),
        Scalar::None => Ok(NONE),
        v => Err(err(context, key, "a string", v)),
    }
}

fn stack_of(context: &'static str, key: &'static str, v: Scalar) -> Result<StackId, SchemaError> {
    match v {
        Scalar::Stack(s) => Ok(s),
        Scalar::None => Ok(NONE),
        v => Err(err(context, key, "a list of frames", v)),
    }
}

fn pair_of(context: &'static str, key: &'static str, v: Scalar) -> Result<Option<(i64, i64)>, SchemaError> {
    match v {
        Scalar::Pair(a, b) => match (i64::try_from(a), i64::try_from(b)) {
            (Ok(a), Ok(b)) => Ok(Some((a, b))),
            _ => Err(SchemaError { context, key, expected: "a pair of 64-bit integers", found: "an out-of-range int" }),
        },
        Scalar::None => Ok(None),
        v => Err(err(context, key, "a pair of integers", v)),
    }
}

/// Applies one key of a trace event. Returns `Ok(false)` for a key the event does not use.
pub fn set_event(row: &mut EventRow, field: Field, v: Scalar, strings: &Strings) -> Result<bool, SchemaError> {
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
            let s = match v {
                Scalar::Str(s) => s,
                v => return Err(err(C, "action", "a string", v)),
            };
            row.action = Action::from_name(strings.get(s).as_bytes());
            row.other_action = s;
        }
        Field::Addr => row.addr = Some(u64_of(C, "addr", v)?),
        Field::Size => row.size = Some(u64_of(C, "size", v)?),
        Field::Stream => row.stream = stream_of(C, v)?,
        Field::TimeUs => row.time_us = if v == Scalar::None { NO_TIME } else { i64_of(C, "time_us", v)? },
        Field::Frames => row.stack = stack_of(C, "frames", v)?,
        Field::ForwardFrames => row.forward_stack = stack_of(C, "forward_frames", v)?,
        Field::CompileContext => row.compile_context = str_of(C, "compile_context", v)?,
        Field::UserMetadata => row.user_metadata = str_of(C, "user_metadata", v)?,
        Field::DeviceFree => row.device_free = Some(u64_of(C, "device_free", v)?),
        Field::PoolId => row.pool_id = pair_of(C, "pool_id", v)?,
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
        Field::TimeUs => row.time_us = i,
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
        _ => return false,
    }
    true
}

/// Checks that an event has what its action needs.
pub fn finish_event(row: &EventRow) -> Result<(), SchemaError> {
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
    Ok(())
}

/// A frame dict being read.
#[derive(Debug, Default, Clone, Copy)]
pub struct FrameRow {
    pub name: Option<StrId>,
    pub filename: Option<StrId>,
    pub line: i64,
}

pub fn set_frame(row: &mut FrameRow, field: Field, v: Scalar) -> Result<bool, SchemaError> {
    const C: &str = "frame";
    match field {
        Field::Name => row.name = Some(str_of(C, "name", v)?),
        Field::Filename => row.filename = Some(str_of(C, "filename", v)?),
        Field::Line => row.line = if v == Scalar::None { 0 } else { i64_of(C, "line", v)? },
        _ => return Ok(false),
    }
    Ok(true)
}

/// A segment dict being read; its blocks are collected by the reader.
#[derive(Debug, Clone)]
pub struct SegmentRow {
    pub device: u32,
    pub address: Option<u64>,
    pub total_size: u64,
    pub allocated_size: u64,
    pub active_size: u64,
    pub requested_size: u64,
    pub stream: u64,
    pub segment_type: StrId,
    pub pool_id: Option<(i64, i64)>,
    pub is_expandable: bool,
    pub stack: StackId,
}

impl Default for SegmentRow {
    fn default() -> Self {
        SegmentRow {
            device: 0,
            address: None,
            total_size: 0,
            allocated_size: 0,
            active_size: 0,
            requested_size: 0,
            stream: 0,
            segment_type: NONE,
            pool_id: None,
            is_expandable: false,
            stack: NONE,
        }
    }
}

pub fn set_segment(row: &mut SegmentRow, field: Field, v: Scalar) -> Result<bool, SchemaError> {
    const C: &str = "segment";
    match field {
        Field::Device => {
            let d = i64_of(C, "device", v)?;
            row.device = u32::try_from(d).map_err(|_| SchemaError {
                context: C,
                key: "device",
                expected: "a device ordinal",
                found: "an out-of-range int",
            })?;
        }
        Field::Address => row.address = Some(u64_of(C, "address", v)?),
        Field::TotalSize => row.total_size = u64_of(C, "total_size", v)?,
        Field::AllocatedSize => row.allocated_size = u64_of(C, "allocated_size", v)?,
        Field::ActiveSize => row.active_size = u64_of(C, "active_size", v)?,
        Field::RequestedSize => row.requested_size = u64_of(C, "requested_size", v)?,
        Field::Stream => row.stream = stream_of(C, v)?,
        Field::SegmentType => row.segment_type = str_of(C, "segment_type", v)?,
        Field::SegmentPoolId => row.pool_id = pair_of(C, "segment_pool_id", v)?,
        Field::IsExpandable => {
            row.is_expandable = match v {
                Scalar::Bool(b) => b,
                Scalar::Int(i) => i != 0,
                Scalar::None => false,
                v => return Err(err(C, "is_expandable", "a bool", v)),
            }
        }
        Field::Frames => row.stack = stack_of(C, "frames", v)?,
        _ => return Ok(false),
    }
    Ok(true)
}

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
    pub state: BlockState,
    pub stack: StackId,
}

impl Default for BlockRow {
    fn default() -> Self {
        BlockRow { address: None, size: None, requested_size: None, state: BlockState::Inactive, stack: NONE }
    }
}

pub fn set_block(row: &mut BlockRow, field: Field, v: Scalar, strings: &Strings) -> Result<bool, SchemaError> {
    const C: &str = "block";
    match field {
        Field::Address => row.address = Some(u64_of(C, "address", v)?),
        Field::Size => row.size = Some(u64_of(C, "size", v)?),
        Field::RequestedSize => row.requested_size = Some(u64_of(C, "requested_size", v)?),
        Field::State => {
            let s = str_of(C, "state", v)?;
            row.state = match strings.get(s) {
                "active_allocated" => BlockState::ActiveAllocated,
                "active_pending_free" => BlockState::ActivePendingFree,
                "inactive" => BlockState::Inactive,
                _ => BlockState::Other(s),
            };
        }
        Field::Frames => row.stack = stack_of(C, "frames", v)?,
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

pub fn set_annotation(
    row: &mut AnnotationRow,
    field: Field,
    v: Scalar,
    strings: &Strings,
) -> Result<bool, SchemaError> {
    const C: &str = "annotation";
    let a = &mut row.0;
    match field {
        Field::Name => a.name = str_of(C, "name", v)?,
        Field::Stage => {
            let s = str_of(C, "stage", v)?;
            a.stage = match strings.get(s) {
                "START" => Stage::Start,
                "END" => Stage::End,
                _ => Stage::Other(s),
            };
        }
        Field::Device => a.device = i64_of(C, "device", v)?,
        Field::TimeUs => a.time_us = if v == Scalar::None { NO_TIME } else { i64_of(C, "time_us", v)? },
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

    fn event(keys: &[(Field, Scalar)], strings: &Strings) -> Result<EventRow, SchemaError> {
        let mut row = EventRow::default();
        for &(field, v) in keys {
            assert!(set_event(&mut row, field, v, strings)?, "{field:?} is an event key");
        }
        Ok(row)
    }

    #[test]
    fn event_keys_fast_and_slow() {
        let mut strings = Strings::default();
        let alloc = strings.intern("alloc");
        let odd = strings.intern("odd_action");
        let row = event(
            &[
                (Field::Action, Scalar::Str(alloc)),
                (Field::Addr, Scalar::Int(u64::MAX as i128)),
                (Field::Size, Scalar::Int(0)),
                (Field::Stream, Scalar::Int(-1)),
                (Field::TimeUs, Scalar::Int(-5)),
                (Field::CompileContext, Scalar::None),
                (Field::UserMetadata, Scalar::Str(odd)),
                (Field::DeviceFree, Scalar::Int(7)),
            ],
            &strings,
        )
        .unwrap();
        assert_eq!((row.action, row.other_action), (Action::Alloc, alloc));
        assert_eq!((row.addr, row.size), (Some(u64::MAX), Some(0)));
        assert_eq!((row.stream, row.time_us), (u64::MAX, -5));
        assert_eq!((row.compile_context, row.user_metadata), (NONE, odd));
        assert_eq!(row.device_free, Some(7));
        let row = event(&[(Field::Action, Scalar::Str(odd))], &strings).unwrap();
        assert_eq!((row.action, row.other_action), (Action::Unknown, odd));

        let bad = |field, v| event(&[(field, v)], &strings).unwrap_err().to_string();
        assert_eq!(
            bad(Field::Size, Scalar::Int(-1)),
            "key `size` of a trace event: expected an unsigned 64-bit integer, found an out-of-range int"
        );
        assert_eq!(
            bad(Field::TimeUs, Scalar::Int(1 << 64)),
            "key `time_us` of a trace event: expected a 64-bit integer, found an out-of-range int"
        );
        assert_eq!(
            bad(Field::Frames, Scalar::Int(1)),
            "key `frames` of a trace event: expected a list of frames, found int"
        );
        assert_eq!(bad(Field::Action, Scalar::None), "key `action` of a trace event: expected a string, found None");
        let mut row = EventRow::default();
        assert!(!set_event(&mut row, Field::Line, Scalar::Int(1), &strings).unwrap());
        assert!(!set_event(&mut row, Field::Unknown, Scalar::Str(odd), &strings).unwrap());
    }
}
