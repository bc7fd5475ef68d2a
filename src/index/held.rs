//! The event rows an index read holds: the reader's [`RowSink`]. An event's large columns
//! (address, size, time, stack: ~28 bytes an event; kept until the archive was written they
//! were most of an index's memory, and their first touches a tenth of the decoder's thread:
//! docs/design/06) are held a few chunks at a time. Every [`CHUNK_ROWS`] rows go to the two
//! workers beside the reader ([`super::reading`]); once both took them, the rows before the
//! chunk handed over last are let go (`Held::let_go`) — but the rare events' (segment events,
//! OOMs, annotations, snapshots, unknown actions), kept for what is derived after the read
//! (reserved memory, the segment timeline).
//!
//! A row rewritten after it was handed over (a pickle that adds keys to an event dict after
//! making it) makes what the workers made stale; a row asked for or rewritten after it was let
//! go makes the read [`Held::lost`]: the pipeline reads the file again, letting go of nothing.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

use super::columns::RawRows;
use crate::archive::chunks::CHUNK_ROWS;
use crate::ingest::RowSink;
use crate::model::{Action, EventValues, Events, RowValues, StackId, is_block_event};

/// Chunks handed over between two lettings go of the rows before them: each moves the chunk
/// still held to the columns' front, on the decoder's thread, so it is not done every chunk.
pub(crate) const FORGET_EVERY: usize = 4;

/// The large columns of an index read's rows: those not let go, and the rare events' of those
/// that were.
#[derive(Debug, Default)]
pub struct Held {
    /// Rows `0..first` were let go; the columns hold rows `first..`.
    first: usize,
    addr: Vec<u64>,
    size: Vec<u64>,
    time_us: Vec<i64>,
    stack: Vec<StackId>,
    /// The rows let go of the events that are not block events, by event.
    kept: Vec<(u32, RowValues)>,
    /// A row let go was asked for or rewritten: the read is not whole.
    lost: bool,
}

/// Rows of the large columns at hand, the first being row `first` (what a chunk is copied from).
pub struct RowSlices<'a> {
    pub first: usize,
    pub addr: &'a [u64],
    pub size: &'a [u64],
    pub time_us: &'a [i64],
    pub stack: &'a [StackId],
}

impl<'a> RowSlices<'a> {
    /// Every row of a whole model.
    pub fn of(ev: &'a Events) -> RowSlices<'a> {
        RowSlices { first: 0, addr: &ev.addr, size: &ev.size, time_us: &ev.time_us, stack: &ev.stack }
    }
}

impl Held {
    /// Rows `0..first` were let go.
    pub fn first(&self) -> usize {
        self.first
    }

    /// A row let go was asked for or rewritten.
    pub fn lost(&self) -> bool {
        self.lost
    }

    /// The rows held (`first()..`).
    pub fn slices(&self) -> RowSlices<'_> {
        RowSlices { first: self.first, addr: &self.addr, size: &self.size, time_us: &self.time_us, stack: &self.stack }
    }

    fn push(&mut self, v: RowValues) {
        self.addr.push(v.addr);
        self.size.push(v.size);
        self.time_us.push(v.time_us);
        self.stack.push(v.stack);
    }

    fn set(&mut self, e: usize, v: RowValues) {
        match e.checked_sub(self.first) {
            Some(i) => {
                self.addr[i] = v.addr;
                self.size[i] = v.size;
                self.time_us[i] = v.time_us;
                self.stack[i] = v.stack;
            }
            None => self.lost = true,
        }
    }

    /// Lets go of rows `first..end`, keeping those of the rare events (`action`: every row's).
    /// The columns' memory is reused by the rows that follow.
    fn let_go(&mut self, end: usize, action: &[Action]) {
        let end = end.min(self.first + self.addr.len());
        let Some(n) = end.checked_sub(self.first) else { return };
        for (e, &a) in action.iter().enumerate().take(end).skip(self.first) {
            if !is_block_event(a) {
                let v = self.values(e).expect("a row held");
                self.kept.push((e as u32, v));
            }
        }
        self.addr.drain(..n);
        self.size.drain(..n);
        self.time_us.drain(..n);
        self.stack.drain(..n);
        self.first = end;
    }

    /// Makes `events` whole: `restored` (rows `0..first`, decompressed from the chunks they were
    /// compressed into), then the rows held.
    pub fn put_into(self, events: &mut Events, restored: RowValuesColumns) {
        let RowValuesColumns { mut addr, mut size, mut time_us, mut stack } = restored;
        assert!(
            [addr.len(), size.len(), time_us.len(), stack.len()] == [self.first; 4],
            "restoring {} rows let go from columns of other lengths",
            self.first
        );
        let Held { addr: a, size: s, time_us: t, stack: k, first, .. } = self;
        if first == 0 {
            // Nothing was let go: the held columns are the model's, moved (not copied).
            (addr, size, time_us, stack) = (a, s, t, k);
        } else {
            addr.extend(a);
            size.extend(s);
            time_us.extend(t);
            stack.extend(k);
        }
        assert_eq!(addr.len(), events.len(), "a model made whole from rows of another length");
        (events.addr, events.size, events.time_us, events.stack) = (addr, size, time_us, stack);
    }
}

impl EventValues for Held {
    fn values(&self, e: usize) -> Option<RowValues> {
        match e.checked_sub(self.first) {
            Some(i) => Some(RowValues {
                addr: *self.addr.get(i)?,
                size: self.size[i],
                time_us: self.time_us[i],
                stack: self.stack[i],
            }),
            None => {
                let j = self.kept.binary_search_by_key(&(e as u32), |k| k.0).ok()?;
                Some(self.kept[j].1)
            }
        }
    }
}

/// The large columns of rows `0..n`, as [`Held::put_into`] takes them back.
#[derive(Debug, Default)]
pub struct RowValuesColumns {
    pub addr: Vec<u64>,
    pub size: Vec<u64>,
    pub time_us: Vec<i64>,
    pub stack: Vec<StackId>,
}

/// The two workers' channels, and the chunks they are done with, back to be filled again.
pub struct Hand {
    pub to_compress: SyncSender<Arc<RawRows>>,
    pub to_walk: SyncSender<Arc<RawRows>>,
    pub spare: Receiver<RawRows>,
}

/// The reader's [`RowSink`] in an index read: holds the rows ([`Held`]), hands each full chunk
/// to the workers, lets go of what both took, and sends what it holds to `out` when the reader
/// is done.
pub struct HeldRows {
    held: Held,
    /// `None` once a rewritten row made the workers' results stale.
    hand: Option<Hand>,
    /// The row count at which the next chunk is handed over.
    next: usize,
    /// The end of the rows handed over last.
    handed_end: usize,
    handed: usize,
    /// Whether rows may be let go (an input that can be read again, should one be asked for).
    forget: bool,
    stale: Arc<AtomicBool>,
    out: SyncSender<Held>,
    /// The time spent handing chunks over (waiting while both workers' channels are full).
    waited: crate::timings::Busy,
}

impl HeldRows {
    pub fn new(hand: Hand, forget: bool, stale: Arc<AtomicBool>, out: SyncSender<Held>) -> HeldRows {
        HeldRows {
            held: Held::default(),
            hand: Some(hand),
            next: CHUNK_ROWS,
            handed_end: 0,
            handed: 0,
            forget,
            stale,
            out,
            waited: crate::timings::Busy::new(),
        }
    }

    /// Hands `rows` to both workers; lets go of the rows before them every [`FORGET_EVERY`]
    /// chunks both took. The rows just handed over stay one chunk longer, so a pickle that adds
    /// keys to the last event dict of a chunk right after it still finds its row.
    fn hand_over(&mut self, events: &Events, rows: Range<usize>) {
        self.handed_end = rows.end;
        let Some(hand) = &self.hand else { return };
        let start = rows.start;
        let rows = Arc::new(match hand.spare.try_recv() {
            Ok(old) => old.refill(events, &self.held.slices(), rows),
            Err(_) => RawRows::of(events, &self.held.slices(), rows),
        });
        let (to_compress, to_walk) = (&hand.to_compress, &hand.to_walk);
        let (sent, walked) = self.waited.time(|| (to_compress.send(rows.clone()).is_ok(), to_walk.send(rows).is_ok()));
        self.handed += 1;
        if walked && sent && self.forget && self.handed.is_multiple_of(FORGET_EVERY) {
            self.held.let_go(start, &events.action);
        }
    }
}

impl HeldRows {
    /// Hands over every chunk that ends at or before `rows` (the rows held so far).
    fn hand_over_full(&mut self, events: &Events, rows: usize) {
        while self.next <= rows {
            let end = self.next;
            self.next = end.saturating_add(CHUNK_ROWS);
            self.hand_over(events, end - CHUNK_ROWS..end);
        }
    }
}

impl RowSink for HeldRows {
    fn push(&mut self, events: &Events, id: u32, v: RowValues) {
        self.held.push(v);
        self.hand_over_full(events, id as usize + 1);
    }

    fn extend(&mut self, events: &Events, first: u32, rows: &Events) {
        let h = &mut self.held;
        debug_assert_eq!(h.first + h.addr.len(), first as usize);
        h.addr.extend_from_slice(&rows.addr);
        h.size.extend_from_slice(&rows.size);
        h.time_us.extend_from_slice(&rows.time_us);
        h.stack.extend_from_slice(&rows.stack);
        self.hand_over_full(events, first as usize + rows.addr.len());
    }

    fn set(&mut self, _events: &Events, id: u32, v: RowValues) {
        if (id as usize) < self.handed_end {
            self.stale.store(true, Ordering::Relaxed);
            self.hand = None;
        }
        self.held.set(id as usize, v);
    }

    fn values(&mut self, id: u32) -> Option<RowValues> {
        let v = self.held.values(id as usize);
        self.held.lost |= v.is_none();
        v
    }

    fn finish(&mut self, _events: &Events) {
        self.hand = None;
        self.waited.report("the reader handing rows to the workers beside it (waiting while they were behind)");
        let _ = self.out.try_send(std::mem::take(&mut self.held));
    }
}
