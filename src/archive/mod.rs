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

/// `run/snap.pickle.gz` → `run/snap.memviz` (every compressor alike: [`crate::ingest::snapshot_stem`]).
pub fn default_path(snapshot: &Path) -> PathBuf {
    let name = snapshot.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    snapshot.with_file_name(format!("{}.memviz", crate::ingest::snapshot_stem(&name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_names() {
        assert_eq!(default_path(Path::new("a/b.pickle")), Path::new("a/b.memviz"));
        assert_eq!(default_path(Path::new("b.pickle.gz")), Path::new("b.memviz"));
        // Every compressor alike (`.xz` gave `run.pickle.xz.memviz`).
        for z in ["xz", "zst", "zstd", "bz2", "lz4", "GZ"] {
            assert_eq!(default_path(Path::new(&format!("run.pickle.{z}"))), Path::new("run.memviz"), "{z}");
        }
        assert_eq!(default_path(Path::new("run.json")), Path::new("run.memviz"));
        assert_eq!(default_path(Path::new("weird")), Path::new("weird.memviz"));
        assert_eq!(default_path(Path::new(".pickle")), Path::new(".pickle.memviz"));
    }
}
