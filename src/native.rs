//! The viewer's [`Platform`] on this machine: archives mapped (`file`), snapshots through the
//! index's cache (`index::cache`), a job's ranks found by `index::folder`, the background checks
//! on a named thread, files written atomically (`output`), start-up timings (`timings`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::archive::{Session, guard::Deferring};
use crate::model::Job;
use crate::viewer::platform::{FirstFrame, Platform, PlatformRef};

/// The native platform.
pub struct Native;

/// The native platform, for [`crate::viewer::app::ViewerOptions::platform`].
pub fn platform() -> PlatformRef {
    PlatformRef(Arc::new(Native))
}

impl Platform for Native {
    fn is_archive(&self, path: &Path) -> bool {
        crate::file::is_archive(path)
    }

    fn open_archive(&self, path: &Path) -> Result<Arc<Session>, String> {
        crate::file::open_session(path).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn open_snapshot(&self, path: &Path, cache: bool, progress: &dyn Fn(u64)) -> Result<Arc<Session>, String> {
        crate::index::cache::open_session(path, cache, progress).map(Arc::new).map_err(|e| format!("{e:#}"))
    }

    /// [`Session::check_everything`] on a named thread, once the first frame is drawn (or after
    /// a second: on two cores a check beside the first frame would halve its share).
    fn start_checks(&self, session: &Arc<Session>, first_frame: &Arc<FirstFrame>) {
        let (s, gate) = (Arc::clone(session), Arc::clone(first_frame));
        let deferring = Deferring::new();
        let spawned = std::thread::Builder::new().name("memviz-verify".into()).spawn(move || {
            gate.wait(std::time::Duration::from_secs(1));
            s.check_everything(deferring);
        });
        if let Err(e) = spawned {
            eprintln!("warning: could not start the checking thread ({e}): checking the archive here");
            session.check_ids_here();
        }
    }

    fn job(&self, paths: &[PathBuf]) -> Result<Job, String> {
        crate::index::folder::job(paths)
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
        crate::output::write_atomic(path, |w| Ok(w.write_all(bytes)?))
    }

    fn print(&self, text: &str) -> anyhow::Result<()> {
        crate::output::write_to(None, |w| Ok(w.write_all(text.as_bytes())?))
    }

    fn timing(&self, what: &str, ms: f64) {
        crate::timings::at(what, ms);
    }
}
