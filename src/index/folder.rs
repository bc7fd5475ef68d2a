//! A folder of per-rank snapshots (what a multi-GPU job leaves behind): finding them among the
//! folder's other files (by their first bytes), the rank of each, a disjoint slice of them for one machine of many, and indexing them in parallel.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memviz_format::SourceStamp;

use super::pipeline::{IndexSummary, build_archive};
use crate::ingest::{self, Sniffed};

pub use crate::model::{Job, RankFile};

/// The last integer in a file name (`rank3.pickle` → 3, `oom_rank_3.pickle` → 3,
/// `snapshot-0003.pickle.gz` → 3, `rank3.memviz` → 3); digits of a compression or format suffix
/// do not count.
pub fn rank_in_name(name: &str) -> Option<u64> {
    // The snapshot's suffixes are not part of the number (files are told apart by their bytes).
    let stem = name.strip_suffix(".memviz").unwrap_or(name);
    let stem = crate::ingest::snapshot_stem(stem);
    let bytes = stem.as_bytes();
    let end = bytes.iter().rposition(u8::is_ascii_digit)? + 1;
    let start = bytes[..end].iter().rposition(|b| !b.is_ascii_digit()).map_or(0, |i| i + 1);
    stem[start..end].parse().ok()
}

/// The files under a folder (recursively; hidden entries skipped), sorted by path, by what
/// their first bytes say they are ([`ingest::sniff`]).
#[derive(Debug, Default)]
struct Found {
    /// Snapshots, and files whose head could not be read (reading them says why).
    snapshots: Vec<PathBuf>,
    archives: Vec<PathBuf>,
    /// Not memory snapshots: logs, configs, weights.
    skipped: Vec<PathBuf>,
}

fn found_in(dir: &Path) -> std::io::Result<Found> {
    let mut found = Found::default();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() || (kind.is_symlink() && path.is_dir()) {
                pending.push(path);
                continue;
            }
            match ingest::sniff(&path) {
                Ok(Sniffed::Archive) => found.archives.push(path),
                Ok(Sniffed::Other) => found.skipped.push(path),
                Ok(Sniffed::Snapshot) | Err(_) => found.snapshots.push(path),
            }
        }
    }
    found.snapshots.sort();
    found.archives.sort();
    found.skipped.sort();
    Ok(found)
}

/// `job` with a warning line first for each file of `skipped`.
fn with_skipped(mut job: Job, skipped: &[PathBuf], root: &Path) -> Job {
    let mut warnings: Vec<String> = skipped
        .iter()
        .map(|p| format!("skipping {}: not a memory snapshot", p.strip_prefix(root).unwrap_or(p).display()))
        .collect();
    warnings.append(&mut job.warnings);
    job.warnings = warnings;
    job
}

/// Every snapshot under `dir` (recursively; hidden entries skipped; told apart from the other
/// files by their first bytes, each other file a warning line), sorted by path, ranked by
/// [`ranked`].
pub fn snapshots_in(dir: &Path) -> std::io::Result<Job> {
    let found = found_in(dir)?;
    Ok(with_skipped(ranked(found.snapshots, dir), &found.skipped, dir))
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

/// Slice `i` of `n` (0-based): every `n`-th file from the `i`-th, so the slices are disjoint and
/// together are the folder, whatever machine takes which.
pub fn shard(files: Vec<RankFile>, i: usize, n: usize) -> Vec<RankFile> {
    files.into_iter().enumerate().filter(|(k, _)| k % n.max(1) == i).map(|(_, f)| f).collect()
}

/// Where a snapshot's archive goes: beside it, or at its relative path under `out_dir`.
pub fn archive_path(f: &RankFile, out_dir: Option<&Path>) -> PathBuf {
    match out_dir {
        Some(o) => super::default_path(&o.join(&f.relative)),
        None => super::default_path(&f.path),
    }
}

/// True when `archive` was built from the snapshot `stamp` describes by this format version
/// (read from its header: nothing is decompressed).
pub fn is_current(archive: &Path, stamp: &SourceStamp) -> bool {
    crate::file::open(archive)
        .is_ok_and(|a| a.format_version() == memviz_format::FORMAT_VERSION && a.header().source == *stamp)
}

/// What became of one snapshot of the folder.
#[derive(Debug)]
pub enum Outcome {
    Indexed(IndexSummary),
    Current,
    Failed(String),
}

/// Indexes `files` on `threads` threads (a few files at a time, so peak memory is that of a few
/// files, each on its share of the threads: [`super::threads::for_folder`]), skipping those
/// whose archive is current; `progress` gets the bytes read so far over all of
/// them. One outcome per file, in order.
pub fn index_all(
    files: &[RankFile],
    out_dir: Option<&Path>,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<Outcome> {
    let (at_once, each) = super::threads::for_folder(threads, files.len());
    let read = AtomicU64::new(0);
    let one = |f: &RankFile| -> Outcome {
        let out = archive_path(f, out_dir);
        let stamp = match crate::file::write::stamp(&f.path) {
            Ok(s) => s,
            Err(e) => return Outcome::Failed(format!("{}: {e}", f.path.display())),
        };
        if is_current(&out, &stamp) {
            progress(read.fetch_add(stamp.size, Ordering::Relaxed) + stamp.size);
            return Outcome::Current;
        }
        if let Some(parent) = out.parent()
            && let Err(e) = std::fs::create_dir_all(parent)
        {
            return Outcome::Failed(format!("{}: {e}", parent.display()));
        }
        let done_before = AtomicU64::new(0);
        let step = |n: u64| {
            let before = done_before.swap(n, Ordering::Relaxed);
            progress(read.fetch_add(n.saturating_sub(before), Ordering::Relaxed) + n.saturating_sub(before));
        };
        match super::threads::on_pool(each, || build_archive(&f.path, stamp, &out, &step, &|_| {})) {
            Ok(s) => {
                step(stamp.size);
                Outcome::Indexed(s)
            }
            Err(e) => Outcome::Failed(format!("{e:#}")),
        }
    };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(at_once).thread_name(|i| format!("memviz-rank-{i}")).build();
    match pool {
        Ok(pool) => pool.install(|| {
            use rayon::prelude::*;
            files.par_iter().with_max_len(1).map(one).collect()
        }),
        Err(_) => files.iter().map(one).collect(),
    }
}

/// The ranks of a job: every snapshot under a folder (answered through its archive beside it),
/// else every archive under it (a folder of archives sent to a colleague), or the files given —
/// ranked by [`ranked`]. Files under the folder that are neither are skipped, a warning line
/// each. `Err` says in one line why there are none.
pub fn job(given: &[PathBuf]) -> Result<Job, String> {
    let [dir] = given else { return Ok(ranked(given.to_vec(), Path::new(""))) };
    if !dir.is_dir() {
        return Ok(ranked(given.to_vec(), Path::new("")));
    }
    let found = found_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let skipped = found.skipped.len();
    let files = if found.snapshots.is_empty() { found.archives } else { found.snapshots };
    let job = with_skipped(ranked(files, dir), &found.skipped, dir);
    if job.files.is_empty() {
        let others = match skipped {
            0 => String::new(),
            1 => " (1 other file, not a memory snapshot)".to_owned(),
            n => format!(" ({n} other files, not memory snapshots)"),
        };
        return Err(format!("{}: no memory snapshots or archives in the folder{others}", dir.display()));
    }
    Ok(job)
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
    fn shards_are_disjoint_and_cover_the_folder() {
        let files: Vec<RankFile> = (0..10)
            .map(|i| RankFile { path: PathBuf::from(format!("r{i}.pickle")), relative: PathBuf::new(), rank: Some(i) })
            .collect();
        let mut seen: Vec<u64> = (0..3).flat_map(|i| shard(files.clone(), i, 3)).filter_map(|f| f.rank).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(shard(files, 1, 3).iter().filter_map(|f| f.rank).collect::<Vec<_>>(), [1, 4, 7]);
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
