//! A multi-GPU job's files: what `index::folder` finds in a job's folder, and what the rank strip
//! and `memviz ranks` read. Plain data: finding them is the index's.

use std::path::PathBuf;

/// One snapshot of the folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankFile {
    pub path: PathBuf,
    /// Its path under the folder (archives under `-o OUTDIR` keep it).
    pub relative: PathBuf,
    /// The number in its name. `None` for a file listed apart: its name has no number, or an
    /// earlier file's name has the same one. Such a file is shown under its path, so that no
    /// rank is ever numbered by its place among the others.
    pub rank: Option<u64>,
}

impl RankFile {
    /// What tables and the strip call it: `rank 3`, or its path under the folder.
    pub fn label(&self) -> String {
        match self.rank {
            Some(r) => format!("rank {r}"),
            None => self.relative.display().to_string(),
        }
    }
}

/// The files of a job, and one line to say for each file listed apart (or skipped: not a
/// snapshot). The command prints the lines; the library only collects them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Job {
    /// Numbered files by rank, then those listed apart in the order given.
    pub files: Vec<RankFile>,
    pub warnings: Vec<String>,
}
