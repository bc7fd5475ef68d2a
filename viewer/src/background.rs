//! Work the UI never waits for. [`Pending`]: one device's derived view data worked out once on a
//! named thread (the OOM markers, the pools, the categories, the annotation lane), empty until it
//! is in. [`Latest`]: answers that follow the pointer (an element's details), worked out on a
//! named thread for the newest key asked, a few recent ones kept.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

use eframe::egui;

use super::data::Session;
use crate::model::DeviceIdx;

pub struct Pending<T> {
    pub device: DeviceIdx,
    pub ready: Arc<OnceLock<T>>,
}

impl<T: Send + Sync + 'static> Pending<T> {
    /// Starts `compute` for device `d` on a thread named `memviz-{what}`; if no thread can be
    /// started, says so once on standard error and stays empty.
    pub fn start(
        what: &'static str,
        session: &Arc<Session>,
        d: DeviceIdx,
        compute: impl FnOnce(&Session, DeviceIdx) -> T + Send + 'static,
    ) -> Pending<T> {
        let ready = Arc::new(OnceLock::new());
        let (out, session) = (Arc::clone(&ready), Arc::clone(session));
        if cfg!(target_arch = "wasm32") {
            // A browser starts no thread: worked out here, once, when first asked for.
            let _ = out.set(compute(&session, d));
            return Pending { device: d, ready };
        }
        let spawned = std::thread::Builder::new().name(format!("memviz-{what}")).spawn(move || {
            let _ = out.set(compute(&session, d));
        });
        if let Err(e) = spawned {
            eprintln!("warning: could not start the {what} thread ({e}): no {what}");
        }
        Pending { device: d, ready }
    }

    /// [`Self::start`] for work the platform can hand elsewhere (`Platform::offload`: a web
    /// worker in a browser), the answer's bytes read by `decode`; worked out as [`Self::start`]
    /// does where it cannot, and here when the answer does not come or does not read.
    #[allow(clippy::too_many_arguments)]
    pub fn start_offloaded(
        what: &'static str,
        session: &Arc<Session>,
        d: DeviceIdx,
        platform: &crate::platform::PlatformRef,
        ctx: &egui::Context,
        job: crate::platform::Offload,
        decode: fn(&[u8]) -> Option<T>,
        compute: fn(&Session, DeviceIdx) -> T,
    ) -> Pending<T> {
        let ready = Arc::new(OnceLock::new());
        let (out, own, ctx) = (Arc::clone(&ready), Arc::clone(session), ctx.clone());
        let done = Box::new(move |bytes: Option<Vec<u8>>| {
            let _ = out.set(bytes.as_deref().and_then(decode).unwrap_or_else(|| compute(&own, d)));
            ctx.request_repaint();
        });
        if platform.offload(job, "", &session.archive.path, d, done) {
            return Pending { device: d, ready };
        }
        Pending::start(what, session, d, compute)
    }

    pub fn get(&self) -> Option<&T> {
        self.ready.get()
    }
}

/// Answers kept by a [`Latest`] (a hovered and a pinned element's, a few moves back).
const LATEST_KEPT: usize = 8;

/// Answers worked out on a named thread for the newest key asked: asking for a key while another
/// is being worked out replaces the waiting one, so a pointer sweeping over thousands of elements
/// costs the answers for the few it rests on. The UI reads an answer once it is in (the thread
/// asks for a repaint) and never waits.
pub struct Latest<K, V> {
    shared: Arc<Shared<K, V>>,
    /// Where no thread starts (a browser): the computation, run in [`Self::get`].
    inline: Option<Compute<K, V>>,
}

/// A [`Latest`]'s computation, kept where it runs on the calling thread.
type Compute<K, V> = Box<dyn Fn(&K) -> V + Send>;

struct Shared<K, V> {
    state: Mutex<LatestState<K, V>>,
    wake: Condvar,
}

struct LatestState<K, V> {
    asked: Option<K>,
    working: Option<K>,
    done: VecDeque<(K, Arc<V>)>,
    /// An answer came in since [`Latest::busy`] last said: no frame may have shown it yet.
    arrived: bool,
    closed: bool,
}

impl<K, V> LatestState<K, V> {
    /// Keeps an answer, the newest first, [`LATEST_KEPT`] at most.
    fn keep(&mut self, key: K, value: Arc<V>) {
        self.done.push_front((key, value));
        self.done.truncate(LATEST_KEPT);
    }
}

impl<K, V> Shared<K, V> {
    fn lock(&self) -> std::sync::MutexGuard<'_, LatestState<K, V>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: Clone + PartialEq + Send + 'static, V: Send + Sync + 'static> Latest<K, V> {
    /// Starts the thread `memviz-{what}` that runs `compute`; if it cannot start, says so once
    /// on standard error and never answers.
    pub fn start(what: &'static str, ctx: egui::Context, compute: impl Fn(&K) -> V + Send + 'static) -> Self {
        let shared: Arc<Shared<K, V>> = Arc::new(Shared {
            state: Mutex::new(LatestState {
                asked: None,
                working: None,
                done: VecDeque::new(),
                arrived: false,
                closed: false,
            }),
            wake: Condvar::new(),
        });
        if cfg!(target_arch = "wasm32") {
            return Latest { shared, inline: Some(Box::new(compute)) };
        }
        let worker = Arc::clone(&shared);
        let spawned = std::thread::Builder::new().name(format!("memviz-{what}")).spawn(move || {
            loop {
                let key = {
                    let mut s = worker.lock();
                    while s.asked.is_none() && !s.closed {
                        s = worker.wake.wait(s).unwrap_or_else(PoisonError::into_inner);
                    }
                    if s.closed {
                        return;
                    }
                    let key = s.asked.take().expect("asked");
                    s.working = Some(key.clone());
                    key
                };
                let value = Arc::new(compute(&key));
                let mut s = worker.lock();
                s.working = None;
                s.keep(key, value);
                s.arrived = true;
                drop(s);
                ctx.request_repaint();
            }
        });
        if let Err(e) = spawned {
            eprintln!("warning: could not start the {what} thread ({e}): no {what}");
        }
        Latest { shared, inline: None }
    }

    /// The answer for `key` once it is in; until then asks for it (once) and returns `None`.
    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        let mut s = self.shared.lock();
        if let Some((_, v)) = s.done.iter().find(|(k, _)| k == key) {
            return Some(Arc::clone(v));
        }
        if let Some(compute) = &self.inline {
            let value = Arc::new(compute(key));
            s.keep(key.clone(), Arc::clone(&value));
            return Some(value);
        }
        if s.working.as_ref() != Some(key) && s.asked.as_ref() != Some(key) {
            s.asked = Some(key.clone());
            self.shared.wake.notify_one();
        }
        None
    }

    /// The answer most recently worked out, whatever its key.
    pub fn last(&self) -> Option<(K, Arc<V>)> {
        self.shared.lock().done.front().map(|(k, v)| (k.clone(), Arc::clone(v)))
    }

    /// True while an answer is asked for or being worked out, and once after one came in (so
    /// whoever waits for the view to settle draws a frame that shows it).
    pub fn busy(&self) -> bool {
        let mut s = self.shared.lock();
        s.asked.is_some() || s.working.is_some() || std::mem::take(&mut s.arrived)
    }
}

impl<K, V> Drop for Latest<K, V> {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_all();
    }
}
