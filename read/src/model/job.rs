//! A multi-GPU job's files: what `index::folder` finds in a job's folder, and what the rank strip
//! and `memviz ranks` read, and how a file's name gives its rank. Finding the files in a folder is
//! the index's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

/// The file-name suffixes of the compressors memviz reads (names are only for naming: what a
/// file holds is read from its bytes).
pub const COMPRESSED_SUFFIXES: [&str; 6] = [".gz", ".zst", ".zstd", ".xz", ".bz2", ".lz4"];

/// The file-name suffixes of snapshots (torch's `_dump_snapshot` takes any name; these are the
/// usual ones).
pub const SNAPSHOT_SUFFIXES: [&str; 4] = [".pickle", ".pkl", ".pt", ".json"];

/// A snapshot's file name without its compression suffix, then its snapshot suffix (any case):
/// `run.pickle.xz` → `run`, `rank3.JSON.gz` → `rank3`; a name that is nothing else stays.
pub fn snapshot_stem(name: &str) -> &str {
    let strip = |stem: &str, suffixes: &[&str]| {
        let lower = stem.to_ascii_lowercase();
        suffixes.iter().find(|s| lower.ends_with(*s)).map_or(stem.len(), |s| stem.len() - s.len())
    };
    let stem = &name[..strip(name, &COMPRESSED_SUFFIXES)];
    let stem = &stem[..strip(stem, &SNAPSHOT_SUFFIXES)];
    if stem.is_empty() { name } else { stem }
}

/// The last integer in a file name (`rank3.pickle` → 3, `oom_rank_3.pickle` → 3,
/// `snapshot-0003.pickle.gz` → 3, `rank3.memviz` → 3); digits of a compression or format suffix
/// do not count.
pub fn rank_in_name(name: &str) -> Option<u64> {
    // The snapshot's suffixes are not part of the number (files are told apart by their bytes).
    let stem = name.strip_suffix(".memviz").unwrap_or(name);
    let stem = snapshot_stem(stem);
    let bytes = stem.as_bytes();
    let end = bytes.iter().rposition(u8::is_ascii_digit)? + 1;
    let start = bytes[..end].iter().rposition(|b| !b.is_ascii_digit()).map_or(0, |i| i + 1);
    stem[start..end].parse().ok()
}

/// `paths` with their ranks: the last integer in each name. The first file (in the order given)
/// with a number keeps it; a file whose name has no number, or a number an earlier file has, is
/// listed apart (after the numbered ones, with a warning line), never shifting the others.
/// When no name has a number there is nothing to set apart: one line says so. `relative` is
/// the path under `root`.
pub fn ranked(paths: Vec<PathBuf>, root: &Path) -> Job {
    let relative = |p: &Path| p.strip_prefix(root).map_or_else(|_| p.to_path_buf(), Path::to_path_buf);
    let mut first_with: BTreeMap<u64, PathBuf> = BTreeMap::new();
    let mut numbered = Vec::new();
    let mut apart = Vec::new();
    let mut warnings = Vec::new();
    let named: Vec<Option<u64>> =
        paths.iter().map(|p| p.file_name().and_then(|n| rank_in_name(&n.to_string_lossy()))).collect();
    let any_numbered = named.iter().any(Option::is_some);
    for (path, number) in paths.into_iter().zip(named) {
        let rel = relative(&path);
        match number {
            Some(n) => match first_with.get(&n) {
                Some(first) => {
                    warnings.push(format!(
                        "{}: rank {n} again (also in {}); listed apart under its file name",
                        rel.display(),
                        first.display()
                    ));
                    apart.push(RankFile { path, relative: rel, rank: None });
                }
                None => {
                    first_with.insert(n, rel.clone());
                    numbered.push(RankFile { path, relative: rel, rank: Some(n) });
                }
            },
            None => {
                if any_numbered {
                    warnings.push(format!(
                        "{}: no rank number in its name; listed apart under its file name",
                        rel.display()
                    ));
                }
                apart.push(RankFile { path, relative: rel, rank: None });
            }
        }
    }
    if !any_numbered && !apart.is_empty() {
        warnings.push("no rank number in the file names; each file is shown under its name".to_owned());
    }
    numbered.sort_by_key(|f| f.rank);
    numbered.extend(apart);
    Job { files: numbered, warnings }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_come_from_the_last_integer_of_the_name() {
        assert_eq!(rank_in_name("rank3.pickle"), Some(3));
        assert_eq!(rank_in_name("oom_rank_3.pickle"), Some(3));
        assert_eq!(rank_in_name("snapshot-0003.pickle.gz"), Some(3));
        assert_eq!(rank_in_name("gpu12_step400.json.zst"), Some(400));
        assert_eq!(rank_in_name("snapshot.pickle"), None);
        assert_eq!(rank_in_name("mem.pt.bz2"), None, "bz2's digit is not a rank");
        assert_eq!(rank_in_name("rank7.memviz"), Some(7));
        assert_eq!(rank_in_name("trace-r5.pickle"), Some(5));
        assert_eq!(rank_in_name("5.pickle"), Some(5));
        assert_eq!(rank_in_name("rank_5.pickle.gz"), Some(5));
    }

    #[test]
    fn a_file_keeps_the_number_in_its_name() {
        let paths = |names: &[&str]| names.iter().map(PathBuf::from).collect::<Vec<_>>();
        let ranks = |job: &Job| job.files.iter().map(|f| (f.label(), f.rank)).collect::<Vec<_>>();
        // No number, or a number taken: listed apart, after the numbered ones; no one renumbered.
        let job =
            ranked(paths(&["baseline.pickle", "rank10.pickle", "rank5.pickle", "rank5.pickle.gz"]), Path::new(""));
        assert_eq!(
            ranks(&job),
            [
                ("rank 5".to_owned(), Some(5)),
                ("rank 10".to_owned(), Some(10)),
                ("baseline.pickle".to_owned(), None),
                ("rank5.pickle.gz".to_owned(), None)
            ]
        );
        assert_eq!(job.warnings.len(), 2, "{:?}", job.warnings);
        assert!(job.warnings[0].starts_with("baseline.pickle: no rank number"), "{:?}", job.warnings);
        assert!(job.warnings[1].starts_with("rank5.pickle.gz: rank 5 again (also in rank5.pickle)"));
        // Names without numbers: all shown by name, one line saying so.
        let job = ranked(paths(&["before.pickle", "after.pickle"]), Path::new(""));
        assert_eq!(job.files.iter().map(|f| f.rank).collect::<Vec<_>>(), [None, None]);
        assert_eq!(job.warnings.len(), 1);
        assert!(
            ranked(paths(&["trace-r5.pickle", "5.pickle.zst"]), Path::new("")).warnings[0].contains("rank 5 again")
        );
    }
}
