//! How many threads an index uses: `--jobs N`, else `MEMVIZ_THREADS`, else the CPUs this process
//! may run on — std's `available_parallelism`, which on Linux is the smaller of the affinity mask
//! (a Slurm job's cpuset, `taskset`) and the cgroup's CPU quota (a Kubernetes limit: v2 `cpu.max`,
//! v1 `cpu.cfs_quota_us`), rounded down. The archive's bytes never depend on it.

use anyhow::bail;

/// The threads for an index run: `jobs` if given, else `MEMVIZ_THREADS`, else the CPUs.
pub fn count(jobs: Option<usize>) -> anyhow::Result<usize> {
    if let Some(n) = jobs {
        return Ok(n.max(1));
    }
    match std::env::var("MEMVIZ_THREADS") {
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => bail!("MEMVIZ_THREADS={v}: not a number of threads (1 or more)"),
        },
        Err(_) => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// Runs `f` on a pool of `threads` named workers (`memviz-index-N`), so that all the parallel
/// work it starts stays within them; on the calling thread if no pool can be made.
pub fn on_pool<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> T {
    let pool =
        rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("memviz-index-{i}")).build();
    match pool {
        Ok(pool) => pool.install(f),
        Err(_) => f(),
    }
}

/// Sizes rayon's global pool (what an index started outside [`on_pool`] runs on: the viewer's,
/// the cache's) to `threads`; once, before anything uses it.
pub fn size_global(threads: usize) {
    let _ =
        rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("memviz-pool-{i}")).build_global();
}

/// Of `threads` for a folder of `files` snapshots: how many are indexed at once (at most 8, so
/// that peak memory is a few files') and the threads each gets.
pub fn for_folder(threads: usize, files: usize) -> (usize, usize) {
    let at_once = threads.min(8).min(files).max(1);
    (at_once, (threads / at_once).max(1))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_folder_shares_the_threads_among_a_few_files_at_once() {
        assert_eq!(super::for_folder(16, 64), (8, 2));
        assert_eq!(super::for_folder(16, 2), (2, 8));
        assert_eq!(super::for_folder(2, 64), (2, 1));
        assert_eq!(super::for_folder(1, 0), (1, 1));
    }
}
