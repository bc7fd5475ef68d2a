//! The search (Ctrl/Cmd+F): an address (hex: every allocation that ever covered it) or frame
//! text (a substring, or `/regex/`), as `memviz find` takes them. Matches are marked one bit per
//! element for the shader, which keeps their colour and dims everything else — from the id of
//! each pixel, so a match is highlighted wherever it is drawn, at every zoom level. Enter and
//! Shift+Enter go to the next and the previous match (in allocation order) and pin it.
//!
//! Finding the matches reads every element (and every stack, for frame text), so it runs on a
//! named thread, `memviz-search`, one query at a time: a keystroke leaves its query in a slot
//! the thread takes the newest from, and the last matches found stay shown until the new ones
//! arrive. The ticks above the plot are drawn from the matches' start actions, sorted with them,
//! by a binary search of the view ([`super::marks`]).

use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Mutex};

use eframe::egui;

use super::data::Session;
use super::view::View;
use crate::analysis::find::{self, Query};
use crate::model::{DeviceIdx, ElementId};

/// What a search is for: its text (trimmed) and the device.
type Key = (String, DeviceIdx);

#[derive(Default)]
pub struct Search {
    /// The field is shown.
    pub open: bool,
    pub text: String,
    /// What was asked for last, and what the matches shown were found for.
    asked: Option<Key>,
    shown: Option<Key>,
    pub error: Option<String>,
    /// Matches in allocation order (live before the trace first).
    pub matches: Vec<ElementId>,
    /// Where the ticks go: `matches[first_started + i]` was allocated in action `starts[i]`
    /// (as x, the action's middle), ascending.
    starts: Vec<f64>,
    first_started: usize,
    /// One bit per element (empty: no search).
    pub marks: Arc<Vec<u32>>,
    /// Changes with every new set of marks (0: none), so the GPU side rebinds them.
    pub generation: u64,
    /// The match last gone to.
    pub current: Option<usize>,
    worker: Option<Worker>,
    /// Searches handed to a browser's web worker, not answered yet.
    offloaded: Vec<Receiver<Found>>,
}

static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A query for the thread.
struct Ask {
    key: Key,
    query: Query,
    session: Arc<Session>,
}

/// The matches of one query, as the thread found them.
struct Found {
    key: Key,
    matches: Vec<ElementId>,
    starts: Vec<f64>,
    first_started: usize,
    marks: Vec<u32>,
}

/// The search thread: the newest query waits in `slot`; `wake` says one is there.
struct Worker {
    slot: Arc<Mutex<Option<Ask>>>,
    wake: SyncSender<()>,
    found: Receiver<Found>,
}

impl Worker {
    fn start(ctx: &egui::Context) -> std::io::Result<Worker> {
        let slot: Arc<Mutex<Option<Ask>>> = Arc::default();
        let (wake, woken) = sync_channel::<()>(1);
        let (send, found) = sync_channel::<Found>(2);
        let (taken, ctx) = (Arc::clone(&slot), ctx.clone());
        std::thread::Builder::new().name("memviz-search".into()).spawn(move || {
            // Ends when the search is dropped (its ends of both channels with it).
            while woken.recv().is_ok() {
                let Some(ask) = taken.lock().ok().and_then(|mut s| s.take()) else { continue };
                if send.send(find_matches(ask)).is_err() {
                    return;
                }
                ctx.request_repaint();
            }
        })?;
        Ok(Worker { slot, wake, found })
    }

    /// Leaves `ask` for the thread, in place of one it has not taken yet.
    fn ask(&self, ask: Ask) {
        if let Ok(mut s) = self.slot.lock() {
            *s = Some(ask);
        }
        // Full: the thread is woken already and takes the slot's newest query.
        let _ = self.wake.try_send(());
    }
}

/// The matches of `ask`, sorted in allocation order, with their start actions and marks.
fn find_matches(ask: Ask) -> Found {
    let Ask { key, query, session } = ask;
    let matches = matching(&session, key.1, &query);
    found(key, matches, &session)
}

/// The matches of `query` on device `d`, in allocation order (live before the trace first).
fn matching(session: &Session, d: DeviceIdx, query: &Query) -> Vec<ElementId> {
    let data = super::data::DeviceData::new(session, d);
    let t = data.timeline();
    let mut matches = find::matching(&t, session.root(), query);
    let e = t.layout.elements;
    matches.sort_by_key(|id| (e.start[id.index()].wrapping_add(1), id.0));
    matches
}

/// `matches` (in allocation order) with their start actions and marks.
fn found(key: Key, matches: Vec<ElementId>, session: &Session) -> Found {
    let e = session.layout(key.1).elements;
    let first_started = matches.partition_point(|id| e.start[id.index()] == crate::layout::BEFORE_TRACE);
    let starts = matches[first_started..].iter().map(|id| f64::from(e.start[id.index()]) + 0.5).collect();
    let mut marks = vec![0u32; e.len().div_ceil(32)];
    for id in &matches {
        marks[id.index() / 32] |= 1 << (id.index() % 32);
    }
    Found { key, matches, starts, first_started, marks }
}

/// A search as a browser's web worker answers it (`Offload::Search`, the text its argument):
/// the matches' ids in allocation order, little-endian `u32`s; `Err` where the text is no query.
pub fn answer(session: &Session, d: DeviceIdx, text: &str) -> Result<Vec<u8>, String> {
    let query = Query::parse_any(text)?;
    Ok(matching(session, d, &query).iter().flat_map(|id| id.0.to_le_bytes()).collect())
}

/// [`answer`]'s bytes read back; `None` for anything else (a length not a multiple of 4).
pub fn read_answer(bytes: &[u8]) -> Option<Vec<ElementId>> {
    bytes
        .len()
        .is_multiple_of(4)
        .then(|| bytes.chunks_exact(4).map(|b| ElementId(u32::from_le_bytes(b.try_into().expect("4 bytes")))).collect())
}

/// The matches a worker sent for `key`, where they are matches of device `key.1` in allocation
/// order (else `None`: found here instead).
fn offloaded(key: &Key, bytes: &[u8], session: &Session) -> Option<Vec<ElementId>> {
    let matches = read_answer(bytes)?;
    let e = session.layout(key.1).elements;
    let order = |id: &ElementId| Some((e.start.get(id.index())?.wrapping_add(1), id.0));
    let keys: Option<Vec<_>> = matches.iter().map(order).collect();
    keys?.is_sorted_by(|a, b| a < b).then_some(matches)
}

impl Search {
    /// True while a search marks something (the shader dims the rest).
    pub fn active(&self) -> bool {
        self.open && !self.text.trim().is_empty() && self.error.is_none()
    }

    /// True while the matches of the text shown are being found (screenshots and tests wait).
    pub fn pending(&self) -> bool {
        self.open && self.asked != self.shown
    }

    /// Asks for the matches when the text or the device changed, and takes those that arrived;
    /// `ctx` repaints when the thread finds them.
    pub fn update(
        &mut self,
        session: &Arc<Session>,
        d: DeviceIdx,
        platform: &crate::platform::PlatformRef,
        ctx: &egui::Context,
    ) {
        self.receive();
        let key = (self.text.trim().to_owned(), d);
        if self.asked.as_ref() == Some(&key) {
            return;
        }
        self.asked = Some(key.clone());
        self.error = None;
        if key.0.is_empty() {
            return self.show(Found {
                key,
                matches: Vec::new(),
                starts: Vec::new(),
                first_started: 0,
                marks: Vec::new(),
            });
        }
        let query = match Query::parse_any(&key.0) {
            Ok(q) => q,
            Err(e) => {
                self.show(Found { key, matches: Vec::new(), starts: Vec::new(), first_started: 0, marks: Vec::new() });
                self.error = Some(e);
                return;
            }
        };
        if cfg!(target_arch = "wasm32") {
            // A browser starts no thread: the page's web worker finds the matches where it can,
            // else they are found here, as the query is typed.
            if !self.offload(platform, &key, session, ctx) {
                self.show(find_matches(Ask { key, query, session: Arc::clone(session) }));
            }
            return;
        }
        if self.worker.is_none() {
            match Worker::start(ctx) {
                Ok(w) => self.worker = Some(w),
                Err(e) => {
                    self.shown = self.asked.clone();
                    self.error = Some(format!("could not start the search thread: {e}"));
                    return;
                }
            }
        }
        if let Some(w) = &self.worker {
            w.ask(Ask { key, query, session: Arc::clone(session) });
        }
    }

    /// Hands the search `key` to the platform's worker ([`crate::platform::Platform::offload`]);
    /// its matches arrive as the thread's do. False where the platform has none.
    fn offload(
        &mut self,
        platform: &crate::platform::PlatformRef,
        key: &Key,
        session: &Arc<Session>,
        ctx: &egui::Context,
    ) -> bool {
        let (send, answer) = sync_channel::<Found>(1);
        let (own, asked, ctx) = (Arc::clone(session), key.clone(), ctx.clone());
        let done = Box::new(move |bytes: Option<Vec<u8>>| {
            let matches = bytes.and_then(|b| offloaded(&asked, &b, &own));
            let f = match (matches, Query::parse_any(&asked.0)) {
                (Some(m), _) => found(asked, m, &own),
                (None, Ok(query)) => find_matches(Ask { key: asked, query, session: own }),
                (None, Err(_)) => return,
            };
            let _ = send.try_send(f);
            ctx.request_repaint();
        });
        let job = crate::platform::Offload::Search;
        if !platform.offload(job, &key.0, &session.archive.path, key.1, done) {
            return false;
        }
        self.offloaded.push(answer);
        true
    }

    /// Takes the matches of the query asked last, if they arrived (older ones are dropped).
    fn receive(&mut self) {
        let mut newest = None;
        // A worker's answers, each on its own channel, in the order asked.
        self.offloaded.retain(|answer| match answer.try_recv() {
            Ok(f) => {
                if Some(&f.key) == self.asked.as_ref() {
                    newest = Some(f);
                }
                false
            }
            Err(TryRecvError::Empty) => true,
            Err(TryRecvError::Disconnected) => false,
        });
        let Some(w) = &self.worker else {
            if let Some(f) = newest {
                self.show(f);
            }
            return;
        };
        loop {
            match w.found.try_recv() {
                Ok(f) if Some(&f.key) == self.asked.as_ref() => newest = Some(f),
                Ok(_) => {}
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        if let Some(f) = newest {
            self.show(f);
        }
    }

    fn show(&mut self, f: Found) {
        self.generation =
            if f.key.0.is_empty() { 0 } else { GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed) };
        self.shown = Some(f.key);
        (self.matches, self.starts, self.first_started) = (f.matches, f.starts, f.first_started);
        self.marks = Arc::new(f.marks);
        self.current = None;
    }

    /// The next (or previous) match after the current one, wrapping.
    pub fn step(&mut self, forward: bool) -> Option<ElementId> {
        let n = self.matches.len();
        if n == 0 {
            return None;
        }
        let i = match (self.current, forward) {
            (None, true) => 0,
            (None, false) => n - 1,
            (Some(i), true) => (i + 1) % n,
            (Some(i), false) => (i + n - 1) % n,
        };
        self.current = Some(i);
        Some(self.matches[i])
    }

    /// A tick at the top of `rect` where each match shown by `view` (the action axis) was
    /// allocated, at most one a point, so a match too small to be drawn at this zoom is still
    /// found; the current one taller, on top.
    pub fn ticks(&self, painter: &egui::Painter, view: &View, rect: egui::Rect) {
        let colour = egui::Color32::from_rgb(255, 235, 64);
        let data = |sx: f32| view.action_from_screen(rect, sx);
        let point = data(rect.left() + 1.0) - data(rect.left());
        let in_plot = |x: f32| (rect.left()..=rect.right()).contains(&x);
        for i in super::marks::thinned(&self.starts, data(rect.left()), data(rect.right()), point) {
            let x = view.screen_from_action(rect, self.starts[i]);
            if in_plot(x) {
                painter.vline(x, rect.top()..=rect.top() + 6.0, egui::Stroke::new(1.0, colour));
            }
        }
        let current = self.current.and_then(|i| self.starts.get(i.checked_sub(self.first_started)?));
        if let Some(&k) = current
            && let x = view.screen_from_action(rect, k)
            && in_plot(x)
        {
            painter.vline(x, rect.top()..=rect.top() + 12.0, egui::Stroke::new(2.0, colour));
        }
    }
}
