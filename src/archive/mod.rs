//! `.memviz` archives: build (model → `memviz_format::schema::Root`), write atomically, open
//! with one validation, and read back as zero-copy views or as the whole model.
//! The byte layout itself belongs to the `memviz-format` crate (see format/FORMAT.md).

pub mod attrs;
pub mod build;
pub mod cache;
pub mod chunks;
pub mod columns;
pub mod consistency;
pub mod events;
pub mod folder;
pub mod guard;
pub mod open;
pub mod pages;
pub mod pipeline;
pub mod reading;
pub mod restore;
pub mod series;
pub mod session;
pub mod write;

use std::path::{Path, PathBuf};

pub use open::{Archive, ArchiveError, is_archive};
pub use session::{DeviceData, DeviceTimes, Plane, Session, StackedRef, TimeAxis};

/// Suffixes stripped from a snapshot's name to name its archive.
const SNAPSHOT_SUFFIXES: [&str; 7] = [".gz", ".zst", ".zstd", ".pickle", ".pkl", ".json", ".pt"];

/// `run/snap.pickle.gz` → `run/snap.memviz`.
pub fn default_path(snapshot: &Path) -> PathBuf {
    let name = snapshot.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut stem = name.as_str();
    while let Some(s) = SNAPSHOT_SUFFIXES.iter().find_map(|suf| stem.strip_suffix(suf)) {
        stem = s;
    }
    let stem = if stem.is_empty() { name.as_str() } else { stem };
    snapshot.with_file_name(format!("{stem}.memviz"))
}

/// When the last index begun began, for [`timed`]'s lines (set by the pipeline; a part timed
/// outside an index prints its length alone).
static INDEX_STARTED: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

/// An index begins at `at` (for [`timed`]'s lines).
fn index_started(at: std::time::Instant) {
    *INDEX_STARTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(at);
}

/// Runs `f`; with `MEMVIZ_TIMINGS` set, prints how long it took and when it ended (a part of a
/// stage, for benchmarks: which parts ran side by side, and which one the stage waited for).
pub(crate) fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let out = f();
    if std::env::var_os("MEMVIZ_TIMINGS").is_some() {
        let took = started.elapsed().as_secs_f64();
        match *INDEX_STARTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner) {
            Some(index) => {
                eprintln!("timing:   {what} took {took:.3} s, ended at {:.3} s", index.elapsed().as_secs_f64())
            }
            None => eprintln!("timing:   {what} took {took:.3} s"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_names() {
        assert_eq!(default_path(Path::new("a/b.pickle")), Path::new("a/b.memviz"));
        assert_eq!(default_path(Path::new("b.pickle.gz")), Path::new("b.memviz"));
        assert_eq!(default_path(Path::new("run.json")), Path::new("run.memviz"));
        assert_eq!(default_path(Path::new("weird")), Path::new("weird.memviz"));
        assert_eq!(default_path(Path::new(".pickle")), Path::new(".pickle.memviz"));
    }
}
