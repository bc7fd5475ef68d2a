//! The sink both readers write into: interning, event columns, segments, and the final checks
//! that turn what was read into a [`Snapshot`].

use std::collections::HashMap;

use super::{BlockRow, FrameRow, SchemaError, SegmentRow};
use crate::model::{
    Annotation, Block, BlockState, DeviceId, EventRow, Frame, FrameId, FrameInterner, Oddity, Segment, Snapshot,
    StackId, StrId, Strings, Tolerated,
};

/// Where one device's trace events ended up while reading.
#[derive(Debug, Clone)]
pub enum TraceList {
    /// Events `start..end`, pushed back to back (the normal case).
    Range(u32, u32),
    /// Events in this order, not contiguous (only hand-made pickles share event dicts).
    Ids(Vec<u32>),
}

/// Gets the events read so far and the rows just completed, every [`Observer::new`]'s `rows`. A range
/// that starts before the end of the one handed over last says that a row already handed over
/// was rewritten (a pickle that adds keys to an event dict after creating it): what the observer
/// made of the rows so far is stale.
///
/// It returns [`Forget::Before`] when the rows before the ones just handed over are no longer
/// needed in memory (they were taken, and the input can be read again should a forgotten row be
/// asked for: [`crate::model::Events::forget_rows`]). The rows just handed over stay one chunk
/// longer, so a pickle that adds keys to the last event dict of a chunk right after it still
/// finds its row.
pub type RowObserver = Box<dyn FnMut(&crate::model::Events, std::ops::Range<usize>) -> Forget>;

/// What the reader may do with the rows before those it just handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forget {
    Before,
    Nothing,
}

/// A reader's row observer: who to tell, and when next. A reader takes one as a parameter
/// ([`Builder::observed`]); the default tells nobody.
pub struct Observer {
    every: usize,
    next: usize,
    observe: Option<RowObserver>,
}

impl Observer {
    /// Hands `observe` every `rows` events as they are pushed (the index pipeline compresses
    /// them meanwhile).
    pub fn new(rows: usize, observe: RowObserver) -> Observer {
        let every = rows.max(1);
        Observer { every, next: every, observe: Some(observe) }
    }
}

impl Default for Observer {
    fn default() -> Self {
        Observer { every: usize::MAX, next: usize::MAX, observe: None }
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").field("every", &self.every).finish()
    }
}

/// Collects a snapshot while a reader walks its input.
#[derive(Debug, Default)]
pub struct Builder {
    pub snap: Snapshot,
    frames: FrameInterner,
    unknown: HashMap<(&'static str, StrId), u64>,
    rows: Observer,
}

impl Builder {
    /// A builder whose pushed rows `rows` watches.
    pub fn observed(rows: Observer) -> Builder {
        Builder { rows, ..Builder::default() }
    }

    pub fn intern_str(&mut self, s: &str) -> StrId {
        self.snap.strings.intern(s)
    }

    pub fn intern_bytes(&mut self, b: &[u8]) -> StrId {
        self.snap.strings.intern_bytes(b)
    }

    pub fn strings(&self) -> &Strings {
        &self.snap.strings
    }

    /// The strings (for the schema's lookups) and the tolerated-oddity counters, borrowed at once.
    pub fn schema_ctx(&mut self) -> (&Strings, &mut Tolerated) {
        (&self.snap.strings, &mut self.snap.tolerated)
    }

    pub fn tolerate(&mut self, o: Oddity) {
        self.snap.tolerated.add(o);
    }

    /// Interns a frame; its oddities are counted the first time the frame is seen.
    pub fn frame(&mut self, row: FrameRow) -> FrameId {
        let missing = |o: Option<StrId>, odd: Oddity, slot: Option<Oddity>| match o {
            Some(s) => (s, slot),
            None => (crate::model::NONE, slot.or(Some(odd))),
        };
        let (name, name_odd) = missing(row.name, Oddity::NameNotStr, row.odd[0]);
        let (filename, file_odd) = missing(row.filename, Oddity::FilenameNotStr, row.odd[1]);
        let frame = Frame { name, filename, line: row.line, fx: row.fx };
        let (id, new) = self.frames.intern(&mut self.snap.frames, frame);
        if new {
            for o in [name_odd, file_odd, row.odd[2]].into_iter().flatten() {
                self.snap.tolerated.add(o);
            }
        }
        id
    }

    /// A frame written as a line of a Python traceback (torch writes `forward_frames` so:
    /// `  File "model.py", line 41, in forward\n    x = self.fc(x)\n`); text that is not such a
    /// line becomes a frame named by the text.
    pub fn text_frame(&mut self, text: &str) -> FrameId {
        let mut row = FrameRow::new();
        match parse_traceback_line(text) {
            Some((file, line, name)) => {
                row.filename = Some(self.intern_str(file));
                row.line = line;
                row.name = Some(self.intern_str(name));
            }
            None => {
                row.name = Some(self.intern_str(text.trim()));
                row.filename = Some(crate::model::NONE);
            }
        }
        self.frame(row)
    }

    pub fn stack(&mut self, frames: &[FrameId]) -> StackId {
        self.snap.stacks.intern(frames)
    }

    /// Frames of an interned stack; empty for `NONE`.
    pub fn stack_frames(&self, id: StackId) -> &[FrameId] {
        self.snap.stacks.get(id)
    }

    pub fn push_event(&mut self, row: &EventRow) -> u32 {
        let id = self.snap.events.push(row);
        if id as usize + 1 == self.rows.next {
            let end = self.rows.next;
            self.rows.next = end.saturating_add(self.rows.every);
            if let Some(observe) = self.rows.observe.as_mut() {
                let start = end - self.rows.every;
                if observe(&self.snap.events, start..end) == Forget::Before {
                    self.snap.events.forget_rows(start);
                }
            }
        }
        id
    }

    /// Overwrites event `id` (a pickle that adds keys to an event dict after creating it), telling
    /// the observer when it was already handed that row.
    pub fn set_event(&mut self, id: u32, row: &EventRow) {
        self.snap.events.set_row(id, row);
        let handed_over = self.rows.next.saturating_sub(self.rows.every);
        if (id as usize) < handed_over
            && let Some(observe) = self.rows.observe.as_mut()
        {
            let _ = observe(&self.snap.events, id as usize..id as usize + 1);
        }
    }

    pub fn event_count(&self) -> usize {
        self.snap.events.len()
    }

    pub fn unknown_key(&mut self, context: &'static str, key: StrId) {
        *self.unknown.entry((context, key)).or_default() += 1;
    }

    /// Adds a segment (of `host`, when read from `host_segments`); blocks without an `address`
    /// sit at the running sum of the sizes before them, counted from the segment's start
    /// (PyTorch's MemoryViz does the same).
    pub fn push_segment(&mut self, row: &SegmentRow, blocks: &[BlockRow], host: bool) -> Result<(), SchemaError> {
        let address = super::finish_segment(row)?;
        let first = self.snap.blocks.len() as u32;
        let mut running = address;
        for b in blocks {
            let size = b.size.ok_or(SchemaError {
                context: "block",
                key: "size",
                expected: "a value",
                found: "nothing (missing)",
            })?;
            if b.address.is_none() {
                self.snap.tolerated.add(Oddity::BlockWithoutAddress);
            }
            self.snap.blocks.push(Block {
                address: b.address.unwrap_or(running),
                size,
                requested_size: b.requested_size.unwrap_or(size),
                state: b.state.unwrap_or(BlockState::Inactive),
                stack: b.stack,
                forward_stack: b.forward_stack,
            });
            running = running.wrapping_add(size);
        }
        let block_sum = running.wrapping_sub(address);
        self.snap.segments.push(Segment {
            device: if host { DeviceId::HOST } else { row.device },
            address,
            total_size: row.total_size.unwrap_or(block_sum),
            allocated_size: row.allocated_size,
            active_size: row.active_size,
            requested_size: row.requested_size,
            stream: row.stream,
            segment_type: row.segment_type,
            pool_id: row.pool_id,
            is_expandable: row.is_expandable,
            stack: row.stack,
            forward_stack: row.forward_stack,
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

    /// Places each device's events (and the host's, from `host_traces`) and runs the
    /// whole-snapshot checks.
    pub fn finish(
        mut self,
        traces: Vec<TraceList>,
        host: Option<TraceList>,
        legacy: bool,
    ) -> Result<Snapshot, NotASnapshot> {
        let mut ranges = Vec::with_capacity(traces.len() + 1);
        let mut next = 0u32;
        for t in traces.iter().chain(host.as_ref()) {
            ranges.push(match t {
                TraceList::Range(a, b) if *a == next || a == b => {
                    next = next.max(*b);
                    *a..*b
                }
                TraceList::Range(a, b) => self.snap.events.append_copy(&(*a..*b).collect::<Vec<_>>()),
                TraceList::Ids(ids) => self.snap.events.append_copy(ids),
            });
        }
        if host.is_some() {
            self.snap.host_trace = ranges.pop().unwrap_or(0..0);
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

/// `(file, line, name)` of `  File "file", line N, in name` (the first line of `text`).
fn parse_traceback_line(text: &str) -> Option<(&str, i64, &str)> {
    let rest = text.trim_start().strip_prefix("File \"")?;
    let (file, rest) = rest.split_once("\", line ")?;
    let (line, rest) = rest.split_once(", in ")?;
    let name = rest.lines().next()?.trim();
    Some((file, line.trim().parse().ok()?, name))
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

#[cfg(test)]
mod tests {
    use super::parse_traceback_line;

    #[test]
    fn traceback_lines() {
        assert_eq!(
            parse_traceback_line("  File \"/p/model.py\", line 41, in forward\n    x = self.fc(x)\n"),
            Some(("/p/model.py", 41, "forward"))
        );
        assert_eq!(parse_traceback_line("train.py:59"), None);
        assert_eq!(parse_traceback_line("  File \"a.py\", line x, in f"), None);
    }
}
