//! How many threads an index uses: `--jobs N`, else `MEMVIZ_THREADS`, else the CPUs this process
//! may run on — std's `available_parallelism`, which on Linux is the smaller of the affinity mask
//! (a Slurm job's cpuset, `taskset`) and the cgroup's CPU quota (a Kubernetes limit: v2 `cpu.max`,
//! v1 `cpu.cfs_quota_us`), rounded down — at most one for each [`THREAD_HEAP`] of the heap's
//! hard limit. The archive's bytes never depend on it.

use anyhow::bail;

/// The budget an index's thread takes: the heap it holds that cannot spill (its zstd contexts
/// and chunk buffers, its share of the passes' working sets) and the spilled pages it faults in
/// between two drops. The budget is the process's, not a thread's: on the device's 16-core
/// host gen10g peaked at 938–949 MB of RSS on 16, 24 and 32 threads but at 1,062–1,686 MB on 64
/// (`RssAnon` 822 MB: the drops' threads starved by 64 busy ones), no faster (16.4–19.2 s at
/// every count); on this 2-core VM its heap was 546 MB at 16 threads, 583 at 32, 700 at 64.
pub const THREAD_HEAP: u64 = 32 << 20;

/// The threads for an index run: `jobs` if given, else `MEMVIZ_THREADS`, else the CPUs; at
/// most one for each [`THREAD_HEAP`] of the heap's hard limit (32 under the default budget).
pub fn count(jobs: Option<usize>) -> anyhow::Result<usize> {
    Ok(asked(jobs)?.min(most()))
}

/// [`count`] for an index run, with a warning on standard error where `--jobs` or
/// `MEMVIZ_THREADS` asked for more threads than the memory budget leaves room for.
pub fn count_told(jobs: Option<usize>) -> anyhow::Result<usize> {
    let (asked, most) = (asked(jobs)?, most());
    let told = jobs.is_some() || std::env::var_os("MEMVIZ_THREADS").is_some();
    if told && asked > most {
        eprintln!(
            "warning: {asked} threads asked, {most} used: each holds heap that cannot spill and pages spilled columns in, one per {} MiB of the {} MiB limit (MEMVIZ_MEMORY_BUDGET raises it)",
            THREAD_HEAP >> 20,
            crate::spill::heap_limit() >> 20
        );
    }
    Ok(asked.min(most))
}

/// The most threads the heap's hard limit leaves room for.
fn most() -> usize {
    within(crate::spill::heap_limit())
}

/// The threads asked for: `jobs`, else `MEMVIZ_THREADS`, else the CPUs.
fn asked(jobs: Option<usize>) -> anyhow::Result<usize> {
    Ok(match (jobs, std::env::var("MEMVIZ_THREADS")) {
        (Some(n), _) => n.max(1),
        (None, Ok(v)) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => bail!("MEMVIZ_THREADS={v}: not a number of threads (1 or more)"),
        },
        (None, Err(_)) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    })
}

/// The most threads a heap limit of `bytes` leaves room for.
fn within(bytes: u64) -> usize {
    usize::try_from(bytes / THREAD_HEAP).unwrap_or(usize::MAX).max(1)
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
    fn the_heap_limit_caps_the_threads() {
        assert_eq!(super::within(1 << 30), 32);
        assert_eq!(super::within(256 << 20), 8);
        assert_eq!(super::within(4 << 30), 128);
        assert_eq!(super::within(0), 1);
    }

    #[test]
    fn a_folder_shares_the_threads_among_a_few_files_at_once() {
        assert_eq!(super::for_folder(16, 64), (8, 2));
        assert_eq!(super::for_folder(16, 2), (2, 8));
        assert_eq!(super::for_folder(2, 64), (2, 1));
        assert_eq!(super::for_folder(1, 0), (1, 1));
    }
}
