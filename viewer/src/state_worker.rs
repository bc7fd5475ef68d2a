//! The Allocator State view's worker: on a named thread (`memviz-state`), the memory map's state
//! at the selected event ([`Shown`]) and the texts of the event list's rows on screen, so stepping
//! through events costs the UI thread nothing that grows with the trace.
//!
//! Requests are latest-wins: the UI leaves its newest map request and its newest row range in one
//! slot each, and the worker takes whatever is there once it is free, so a held → never queues
//! stale states. The UI draws the last state that came back until the next one does (the worker
//! asks for a repaint when one is in).
//!
//! The worker keeps its last walk back through the allocator's events
//! ([`Session::allocator_walk`]): a step back is one more undo; a step forward or a jump starts
//! again from the saved state at or after the event. Either way a state costs at most one saved
//! state decoded and fewer than K events undone, which [`StateWork`] counts for the tests.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use eframe::egui;

use super::data::Session;
use super::memory_map::Shown;
use crate::allocator::EventColumns as _;
use crate::archive::chunks;
use crate::archive::events::ArchiveEvents;
use crate::archive::session::AllocatorWalk;
use crate::model::DeviceIdx;

/// A state asked for: (device, device-relative event).
pub type MapKey = (DeviceIdx, i64);

/// Rows asked for: (device, first row, end row).
pub type RowsKey = (DeviceIdx, usize, usize);

/// The texts of a range of the event list's rows.
pub struct Rows {
    pub key: RowsKey,
    pub texts: Vec<String>,
}

impl Rows {
    /// Row `i`'s text, when these rows are of `device` and hold it.
    pub fn get(&self, device: DeviceIdx, i: usize) -> Option<&str> {
        let (d, start, _) = self.key;
        if d != device {
            return None;
        }
        self.texts.get(i.checked_sub(start)?).map(String::as_str)
    }
}

/// What the worker did for the map since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateWork {
    /// States made (map requests answered).
    pub states: u64,
    /// Saved states decoded, over all states.
    pub saved_states_decoded: u64,
    /// Events undone, over all states.
    pub events_undone: u64,
    /// The most saved states and undone events one state took.
    pub most_decoded: u64,
    pub most_undone: u64,
    /// Chunks the worker's thread decompressed (saved states, event columns, rows).
    pub chunks: u64,
}

/// What the UI left for the worker: the newest request of each kind.
#[derive(Default)]
struct Inbox {
    map: Option<MapKey>,
    rows: Option<RowsKey>,
    closed: bool,
}

/// What the worker made and the UI has not taken yet.
#[derive(Default)]
struct Outbox {
    /// `None` inside: no state there (an archive before format 3, a saved state that does not decode).
    map: Option<(MapKey, Option<Shown>)>,
    rows: Option<Rows>,
}

#[derive(Default)]
struct Shared {
    inbox: Mutex<Inbox>,
    wake: Condvar,
    outbox: Mutex<Outbox>,
    work: Mutex<StateWork>,
    /// The thread ended (or never started): nothing more will come.
    gone: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The UI's side of the worker: what it asked for last and what came back.
pub struct StateWorker {
    session: Arc<Session>,
    shared: Arc<Shared>,
    asked_map: Option<MapKey>,
    answered_map: Option<MapKey>,
    asked_rows: Option<RowsKey>,
    rows: Option<Rows>,
}

impl StateWorker {
    /// Starts the worker of `session`'s state view; if no thread can be started, says so once on
    /// standard error and answers nothing. In a browser it answers each request when asked.
    pub fn start(session: Arc<Session>, ctx: egui::Context) -> StateWorker {
        let shared = Arc::new(Shared::default());
        if cfg!(target_arch = "wasm32") {
            // A browser starts no thread: each request is answered when it is asked
            // (`Self::answer_here`).
            return StateWorker { session, shared, asked_map: None, answered_map: None, asked_rows: None, rows: None };
        }
        let (theirs, s) = (Arc::clone(&shared), Arc::clone(&session));
        let spawned = std::thread::Builder::new().name("memviz-state".into()).spawn(move || {
            let _gone = Gone(&theirs);
            serve(&s, &theirs, &ctx);
        });
        if let Err(e) = spawned {
            eprintln!("warning: could not start the allocator state thread ({e}): no memory map");
            shared.gone.store(true, Ordering::Relaxed);
        }
        StateWorker { session, shared, asked_map: None, answered_map: None, asked_rows: None, rows: None }
    }

    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// Asks for the state after `key`'s event (nothing new when it was the last asked for).
    pub fn ask_map(&mut self, key: MapKey) {
        if self.asked_map != Some(key) {
            self.asked_map = Some(key);
            lock(&self.shared.inbox).map = Some(key);
            self.shared.wake.notify_one();
            self.answer_here();
        }
    }

    /// Where no thread serves the requests (a browser): answers them now, each state from its
    /// saved one (no walk is kept between them).
    fn answer_here(&self) {
        if !cfg!(target_arch = "wasm32") {
            return;
        }
        let asked = {
            let mut inbox = lock(&self.shared.inbox);
            (inbox.map.take(), inbox.rows.take())
        };
        let events = ArchiveEvents::new(self.session.root());
        answer(&self.session, (&events, &events), &mut None, &self.shared, asked);
    }

    /// Asks for the texts of rows `key` (nothing new when they were the last asked for).
    pub fn ask_rows(&mut self, key: RowsKey) {
        if self.asked_rows != Some(key) {
            self.asked_rows = Some(key);
            lock(&self.shared.inbox).rows = Some(key);
            self.shared.wake.notify_one();
            self.answer_here();
        }
    }

    /// The state that came back since the last call, if one did.
    pub fn take_map(&mut self) -> Option<(MapKey, Option<Shown>)> {
        let map = lock(&self.shared.outbox).map.take();
        if let Some((key, _)) = &map {
            self.answered_map = Some(*key);
        }
        map
    }

    /// The rows that came back last.
    pub fn rows(&mut self) -> Option<&Rows> {
        if let Some(rows) = lock(&self.shared.outbox).rows.take() {
            self.rows = Some(rows);
        }
        self.rows.as_ref()
    }

    /// A state or rows asked for have not come back yet.
    pub fn pending(&self) -> bool {
        let rows = self.rows.as_ref().map(|r| r.key);
        !self.gone() && (self.asked_map != self.answered_map || self.asked_rows != rows || self.unpolled())
    }

    fn unpolled(&self) -> bool {
        let out = lock(&self.shared.outbox);
        out.map.is_some() || out.rows.is_some()
    }

    /// The thread ended (a panic while reading, or it never started): nothing more will come.
    pub fn gone(&self) -> bool {
        self.shared.gone.load(Ordering::Relaxed)
    }

    pub fn work(&self) -> StateWork {
        *lock(&self.shared.work)
    }
}

impl Drop for StateWorker {
    fn drop(&mut self) {
        lock(&self.shared.inbox).closed = true;
        self.shared.wake.notify_one();
    }
}

/// Marks the worker gone when its thread ends, even by a panic.
struct Gone<'a>(&'a Shared);

impl Drop for Gone<'_> {
    fn drop(&mut self) {
        self.0.gone.store(true, Ordering::Relaxed);
    }
}

impl Shared {
    /// Waits for requests and takes them all; `None` once the UI side is dropped.
    fn next(&self) -> Option<(Option<MapKey>, Option<RowsKey>)> {
        let inbox = lock(&self.inbox);
        let mut inbox = self
            .wake
            .wait_while(inbox, |i| !i.closed && i.map.is_none() && i.rows.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        (!inbox.closed).then(|| (inbox.map.take(), inbox.rows.take()))
    }
}

/// The worker's loop: each request answered from the session, the walk kept between states.
fn serve(session: &Session, shared: &Shared, ctx: &egui::Context) {
    // Two readers of the event columns, each keeping its own last chunks: the undo's and the
    // list's rows sit in different places of the trace.
    let (undoing, listing) = (ArchiveEvents::new(session.root()), ArchiveEvents::new(session.root()));
    let mut kept: Option<AllocatorWalk<'_>> = None;
    let chunks_before = chunks::decompressed_on_this_thread();
    while let Some(asked) = shared.next() {
        answer(session, (&undoing, &listing), &mut kept, shared, asked);
        lock(&shared.work).chunks = chunks::decompressed_on_this_thread() - chunks_before;
        ctx.request_repaint();
    }
}

/// Answers the requests `asked` (a state, the event list's rows) into the outbox: a state from
/// `kept` where that walk is the cheaper one, rows from `listing`.
fn answer<'e>(
    session: &Session,
    (undoing, listing): (&'e ArchiveEvents<'_>, &ArchiveEvents<'_>),
    kept: &mut Option<AllocatorWalk<'e>>,
    shared: &Shared,
    (map, rows): (Option<MapKey>, Option<RowsKey>),
) {
    if let Some(key) = map {
        let shown = state(session, undoing, key, kept, &shared.work);
        lock(&shared.outbox).map = Some((key, shown));
    }
    if let Some(key) = rows {
        let texts = row_texts(session, listing, key);
        lock(&shared.outbox).rows = Some(Rows { key, texts });
    }
}

/// The state after `key`'s event, going on from `kept` where that is the cheaper walk; counts
/// the work into `work`.
fn state<'e>(
    session: &Session,
    events: &'e ArchiveEvents<'_>,
    (device, event): MapKey,
    kept: &mut Option<AllocatorWalk<'e>>,
    work: &Mutex<StateWork>,
) -> Option<Shown> {
    let (walk, cost) = session.allocator_walk(events, device, event, kept.take())?;
    let shown = Shown::of(session, device, event, &walk.undo.state);
    *kept = Some(walk);
    let mut w = lock(work);
    w.states += 1;
    w.saved_states_decoded += cost.states_decoded;
    w.events_undone += cost.events_undone;
    w.most_decoded = w.most_decoded.max(cost.states_decoded);
    w.most_undone = w.most_undone.max(cost.events_undone);
    Some(shown)
}

/// The event list's rows `key`: index, action, address and size of each event.
fn row_texts(session: &Session, events: &ArchiveEvents<'_>, (device, start, end): RowsKey) -> Vec<String> {
    let trace = session.trace(device);
    (start..end.min(trace.len()))
        .map(|i| {
            let e = trace.start + i;
            // The size before the address: a narrow panel cuts the row's end, not the size.
            format!(
                "{i:>8} {:<14} {:>10} {:#x}",
                events.action(e).name(),
                crate::analysis::units::bytes(events.size(e)),
                events.addr(e)
            )
        })
        .collect()
}
