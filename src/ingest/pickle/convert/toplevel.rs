//! Interpreting the value that STOP returns: the top-level dict (or a legacy list of
//! segments), device traces, segments with their blocks, annotations and `allocator_settings`.
//!
//! These are small next to the trace events, so they are read from the arena's generic
//! containers after the VM has finished, through the same `schema::set_*` rules as the JSON
//! reader.

use super::State;
use crate::ingest::builder::{NotASnapshot, TraceList};
use crate::ingest::pickle::PickleError;
use crate::ingest::pickle::value::{Obj, Val};
use crate::ingest::schema::{self, AnnotationRow, BlockRow, Field, SegmentRow};
use crate::model::Snapshot;

/// Nesting depth accepted inside `allocator_settings` (the only free-form value we keep).
const MAX_SETTINGS_DEPTH: usize = 32;

impl State {
    /// Interprets the value that STOP returned.
    pub fn finish(mut self, top: Val, end: u64) -> Result<Snapshot, PickleError> {
        let (traces, host, legacy) = match self.resolve(top) {
            Val::Obj(i) => match self.arena[i as usize] {
                Obj::Dict(p) => {
                    let items = std::mem::take(self.pool.get_mut(p));
                    let (traces, host) = self.top_dict(&items).map_err(|e| e.at(end))?;
                    (traces, host, false)
                }
                Obj::List(p) => {
                    for v in std::mem::take(self.pool.get_mut(p)) {
                        self.segment(v, false).map_err(|e| e.at(end))?;
                    }
                    (Vec::new(), None, true)
                }
                Obj::Events(..) => {
                    return Err(
                        NotASnapshot::Shape { what: "the top level is a bare list of trace events".into() }.into()
                    );
                }
                _ => {
                    return Err(NotASnapshot::TopLevel { found: top.type_name(&self.arena) }.into());
                }
            },
            Val::NewDict(_) => {
                return Err(NotASnapshot::Shape { what: "the top level is an empty dict".into() }.into());
            }
            other => {
                return Err(NotASnapshot::TopLevel { found: other.type_name(&self.arena) }.into());
            }
        };
        Ok(self.b.finish(traces, host, legacy)?)
    }

    #[allow(clippy::type_complexity)]
    fn top_dict(&mut self, items: &[Val]) -> Result<(Vec<TraceList>, Option<TraceList>), ShapeError> {
        let mut traces = Vec::new();
        let mut host = None;
        let mut recognised = false;
        for kv in items.chunks_exact(2) {
            let (k, v) = (kv[0], kv[1]);
            match self.field(k) {
                Field::Segments | Field::HostSegments => {
                    recognised |= self.field(k) == Field::Segments;
                    let is_host = self.field(k) == Field::HostSegments;
                    let key = if is_host { "host_segments" } else { "segments" };
                    for item in self.list_items(v, key)? {
                        self.segment(item, is_host)?;
                    }
                }
                Field::DeviceTraces => {
                    recognised = true;
                    for (d, item) in self.list_items(v, "device_traces")?.into_iter().enumerate() {
                        traces.push(self.trace_list(item, &format!("device_traces[{d}]"))?);
                    }
                }
                Field::HostTraces => host = Some(self.trace_list(v, "host_traces")?),
                Field::ExternalAnnotations | Field::Annotations => {
                    let derived = self.field(k) == Field::Annotations;
                    for item in self.list_items(v, "external_annotations")? {
                        // A re-export's `annotations` may hold derived text: skipped.
                        if derived
                            && !matches!(self.resolve(item), Val::Obj(i) if matches!(self.arena[i as usize], Obj::Dict(_)))
                        {
                            continue;
                        }
                        let pairs = self.dict_pairs(item, "external_annotations[]")?;
                        let mut row = AnnotationRow::default();
                        for (k, v) in pairs {
                            let field = self.field(k);
                            let s = self.scalar(v, field);
                            let (strings, tol) = self.b.schema_ctx();
                            if !schema::set_annotation(&mut row, field, s, strings, tol)? {
                                self.unknown_key(schema::CTX_ANNOTATION, k);
                            }
                        }
                        self.b.push_annotation(row.0);
                    }
                }
                Field::AllocatorSettings => {
                    let json = self.to_json(v, 0)?;
                    self.b.set_allocator_settings(json);
                }
                Field::Derived => {}
                _ => self.unknown_key(schema::CTX_SNAPSHOT, k),
            }
        }
        if !recognised {
            return Err(ShapeError::Shape(NotASnapshot::Shape {
                what: "a dict without `segments` or `device_traces`".into(),
            }));
        }
        Ok((traces, host))
    }

    /// The items of a list the schema nests (a tuple is read as the list, and counted).
    fn list_items(&mut self, v: Val, key: &str) -> Result<Vec<Val>, ShapeError> {
        let bad = |found: &str| ShapeError::shape(format!("`{key}` is a {found}, expected a list"));
        match self.resolve(v) {
            Val::Obj(i) => match self.arena[i as usize] {
                Obj::List(p) => Ok(self.pool.get(p).to_vec()),
                Obj::Tuple(p) => {
                    self.b.tolerate(crate::model::Oddity::TupleAsList);
                    Ok(self.pool.get(p).to_vec())
                }
                Obj::Events(k) => {
                    let (a, b) = self.event_ranges[k as usize];
                    Ok((a..b).map(Val::Event).collect())
                }
                _ => Err(bad(v.type_name(&self.arena))),
            },
            other => Err(bad(other.type_name(&self.arena))),
        }
    }

    fn dict_pairs(&self, v: Val, what: &str) -> Result<Vec<(Val, Val)>, ShapeError> {
        let bad = |found: &str| ShapeError::shape(format!("`{what}` holds a {found}, expected a dict"));
        match self.resolve(v) {
            Val::NewDict(_) => Ok(Vec::new()),
            Val::Obj(i) => match self.arena[i as usize] {
                Obj::Dict(p) => Ok(self.pool.get(p).chunks_exact(2).map(|kv| (kv[0], kv[1])).collect()),
                _ => Err(bad(v.type_name(&self.arena))),
            },
            other => Err(bad(other.type_name(&self.arena))),
        }
    }

    fn trace_list(&mut self, v: Val, key: &str) -> Result<TraceList, ShapeError> {
        let bad = |found: &str| ShapeError::shape(format!("`{key}` is a {found}, expected a list of trace events"));
        match self.resolve(v) {
            Val::Obj(i) => match self.arena[i as usize] {
                Obj::Events(k) => {
                    let (a, b) = self.event_ranges[k as usize];
                    Ok(TraceList::Range(a, b))
                }
                Obj::List(p) | Obj::Tuple(p) if self.pool.get(p).is_empty() => Ok(TraceList::Range(0, 0)),
                Obj::List(p) | Obj::Tuple(p) => {
                    if matches!(self.arena[i as usize], Obj::Tuple(_)) {
                        self.b.tolerate(crate::model::Oddity::TupleAsList);
                    }
                    self.pool
                        .get(p)
                        .iter()
                        .map(|&v| match self.resolve(v) {
                            Val::Event(e) => Ok(e),
                            other => Err(ShapeError::shape(format!(
                                "`{key}` holds a {}, expected trace events (dicts with `action`)",
                                other.type_name(&self.arena)
                            ))),
                        })
                        .collect::<Result<_, _>>()
                        .map(TraceList::Ids)
                }
                _ => Err(bad(v.type_name(&self.arena))),
            },
            other => Err(bad(other.type_name(&self.arena))),
        }
    }

    fn segment(&mut self, v: Val, host: bool) -> Result<(), ShapeError> {
        let pairs = self.dict_pairs(v, "segments")?;
        let mut row = SegmentRow::default();
        let mut blocks = Vec::new();
        for (k, v) in pairs {
            let field = self.field(k);
            if field == Field::Blocks {
                for b in self.list_items(v, "blocks")? {
                    blocks.push(self.block(b)?);
                }
                continue;
            }
            let s = self.scalar(v, field);
            if !schema::set_segment(&mut row, field, s, &mut self.b.snap.tolerated)? {
                self.unknown_key(schema::CTX_SEGMENT, k);
            }
        }
        Ok(self.b.push_segment(&row, &blocks, host)?)
    }

    fn block(&mut self, v: Val) -> Result<BlockRow, ShapeError> {
        let mut row = BlockRow::default();
        for (k, v) in self.dict_pairs(v, "blocks")? {
            let field = self.field(k);
            let s = self.scalar(v, field);
            let (strings, tol) = self.b.schema_ctx();
            if !schema::set_block(&mut row, field, s, strings, tol)? {
                self.unknown_key(schema::CTX_BLOCK, k);
            }
        }
        Ok(row)
    }

    /// `allocator_settings` is free-form: keep it as JSON.
    pub(super) fn to_json(&self, v: Val, depth: usize) -> Result<serde_json::Value, ShapeError> {
        use serde_json::Value as J;
        if depth > MAX_SETTINGS_DEPTH {
            return Err(ShapeError::shape("`allocator_settings` is nested too deeply".into()));
        }
        Ok(match self.resolve(v) {
            Val::None => J::Null,
            Val::Bool(b) => J::Bool(b),
            Val::Int(i) => J::from(i),
            Val::UInt(u) => J::from(u),
            Val::Huge => J::String("<huge int>".into()),
            Val::Float(f) => serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
            Val::Str(s) => J::String(self.b.strings().get(s).to_owned()),
            Val::NewDict(_) => J::Object(Default::default()),
            Val::Obj(i) => match self.arena[i as usize] {
                Obj::List(p) | Obj::Tuple(p) | Obj::Set(p) => {
                    J::Array(self.pool.get(p).iter().map(|&x| self.to_json(x, depth + 1)).collect::<Result<_, _>>()?)
                }
                Obj::Dict(p) => {
                    let mut map = serde_json::Map::new();
                    for kv in self.pool.get(p).chunks_exact(2) {
                        let (k, v) = (kv[0], kv[1]);
                        let key = match self.resolve(k) {
                            Val::Str(s) => self.b.strings().get(s).to_owned(),
                            Val::Int(i) => i.to_string(),
                            other => other.type_name(&self.arena).to_owned(),
                        };
                        map.insert(key, self.to_json(v, depth + 1)?);
                    }
                    J::Object(map)
                }
                Obj::Events(..) | Obj::Stack(_) => J::Null,
            },
            Val::Bytes | Val::Event(_) | Val::Frame(_) => J::Null,
        })
    }
}

/// Problems found while interpreting the finished top level.
pub(super) enum ShapeError {
    Schema(schema::SchemaError),
    Shape(NotASnapshot),
}

impl ShapeError {
    fn shape(what: String) -> Self {
        ShapeError::Shape(NotASnapshot::Shape { what })
    }

    fn at(self, offset: u64) -> PickleError {
        match self {
            ShapeError::Schema(problem) => PickleError::Schema { problem, offset },
            ShapeError::Shape(s) => PickleError::Shape(s),
        }
    }
}

impl From<schema::SchemaError> for ShapeError {
    fn from(e: schema::SchemaError) -> Self {
        ShapeError::Schema(e)
    }
}
