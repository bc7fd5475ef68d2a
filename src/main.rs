//! The `memviz` binary: parse arguments, run the command, map errors to exit codes.
//! Usage errors exit 2 (clap's, and a mistyped command's one line), bad input exits 1 with one
//! `error: ...` line, and `diff` exits 3 when B's peak grew past `--threshold` (`ranks`: when an
//! outlier rank's peak is past it).

use std::process::ExitCode;

use clap::Parser;

/// Large allocations of a build can spill to a temp file beside its output (`memviz::spill`).
#[global_allocator]
static ALLOCATOR: memviz::spill::Spilling = memviz::spill::Spilling;

fn main() -> ExitCode {
    let started = std::time::Instant::now();
    memviz::viewer::mark_process_start();
    tune_allocator();
    memviz::spill::install();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(message) = memviz::cli::unknown_command(&args) {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    let cli = memviz::cli::Cli::parse_from(memviz::cli::with_open_default(args.into_iter()));
    let result = memviz::commands::run(cli);
    memviz::timings::stage("command", started);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if memviz::commands::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) if err.is::<memviz::commands::PeakGrew>() => {
            eprintln!("regression: {err}");
            ExitCode::from(3)
        }
        Err(err) if err.is::<memviz::commands::RankOutlier>() => {
            eprintln!("outlier: {err}");
            ExitCode::from(3)
        }
        Err(err) => {
            let msg = format!("{err:#}").replace('\n', " ");
            eprintln!("error: {msg}");
            ExitCode::from(if memviz::commands::is_usage_error(&err) { 2 } else { 1 })
        }
    }
}

/// glibc raises its mmap threshold each time a large block is freed, so after the decoder frees
/// its memo every later multi-MB column lands in the heap, and freeing it no longer returns the
/// memory (a large share of `index`'s peak RSS was freed heap). A fixed 4 MiB threshold keeps big
/// columns in their own mappings, at the same speed (docs/design/10).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn tune_allocator() {
    const M_MMAP_THRESHOLD: i32 = -3;
    unsafe extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    // SAFETY: mallopt only changes allocator tuning; it is called before any other thread exists.
    unsafe {
        mallopt(M_MMAP_THRESHOLD, 4 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}
