//! The sink both readers write into: interning, event columns, segments, and the final checks
//! that turn what was read into a [`Snapshot`].

use std::collections::HashMap;

use super::schema::{BlockRow, FrameRow, SchemaError, SegmentRow};
use crate::model::{Annotation, Block, EventRow, Frame, FrameId, FrameInterner, Segment, Snapshot, StackId, StrId};

/// Where one device's trace events ended up while reading.
#[derive(Debug, Clone)]
pub enum TraceList {
    /// Events `start..end`, pushed back to back (the normal case).
    Range(u32, u32),
    /// Events in this order, not contiguous (only hand-made pickles share event dicts).
    Ids(Vec<u32>),
}

/// Collects a snapshot while a reader walks its input.
#[derive(Debug, Default)]
pub struct Builder {
    pub snap: Snapshot,
    frames: FrameInterner,
    unknown: HashMap<(&'static str, StrId), u64>,
}

impl Builder {
    pub fn intern_str(&mut self, s: &str) -> StrId {
        self.snap.strings.intern(s)
    }

    pub fn intern_bytes(&mut self, b: &[u8]) -> StrId {
        self.snap.strings.intern_bytes(b)
    }

    pub fn strings(&self) -> &crate::model::Strings {
        &self.snap.strings
    }

    pub fn frame(&mut self, row: FrameRow) -> FrameId {
        let frame = Frame {
            name: row.name.unwrap_or(crate::model::NONE),
            filename: row.filename.unwrap_or(crate::model::NONE),
            line: row.line,
        };
        self.frames.intern(&mut self.snap.frames, frame)
    }

    pub fn stack(&mut self, frames: &[FrameId]) -> StackId {
        self.snap.stacks.intern(frames)
    }

    /// Frames of an interned stack; empty for `NONE`.
    pub fn stack_frames(&self, id: StackId) -> &[FrameId] {
        self.snap.stacks.get(id)
    }

    pub fn push_event(&mut self, row: &EventRow) -> u32 {
        self.snap.events.push(row)
    }

    pub fn event_count(&self) -> usize {
        self.snap.events.len()
    }

    pub fn unknown_key(&mut self, context: &'static str, key: StrId) {
        *self.unknown.entry((context, key)).or_default() += 1;
    }

    /// Adds a segment; blocks without an `address` sit at the running sum of the sizes before
    /// them, counted from the segment's start (PyTorch's MemoryViz does the same).
    pub fn push_segment(&mut self, row: &SegmentRow, blocks: &[BlockRow]) -> Result<(), SchemaError> {
        let address = super::schema::finish_segment(row)?;
        let first = self.snap.blocks.len() as u32;
        let mut running = address;
        for b in blocks {
            let size = b.size.ok_or(SchemaError {
                context: "block",
                key: "size",
                expected: "a value",
                found: "nothing (missing)",
            })?;
            self.snap.blocks.push(Block {
                address: b.address.unwrap_or(running),
                size,
                requested_size: b.requested_size.unwrap_or(size),
                state: b.state,
                stack: b.stack,
            });
            running = running.wrapping_add(size);
        }
        self.snap.segments.push(Segment {
            device: row.device,
            address,
            total_size: row.total_size,
            allocated_size: row.allocated_size,
            active_size: row.active_size,
            requested_size: row.requested_size,
            stream: row.stream,
            segment_type: row.segment_type,
            pool_id: row.pool_id,
            is_expandable: row.is_expandable,
            stack: row.stack,
            blocks: first..self.snap.blocks.len() as u32,
        });
        Ok(())
    }

    pub fn push_annotation(&mut self, a: Annotation) {
        self.snap.annotations.push(a);
    }

    pub fn set_allocator_settings(&mut self, v: serde_json::Value) {
        self.snap.allocator_settings = Some(v);
    }

    /// Places each device's events and runs the whole-snapshot checks.
    pub fn finish(mut self, traces: Vec<TraceList>, legacy: bool) -> Result<Snapshot, NotASnapshot> {
        let mut ranges = Vec::with_capacity(traces.len());
        let mut next = 0u32;
        for t in &traces {
            ranges.push(match t {
                TraceList::Range(a, b) if *a == next || a == b => {
                    next = next.max(*b);
                    *a..*b
                }
                TraceList::Range(a, b) => self.snap.events.append_copy(&(*a..*b).collect::<Vec<_>>()),
                TraceList::Ids(ids) => self.snap.events.append_copy(ids),
            });
        }
        self.snap.traces = ranges;
        self.snap.legacy = legacy;
        let mut unknown: Vec<_> = self.unknown.into_iter().collect();
        unknown.sort_unstable();
        for ((ctx, key), n) in unknown {
            let name = format!("{ctx}.{}", self.snap.strings.get(key));
            *self.snap.unknown_keys.entry(name).or_default() += n;
        }
        if self.snap.event_count() == 0 && self.snap.segments.is_empty() {
            return Err(NotASnapshot::Empty);
        }
        Ok(self.snap)
    }
}

/// Whole-snapshot problems found after reading.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotASnapshot {
    #[error("the snapshot holds no trace events and no segments (nothing to show)")]
    Empty,
    #[error(
        "not a memory snapshot: the top-level value is {found}, expected a dict with `segments` / `device_traces` (or a legacy list of segments)"
    )]
    TopLevel { found: &'static str },
    #[error("not a memory snapshot: {what}")]
    Shape { what: String },
}
