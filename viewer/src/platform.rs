//! What the viewer needs of the machine it runs on, given to it rather than reached for: opening
//! archives and snapshots, checking an archive in the background, finding a job's ranks, writing
//! a file, standard output, start-up timings. `memviz`'s `native` module implements it with
//! mapped files, the index and threads; a browser's would with fetch and bounded work
//! (docs/design/11).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::archive::Session;
use crate::model::{DeviceIdx, Job};

pub trait Platform: Send + Sync {
    /// Whether `path` is a `.memviz` archive (by its first bytes).
    fn is_archive(&self, path: &Path) -> bool;
    /// An archive, opened and validated.
    fn open_archive(&self, path: &Path) -> Result<Arc<Session>, String>;
    /// A snapshot through its cached archive (indexed first when none matches; without the
    /// cache, a temporary one); `progress` gets the bytes read so far.
    fn open_snapshot(&self, path: &Path, cache: bool, progress: &dyn Fn(u64)) -> Result<Arc<Session>, String>;
    /// Starts `session`'s background checks ([`Session::check_everything`]), to run once
    /// `first_frame` says the first frame is drawn.
    fn start_checks(&self, session: &Arc<Session>, first_frame: &Arc<FirstFrame>);
    /// A job's rank files among `paths` (a folder, or the files), with what to warn about.
    fn job(&self, paths: &[PathBuf]) -> Result<Job, String>;
    /// Writes `bytes` to `path`, whole or not at all.
    fn write(&self, path: &Path, bytes: &[u8]) -> anyhow::Result<()>;
    /// Prints `text` on standard output (`--bench`'s report).
    fn print(&self, text: &str) -> anyhow::Result<()>;
    /// A start-up stage ended `ms` after the process started.
    fn timing(&self, what: &str, ms: f64);
    /// What "copy link" copies to reopen `view` of the file at `path`: here, the command line.
    fn link(&self, path: &Path, view: &crate::open_view::ViewState) -> String {
        view.command(path)
    }
    /// Works out `job` (with its argument `arg`: a search's text, else empty) for device `d` of
    /// the archive at `path` elsewhere where the platform can (a browser: a web worker, as the
    /// page's own thread would stall), handing its answer's bytes to `done` (`None`: it failed
    /// there); `false` where it cannot (the caller works it out itself).
    fn offload(
        &self,
        _job: Offload,
        _arg: &str,
        _path: &Path,
        _d: DeviceIdx,
        _done: Box<dyn FnOnce(Option<Vec<u8>>)>,
    ) -> bool {
        false
    }
    /// What is on screen, each frame: the file at a path on a view, or `None` for a job's strip
    /// or comparison (a browser keeps it in the page's URL); `true` asks to be told again shortly
    /// even if nothing moves (a change it has not kept yet).
    fn showing(&self, _shown: Option<(&Path, &crate::open_view::ViewState)>) -> bool {
        false
    }
}

/// Work the viewer can hand to another worker ([`Platform::offload`]), its answer as bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    /// A device's categories (`categories::DeviceCategories::encode`).
    Categories,
    /// What the row under the top bar says of a device (`timeline::TopFacts::encode`).
    TopFacts,
    /// A device's OOM markers (`ooms::OomMarks::encode`).
    OomMarks,
    /// A device's private pools for the pools view (`pools::encode`).
    Pools,
    /// A device's annotation spans placed for the lane, by the default filter
    /// (`span_marks::SpanMarks::encode`).
    SpanMarks,
    /// The matches of a search, its text the job's argument (`search::answer`).
    Search,
}

impl Offload {
    /// The job's name, as a worker is asked for it.
    pub fn name(self) -> &'static str {
        match self {
            Offload::Categories => "categories",
            Offload::TopFacts => "top facts",
            Offload::OomMarks => "oom marks",
            Offload::Pools => "pools",
            Offload::SpanMarks => "annotation spans",
            Offload::Search => "search",
        }
    }
}

/// The platform a viewer runs on (what [`crate::app::ViewerOptions`] carries).
#[derive(Clone)]
pub struct PlatformRef(pub Arc<dyn Platform>);

impl std::ops::Deref for PlatformRef {
    type Target = dyn Platform;
    fn deref(&self) -> &(dyn Platform + 'static) {
        &*self.0
    }
}

impl std::fmt::Debug for PlatformRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlatformRef")
    }
}

/// No platform given: nothing can be opened (each attempt says so).
impl Default for PlatformRef {
    fn default() -> Self {
        PlatformRef(Arc::new(Unavailable))
    }
}

struct Unavailable;

const UNAVAILABLE: &str = "this viewer was given no platform to open files with";

impl Platform for Unavailable {
    fn is_archive(&self, _: &Path) -> bool {
        false
    }
    fn open_archive(&self, _: &Path) -> Result<Arc<Session>, String> {
        Err(UNAVAILABLE.into())
    }
    fn open_snapshot(&self, _: &Path, _: bool, _: &dyn Fn(u64)) -> Result<Arc<Session>, String> {
        Err(UNAVAILABLE.into())
    }
    fn start_checks(&self, session: &Arc<Session>, _: &Arc<FirstFrame>) {
        session.check_ids_here();
    }
    fn job(&self, _: &[PathBuf]) -> Result<Job, String> {
        Err(UNAVAILABLE.into())
    }
    fn write(&self, _: &Path, _: &[u8]) -> anyhow::Result<()> {
        anyhow::bail!(UNAVAILABLE)
    }
    fn print(&self, _: &str) -> anyhow::Result<()> {
        anyhow::bail!(UNAVAILABLE)
    }
    fn timing(&self, _: &str, _: f64) {}
}

/// Set once the viewer drew its first frame: the background checks start then.
#[derive(Default)]
pub struct FirstFrame {
    drawn: Mutex<bool>,
    ready: Condvar,
}

impl FirstFrame {
    /// The viewer drew its first frame (or needs the checks now).
    pub fn drawn(&self) {
        let mut d = self.drawn.lock().unwrap_or_else(PoisonError::into_inner);
        if !*d {
            *d = true;
            self.ready.notify_all();
        }
    }

    /// Waits until [`Self::drawn`], or `at_most`.
    pub fn wait(&self, at_most: std::time::Duration) {
        let d = self.drawn.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = self.ready.wait_timeout_while(d, at_most, |d| !*d);
    }
}
