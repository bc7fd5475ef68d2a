//! What the pipeline does beside the decoder while it reads, on the cores it leaves idle: every
//! full chunk of rows the reader completes is compressed (the event table's large columns) and
//! fed to the layout's walk of the trace that starts at the first row — the walk
//! [`Layout::build`] would make after reading. Both take the same copy of the rows
//! ([`RawRows`]), each on its own named worker; the second one done with a copy sends it back,
//! and the reader's sink fills its memory with a later chunk's rows.
//!
//! ```text
//!   decoder ──rows──▶ HeldRows ──Arc<RawRows>──┬──▶ memviz-compress   → Columns
//!                                              └──▶ memviz-lay-out    → TraceWalk of rows 0..m,
//!                                                                       its action times and
//!                                                                       element stacks
//! ```
//!
//! The walk also keeps the two columns of its trace that need each event's time and stack —
//! the time of each action's event and the stack of each element's — while the rows are at hand:
//! after reading, on a large snapshot, they were passes over spilled columns faulted back.
//!
//! The reader's rows are held by [`super::held`] (the reader's [`crate::ingest::RowSink`]),
//! which hands each chunk over and, once both workers took it, lets go of the rows before it.
//! What is derived after the read from the walked trace's rows comes from the walk (the first
//! event's time) or from the rows kept of the rare events (reserved memory, the segment
//! timeline: [`MadeWhileReading::held`]). When more is needed — a device the walk does not
//! belong to, rows rewritten after they were handed over — the rows let go are decompressed
//! back from the chunks first and the model made whole; when a row let go was asked for while
//! reading ([`Held::lost`]), the pipeline reads the file again, letting go of nothing.
//!
//! After reading, [`WhileReading::finish`] completes both with the rows past the last full chunk
//! and lays out every other device as before. Which device the walk belongs to is known only
//! then (the trace lists are placed at the end of the pickle): the one whose trace starts at row
//! 0 and reaches past what was walked; when none does (several devices' traces in the first
//! chunks, a trace list given out of order), the walk is dropped and that device is laid out
//! afresh. When a row already handed over is rewritten, both workers' results are dropped and
//! everything is done after reading, so the result never depends on what was streamed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use memviz_format::schema::Chunk;
use rayon::prelude::*;

use super::columns::{Columns, RawRows};
use super::held::{Hand, Held, HeldRows, RowSlices, RowValuesColumns};
use crate::archive::chunks::{self, CHUNK_ROWS};
use crate::derive::sites;
use crate::derive::timeline::model_action_times;
use crate::layout::{Layout, TraceWalk, extent};
use crate::model::{Action, ElementId, EventValues, NO_TIME, NONE, Snapshot, StrId};

/// Chunks in flight to each worker (2 MB each): the decoder waits rather than holding more.
const IN_FLIGHT: usize = 4;

/// The two workers, and whether what they were handed went stale.
pub struct WhileReading {
    compress: JoinHandle<Columns>,
    walk: JoinHandle<Walking>,
    stale: Arc<AtomicBool>,
    /// What the reader's rows held when it was done.
    held: Receiver<Held>,
}

/// What was made beside the reader, for the archive: the event table compressed, and for each
/// layout (in their order) its event-derived columns where its trace was walked.
pub struct MadeWhileReading {
    pub columns: Columns,
    pub walked: Vec<Option<Walked>>,
    /// The rows the reader held, where the model is not whole (it let go of the walked trace's
    /// block events): what is derived from the rest of the events reads them here.
    pub held: Option<Held>,
}

/// A walked trace's columns that need its events' times and stacks.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Walked {
    /// The time of each action's event (`derive::timeline::model_action_times`).
    pub action_time_us: Vec<i64>,
    /// `action_time_us`' chunks as the archive stores them, each encoded as soon as its
    /// [`CHUNK_ROWS`] actions were walked, on a thread beside the walk (`memviz-times`; the
    /// rest are encoded after the read).
    pub action_time_chunks: Vec<Chunk>,
    /// The stack of each element's event (`derive::sites::element_stacks`).
    pub element_stack: Vec<u32>,
    /// The time of the trace's first event with one.
    pub first_time_us: Option<i64>,
}

/// A [`TraceWalk`] and the [`Walked`] columns of the rows it took.
#[derive(Debug, Default)]
struct Walking {
    walk: TraceWalk,
    walked: Walked,
    /// Where the action times' chunks are encoded while the walk goes on (`None`: here).
    encoding: Option<TimeChunks>,
    /// What makes the pages of the columns the walk grows ahead of its writes (`None`: none).
    ahead: Option<Ahead>,
}

/// A thread that makes the pages of the walk's growing columns ahead of its writes
/// ([`crate::spill::populate`]): the first writes of fresh pages were a third of the walk's
/// time, and on many cores the walk bounds the read.
#[derive(Debug)]
struct Ahead {
    to: SyncSender<(usize, usize)>,
    thread: JoinHandle<()>,
    /// For each column: its address when last asked for, where what was asked for ends (bytes
    /// from its start), and the bytes it held at the last ask.
    asked: Vec<(usize, usize, usize)>,
}

/// How many chunks of rows ahead of a column's writes its pages are made (each column by what
/// the last chunk grew it: gen9m's ~7 MB in all ahead; 4 MiB a column was ~35 MB more of peak
/// RSS).
const AHEAD_CHUNKS: usize = 4;

impl Ahead {
    fn start() -> Option<Ahead> {
        let (to, rx) = sync_channel::<(usize, usize)>(64);
        let thread = spawn("memviz-prefault", move || rx.iter().for_each(|(at, len)| crate::spill::populate(at, len)))?;
        Some(Ahead { to, thread, asked: Vec::new() })
    }

    /// Asks for the pages [`AHEAD_CHUNKS`] chunks' growth past what each of `columns` holds
    /// (`(address, bytes written, bytes of capacity)`), where fewer than half of those are
    /// asked for already.
    fn ask(&mut self, columns: impl IntoIterator<Item = (usize, usize, usize)>) {
        for (i, (at, len, cap)) in columns.into_iter().enumerate() {
            if self.asked.len() <= i {
                self.asked.push((0, 0, 0));
            }
            let (was_at, asked, held) = &mut self.asked[i];
            let ahead = len.saturating_sub(*held) * AHEAD_CHUNKS;
            *held = len;
            if *was_at != at {
                (*was_at, *asked) = (at, len);
            }
            let from = (*asked).max(len);
            let to = cap.min(len + ahead);
            // A full channel: asked for again after the next rows.
            if from < len + ahead / 2 && to > from && self.to.try_send((at + from, to - from)).is_ok() {
                *asked = to;
            }
        }
    }

    fn stop(self) {
        drop(self.to);
        let _ = self.thread.join();
    }
}

/// A thread that encodes the action times' chunks the walk hands it, in order: zstd was a
/// fifth of the walk's time, and on many cores the walk bounds the read.
#[derive(Debug)]
struct TimeChunks {
    to: SyncSender<Vec<i64>>,
    encoded: JoinHandle<Vec<Chunk>>,
}

impl TimeChunks {
    fn start() -> Option<TimeChunks> {
        let (to, rx) = sync_channel::<Vec<i64>>(IN_FLIGHT);
        let encoded = spawn("memviz-times", move || rx.iter().map(|t| chunks::encode_deltas(&t)).collect())?;
        Some(TimeChunks { to, encoded })
    }
}

impl Walking {
    #[inline]
    fn step(&mut self, (action, addr, size): (Action, u64, u64), time: i64, stack: u32, text: impl FnOnce() -> StrId) {
        if self.walked.first_time_us.is_none() && time != NO_TIME {
            self.walked.first_time_us = Some(time);
        }
        let did = self.walk.step(action, addr, size, text);
        if did.action {
            let times = &mut self.walked.action_time_us;
            times.push(time);
            if times.len().is_multiple_of(CHUNK_ROWS) {
                let full = &times[times.len() - CHUNK_ROWS..];
                // A thread that is gone leaves its chunks to the walk.
                let sent = self.encoding.as_ref().is_some_and(|e| e.to.send(full.to_vec()).is_ok());
                if !sent {
                    self.encoding = None;
                    self.walked.action_time_chunks.push(chunks::encode_deltas(full));
                }
            }
        }
        if did.new_element {
            self.walked.element_stack.push(stack);
        }
    }

    /// The chunks encoded beside the walk, in place before any it encodes itself from now on.
    fn encoded(&mut self) {
        let Some(TimeChunks { to, encoded }) = self.encoding.take() else { return };
        drop(to);
        let mine = std::mem::take(&mut self.walked.action_time_chunks);
        self.walked.action_time_chunks = match encoded.join() {
            // The thread took every chunk, in order.
            Ok(chunks) if mine.is_empty() => chunks,
            // It failed, or stopped taking them: every chunk is encoded after the read.
            _ => Vec::new(),
        };
    }

    /// Rows handed over, the walk having taken every row before them.
    fn rows(&mut self, r: &RawRows) {
        debug_assert_eq!(self.walk.next(), r.first);
        let mut texts = r.annotations.iter();
        for i in 0..r.action.len() {
            let text = || texts.next().copied().unwrap_or(NONE);
            self.step((Action::from_code(r.action[i]), r.addr[i], r.size[i]), r.time_us[i], r.stack[i], text);
        }
        if let Some(ahead) = self.ahead.as_mut() {
            let w = &self.walked;
            let own = [extent(&w.action_time_us), extent(&w.element_stack)];
            ahead.ask(self.walk.growing().into_iter().chain(own));
        }
    }

    /// The events from the walk's next up to `end` (held in `rows`: the walk took every row let
    /// go), then the layout of `device` and its columns.
    fn finish(
        mut self,
        snap: &Snapshot,
        rows: &dyn EventValues,
        device: crate::model::DeviceId,
        end: usize,
    ) -> (Layout, Walked) {
        let ev = &snap.events;
        for e in self.walk.next()..end {
            let text = || ev.user_metadata.get(e as u32);
            let v = rows.values(e).expect("the rows past the walk are held");
            self.step((ev.action[e], v.addr, v.size), v.time_us, v.stack, text);
        }
        let layout = self.walk.finish(snap, device);
        let mut walked = self.walked;
        // The ghosts the finish added, and the one action of a trace without any (a ghost's).
        let l = layout.view();
        walked.element_stack.extend(
            (walked.element_stack.len()..l.elements.len()).map(|id| sites::element_stack(snap, l, ElementId::at(id))),
        );
        if walked.action_time_us.len() != l.actions.len() {
            walked.action_time_us = model_action_times(snap, l);
            walked.action_time_chunks.clear();
        }
        (layout, walked)
    }
}

impl WhileReading {
    /// The workers and the row sink to give the reader; `None` when a thread cannot be started
    /// (everything is done after reading then).
    /// `forget`: the reader may let go of the rows both workers took (an input that can be read
    /// again, should one be asked for).
    pub fn start(forget: bool) -> Option<(WhileReading, Box<dyn crate::ingest::RowSink>)> {
        let (to_compress, compress_rx) = sync_channel::<Arc<RawRows>>(IN_FLIGHT);
        let (to_walk, walk_rx) = sync_channel::<Arc<RawRows>>(IN_FLIGHT);
        // Chunks both workers are done with, back to the sink to be filled again.
        let (done, spare) = sync_channel::<RawRows>(2 * IN_FLIGHT + 2);
        let done_too = done.clone();
        let compress = spawn("memviz-compress", move || compress_all(&compress_rx, &done))?;
        let walk = spawn("memviz-lay-out", move || walk_all(&walk_rx, &done_too))?;
        let stale = Arc::new(AtomicBool::new(false));
        let (out, held) = sync_channel(1);
        let sink = HeldRows::new(Hand { to_compress, to_walk, spare }, forget, stale.clone(), out);
        Some((WhileReading { compress, walk, stale, held }, Box::new(sink)))
    }

    /// Once the reader is done (its sink dropped): every device laid out, in
    /// [`Snapshot::device_ids`] order, and what was made beside the reader; the model is made
    /// whole unless only the walked trace's rows were let go. `None` when rows the reader let go
    /// are needed and cannot be had back (one was asked for while reading, or the compressing
    /// worker failed): the snapshot must be read again.
    pub fn finish(self, snap: &mut Snapshot) -> Option<(Vec<Layout>, MadeWhileReading)> {
        let (columns, walk) = (self.compress.join().ok(), self.walk.join().ok());
        let stale = self.stale.load(Ordering::Relaxed);
        let held = self.held.try_recv().ok()?;
        if held.lost() {
            return None;
        }
        // The walk's device, if one takes it; every other device is laid out from the rows.
        let ids = snap.device_ids();
        let walked_device = walk.as_ref().and_then(|w| walked_device(snap, &ids, w));
        let others_read_rows =
            ids.iter().enumerate().any(|(i, &d)| Some(i) != walked_device && !snap.trace(d).is_empty());
        let first = held.first();
        let held = if first == 0 || stale || walked_device.is_none() || others_read_rows {
            let restored = match first {
                0 => RowValuesColumns::default(),
                _ => columns.as_ref().filter(|c| c.rows() >= first)?.restore(first),
            };
            held.put_into(&mut snap.events, restored);
            None
        } else {
            Some(held)
        };
        let snap = &*snap;
        let ev = &snap.events;
        if stale {
            let layouts = lay_out(snap);
            let walked = vec![None; layouts.len()];
            return Some((layouts, MadeWhileReading { columns: Columns::compress(ev), walked, held }));
        }
        let (slices, rows): (RowSlices<'_>, &dyn EventValues) = match &held {
            Some(h) => (h.slices(), h),
            None => (RowSlices::of(ev), ev),
        };
        let columns = match columns {
            Some(c) if c.rows() <= ev.len() && c.rows() >= slices.first => c.complete(ev, &slices),
            _ if slices.first > 0 => return None,
            _ => Columns::compress(ev),
        };
        let (layouts, walked) = lay_out_walked(snap, rows, walk, walked_device).into_iter().unzip();
        Some((layouts, MadeWhileReading { columns, walked, held }))
    }
}

fn spawn<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> Option<JoinHandle<T>> {
    std::thread::Builder::new().name(name.into()).spawn(f).ok()
}

fn compress_all(rx: &Receiver<Arc<RawRows>>, done: &SyncSender<RawRows>) -> Columns {
    let (mut columns, mut busy) = (Columns::default(), crate::timings::Busy::new());
    for rows in rx {
        busy.time(|| columns.take(&rows));
        give_back(rows, done);
    }
    busy.report("while reading, compressing the rows was busy");
    columns
}

fn walk_all(rx: &Receiver<Arc<RawRows>>, done: &SyncSender<RawRows>) -> Walking {
    let mut walking = Walking { encoding: TimeChunks::start(), ahead: Ahead::start(), ..Walking::default() };
    let mut busy = crate::timings::Busy::new();
    for rows in rx {
        busy.time(|| walking.rows(&rows));
        give_back(rows, done);
    }
    if let Some(ahead) = walking.ahead.take() {
        ahead.stop();
    }
    walking.encoded();
    busy.report("while reading, walking the rows was busy");
    walking
}

/// The second worker done with a chunk sends it back (never waiting: a full channel drops it).
fn give_back(rows: Arc<RawRows>, done: &SyncSender<RawRows>) {
    // Both workers write columns that spill past the budget.
    crate::spill::help_drop();
    if let Some(rows) = Arc::into_inner(rows) {
        let _ = done.try_send(rows);
    }
}

/// Every device's layout, in [`Snapshot::device_ids`] order (in parallel).
pub fn lay_out(snap: &Snapshot) -> Vec<Layout> {
    snap.device_ids().par_iter().map(|&d| Layout::build(snap, d)).collect()
}

/// The device whose trace a walk of the first rows belongs to, as its position in
/// [`Snapshot::device_ids`]: the one whose trace starts at row 0 and reaches past what was
/// walked (none: several devices' traces in the first chunks, a trace list out of order).
fn walked_device(snap: &Snapshot, ids: &[crate::model::DeviceId], w: &Walking) -> Option<usize> {
    ids.iter().position(|&d| {
        let trace = snap.trace(d);
        trace.start == 0 && !trace.is_empty() && trace.end >= w.walk.next()
    })
}

/// [`lay_out`], the device whose trace `walk` began taking it (`walked_device`, its position
/// in [`Snapshot::device_ids`]): the walk goes on over the rest of that trace, then finishes,
/// with its [`Walked`] columns.
fn lay_out_walked(
    snap: &Snapshot,
    rows: &dyn EventValues,
    walk: Option<Walking>,
    walked_device: Option<usize>,
) -> Vec<(Layout, Option<Walked>)> {
    let ids = snap.device_ids();
    let mut walks: Vec<Option<Walking>> = ids.iter().map(|_| None).collect();
    if let (Some(w), Some(at)) = (walk, walked_device) {
        walks[at] = Some(w);
    }
    ids.par_iter()
        .zip(walks)
        .map(|(&d, w)| match w {
            Some(w) => {
                let (layout, walked) = w.finish(snap, rows, d, snap.trace(d).end);
                (layout, Some(walked))
            }
            None => (Layout::build(snap, d), None),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::held::FORGET_EVERY;
    use super::*;

    fn same(a: &[Layout], b: &[Layout]) {
        assert_eq!(a.len(), b.len());
        for (a, b) in a.iter().zip(b) {
            assert_eq!(a.device, b.device);
            assert_eq!(a.elements, b.elements, "{:?}", a.device);
            assert_eq!((&a.actions, &a.initial, &a.totals), (&b.actions, &b.initial, &b.totals));
            assert_eq!((a.initial_total, a.peak_bytes, a.peak_action), (b.initial_total, b.peak_bytes, b.peak_action));
        }
    }

    /// The walk of rows `0..m` made beside the reader, whichever device's trace they turn out to
    /// be: taken by the device whose trace starts at row 0 and reaches past `m`, dropped when
    /// none does; the layouts are `Layout::build`'s either way.
    #[test]
    fn a_walk_made_while_reading_gives_the_layouts_of_a_fresh_one() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gpt2_small.pickle");
        let (mut snap, _) = crate::ingest::read_path(&path).unwrap();
        let n = snap.event_count() as u32;
        let third = n / 3;
        // Two devices sharing the rows (device 1 without segments), then device 1 alone.
        #[allow(clippy::single_range_in_vec_init)] // one device's trace: a list of one range
        for traces in [vec![0..n], vec![0..third, third..n], vec![0..0, 0..n], vec![third..n, 0..third]] {
            snap.traces = traces.clone();
            let fresh: Vec<Layout> = snap.device_ids().iter().map(|&d| Layout::build(&snap, d)).collect();
            for m in [0, 1, third / 2, third, third + 1, n / 2, n] {
                let mut walking = Walking::default();
                let ev = &snap.events;
                for e in 0..m as usize {
                    let text = || ev.user_metadata.get(e as u32);
                    walking.step((ev.action[e], ev.addr[e], ev.size[e]), ev.time_us[e], ev.stack[e], text);
                }
                let at = walked_device(&snap, &snap.device_ids(), &walking);
                let (layouts, walked): (Vec<Layout>, Vec<Option<Walked>>) =
                    lay_out_walked(&snap, &snap.events, Some(walking), at).into_iter().unzip();
                same(&layouts, &fresh);
                // The columns made as the walk went are the ones made from the layout after it.
                for (l, w) in layouts.iter().zip(walked).filter_map(|(l, w)| Some((l, w?))) {
                    assert_eq!(w.action_time_us, model_action_times(&snap, l.view()), "{traces:?} {m}");
                    assert_eq!(w.element_stack, sites::element_stacks(&snap, l.view()), "{traces:?} {m}");
                }
            }
            same(&lay_out(&snap), &fresh);
        }
    }

    /// gpt2_small's events again and again, past `rows` events (a trace of several chunks).
    fn long_model(rows: usize) -> Snapshot {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gpt2_small.pickle");
        let (mut whole, _) = crate::ingest::read_path(&path).unwrap();
        let first = whole.events.len() as u32;
        while whole.events.len() < rows {
            for id in 0..first {
                let row = whole.events.row(id);
                whole.events.push(&row);
            }
        }
        let n = whole.events.len() as u32;
        whole.traces = std::iter::once(0..n).collect();
        whole
    }

    /// A model as an index read leaves it: `whole`'s rows pushed one by one through a builder
    /// whose rows go to the index's sink; `wrong`: row 0 pushed with another address, rewritten
    /// once a chunk was handed over; `rewrite`: the row (read back and set again) after that
    /// many rows, as a pickle that adds keys to an event dict does. Returns what `finish` made,
    /// and the model it was given.
    fn read_through_the_sink(
        whole: &Snapshot,
        forget: bool,
        wrong: bool,
        rewrite: Option<(u32, usize)>,
    ) -> (Option<(Vec<Layout>, MadeWhileReading)>, Snapshot) {
        let (beside, sink) = WhileReading::start(forget).unwrap();
        let mut b = crate::ingest::builder::Builder::with_rows(Some(sink));
        b.snap = Snapshot { events: crate::model::Events::default(), ..whole.clone() };
        for e in 0..whole.events.len() {
            let mut row = whole.events.row(e as u32);
            if wrong && e == 0 {
                row.addr = row.addr.map(|a| a ^ 0x10);
            }
            b.push_event(&row);
            if wrong && e == CHUNK_ROWS {
                b.set_event(0, &whole.events.row(0));
            }
            if let Some((id, _)) = rewrite.filter(|&(_, at)| at == e) {
                let row = b.event_row(id);
                b.set_event(id, &row);
            }
        }
        let traces = whole.traces.iter().map(|r| crate::ingest::builder::TraceList::Range(r.start, r.end)).collect();
        let mut read = b.finish(traces, None, whole.legacy).unwrap();
        (beside.finish(&mut read), read)
    }

    /// A rewritten row (one handed over already) drops what both workers made: the columns are
    /// compressed and the devices laid out afresh, the same as a read with no workers beside it.
    #[test]
    fn a_rewritten_row_drops_what_was_made_beside_the_reader() {
        let whole = long_model(CHUNK_ROWS + 1000);
        let (made, read) = read_through_the_sink(&whole, false, true, None);
        let (layouts, made) = made.unwrap();
        assert!(read.events.holds_values() && made.held.is_none());
        let fresh = Columns::compress(&whole.events);
        assert_eq!(made.columns.addr, fresh.addr);
        assert!(made.walked.iter().all(Option::is_none));
        same(&layouts, &lay_out(&whole));
    }

    /// The rows an index read lets go are never needed again, or are had back: the layouts, the
    /// walk's columns and the compressed columns equal those made from the whole model — one
    /// device (the walk's, from the rows kept of the rare events), two devices (the rows let go
    /// decompressed back), a row rewritten after it was handed over (stale: decompressed back),
    /// a row let go asked for (lost: `None`, the pipeline reads again).
    #[test]
    fn the_rows_an_index_read_lets_go_are_not_missed() {
        let mut whole = long_model((FORGET_EVERY + 2) * CHUNK_ROWS + 1234);
        let n = whole.events.len() as u32;
        #[allow(clippy::single_range_in_vec_init)] // one device's trace: a list of one range
        for (traces, rewrite) in
            [(vec![0..n], None), (vec![0..n / 2, n / 2..n], None), (vec![0..n], Some((70_000, 140_000)))]
        {
            whole.traces = traces.clone();
            let (made, read) = read_through_the_sink(&whole, true, false, rewrite);
            let (layouts, made) = made.expect("nothing let go was asked for");
            // Only the walked trace's rows stay let go; else the model is whole again.
            assert_eq!(made.held.is_some(), traces.len() == 1 && rewrite.is_none(), "{traces:?}");
            assert_eq!(read.events.holds_values(), made.held.is_none());
            same(&layouts, &lay_out(&whole));
            let fresh = Columns::compress(&whole.events);
            assert!(made.columns.addr == fresh.addr && made.columns.time_us == fresh.time_us, "{traces:?}");
            assert!(made.columns.stack == fresh.stack && made.columns.size == fresh.size, "{traces:?}");
            for (l, w) in layouts.iter().zip(made.walked).filter_map(|(l, w)| Some((l, w?))) {
                assert_eq!(w.action_time_us, model_action_times(&whole, l.view()), "{traces:?}");
                assert_eq!(w.element_stack, sites::element_stacks(&whole, l.view()), "{traces:?}");
            }
            // What is derived after the read from the rows kept of the rare events.
            let rows: &dyn EventValues = match &made.held {
                Some(h) => h,
                None => &read.events,
            };
            for d in whole.device_ids() {
                let reserved = crate::derive::reserved::timeline;
                assert_eq!(reserved(&read, rows, d), reserved(&whole, &whole.events, d));
                let (a, b) = (Layout::segments(&read, rows, d), Layout::segments(&whole, &whole.events, d));
                same(std::slice::from_ref(&a), std::slice::from_ref(&b));
                let stacks = sites::segment_stacks;
                assert_eq!(stacks(&read, rows, a.view()), stacks(&whole, &whole.events, b.view()));
            }
        }
        // A row let go asked for again long after (a pickle fetching an old event dict).
        whole.traces = std::iter::once(0..n).collect();
        let (made, _) = read_through_the_sink(&whole, true, false, Some((5, (FORGET_EVERY + 1) * CHUNK_ROWS)));
        assert!(made.is_none());
    }
}
