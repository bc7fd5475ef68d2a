//! A folder of per-rank snapshots (what a multi-GPU job leaves behind): finding them among the
//! folder's other files (by their first bytes), the rank of each, a disjoint slice of them for one machine of many, and indexing them in parallel.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memviz_format::SourceStamp;

use super::pipeline::{IndexSummary, build_archive};
use crate::ingest::{self, Sniffed};

pub use crate::model::{Job, RankFile, rank_in_name, ranked};

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
    fn shards_are_disjoint_and_cover_the_folder() {
        let files: Vec<RankFile> = (0..10)
            .map(|i| RankFile { path: PathBuf::from(format!("r{i}.pickle")), relative: PathBuf::new(), rank: Some(i) })
            .collect();
        let mut seen: Vec<u64> = (0..3).flat_map(|i| shard(files.clone(), i, 3)).filter_map(|f| f.rank).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(shard(files, 1, 3).iter().filter_map(|f| f.rank).collect::<Vec<_>>(), [1, 4, 7]);
    }
}
