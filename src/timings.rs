//! `MEMVIZ_TIMINGS`: where the time of a run goes, printed to standard error for benchmarks and
//! the hostile-input tests. Three kinds of line, all starting `timing:`: a stage of a command
//! ended ([`stage`]: with CPU time, resident sizes and spilling), a part of an index took so
//! long ([`timed`]), the viewer's start-up reached a point ([`at`]).

use std::sync::Mutex;
use std::time::Instant;

/// Whether `MEMVIZ_TIMINGS` is set.
pub fn enabled() -> bool {
    std::env::var_os("MEMVIZ_TIMINGS").is_some()
}

/// When the last index begun began, for [`timed`]'s lines (a part timed outside an index prints
/// its length alone).
static INDEX_STARTED: Mutex<Option<Instant>> = Mutex::new(None);

/// An index begins at `at` (for [`timed`]'s lines).
pub fn index_started(at: Instant) {
    *INDEX_STARTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(at);
}

/// A stage of a command ended: when (since `started`), with the process's CPU time, resident
/// size, peak resident size (`VmHWM`: this program's own, whatever the process that started it
/// held) and what spilling did.
pub fn stage(what: &str, started: Instant) {
    if !enabled() {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |k: &str| status.lines().find(|l| l.starts_with(k)).map_or("", |l| l[k.len()..].trim()).to_owned();
    let spill = crate::spill::stats();
    // utime and stime, fields 14 and 15 of /proc/self/stat (after the parenthesised name), in
    // clock ticks of 10 ms: the CPU time beside the wall time shows how busy the cores were.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let ticks = stat.rsplit_once(')').map_or(0, |(_, rest)| {
        rest.split_whitespace().skip(11).take(2).filter_map(|t| t.parse::<u64>().ok()).sum::<u64>()
    });
    eprintln!(
        "timing: {what} done at {:.3} s, CPU {:.2} s (RSS {}, peak {}; spilled {:.1} MB, pages dropped {} times in {:.3} s, the longest {:.1} ms)",
        started.elapsed().as_secs_f64(),
        ticks as f64 / 100.0,
        field("VmRSS:"),
        field("VmHWM:"),
        spill.spilled_bytes as f64 / (1 << 20) as f64,
        spill.releases,
        spill.release_ns as f64 / 1e9,
        spill.release_ns_max as f64 / 1e6
    );
}

/// Runs `f`, then says how long it took and when it ended (a part of an index's stage: which
/// parts ran side by side, and which one the stage waited for).
pub fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    if enabled() {
        let took = started.elapsed().as_secs_f64();
        eprintln!("timing:   {what} took {took:.3} s{}", ended_at());
    }
    out
}

/// `, ended at S s` (since the last index began), or nothing outside an index.
fn ended_at() -> String {
    let index = *INDEX_STARTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    index.map_or(String::new(), |i| format!(", ended at {:.3} s", i.elapsed().as_secs_f64()))
}

/// The viewer's start-up reached `what`, `ms` after the process started.
pub fn at(what: &str, ms: f64) {
    if enabled() {
        eprintln!("timing: {what} at {ms:.1} ms");
    }
}

/// How long a thread of an index was busy, of how long it was alive (`MEMVIZ_TIMINGS`): for a
/// worker that waits on others, whether it or they held the stage up.
pub struct Busy {
    started: Instant,
    busy: std::time::Duration,
    on: bool,
}

impl Busy {
    pub fn new() -> Busy {
        Busy { started: Instant::now(), busy: std::time::Duration::ZERO, on: enabled() }
    }

    /// Runs `f`, counting its time as busy.
    #[inline]
    pub fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        if !self.on {
            return f();
        }
        let t0 = Instant::now();
        let out = f();
        self.busy += t0.elapsed();
        out
    }

    /// Says how long `what` was busy, of how long it was alive, and when it ended.
    pub fn report(&self, what: &str) {
        if !self.on {
            return;
        }
        let alive = self.started.elapsed().as_secs_f64();
        eprintln!("timing:   {what}: {:.3} s of {alive:.3} s{}", self.busy.as_secs_f64(), ended_at());
    }
}

impl Default for Busy {
    fn default() -> Self {
        Busy::new()
    }
}
