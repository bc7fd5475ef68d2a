//! The event table's large columns (action, addr, size, time, stack), compressed a chunk of
//! rows at a time: while the decoder reads (a worker compresses each chunk it completes, on the
//! core the decoder leaves idle: [`super::reading`]), or all at once in parallel. Once
//! compressed, the raw columns go (the allocator's backward pass reads the chunks back through
//! [`CompressedEvents`]), so indexing holds them only until the layout and what is derived from
//! the events are done.

use std::cell::RefCell;
use std::ops::Range;

use rayon::prelude::*;

use memviz_format::schema::{Chunk, EventTable};

use super::held::{RowSlices, RowValuesColumns};
use crate::allocator::EventColumns;
use crate::archive::chunks::{self, CHUNK_ROWS};
use crate::model::{Action, Events, StrId};

/// One chunk of rows of the large columns, copied out of the events being read, with the text
/// of each `annotate` among them (for the layout's walk).
#[derive(Debug, Default, PartialEq)]
pub struct RawRows {
    pub(super) first: usize,
    pub(super) action: Vec<u8>,
    pub(super) addr: Vec<u64>,
    pub(super) size: Vec<u64>,
    pub(super) time_us: Vec<i64>,
    pub(super) stack: Vec<u32>,
    pub(super) annotations: Vec<StrId>,
}

impl RawRows {
    /// Rows `rows` of `ev`, their large columns from `values`.
    pub fn of(ev: &Events, values: &RowSlices<'_>, rows: Range<usize>) -> RawRows {
        RawRows::default().refill(ev, values, rows)
    }

    /// These columns' memory holding `rows` of `ev` instead (a chunk's rows reuse a chunk's
    /// capacity: allocating and freeing them each chunk made the heap trim and fault fresh
    /// pages back in).
    /// `values` holds `rows` (an index read lets go of rows: `super::held`).
    pub fn refill(mut self, ev: &Events, values: &RowSlices<'_>, rows: Range<usize>) -> RawRows {
        let action = &ev.action[rows.clone()];
        self.first = rows.start;
        self.annotations.clear();
        self.annotations.extend(
            (rows.clone())
                .zip(action)
                .filter(|&(_, &a)| a == Action::Annotate)
                .map(|(e, _)| ev.user_metadata.get(e as u32)),
        );
        self.action.clear();
        self.action.extend(action.iter().map(|&a| a as u8));
        let held = rows.start - values.first..rows.end - values.first;
        values.addr[held.clone()].clone_into(&mut self.addr);
        values.size[held.clone()].clone_into(&mut self.size);
        values.time_us[held.clone()].clone_into(&mut self.time_us);
        values.stack[held].clone_into(&mut self.stack);
        self
    }

    fn compress(&self) -> [Chunk; 5] {
        [
            chunks::encode(&self.action),
            chunks::encode(&self.addr),
            chunks::encode(&self.size),
            chunks::encode_deltas(&self.time_us),
            chunks::encode(&self.stack),
        ]
    }
}

/// The compressed columns, `CHUNK_ROWS` rows a chunk (the last one shorter).
#[derive(Default)]
pub struct Columns {
    pub action: Vec<Chunk>,
    pub addr: Vec<Chunk>,
    pub size: Vec<Chunk>,
    pub time_us: Vec<Chunk>,
    pub stack: Vec<Chunk>,
    rows: usize,
}

impl Columns {
    /// Every row of `ev`, its chunks compressed in parallel.
    pub fn compress(ev: &Events) -> Columns {
        Columns::default().complete(ev, &RowSlices::of(ev))
    }

    /// Takes the next chunk, `rows` compressed.
    pub fn take(&mut self, rows: &RawRows) {
        debug_assert_eq!(self.rows, rows.first);
        self.push(rows.action.len(), rows.compress());
    }

    /// The rows compressed so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    fn push(&mut self, rows: usize, [action, addr, size, time_us, stack]: [Chunk; 5]) {
        self.action.push(action);
        self.addr.push(addr);
        self.size.push(size);
        self.time_us.push(time_us);
        self.stack.push(stack);
        self.rows += rows;
    }

    /// Rows `0..rows` decompressed (`rows` at most [`Self::rows`]): the rows an index read let go,
    /// made whole again with [`super::held::Held::put_into`].
    pub fn restore(&self, rows: usize) -> RowValuesColumns {
        fn column<T: Send>(
            chunks: &[Chunk],
            rows: usize,
            decode: fn(&Chunk) -> Result<Vec<T>, chunks::ChunkError>,
        ) -> Vec<T> {
            let decoded: Vec<Vec<T>> = chunks[..rows.div_ceil(CHUNK_ROWS)]
                .par_iter()
                .map(|c| decode(c).expect("chunks compressed in this process decode"))
                .collect();
            let mut out: Vec<T> = decoded.into_iter().flatten().collect();
            out.truncate(rows);
            out
        }
        RowValuesColumns {
            addr: column(&self.addr, rows, chunks::decode_owned),
            size: column(&self.size, rows, chunks::decode_owned),
            time_us: column(&self.time_us, rows, chunks::decode_deltas_owned),
            stack: column(&self.stack, rows, chunks::decode_owned),
        }
    }

    /// The rows of `ev` past those already compressed (a multiple of `CHUNK_ROWS`), in parallel;
    /// `values` holds them.
    pub fn complete(mut self, ev: &Events, values: &RowSlices<'_>) -> Columns {
        debug_assert!(self.rows.is_multiple_of(CHUNK_ROWS));
        let starts: Vec<usize> = (self.rows..ev.len()).step_by(CHUNK_ROWS).collect();
        let done: Vec<(usize, [Chunk; 5])> = starts
            .par_iter()
            .map(|&a| {
                let b = (a + CHUNK_ROWS).min(ev.len());
                (b - a, RawRows::of(ev, values, a..b).compress())
            })
            .collect();
        for (rows, chunks) in done {
            self.push(rows, chunks);
        }
        self
    }
}

/// The large columns an undo reads (action, address, size) read back from their chunks, the
/// chunk read last kept decoded (a backward pass decodes each chunk once); the run-length and
/// sparse columns from the events.
pub struct CompressedEvents<'a> {
    events: &'a Events,
    /// The action, address and size columns' chunks.
    action: &'a [Chunk],
    addr: &'a [Chunk],
    size: &'a [Chunk],
    /// The three columns of one chunk, decoded together: an undo reads all three of every event,
    /// and one chunk check a row replaced three cursors'.
    last: RefCell<DecodedRows>,
}

/// One chunk's action, address and size columns (empty where a chunk does not decode: the
/// values read are then the defaults, as [`chunks::Cursor`]'s).
#[derive(Default)]
struct DecodedRows {
    chunk: Option<usize>,
    action: Vec<u8>,
    addr: Vec<u64>,
    size: Vec<u64>,
}

impl<'a> CompressedEvents<'a> {
    /// `table`'s chunks (the archive's event table, made of the compressed [`Columns`]).
    pub fn new(table: &'a EventTable, events: &'a Events) -> Self {
        CompressedEvents {
            events,
            action: &table.action,
            addr: &table.addr,
            size: &table.size,
            last: RefCell::default(),
        }
    }

    /// The chunks of `columns`, before they move into the event table.
    pub fn of_columns(columns: &'a Columns, events: &'a Events) -> Self {
        let (action, addr, size) = (&columns.action, &columns.addr, &columns.size);
        CompressedEvents { events, action, addr, size, last: RefCell::default() }
    }

    fn row(&self, e: usize) -> (Action, u64, u64) {
        let (c, i) = (e / CHUNK_ROWS, e % CHUNK_ROWS);
        let mut rows = self.last.borrow_mut();
        if rows.chunk != Some(c) {
            fn decoded<T: chunks::Scalar>(column: &[Chunk], c: usize) -> Vec<T> {
                column.get(c).and_then(|chunk| chunks::decode_owned(chunk).ok()).unwrap_or_default()
            }
            *rows = DecodedRows {
                chunk: Some(c),
                action: decoded(self.action, c),
                addr: decoded(self.addr, c),
                size: decoded(self.size, c),
            };
        }
        let value = |v: Option<&u64>| v.copied().unwrap_or_default();
        (
            Action::from_code(rows.action.get(i).copied().unwrap_or_default()),
            value(rows.addr.get(i)),
            value(rows.size.get(i)),
        )
    }
}

impl EventColumns for CompressedEvents<'_> {
    fn action(&self, e: usize) -> Action {
        self.row(e).0
    }
    fn addr(&self, e: usize) -> u64 {
        self.row(e).1
    }
    fn size(&self, e: usize) -> u64 {
        self.row(e).2
    }
    fn block_fields(&self, e: usize) -> (Action, u64, u64) {
        self.row(e)
    }
    fn stream(&self, e: usize) -> u64 {
        EventColumns::stream(self.events, e)
    }
    fn pool(&self, e: usize) -> Option<(i64, i64)> {
        EventColumns::pool(self.events, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk's memory filled again holds what a fresh chunk of the same rows holds, whatever
    /// it held before (longer, shorter, with annotations or not).
    #[test]
    fn a_refilled_chunk_equals_a_fresh_one() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gpt2_small.pickle");
        let (mut snap, _) = crate::ingest::read_path(&path).unwrap();
        let n = snap.events.len();
        // Some rows as `annotate` events, whose texts a chunk carries.
        for e in (0..n).step_by(97) {
            snap.events.action[e] = Action::Annotate;
        }
        let ev = &snap.events;
        let ranges = [0..n, 3..10, n / 2..n, 0..0, 1..n / 3, n - 1..n];
        let all = RowSlices::of(ev);
        let mut chunk = RawRows::of(ev, &all, 0..n / 4);
        for r in ranges {
            chunk = chunk.refill(ev, &all, r.clone());
            assert_eq!(chunk, RawRows::of(ev, &all, r.clone()), "{r:?}");
            // The same rows from columns that begin later (an index read let go of the first).
            let from = r.start.min(2);
            let later = RowSlices {
                first: from,
                addr: &ev.addr[from..],
                size: &ev.size[from..],
                time_us: &ev.time_us[from..],
                stack: &ev.stack[from..],
            };
            assert_eq!(chunk, RawRows::of(ev, &later, r.clone()), "{r:?}");
        }
    }
}
