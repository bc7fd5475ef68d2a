//! What the pipeline does beside the decoder while it reads, on the cores it leaves idle: every
//! full chunk of rows the reader completes is compressed (the event table's large columns) and
//! fed to the layout's walk of the trace that starts at the first row — the walk
//! [`Layout::build`] would make after reading. Both take the same copy of the rows
//! ([`RawRows`]), each on its own named worker; the second one done with a copy sends it back,
//! and the observer fills its memory with a later chunk's rows.
//!
//! ```text
//!   decoder ──rows──▶ observer ──Arc<RawRows>──┬──▶ memviz-compress   → Columns
//!                                              └──▶ memviz-lay-out    → TraceWalk of rows 0..m,
//!                                                                       its action times and
//!                                                                       element stacks
//! ```
//!
//! The walk also keeps the two columns of its trace that need each event's time and stack —
//! the time of each action's event and the stack of each element's — while the rows are at hand:
//! after reading, at 10 GB, they were passes over spilled columns faulted back (7 s).
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

use rayon::prelude::*;

use super::columns::{Columns, RawRows};
use crate::derive::sites;
use crate::derive::timeline::model_action_times;
use crate::layout::{Layout, TraceWalk};
use crate::model::{Action, ElementId, Events, NONE, Snapshot, StrId};

/// Chunks in flight to each worker (2 MB each): the decoder waits rather than holding more.
const IN_FLIGHT: usize = 4;

/// The two workers, and whether what they were handed went stale.
pub struct WhileReading {
    compress: JoinHandle<Columns>,
    walk: JoinHandle<Walking>,
    stale: Arc<AtomicBool>,
}

/// What was made beside the reader, for the archive: the event table compressed, and for each
/// layout (in their order) its event-derived columns where its trace was walked.
pub struct MadeWhileReading {
    pub columns: Columns,
    pub walked: Vec<Option<Walked>>,
}

/// A walked trace's columns that need its events' times and stacks.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Walked {
    /// The time of each action's event (`derive::timeline::model_action_times`).
    pub action_time_us: Vec<i64>,
    /// The stack of each element's event (`derive::sites::element_stacks`).
    pub element_stack: Vec<u32>,
}

/// A [`TraceWalk`] and the [`Walked`] columns of the rows it took.
#[derive(Debug, Default)]
struct Walking {
    walk: TraceWalk,
    walked: Walked,
}

impl Walking {
    #[inline]
    fn step(&mut self, (action, addr, size): (Action, u64, u64), time: i64, stack: u32, text: impl FnOnce() -> StrId) {
        let did = self.walk.step(action, addr, size, text);
        if did.action {
            self.walked.action_time_us.push(time);
        }
        if did.new_element {
            self.walked.element_stack.push(stack);
        }
    }

    /// Rows handed over, the walk having taken every row before them.
    fn rows(&mut self, r: &RawRows) {
        debug_assert_eq!(self.walk.next(), r.first);
        let mut texts = r.annotations.iter();
        for i in 0..r.action.len() {
            let text = || texts.next().copied().unwrap_or(NONE);
            self.step((Action::from_code(r.action[i]), r.addr[i], r.size[i]), r.time_us[i], r.stack[i], text);
        }
    }

    /// The events from the walk's next up to `end`, then the layout of `device` and its columns.
    fn finish(mut self, snap: &Snapshot, device: crate::model::DeviceId, end: usize) -> (Layout, Walked) {
        let ev = &snap.events;
        for e in self.walk.next()..end {
            let text = || ev.user_metadata.get(e as u32);
            self.step((ev.action[e], ev.addr[e], ev.size[e]), ev.time_us[e], ev.stack[e], text);
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
        }
        (layout, walked)
    }
}

impl WhileReading {
    /// The workers and the observer to give the reader (every
    /// [`CHUNK_ROWS`](super::chunks::CHUNK_ROWS) rows); `None` when a thread cannot be started
    /// (everything is done after reading then).
    pub fn start() -> Option<(WhileReading, crate::ingest::RowObserver)> {
        let (to_compress, compress_rx) = sync_channel::<Arc<RawRows>>(IN_FLIGHT);
        let (to_walk, walk_rx) = sync_channel::<Arc<RawRows>>(IN_FLIGHT);
        // Chunks both workers are done with, back to the observer to be filled again.
        let (done, spare) = sync_channel::<RawRows>(2 * IN_FLIGHT + 2);
        let done_too = done.clone();
        let compress = spawn("memviz-compress", move || compress_all(&compress_rx, &done))?;
        let walk = spawn("memviz-lay-out", move || walk_all(&walk_rx, &done_too))?;
        let stale = Arc::new(AtomicBool::new(false));
        let observe = observer(to_compress, to_walk, spare, stale.clone());
        Some((WhileReading { compress, walk, stale }, observe))
    }

    /// Once the reader is done (its observer dropped): every device laid out, in
    /// [`Snapshot::device_ids`] order, and what was made beside the reader.
    pub fn finish(self, snap: &Snapshot) -> (Vec<Layout>, MadeWhileReading) {
        let ev = &snap.events;
        let (columns, walk) = (self.compress.join().ok(), self.walk.join().ok());
        if self.stale.load(Ordering::Relaxed) {
            let layouts = lay_out(snap);
            let walked = vec![None; layouts.len()];
            return (layouts, MadeWhileReading { columns: Columns::compress(ev), walked });
        }
        let columns = match columns {
            Some(c) if c.rows() <= ev.len() => c.complete(ev),
            _ => Columns::compress(ev),
        };
        let (layouts, walked) = lay_out_walked(snap, walk).into_iter().unzip();
        (layouts, MadeWhileReading { columns, walked })
    }
}

fn spawn<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> Option<JoinHandle<T>> {
    std::thread::Builder::new().name(name.into()).spawn(f).ok()
}

/// Hands each chunk of rows to both workers; a rewritten row (a range before the last one's
/// end) marks their results stale and stops the handing over.
fn observer(
    to_compress: SyncSender<Arc<RawRows>>,
    to_walk: SyncSender<Arc<RawRows>>,
    spare: Receiver<RawRows>,
    stale: Arc<AtomicBool>,
) -> crate::ingest::RowObserver {
    let mut senders = Some((to_compress, to_walk));
    let mut end = 0;
    Box::new(move |ev: &Events, rows: std::ops::Range<usize>| {
        if rows.start < end {
            stale.store(true, Ordering::Relaxed);
            senders = None;
        }
        end = rows.end;
        if let Some((to_compress, to_walk)) = &senders {
            let rows = Arc::new(match spare.try_recv() {
                Ok(old) => old.refill(ev, rows),
                Err(_) => RawRows::of(ev, rows),
            });
            let _ = to_compress.send(rows.clone());
            let _ = to_walk.send(rows);
        }
    })
}

fn compress_all(rx: &Receiver<Arc<RawRows>>, done: &SyncSender<RawRows>) -> Columns {
    let mut columns = Columns::default();
    for rows in rx {
        columns.take(&rows);
        give_back(rows, done);
    }
    columns
}

fn walk_all(rx: &Receiver<Arc<RawRows>>, done: &SyncSender<RawRows>) -> Walking {
    let mut walking = Walking::default();
    for rows in rx {
        walking.rows(&rows);
        give_back(rows, done);
    }
    walking
}

/// The second worker done with a chunk sends it back (never waiting: a full channel drops it).
fn give_back(rows: Arc<RawRows>, done: &SyncSender<RawRows>) {
    if let Some(rows) = Arc::into_inner(rows) {
        let _ = done.try_send(rows);
    }
}

/// Every device's layout, in [`Snapshot::device_ids`] order (in parallel).
pub fn lay_out(snap: &Snapshot) -> Vec<Layout> {
    snap.device_ids().par_iter().map(|&d| Layout::build(snap, d)).collect()
}

/// [`lay_out`], the device whose trace `walk` began taking it: the walk goes on over the rest of
/// that trace, then finishes, with its [`Walked`] columns.
fn lay_out_walked(snap: &Snapshot, walk: Option<Walking>) -> Vec<(Layout, Option<Walked>)> {
    let ids = snap.device_ids();
    let mut walks: Vec<Option<Walking>> = ids.iter().map(|_| None).collect();
    if let Some(w) = walk
        && let Some(at) = ids.iter().position(|&d| {
            let trace = snap.trace(d);
            trace.start == 0 && !trace.is_empty() && trace.end >= w.walk.next()
        })
    {
        walks[at] = Some(w);
    }
    ids.par_iter()
        .zip(walks)
        .map(|(&d, w)| match w {
            Some(w) => {
                let (layout, walked) = w.finish(snap, d, snap.trace(d).end);
                (layout, Some(walked))
            }
            None => (Layout::build(snap, d), None),
        })
        .collect()
}

#[cfg(test)]
mod tests {
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
                let (layouts, walked): (Vec<Layout>, Vec<Option<Walked>>) =
                    lay_out_walked(&snap, Some(walking)).into_iter().unzip();
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

    /// A rewritten row (a range handed over again) drops what both workers made: the columns are
    /// compressed and the devices laid out afresh, the same as a read with no workers beside it.
    #[test]
    fn a_rewritten_row_drops_what_was_made_beside_the_reader() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gpt2_small.pickle");
        let (snap, _) = crate::ingest::read_path(&path).unwrap();
        let chunk = super::super::chunks::CHUNK_ROWS.min(snap.event_count());
        let (beside, mut observe) = WhileReading::start().unwrap();
        let mut wrong = snap.clone();
        wrong.events.addr[0] ^= 0x10;
        observe(&wrong.events, 0..chunk);
        observe(&snap.events, 0..1);
        drop(observe);
        let (layouts, made) = beside.finish(&snap);
        let fresh = Columns::compress(&snap.events);
        assert_eq!(made.columns.addr, fresh.addr);
        assert!(made.walked.iter().all(Option::is_none));
        same(&layouts, &lay_out(&snap));
    }
}
