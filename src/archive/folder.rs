//! A folder of per-rank snapshots (what a multi-GPU job leaves behind): finding them, the rank of
//! each, a disjoint slice of them for one machine of many, and indexing them in parallel.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memviz_format::SourceStamp;

use super::Archive;
use super::pipeline::{IndexSummary, build_archive};

/// Snapshot file names: one of these, optionally followed by a compression suffix.
const SNAPSHOT_ENDINGS: [&str; 4] = [".pickle", ".pkl", ".pt", ".json"];
const COMPRESSED: [&str; 6] = [".gz", ".zst", ".zstd", ".xz", ".bz2", ".lz4"];

/// One snapshot of the folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankFile {
    pub path: PathBuf,
    /// Its path under the folder (archives under `-o OUTDIR` keep it).
    pub relative: PathBuf,
    pub rank: u64,
}

/// True for a file name a snapshot has (`rank3.pickle`, `snap.json.gz`, `x.pt.zst`).
pub fn is_snapshot_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let stem = COMPRESSED.iter().find_map(|c| lower.strip_suffix(c)).unwrap_or(&lower);
    SNAPSHOT_ENDINGS.iter().any(|e| stem.ends_with(e))
}

/// The last integer in a file name (`rank3.pickle` → 3, `oom_rank_3.pickle` → 3,
/// `snapshot-0003.pickle.gz` → 3, `rank3.memviz` → 3); digits of a compression or format suffix
/// do not count.
pub fn rank_in_name(name: &str) -> Option<u64> {
    let mut stem = name;
    for suffix in COMPRESSED.iter().chain(&SNAPSHOT_ENDINGS).chain(&[".memviz"]) {
        if let Some(s) = stem.to_ascii_lowercase().strip_suffix(suffix) {
            stem = &stem[..s.len()];
        }
    }
    let bytes = stem.as_bytes();
    let end = bytes.iter().rposition(u8::is_ascii_digit)? + 1;
    let start = bytes[..end].iter().rposition(|b| !b.is_ascii_digit()).map_or(0, |i| i + 1);
    stem[start..end].parse().ok()
}

/// Every snapshot under `dir` (recursively; hidden entries skipped), sorted by path, each with
/// its rank: the last integer in its name when every file has one and no two share it, else its
/// position in that order.
pub fn snapshots_in(dir: &Path) -> std::io::Result<Vec<RankFile>> {
    let mut paths = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() || (kind.is_symlink() && path.is_dir()) {
                pending.push(path);
            } else if is_snapshot_name(&name) {
                paths.push(path);
            }
        }
    }
    paths.sort();
    Ok(ranked(paths, dir))
}

/// `paths` (in the order given) with their ranks: the last integer in each name when every file
/// has one and no two share it, else each one's position; `relative` is the path under `root`.
pub fn ranked(paths: Vec<PathBuf>, root: &Path) -> Vec<RankFile> {
    let named: Vec<Option<u64>> =
        paths.iter().map(|p| p.file_name().and_then(|n| rank_in_name(&n.to_string_lossy()))).collect();
    let mut distinct: Vec<u64> = named.iter().flatten().copied().collect();
    distinct.sort_unstable();
    distinct.dedup();
    let by_name = distinct.len() == paths.len();
    paths
        .into_iter()
        .enumerate()
        .map(|(i, path)| RankFile {
            relative: path.strip_prefix(root).map_or_else(|_| path.clone(), Path::to_path_buf),
            rank: if by_name { named[i].unwrap_or(i as u64) } else { i as u64 },
            path,
        })
        .collect()
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
    Archive::open(archive)
        .is_ok_and(|a| a.format_version() == memviz_format::FORMAT_VERSION && a.header().source == *stamp)
}

/// What became of one snapshot of the folder.
#[derive(Debug)]
pub enum Outcome {
    Indexed(IndexSummary),
    Current,
    Failed(String),
}

/// Indexes `files` on `jobs` threads (a few at a time, so peak memory is that of a few files),
/// skipping those whose archive is current; `progress` gets the bytes read so far over all of
/// them. One outcome per file, in order.
pub fn index_all(
    files: &[RankFile],
    out_dir: Option<&Path>,
    jobs: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<Outcome> {
    let read = AtomicU64::new(0);
    let one = |f: &RankFile| -> Outcome {
        let out = archive_path(f, out_dir);
        let stamp = match super::write::stamp(&f.path) {
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
        match build_archive(&f.path, stamp, &out, &step, &|_| {}) {
            Ok(s) => {
                step(stamp.size);
                Outcome::Indexed(s)
            }
            Err(e) => Outcome::Failed(format!("{e:#}")),
        }
    };
    let pool =
        rayon::ThreadPoolBuilder::new().num_threads(jobs.max(1)).thread_name(|i| format!("memviz-rank-{i}")).build();
    match pool {
        Ok(pool) => pool.install(|| {
            use rayon::prelude::*;
            files.par_iter().with_max_len(1).map(one).collect()
        }),
        Err(_) => files.iter().map(one).collect(),
    }
}

/// The ranks of a job: every snapshot under a folder (answered through its archive beside it),
/// else every archive in it (a folder of archives sent to a colleague), or the files given —
/// ranks from their names, else their order. `Err` says in one line why there are none.
pub fn job(given: &[PathBuf]) -> Result<Vec<RankFile>, String> {
    let [dir] = given else { return Ok(ranked(given.to_vec(), Path::new(""))) };
    if !dir.is_dir() {
        return Ok(ranked(given.to_vec(), Path::new("")));
    }
    let say = |e: std::io::Error| format!("{}: {e}", dir.display());
    let mut files = snapshots_in(dir).map_err(say)?;
    if files.is_empty() {
        let mut archives: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(say)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "memviz"))
            .collect();
        archives.sort();
        files = ranked(archives, dir);
    }
    if files.is_empty() {
        return Err(format!("{}: no snapshots or archives in the folder", dir.display()));
    }
    Ok(files)
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
        assert!(is_snapshot_name("rank0.pickle") && is_snapshot_name("R.JSON.GZ") && is_snapshot_name("a.pt.lz4"));
        assert!(!is_snapshot_name("rank0.memviz") && !is_snapshot_name("log.txt") && !is_snapshot_name("x.gz"));
    }

    #[test]
    fn shards_are_disjoint_and_cover_the_folder() {
        let files: Vec<RankFile> = (0..10)
            .map(|i| RankFile { path: PathBuf::from(format!("r{i}.pickle")), relative: PathBuf::new(), rank: i })
            .collect();
        let mut seen: Vec<u64> = (0..3).flat_map(|i| shard(files.clone(), i, 3)).map(|f| f.rank).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(shard(files, 1, 3).iter().map(|f| f.rank).collect::<Vec<_>>(), [1, 4, 7]);
    }
}
