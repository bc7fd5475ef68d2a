//! What the pipeline does beside the decoder while it reads, on the cores it leaves idle: every
//! full chunk of rows the reader completes is compressed (the event table's large columns) and
//! fed to the layout's walk of the trace that starts at the first row — the walk
//! [`Layout::build`] would make after reading. Both take the same copy of the rows
//! ([`RawRows`]), each on its own named worker.
//!
//! ```text
//!   decoder ──rows──▶ observer ──Arc<RawRows>──┬──▶ memviz-compress   → Columns
//!                                              └──▶ memviz-lay-out    → TraceWalk of rows 0..m
//! ```
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
use crate::layout::{Layout, TraceWalk};
use crate::model::{Events, Snapshot};

/// Chunks in flight to each worker (2 MB each): the decoder waits rather than holding more.
const IN_FLIGHT: usize = 4;

/// The two workers, and whether what they were handed went stale.
pub struct WhileReading {
    compress: JoinHandle<Columns>,
    walk: JoinHandle<TraceWalk>,
    stale: Arc<AtomicBool>,
}

impl WhileReading {
    /// The workers and the observer to give the reader (every
    /// [`CHUNK_ROWS`](super::chunks::CHUNK_ROWS) rows); `None` when a thread cannot be started
    /// (everything is done after reading then).
    pub fn start() -> Option<(WhileReading, crate::ingest::RowObserver)> {
        let (to_compress, compress_rx) = sync_channel::<Arc<RawRows>>(IN_FLIGHT);
        let (to_walk, walk_rx) = sync_channel::<Arc<RawRows>>(IN_FLIGHT);
        let compress = spawn("memviz-compress", move || compress_all(&compress_rx))?;
        let walk = spawn("memviz-lay-out", move || walk_all(&walk_rx))?;
        let stale = Arc::new(AtomicBool::new(false));
        let observe = observer(to_compress, to_walk, stale.clone());
        Some((WhileReading { compress, walk, stale }, observe))
    }

    /// Once the reader is done (its observer dropped): the event table compressed and every
    /// device laid out, in [`Snapshot::device_ids`] order.
    pub fn finish(self, snap: &Snapshot) -> (Columns, Vec<Layout>) {
        let ev = &snap.events;
        let (columns, walk) = (self.compress.join().ok(), self.walk.join().ok());
        if self.stale.load(Ordering::Relaxed) {
            return (Columns::compress(ev), lay_out(snap, None));
        }
        let columns = match columns {
            Some(c) if c.rows() <= ev.len() => c.complete(ev),
            _ => Columns::compress(ev),
        };
        (columns, lay_out(snap, walk))
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
            let rows = Arc::new(RawRows::of(ev, rows));
            let _ = to_compress.send(rows.clone());
            let _ = to_walk.send(rows);
        }
    })
}

fn compress_all(rx: &Receiver<Arc<RawRows>>) -> Columns {
    let mut columns = Columns::default();
    for rows in rx {
        columns.take(&rows);
    }
    columns
}

fn walk_all(rx: &Receiver<Arc<RawRows>>) -> TraceWalk {
    let mut walk = TraceWalk::new(0);
    for rows in rx {
        rows.walk(&mut walk);
    }
    walk
}

/// Every device's layout (in parallel), the one whose trace `walk` began taken from it: the walk
/// goes on over the rest of that trace, then finishes.
pub fn lay_out(snap: &Snapshot, walk: Option<TraceWalk>) -> Vec<Layout> {
    let ids = snap.device_ids();
    let walked = walk.and_then(|w| {
        let d = ids.iter().position(|&d| {
            let trace = snap.trace(d);
            trace.start == 0 && !trace.is_empty() && trace.end >= w.next()
        })?;
        Some((d, w))
    });
    let walked = std::sync::Mutex::new(walked);
    ids.par_iter()
        .enumerate()
        .map(|(i, &d)| {
            let taken = {
                let mut w = walked.lock().unwrap_or_else(|e| e.into_inner());
                if w.as_ref().is_some_and(|(at, _)| *at == i) { w.take() } else { None }
            };
            match taken {
                Some((_, mut w)) => {
                    w.walk(&snap.events, snap.trace(d).end);
                    w.finish(snap, d)
                }
                None => Layout::build(snap, d),
            }
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
                let mut walk = TraceWalk::new(0);
                walk.walk(&snap.events, m as usize);
                same(&lay_out(&snap, Some(walk)), &fresh);
            }
            same(&lay_out(&snap, None), &fresh);
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
        let (columns, layouts) = beside.finish(&snap);
        let fresh = Columns::compress(&snap.events);
        assert_eq!(columns.addr, fresh.addr);
        same(&layouts, &lay_out(&snap, None));
    }
}
