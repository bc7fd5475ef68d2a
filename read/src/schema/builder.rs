//! The sink both readers write into: interning, event columns, segments, and the final checks
//! that turn what was read into a [`Snapshot`].

use std::collections::HashMap;

use super::{BlockRow, FrameRow, SchemaError, SegmentRow};
use crate::model::{
    Annotation, Block, BlockState, DeviceId, EventRow, Events, Frame, FrameId, FrameInterner, Oddity, RowValues,
    Segment, Snapshot, StackId, StrId, Strings, Tolerated,
};

/// Where one device's trace events ended up while reading.
#[derive(Debug, Clone)]
pub enum TraceList {
    /// Events `start..end`, pushed back to back (the normal case).
    Range(u32, u32),
    /// Events in this order, not contiguous (only hand-made pickles share event dicts).
    Ids(Vec<u32>),
}

/// Where a reader's events' large columns ([`RowValues`]) go instead of the model: an index
/// read hands them to its workers a chunk at a time and lets go of what both took
/// (`index::held` in the native crate). A reader takes one as a parameter
/// ([`Builder::with_rows`]); without one they go into the model's columns.
pub trait RowSink: Send {
    /// Event `id` (every event, in order) was pushed, its large columns `v`: `events` holds
    /// its other columns.
    fn push(&mut self, events: &Events, id: u32, v: RowValues);
    /// Events `first..` were pushed at once (their large columns: `rows`, of which only
    /// `addr`, `size`, `time_us` and `stack` are read); `events` holds their other columns.
    fn extend(&mut self, events: &Events, first: u32, rows: &Events) {
        for i in 0..rows.addr.len() {
            let v = rows.values(i).expect("a row of the columns");
            self.push(events, first + i as u32, v);
        }
    }
    /// Event `id` was rewritten (a pickle that adds keys to an event dict after creating it).
    fn set(&mut self, events: &Events, id: u32, v: RowValues);
    /// Event `id`'s values, for a reader that reads a row back; `None` when they are no longer
    /// held (the sink notes it: the model cannot be whole).
    fn values(&mut self, id: u32) -> Option<RowValues>;
    /// The reader is done (`events` complete but for traces placed out of order).
    fn finish(&mut self, events: &Events);
}

/// Collects a snapshot while a reader walks its input.
#[derive(Default)]
pub struct Builder {
    pub snap: Snapshot,
    frames: FrameInterner,
    unknown: HashMap<(&'static str, StrId), u64>,
    /// Where the events' large columns go; `None`: into the model's.
    rows: Option<Box<dyn RowSink>>,
    /// Events pushed whose large columns have yet to go to `rows` ([`Self::push_events_later`]).
    put_off: Vec<(u32, Events)>,
}

/// The sink and the rows put off for it, taken from a builder ([`Builder::take_put_off`]) to be
/// handed over on another thread while the builder is read.
pub struct PutOff {
    rows: Option<Box<dyn RowSink>>,
    list: Vec<(u32, Events)>,
}

impl PutOff {
    /// Hands the rows put off to the sink, in order (`events`: the builder's events).
    pub fn hand_over(&mut self, events: &Events) {
        if let Some(sink) = self.rows.as_mut() {
            hand_over(sink.as_mut(), events, &mut self.list);
        }
    }
}

/// Hands the rows of `list` to `sink`, in order, emptying it.
fn hand_over(sink: &mut dyn RowSink, events: &Events, list: &mut Vec<(u32, Events)>) {
    for (first, rows) in list.drain(..) {
        sink.extend(events, first, &rows);
    }
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder").field("snap", &self.snap).field("rows_elsewhere", &self.rows.is_some()).finish()
    }
}

impl Builder {
    /// A builder whose events' large columns go to `rows` (`None`: into the model).
    pub fn with_rows(rows: Option<Box<dyn RowSink>>) -> Builder {
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

    /// Hands the rows put off to the sink: before every other use of it, so that it sees the
    /// events in order.
    #[inline]
    fn catch_up(&mut self) {
        if let Some(sink) = self.rows.as_mut().filter(|_| !self.put_off.is_empty()) {
            hand_over(sink.as_mut(), &self.snap.events, &mut self.put_off);
        }
    }

    pub fn push_event(&mut self, row: &EventRow) -> u32 {
        self.catch_up();
        match self.rows.as_mut() {
            None => self.snap.events.push(row),
            Some(sink) => {
                let id = self.snap.events.push_without_values(row);
                sink.push(&self.snap.events, id, RowValues::of(row));
                id
            }
        }
    }

    /// Pushes every event of `rows` (a reader's events read apart, its ids from 0: as if each
    /// row were pushed in turn); returns the first one's id.
    pub fn push_events(&mut self, rows: &Events) -> u32 {
        self.catch_up();
        let first = self.snap.events.append_without_values(rows);
        match self.rows.as_mut() {
            None => self.snap.events.append_values(rows),
            Some(sink) => sink.extend(&self.snap.events, first, rows),
        }
        first
    }

    /// [`Self::push_events`], the large columns handed to a sink later: at its next use, or
    /// on another thread beside other work ([`Self::take_put_off`]).
    pub fn push_events_later(&mut self, rows: Events) -> u32 {
        if self.rows.is_none() {
            return self.push_events(&rows);
        }
        let first = self.snap.events.append_without_values(&rows);
        self.put_off.push((first, rows));
        first
    }

    /// The sink and the rows put off for it, for [`PutOff::hand_over`] while this builder is
    /// read elsewhere; [`Self::give_back`] returns the sink.
    pub fn take_put_off(&mut self) -> PutOff {
        PutOff { rows: self.rows.take(), list: std::mem::take(&mut self.put_off) }
    }

    /// Returns the sink taken by [`Self::take_put_off`], with any rows it still holds put off.
    pub fn give_back(&mut self, mut off: PutOff) {
        self.rows = off.rows.take();
        off.list.append(&mut self.put_off);
        self.put_off = off.list;
    }

    /// Overwrites event `id` (a pickle that adds keys to an event dict after creating it).
    pub fn set_event(&mut self, id: u32, row: &EventRow) {
        self.catch_up();
        match self.rows.as_mut() {
            None => self.snap.events.set_row(id, row),
            Some(sink) => {
                self.snap.events.set_row_without_values(id, row);
                sink.set(&self.snap.events, id, RowValues::of(row));
            }
        }
    }

    /// Event `id` read back, for a reader that goes on with it (zeros where its values are no
    /// longer held: the sink noted that).
    pub fn event_row(&mut self, id: u32) -> EventRow {
        self.catch_up();
        let v = match self.rows.as_mut() {
            None => self.snap.events.values(id as usize),
            Some(sink) => sink.values(id),
        };
        self.snap.events.row_with(id, v.unwrap_or_default())
    }

    /// Pushes events `ids` again at the end (re-orders a trace that was not contiguous).
    fn append_copy(&mut self, ids: impl IntoIterator<Item = u32>) -> std::ops::Range<u32> {
        let start = self.snap.events.len() as u32;
        for id in ids {
            let row = self.event_row(id);
            self.push_event(&row);
        }
        start..self.snap.events.len() as u32
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
                TraceList::Range(a, b) => self.append_copy(*a..*b),
                TraceList::Ids(ids) => self.append_copy(ids.iter().copied()),
            });
        }
        self.catch_up();
        if let Some(sink) = self.rows.as_mut() {
            sink.finish(&self.snap.events);
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
    use super::{Builder, RowSink, parse_traceback_line};
    use crate::model::{EventRow, Events, RowValues};
    use std::sync::{Arc, Mutex};

    /// A sink that notes each event's id and address it is told of, in order.
    struct Noted(Arc<Mutex<Vec<(u32, u64)>>>);

    impl RowSink for Noted {
        fn push(&mut self, _: &Events, id: u32, v: RowValues) {
            self.0.lock().unwrap().push((id, v.addr));
        }
        fn set(&mut self, _: &Events, id: u32, v: RowValues) {
            self.0.lock().unwrap().push((id, v.addr));
        }
        fn values(&mut self, id: u32) -> Option<RowValues> {
            let noted = self.0.lock().unwrap();
            let &(_, addr) = noted.iter().rfind(|&&(i, _)| i == id)?;
            Some(RowValues { addr, size: 0, time_us: 0, stack: 0 })
        }
        fn finish(&mut self, _: &Events) {}
    }

    fn row(addr: u64) -> EventRow {
        EventRow { addr: Some(addr), ..EventRow::default() }
    }

    fn rows(addrs: &[u64]) -> Events {
        let mut e = Events::default();
        for &a in addrs {
            e.push(&row(a));
        }
        e
    }

    /// Rows put off reach the sink before anything else does — a row pushed, one read back or
    /// rewritten — or when handed over beside other work: the sink sees every event in order.
    #[test]
    fn rows_put_off_reach_the_sink_in_order() {
        let noted = Arc::new(Mutex::new(Vec::new()));
        let mut b = Builder::with_rows(Some(Box::new(Noted(noted.clone()))));
        assert_eq!(b.push_events_later(rows(&[10, 11])), 0);
        assert!(noted.lock().unwrap().is_empty(), "handed over at once");
        assert_eq!(b.push_event(&row(12)), 2);
        assert_eq!(b.push_events_later(rows(&[13])), 3);
        let mut off = b.take_put_off();
        off.hand_over(&b.snap.events);
        b.give_back(off);
        assert_eq!(b.push_events_later(rows(&[14])), 4);
        assert_eq!(b.event_row(4).addr, Some(14));
        assert_eq!(b.push_events_later(rows(&[15])), 5);
        b.set_event(5, &row(16));
        assert_eq!(*noted.lock().unwrap(), [(0, 10), (1, 11), (2, 12), (3, 13), (4, 14), (5, 15), (5, 16)]);
        assert_eq!(b.event_count(), 6);
    }

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
