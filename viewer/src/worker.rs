//! Background work for the viewer, on named threads behind bounded channels: decompressing
//! archive tiles and rasterising views from checkpoints. The UI thread only polls results.

use crate::model::DeviceIdx;
use std::collections::HashSet;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Mutex};

use eframe::egui;

use super::data::{Plane, Session};
use super::gpu::{TexData, TexKey};
use crate::lod::raster::{Band, action_columns, rasterize_columns, samples_for_ranges, time_columns};
use memviz_format::{TILE_H, TILE_W, texel_keys};

/// What a view raster covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ViewSpec {
    pub device: DeviceIdx,
    pub plane: Plane,
    /// Actions `[x0, x1)`, or µs when `time_axis`.
    pub x0: f64,
    pub x1: f64,
    /// Bytes `[y0, y1)`.
    pub y0: f64,
    pub y1: f64,
    pub columns: u32,
    pub rows: u32,
    pub time_axis: bool,
    /// `--max-entries`: how many elements are drawn individually (the mask travels beside).
    pub max_entries: Option<u32>,
    /// The private pools as bands (their mask travels beside).
    pub pools: bool,
}

/// Which elements a raster draws individually, and the floor of the band the others form (the
/// private pools' reserved bytes per action), shared with the workers.
#[derive(Debug, Clone, PartialEq)]
pub struct Mask {
    pub keep: Vec<bool>,
    pub at_least: Option<Vec<u64>>,
}

impl Mask {
    pub fn band(&self) -> Band<'_> {
        Band { keep: &self.keep, at_least: self.at_least.as_deref() }
    }
}

/// Which elements a raster draws individually.
#[derive(Debug, Clone)]
pub enum Keep {
    /// Every element.
    All,
    /// Those of a mask made elsewhere (the pools').
    Mask(Arc<Mask>),
    /// `--max-entries N`: the N largest of the view's timeline, the mask made by the worker.
    Largest(usize),
}

enum Job {
    Tile { key: TexKey, device: DeviceIdx, plane: Plane, level: usize, tile: usize },
    Raster { key: TexKey, spec: ViewSpec, keep: Keep },
}

impl Job {
    fn key(&self) -> TexKey {
        match self {
            Job::Tile { key, .. } | Job::Raster { key, .. } => *key,
        }
    }
}

/// The `--max-entries` masks, made on the workers: the elements of one timeline sorted by size
/// once, so each new N (the detail slider, dragged) is a fill of one mask; and the last mask, for
/// the rasters of a pan. Shared by the worker threads.
#[derive(Default)]
struct Largest {
    /// The elements of (device, plane), largest first.
    order: Option<(Of, Arc<Vec<u32>>)>,
    /// The mask of the N largest of (device, plane).
    mask: Option<((Of, usize), Arc<Mask>)>,
}

/// A timeline: device and plane.
type Of = (DeviceIdx, Plane);

impl Largest {
    /// The mask of the `n` largest elements of `plane` on device `d`.
    fn mask(cache: &Mutex<Largest>, session: &Session, d: DeviceIdx, plane: Plane, n: usize) -> Arc<Mask> {
        let key = ((d, plane), n);
        let (mask, order) = match cache.lock() {
            Ok(c) => (
                c.mask.as_ref().filter(|(k, _)| *k == key).map(|(_, m)| Arc::clone(m)),
                c.order.as_ref().filter(|(k, _)| *k == (d, plane)).map(|(_, o)| Arc::clone(o)),
            ),
            Err(_) => (None, None),
        };
        if let Some(m) = mask {
            return m;
        }
        let sizes = super::timeline::stacked_in(session, d, plane).layout.elements.size;
        let order = order.unwrap_or_else(|| Arc::new(crate::lod::raster::by_size(sizes)));
        let keep = crate::lod::raster::first_of(&order, sizes.len(), n);
        let mask = Arc::new(Mask { keep, at_least: None });
        if let Ok(mut c) = cache.lock() {
            c.order = Some(((d, plane), order));
            c.mask = Some((key, Arc::clone(&mask)));
        }
        mask
    }
}

/// The sample action of each column of a raster (`None`: a column outside the trace).
pub type Samples = Arc<Vec<Option<u32>>>;

/// A finished job: its texture (`None` when it failed: the session says why), and for a raster
/// the sample action of each of its columns.
struct Done {
    key: TexKey,
    tex: Option<TexData>,
    samples: Option<Samples>,
}

pub struct Worker {
    jobs: SyncSender<Job>,
    done: Receiver<Done>,
    pub in_flight: HashSet<TexKey>,
    /// The newest raster's key and column samples: overlays drawn per column of the raster (the
    /// pools' bands) read them instead of searching the totals again each frame.
    samples: Option<(TexKey, Samples)>,
    /// No thread could be started (a browser): the jobs run in [`Self::poll`], a few a frame.
    inline: Option<Inline>,
}

/// What the jobs need when they run on the UI thread, [`INLINE_JOBS`] a frame.
struct Inline {
    rx: Arc<Mutex<Receiver<Job>>>,
    tx: SyncSender<Done>,
    session: Arc<Session>,
    largest: Arc<Mutex<Largest>>,
    ctx: egui::Context,
}

/// Jobs run a frame where there are no worker threads: a tile decodes in about a millisecond.
const INLINE_JOBS: usize = 2;

const THREADS: usize = 2;
const QUEUE: usize = 64;

impl Worker {
    pub fn start(session: Arc<Session>, ctx: egui::Context) -> Worker {
        let (jobs, job_rx) = sync_channel::<Job>(QUEUE);
        let (done_tx, done) = sync_channel::<Done>(QUEUE);
        let job_rx = Arc::new(Mutex::new(job_rx));
        let largest = Arc::new(Mutex::new(Largest::default()));
        let mut started = 0;
        for i in 0..THREADS {
            let (rx, tx, session, ctx) = (Arc::clone(&job_rx), done_tx.clone(), Arc::clone(&session), ctx.clone());
            let largest = Arc::clone(&largest);
            let spawned = std::thread::Builder::new().name(format!("memviz-tiles-{i}")).spawn(move || {
                loop {
                    let job = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return };
                    // Every job is answered, so none stays in flight.
                    if tx.send(run(&session, &largest, job)).is_err() {
                        return;
                    }
                    ctx.request_repaint();
                }
            });
            match spawned {
                Ok(_) => started += 1,
                // Fewer workers only make tiles arrive later; with none the jobs run inline.
                Err(e) if !cfg!(target_arch = "wasm32") => eprintln!("warning: could not start tile worker {i}: {e}"),
                Err(_) => {}
            }
        }
        let inline = (started == 0).then(|| Inline { rx: job_rx, tx: done_tx, session, largest, ctx });
        Worker { jobs, done, in_flight: HashSet::new(), samples: None, inline }
    }

    /// Asks for a pyramid tile; false when the queue is full (ask again next frame).
    pub fn request_tile(&mut self, key: TexKey, device: DeviceIdx, plane: Plane, level: usize, tile: usize) -> bool {
        self.submit(key, Job::Tile { key, device, plane, level, tile })
    }

    pub fn request_raster(&mut self, key: TexKey, spec: ViewSpec, keep: Keep) -> bool {
        self.submit(key, Job::Raster { key, spec, keep })
    }

    fn submit(&mut self, key: TexKey, job: Job) -> bool {
        if self.in_flight.contains(&key) {
            return true;
        }
        match self.jobs.try_send(job) {
            Ok(()) => {
                self.in_flight.insert(key);
                true
            }
            Err(_) => false,
        }
    }

    /// Results that arrived since the last poll (without worker threads, a few jobs run first).
    pub fn poll(&mut self) -> Vec<TexData> {
        if let Some(i) = &self.inline {
            for _ in 0..INLINE_JOBS {
                let job = match i.rx.lock() {
                    Ok(rx) => rx.try_recv(),
                    Err(_) => break,
                };
                let Ok(job) = job else { break };
                let _ = i.tx.try_send(run(&i.session, &i.largest, job));
                // More may wait: the next frame runs them.
                i.ctx.request_repaint();
            }
        }
        let mut out = Vec::new();
        loop {
            match self.done.try_recv() {
                Ok(Done { key, tex, samples }) => {
                    self.in_flight.remove(&key);
                    if let Some(s) = samples {
                        self.samples = Some((key, s));
                    }
                    out.extend(tex);
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return out,
            }
        }
    }

    pub fn busy(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// The column samples of raster `key`, if it is the newest raster that arrived.
    pub fn raster_samples(&self, key: &TexKey) -> Option<&Samples> {
        self.samples.as_ref().filter(|(k, _)| k == key).map(|(_, s)| s)
    }
}

/// Runs `job`; over a session found bad, answers it without reading (the window shows the
/// archive's one line).
fn run(session: &Session, largest: &Mutex<Largest>, job: Job) -> Done {
    if session.is_bad() {
        return Done { key: job.key(), tex: None, samples: None };
    }
    match job {
        Job::Tile { key, device, plane, level, tile } => {
            // (No segment timeline, in an archive made before format 4: the view asks for none.)
            let Some(stacked) = session.stacked(device, plane) else { return Done { key, tex: None, samples: None } };
            let tex = session.noting(stacked.tile(level, tile)).map(|(texels, keys)| {
                // An element tile of an archive that stores no keys: made here, off the UI thread.
                let keys = keys.or_else(|| (plane == Plane::Elements).then(|| texel_keys(&texels, stacked.sites)));
                TexData { key, width: TILE_W, height: TILE_H, texels: Arc::new(texels), site_keys: keys.map(Arc::new) }
            });
            Done { key, tex, samples: None }
        }
        Job::Raster { key, spec, keep } => {
            let mask = match keep {
                Keep::All => None,
                Keep::Mask(m) => Some(m),
                Keep::Largest(n) => Some(Largest::mask(largest, session, spec.device, spec.plane, n)),
            };
            let (tex, samples) = raster(session, key, spec, mask.as_deref().map(Mask::band));
            Done { key, tex: Some(tex), samples: Some(Arc::new(samples)) }
        }
    }
}

/// Rasterises exactly what a view shows, one texel per screen pixel; with the sample action of
/// each column.
pub fn raster(session: &Session, key: TexKey, spec: ViewSpec, keep: Option<Band<'_>>) -> (TexData, Vec<Option<u32>>) {
    let stacked = super::timeline::stacked_in(session, spec.device, spec.plane);
    let (layout, cps) = (stacked.layout, stacked.checkpoints);
    let samples = if spec.time_axis {
        let times = session.time_axis_now(spec.device);
        samples_for_ranges(layout.totals, time_columns(&times, spec.x0, spec.x1, spec.columns))
    } else {
        samples_for_ranges(layout.totals, action_columns(spec.x0, spec.x1, spec.columns))
    };
    let lo = spec.y0.max(0.0).round() as u64;
    let hi = spec.y1.max(1.0).round() as u64;
    let r = rasterize_columns(layout, cps, &samples, spec.rows, lo, hi, keep);
    // The element timeline's keys by site, made here rather than at the upload on the UI thread
    // (a raster's ids reach across the whole site table: a cache miss a texel on a big archive).
    let site_keys = (spec.plane == Plane::Elements).then(|| Arc::new(texel_keys(&r.texels, stacked.sites)));
    (TexData { key, width: r.columns, height: r.rows, texels: Arc::new(r.texels), site_keys }, samples)
}
