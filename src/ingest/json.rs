//! Snapshot JSON (the same schema as the pickle) decoded with serde visitors straight into the
//! model — no `serde_json::Value` tree except for the small `allocator_settings`.

use std::fmt;
use std::io::Read;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::builder::{Builder, NotASnapshot, RowSink, TraceList};
use super::schema::{self, AnnotationRow, BlockRow, Field, FrameRow, Scalar, SegmentRow};
use crate::model::{EventRow, Snapshot};

#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error(transparent)]
    Syntax(#[from] serde_json::Error),
    #[error(transparent)]
    Shape(#[from] NotASnapshot),
}

pub fn decode<R: Read>(reader: R) -> Result<Snapshot, JsonError> {
    decode_observed(reader, None)
}

/// [`decode`], its events' large columns going to `rows` (`None`: into the model).
pub fn decode_observed<R: Read>(reader: R, rows: Option<Box<dyn RowSink>>) -> Result<Snapshot, JsonError> {
    let mut b = Builder::with_rows(rows);
    let mut traces = Vec::new();
    let mut host = None;
    let mut legacy = false;
    let mut de = serde_json::Deserializer::from_reader(reader);
    TopSeed { b: &mut b, traces: &mut traces, host: &mut host, legacy: &mut legacy }.deserialize(&mut de)?;
    de.end()?;
    Ok(b.finish(traces, host, legacy)?)
}

fn custom<E: de::Error>(e: impl fmt::Display) -> E {
    E::custom(e)
}

/// Counts a key the schema does not use and skips its value.
fn skip_unknown<'de, A: MapAccess<'de>>(
    b: &mut Builder,
    ctx: &'static str,
    key: &str,
    map: &mut A,
) -> Result<(), A::Error> {
    let id = b.intern_str(key);
    b.unknown_key(ctx, id);
    map.next_value::<IgnoredAny>()?;
    Ok(())
}

struct TopSeed<'a> {
    b: &'a mut Builder,
    traces: &'a mut Vec<TraceList>,
    host: &'a mut Option<TraceList>,
    legacy: &'a mut bool,
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a snapshot: a dict with `segments` / `device_traces`, or a legacy list of segments")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        *self.legacy = true;
        while seq.next_element_seed(SegmentSeed { b: self.b, host: false })?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut recognised = false;
        while let Some(key) = map.next_key::<String>()? {
            match Field::of(key.as_bytes()) {
                Field::Segments => {
                    recognised = true;
                    map.next_value_seed(ListSeed { b: &mut *self.b, item: Item::Segment { host: false } })?;
                }
                Field::HostSegments => {
                    map.next_value_seed(ListSeed { b: &mut *self.b, item: Item::Segment { host: true } })?;
                }
                Field::DeviceTraces => {
                    recognised = true;
                    map.next_value_seed(TracesSeed { b: self.b, traces: self.traces })?;
                }
                Field::HostTraces => {
                    let start = self.b.event_count() as u32;
                    map.next_value_seed(ListSeed { b: &mut *self.b, item: Item::Event { device: None } })?;
                    *self.host = Some(TraceList::Range(start, self.b.event_count() as u32));
                }
                Field::ExternalAnnotations => {
                    map.next_value_seed(ListSeed { b: &mut *self.b, item: Item::Annotation })?;
                }
                Field::Annotations => {
                    map.next_value_seed(ListSeed { b: &mut *self.b, item: Item::DerivedAnnotation })?;
                }
                Field::AllocatorSettings => {
                    let v: serde_json::Value = map.next_value()?;
                    self.b.set_allocator_settings(v);
                }
                Field::Derived => {
                    map.next_value::<IgnoredAny>()?;
                }
                _ => skip_unknown(self.b, schema::CTX_SNAPSHOT, &key, &mut map)?,
            }
        }
        if !recognised {
            return Err(custom(NotASnapshot::Shape { what: "a dict without `segments` or `device_traces`".into() }));
        }
        Ok(())
    }
}

/// What a [`ListSeed`] holds.
#[derive(Clone, Copy)]
enum Item {
    Segment {
        host: bool,
    },
    Annotation,
    /// An item of a re-export's `annotations`: an annotation dict, or derived text (skipped).
    DerivedAnnotation,
    /// Events of `device_traces[device]`, or of `host_traces` (`None`).
    Event {
        device: Option<usize>,
    },
}

/// A list of segments, annotations or one device's trace events.
struct ListSeed<'a> {
    b: &'a mut Builder,
    item: Item,
}

impl<'de> DeserializeSeed<'de> for ListSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ListSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.item {
            Item::Segment { .. } => "a list of segments",
            Item::Annotation | Item::DerivedAnnotation => "a list of annotations",
            Item::Event { .. } => "a list of trace events",
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            let b = &mut *self.b;
            let more = match self.item {
                Item::Segment { host } => seq.next_element_seed(SegmentSeed { b, host })?,
                Item::Annotation => seq.next_element_seed(AnnotationSeed(b))?,
                Item::DerivedAnnotation => {
                    seq.next_element::<serde_json::Value>()?.map(|v| match v {
                        serde_json::Value::Object(_) => AnnotationSeed(b).deserialize(v).map_err(custom),
                        _ => Ok(()),
                    })
                }
                .transpose()?,
                Item::Event { device } => seq.next_element_seed(EventSeed { b, device })?,
            };
            if more.is_none() {
                return Ok(());
            }
        }
    }
}

struct TracesSeed<'a> {
    b: &'a mut Builder,
    traces: &'a mut Vec<TraceList>,
}

impl<'de> DeserializeSeed<'de> for TracesSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for TracesSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`device_traces`: a list with one list of trace events per device")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            let start = self.b.event_count() as u32;
            let device = self.traces.len();
            let seed = ListSeed { b: &mut *self.b, item: Item::Event { device: Some(device) } };
            if seq.next_element_seed(seed)?.is_none() {
                return Ok(());
            }
            self.traces.push(TraceList::Range(start, self.b.event_count() as u32));
        }
    }
}

struct EventSeed<'a> {
    b: &'a mut Builder,
    device: Option<usize>,
}

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a trace event (a dict with `action`)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut row = EventRow::default();
        let device = self.device;
        let at = |b: &Builder| match device {
            Some(d) => format!("device_traces[{d}][{}]", b.event_count()),
            None => format!("host_traces[{}]", b.event_count()),
        };
        while let Some(key) = map.next_key::<String>()? {
            let field = Field::of(key.as_bytes());
            let v = value_for(self.b, field, &mut map)?;
            let (strings, tol) = self.b.schema_ctx();
            match schema::set_event(&mut row, field, v, strings, tol) {
                Ok(true) => {}
                Ok(false) => {
                    let id = self.b.intern_str(&key);
                    self.b.unknown_key(schema::CTX_EVENT, id);
                }
                Err(e) => return Err(custom(format_args!("{}: {e}", at(self.b)))),
            }
        }
        let (_, tol) = self.b.schema_ctx();
        let finished = schema::finish_event(&row, tol);
        finished.map_err(|e| custom(format_args!("{}: {e}", at(self.b))))?;
        self.b.push_event(&row);
        Ok(())
    }
}

/// Reads the value of `field`: frame lists and pairs where the schema expects them, else a scalar.
fn value_for<'de, A: MapAccess<'de>>(b: &mut Builder, field: Field, map: &mut A) -> Result<Scalar, A::Error> {
    match field {
        Field::Unknown => {
            map.next_value::<IgnoredAny>()?;
            Ok(Scalar::Other("unknown"))
        }
        Field::Frames | Field::ForwardFrames => map.next_value_seed(StackSeed(b)),
        f if f.is_text() => {
            let v: serde_json::Value = map.next_value()?;
            Ok(match v {
                serde_json::Value::String(s) => Scalar::Str(b.intern_str(&s)),
                serde_json::Value::Null => Scalar::None,
                other => Scalar::Text(b.intern_str(&other.to_string())),
            })
        }
        _ => map.next_value_seed(ScalarSeed(b)),
    }
}

/// Any JSON value reduced to a [`Scalar`]; a two-integer list becomes a pair.
struct ScalarSeed<'a>(&'a mut Builder);

impl<'de> DeserializeSeed<'de> for ScalarSeed<'_> {
    type Value = Scalar;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ScalarSeed<'_> {
    type Value = Scalar;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar::Int(v as i128))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::Int(v as i128))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Scalar, E> {
        Ok(Scalar::Int(v))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Scalar, E> {
        Ok(i128::try_from(v).map_or(Scalar::HugeInt, Scalar::Int))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
        Ok(Scalar::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Str(self.0.intern_str(v)))
    }
    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::None)
    }
    fn visit_none<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        let a = seq.next_element::<serde_json::Value>()?;
        let b = seq.next_element::<serde_json::Value>()?;
        let rest = seq.next_element::<IgnoredAny>()?;
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        let int = |v: &serde_json::Value| v.as_i64().map(i128::from).or_else(|| v.as_u64().map(i128::from));
        Ok(match (a.as_ref().and_then(int), b.as_ref().and_then(int), rest) {
            (Some(a), Some(b), None) => Scalar::Pair(a, b),
            _ => Scalar::Other("list"),
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("dict"))
    }
}

/// A frame list → interned stack.
struct StackSeed<'a>(&'a mut Builder);

impl<'de> DeserializeSeed<'de> for StackSeed<'_> {
    type Value = Scalar;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StackSeed<'_> {
    type Value = Scalar;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of frames")
    }
    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        let mut frames = Vec::new();
        while let Some(f) = seq.next_element_seed(FrameSeed(&mut *self.0))? {
            match f {
                Some(f) => frames.push(f),
                None => self.0.tolerate(crate::model::Oddity::NotAFrame),
            }
        }
        Ok(Scalar::Stack(self.0.stack(&frames)))
    }
    fn visit_str<E>(self, _: &str) -> Result<Scalar, E> {
        Ok(Scalar::Other("str"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Scalar, E> {
        Ok(Scalar::Other("int"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Scalar, E> {
        Ok(Scalar::Other("int"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Scalar, E> {
        Ok(Scalar::Other("float"))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Scalar, E> {
        Ok(Scalar::Other("bool"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("dict"))
    }
}

struct FrameSeed<'a>(&'a mut Builder);

/// A frame dict → its id; anything else in a frame list → `None` (left out, counted).
impl<'de> DeserializeSeed<'de> for FrameSeed<'_> {
    type Value = Option<u32>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<u32>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FrameSeed<'_> {
    type Value = Option<u32>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a frame {name, filename, line}")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<u32>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<u32>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<u32>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<u32>, E> {
        Ok(None)
    }
    /// `forward_frames` are traceback lines.
    fn visit_str<E>(self, text: &str) -> Result<Option<u32>, E> {
        Ok(Some(self.0.text_frame(text)))
    }
    fn visit_unit<E>(self) -> Result<Option<u32>, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<u32>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<u32>, A::Error> {
        let mut row = FrameRow::new();
        while let Some(key) = map.next_key::<String>()? {
            let field = Field::of(key.as_bytes());
            let v = value_for(self.0, field, &mut map)?;
            if !schema::set_frame(&mut row, field, v) {
                let id = self.0.intern_str(&key);
                self.0.unknown_key(schema::CTX_FRAME, id);
            }
        }
        Ok(Some(self.0.frame(row)))
    }
}

struct SegmentSeed<'a> {
    b: &'a mut Builder,
    host: bool,
}

impl<'de> DeserializeSeed<'de> for SegmentSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SegmentSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a segment (a dict)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let b = self.b;
        let mut row = SegmentRow::default();
        let mut blocks = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let field = Field::of(key.as_bytes());
            if field == Field::Blocks {
                map.next_value_seed(BlocksSeed { b: &mut *b, out: &mut blocks })?;
                continue;
            }
            let v = value_for(b, field, &mut map)?;
            let (_, tol) = b.schema_ctx();
            if !schema::set_segment(&mut row, field, v, tol).map_err(custom)? {
                let id = b.intern_str(&key);
                b.unknown_key(schema::CTX_SEGMENT, id);
            }
        }
        b.push_segment(&row, &blocks, self.host).map_err(custom)
    }
}

struct BlocksSeed<'a> {
    b: &'a mut Builder,
    out: &'a mut Vec<BlockRow>,
}

impl<'de> DeserializeSeed<'de> for BlocksSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for BlocksSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of blocks")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(row) = seq.next_element_seed(BlockSeed(&mut *self.b))? {
            self.out.push(row);
        }
        Ok(())
    }
}

struct BlockSeed<'a>(&'a mut Builder);

impl<'de> DeserializeSeed<'de> for BlockSeed<'_> {
    type Value = BlockRow;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<BlockRow, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for BlockSeed<'_> {
    type Value = BlockRow;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a block (a dict)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BlockRow, A::Error> {
        let b = self.0;
        let mut row = BlockRow::default();
        while let Some(key) = map.next_key::<String>()? {
            let field = Field::of(key.as_bytes());
            let v = value_for(b, field, &mut map)?;
            let (strings, tol) = b.schema_ctx();
            if !schema::set_block(&mut row, field, v, strings, tol).map_err(custom)? {
                let id = b.intern_str(&key);
                b.unknown_key(schema::CTX_BLOCK, id);
            }
        }
        Ok(row)
    }
}

struct AnnotationSeed<'a>(&'a mut Builder);

impl<'de> DeserializeSeed<'de> for AnnotationSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for AnnotationSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an annotation (a dict)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let b = self.0;
        let mut row = AnnotationRow::default();
        while let Some(key) = map.next_key::<String>()? {
            let field = Field::of(key.as_bytes());
            let v = value_for(b, field, &mut map)?;
            let (strings, tol) = b.schema_ctx();
            if !schema::set_annotation(&mut row, field, v, strings, tol).map_err(custom)? {
                let id = b.intern_str(&key);
                b.unknown_key(schema::CTX_ANNOTATION, id);
            }
        }
        b.push_annotation(row.0);
        Ok(())
    }
}
