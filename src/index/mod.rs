//! The index pipeline: a snapshot → its `.memviz` archive. `pipeline` runs the stages (read,
//! lay out, derive, the allocator's pass, checkpoints and tiles) while `held` holds the rows the
//! decoder completes, `reading` takes them on two workers and `columns` compresses the event table; `build` makes the rkyv root
//! and `series` its allocator section (its spans taken by the pool's threads, `share`); `cache` finds, reuses or rebuilds a snapshot's archive;
//! `folder` indexes a job's folder of per-rank snapshots. The file itself is `crate::file`'s.

pub mod build;
pub mod cache;
pub mod columns;
pub mod folder;
pub mod held;
pub mod pipeline;
pub mod reading;
pub mod series;
pub mod share;
pub mod threads;

use std::path::{Path, PathBuf};

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
