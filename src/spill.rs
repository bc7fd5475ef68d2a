//! Spilling: while an archive is built, the process's large allocations can live in a sparse
//! temp file next to the output instead of anonymous memory, so `memviz index` stays within a
//! memory budget at any input size.
//!
//! The binary installs [`Spilling`] as its global allocator. Outside a build it is the system
//! allocator. While a build runs ([`activate`]), a watcher thread reads the process's resident
//! size every few milliseconds; once it passes ¾ of the budget, every allocation of at least
//! [`MIN_SPILL`] bytes (the columns, the layout, the archive's root: everything that grows with
//! the input; one of an eighth of the budget or more sooner, once the heap's large allocations
//! would pass half the budget with it) is placed in one
//! shared mapping of an unlinked, sparse temp file, and each time the resident size passes ⅞ of
//! the budget the watcher drops that mapping's pages from the process (`MADV_DONTNEED`). For a
//! shared file mapping that loses nothing: the pages stay in the page cache (dirty ones are
//! written back by the kernel) and the next access maps them again, so the passes over the
//! columns page through them and the kernel can reclaim them under pressure. The data is the
//! same bytes wherever it lives, so archives are byte-identical with or without it.
//!
//! Each spilled allocation takes a fresh range of the file: a header page with the range's length,
//! then room for eight times its size, so a `Vec` that doubles grows in place three times of four;
//! its blocks are reserved with `fallocate` when it is made, so a full disk is the system
//! allocator's turn rather than a `SIGBUS`, and freed with a punched hole, which returns its
//! pages and its disk at once. Ranges are never reused: the file is eight terabytes of address
//! space, sparse.
//!
//! `MEMVIZ_MEMORY_BUDGET` (bytes, or with `K` / `M` / `G`) sets the budget; the default is
//! [`DEFAULT_BUDGET`]. Tests set a tiny one to make a small build spill all the time.
//!
//! Every command but the viewer runs with the watcher on ([`guard`]), and the watcher bounds
//! what no spilling can move: when the process's anonymous memory (`RssAnon`: the heap, not the
//! mapped archive or spill file) passes the budget (at least [`MIN_HARD_LIMIT`]), or the spill
//! file would hold more than `MEMVIZ_SPILL_LIMIT` (default: the free disk of its folder less
//! [`DISK_MARGIN`]), the command stops with one error line and exit code 1, its temp files
//! removed ([`crate::temp_files::remove_all`]) — a hostile input never exhausts the machine.
//!
//! With `temp_files.rs` (signal handlers) and `ingest/mapped.rs` (a pickle's mapping), the only `unsafe` outside `file/mod.rs`, the read crate's `archive/open.rs` and `main.rs`: the allocator, its mapping and the
//! syscalls (Linux only; elsewhere [`Spilling`] is the system allocator and nothing spills).

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;

/// Allocations this large or larger spill while spilling.
pub const MIN_SPILL: usize = 1 << 20;
/// The resident size a build aims to stay under.
pub const DEFAULT_BUDGET: u64 = 1 << 30;
/// The anonymous memory a command may never pass, whatever the budget says (a tiny budget makes
/// builds spill; it does not stop them).
pub const MIN_HARD_LIMIT: u64 = 256 << 20;
/// Free disk the spill file leaves to others by default.
pub const DISK_MARGIN: u64 = 1 << 30;

/// Keeps the watcher on for a whole command (spilling past ¾ of the budget, the hard limits),
/// spilling into `dir`.
pub fn guard(dir: &Path) -> Active {
    activate(dir)
}

/// Stops the process on a limit: one error line, temp files removed, exit code 1. Called from
/// the watcher or the allocator, so it allocates nothing but the message.
fn fatal(message: &str) -> ! {
    crate::temp_files::remove_all();
    eprintln!("error: {message}");
    // SAFETY: _exit has no preconditions; it does not run destructors, which may allocate.
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(1)
    }
}

fn spill_limit(dir: &Path) -> u64 {
    let chosen = std::env::var("MEMVIZ_SPILL_LIMIT").ok().and_then(|v| parse_bytes(&v));
    let free = free_disk(dir).map(|f| f.saturating_sub(DISK_MARGIN));
    match (chosen, free) {
        (Some(c), Some(f)) => c.min(f),
        (c, f) => c.or(f).unwrap_or(u64::MAX),
    }
}

#[cfg(unix)]
#[allow(unsafe_code)]
fn free_disk(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs to fill.
    (unsafe { libc::statvfs(path.as_ptr(), &mut s) } == 0).then(|| s.f_bavail as u64 * s.f_frsize as u64)
}

#[cfg(not(unix))]
fn free_disk(_dir: &Path) -> Option<u64> {
    None
}

/// The global allocator of the binary.
pub struct Spilling;

/// What spilling did since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpillStats {
    /// Bytes of allocations placed in the spill file.
    pub spilled_bytes: u64,
    /// Times the spill file's pages were dropped from the process.
    pub releases: u64,
    /// How long those drops took, in all and the longest (nanoseconds).
    pub release_ns: u64,
    pub release_ns_max: u64,
}

/// Keeps spilling on while it lives (builds may overlap: a folder's ranks are indexed a few at a
/// time; spilling stops when the last one ends).
pub struct Active {
    on: bool,
}

impl Drop for Active {
    fn drop(&mut self) {
        if self.on {
            imp::deactivate();
        }
    }
}

/// Turns spilling on for a build whose output goes into `dir`. Does nothing when the binary's
/// allocator is not [`Spilling`] (the library's tests), or where the spill file cannot be made.
pub fn activate(dir: &Path) -> Active {
    Active { on: imp::activate(dir, budget(), heap_limit(), spill_limit(dir)) }
}

/// What spilling did so far.
pub fn stats() -> SpillStats {
    imp::stats()
}

/// For a thread that streams through spilled memory faster than the watcher looks (the
/// archive's writer serializes gigabytes of spilled columns), every few megabytes: past the
/// mark the watcher drops the spill file's pages at, drops them now; while they are being
/// dropped, helps ([`help_drop`]).
pub fn relieve() {
    imp::relieve();
}

/// For a thread that pages through spilled memory (the allocator's pass and the tiles read the
/// layout's columns; the read crate's long passes through [`crate::pace`]), every so
/// often: while the spill file's pages are being dropped, drops some of them instead of
/// faulting more in — so the threads that fill the resident size are the ones that empty it.
/// One atomic load when no drop is under way.
pub fn help_drop() {
    imp::help_drop();
}

/// Called by the binary that installs [`Spilling`], before anything is built: the read
/// crate's long passes ([`crate::pace`]) then help its drops as they go, and start one where
/// the resident size is past the mark ([`relieve`]) rather than wait for the watcher: on the
/// device's 16-core host gen10g at 64 threads peaked at 1,062 MB so, 1,113–1,686 MB without
/// (the watcher and its droppers starved by 64 busy threads); at 32 threads 938 against
/// 941–942 MB, no slower.
pub fn install() {
    imp::install();
    crate::pace::set(relieve);
}

/// Has the kernel make the pages of `[addr, addr + len)` ready for writing (`MADV_POPULATE_WRITE`:
/// what a first write to each would fault in, without writing), so that the thread that writes
/// them next does not fault: for memory a thread is about to fill. The range may have been freed
/// meanwhile: the advice changes no byte of anything, and fails harmlessly on what is unmapped.
/// Nothing in the spill file.
pub fn populate(addr: usize, len: usize) {
    imp::populate(addr, len);
}

/// The heap a command may never pass: the budget, at least [`MIN_HARD_LIMIT`].
pub fn heap_limit() -> u64 {
    budget().max(MIN_HARD_LIMIT)
}

/// The memory budget: `MEMVIZ_MEMORY_BUDGET`, else [`DEFAULT_BUDGET`].
pub fn budget() -> u64 {
    std::env::var("MEMVIZ_MEMORY_BUDGET").ok().and_then(|v| parse_bytes(&v)).unwrap_or(DEFAULT_BUDGET)
}

/// `123`, `64K`, `512M`, `2G` (powers of 1024).
fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&text[..i], c.to_ascii_uppercase()),
        _ => (text, 'B'),
    };
    let shift = match unit {
        'B' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        _ => return None,
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

// SAFETY (all four): each call is either the system allocator's with the caller's arguments, or
// the spill file's (`imp`), which hands out page-aligned ranges of a mapping that is never
// unmapped, to one owner each, only for layouts whose alignment a page satisfies.
unsafe impl GlobalAlloc for Spilling {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if let Some(p) = imp::alloc(layout) {
            return p;
        }
        imp::heap_made(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Fresh ranges of the spill file read as zeros.
        if let Some(p) = imp::alloc(layout) {
            return p;
        }
        imp::heap_made(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !imp::dealloc(ptr, layout) {
            unsafe { System.dealloc(ptr, layout) };
            imp::heap_freed(layout.size());
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { imp::realloc(ptr, layout, new_size) }
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::io::Read as _;
    use std::os::fd::IntoRawFd as _;
    use std::path::Path;
    use std::sync::Mutex;
    use std::sync::atomic::{
        AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
    };
    use std::time::Duration;

    use super::{MIN_SPILL, SpillStats};

    /// Address space (and sparse file length) of the spill mapping.
    const RESERVE: u64 = 8 << 40;
    /// How many times its size a spilled allocation can grow in place (a `Vec` that doubles
    /// moves once in four doublings).
    const ROOM: u64 = 8;
    /// How often the watcher reads the resident size.
    const WATCH: Duration = Duration::from_millis(5);
    /// How often once the resident size is past ¾ of the budget: sixteen threads paging through
    /// spilled columns grow it by ~100 MB in [`WATCH`] (gen10g at 16 threads peaked at 1,069 MB
    /// on the device's host, 19 MiB over the budget, its pages dropped at ⅞).
    const WATCH_NEAR: Duration = Duration::from_millis(1);

    static INSTALLED: AtomicBool = AtomicBool::new(false);
    /// The resident size past which the spill file's pages are dropped (none while no build
    /// spills).
    static RELEASE_AT: AtomicU64 = AtomicU64::new(u64::MAX);
    /// Whether large allocations go to the file now.
    static SPILLING: AtomicBool = AtomicBool::new(false);
    /// Allocations this large go to the file while a build runs, spilling or not, once the
    /// heap's large allocations would pass `HEAP_SHARE` with them ([`EARLY`]).
    static EARLY_FROM: AtomicUsize = AtomicUsize::new(usize::MAX);
    static HEAP_SHARE: AtomicU64 = AtomicU64::new(u64::MAX);
    /// The bytes the heap's allocations of [`MIN_SPILL`] or more were made for, touched or not.
    static BIG_HEAP: AtomicU64 = AtomicU64::new(0);
    /// The mapping's first byte (0: none yet) and the file.
    static BASE: AtomicUsize = AtomicUsize::new(0);
    static FD: AtomicI32 = AtomicI32::new(-1);
    static PAGE: AtomicUsize = AtomicUsize::new(4096);
    /// The next free offset of the file.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static SPILLED: AtomicU64 = AtomicU64::new(0);
    /// Bytes of the spill file reserved now (reserved less punched), and the most it may hold.
    static LIVE: AtomicU64 = AtomicU64::new(0);
    static LIMIT: AtomicU64 = AtomicU64::new(u64::MAX);
    static RELEASES: AtomicU64 = AtomicU64::new(0);
    static RELEASE_NS: AtomicU64 = AtomicU64::new(0);
    static RELEASE_NS_MAX: AtomicU64 = AtomicU64::new(0);
    /// One drop at a time (the watcher's, or a streaming thread's through `relieve`); while
    /// one runs, `DROP_USED` is the range it drops (0: none) and `DROP_NEXT` its next piece.
    static DROPPING: Mutex<()> = Mutex::new(());
    static DROP_USED: AtomicUsize = AtomicUsize::new(0);
    static DROP_NEXT: AtomicUsize = AtomicUsize::new(0);
    /// The resident size is past ¾ of the budget (the watcher's last look).
    static NEAR: AtomicBool = AtomicBool::new(false);
    /// Builds running; the watcher runs while this is above zero.
    static BUILDS: Mutex<(usize, Option<std::thread::JoinHandle<()>>)> = Mutex::new((0, None));
    static STOP: AtomicBool = AtomicBool::new(false);

    pub fn install() {
        INSTALLED.store(true, Relaxed);
    }

    pub fn stats() -> SpillStats {
        SpillStats {
            spilled_bytes: SPILLED.load(Relaxed),
            releases: RELEASES.load(Relaxed),
            release_ns: RELEASE_NS.load(Relaxed),
            release_ns_max: RELEASE_NS_MAX.load(Relaxed),
        }
    }

    pub fn help_drop() {
        helped();
    }

    /// Helps the drop under way, if one is; whether one was.
    fn helped() -> bool {
        let under_way = DROP_USED.load(Relaxed) != 0;
        if under_way {
            drop_pieces();
        }
        under_way
    }

    pub fn relieve() {
        if helped() {
            return;
        }
        // Nothing spills, or the watcher saw the resident size well under the mark: no statm
        // read (the writer calls this every 4 MiB block of every archive).
        let at = RELEASE_AT.load(Relaxed);
        if at != u64::MAX && NEAR.load(Relaxed) && resident().is_some_and(|rss| rss > at) {
            release_pages();
        }
    }

    /// Spilling past ¾ of `budget`, the process stopped once its heap passes `hard` or the
    /// spill file `limit`.
    pub fn activate(dir: &Path, budget: u64, hard: u64, limit: u64) -> bool {
        if !INSTALLED.load(Relaxed) {
            return false;
        }
        LIMIT.fetch_min(limit, Relaxed);
        let mut builds = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
        if BASE.load(Acquire) == 0 && !map_file(dir) {
            return false;
        }
        builds.0 += 1;
        if builds.0 == 1 {
            STOP.store(false, Relaxed);
            EARLY_FROM.store(usize::try_from(budget / EARLY).unwrap_or(usize::MAX).max(MIN_SPILL), Relaxed);
            HEAP_SHARE.store(budget / 2, Relaxed);
            let watcher = std::thread::Builder::new().name("memviz-spill".into()).spawn(move || watch(budget, hard));
            builds.1 = watcher.ok();
        }
        true
    }

    pub fn deactivate() {
        let mut builds = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
        builds.0 -= 1;
        if builds.0 == 0 {
            STOP.store(true, Relaxed);
            if let Some(w) = builds.1.take() {
                let _ = w.join();
            }
            SPILLING.store(false, Relaxed);
            EARLY_FROM.store(usize::MAX, Relaxed);
            HEAP_SHARE.store(u64::MAX, Relaxed);
            RELEASE_AT.store(u64::MAX, Relaxed);
        }
    }

    /// Makes the spill file in `dir` (unlinked at once, so nothing is left behind even when the
    /// process is killed) and maps it.
    fn map_file(dir: &Path) -> bool {
        let name = format!(".memviz-spill-{}", std::process::id());
        let path = dir.join(name);
        let Ok(file) = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path) else {
            return false;
        };
        let _ = std::fs::remove_file(&path);
        if file.set_len(RESERVE).is_err() {
            return false;
        }
        let fd = file.into_raw_fd();
        // SAFETY: a fresh shared mapping of our own file; nothing else maps it, and it is never
        // unmapped (allocations in it may outlive any build).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                RESERVE as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            // SAFETY: our own descriptor, used by nothing else.
            unsafe { libc::close(fd) };
            return false;
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page > 0 {
            PAGE.store(page as usize, Relaxed);
        }
        // `MADV_RANDOM`: a fault maps its own page only. With the default advice a read fault
        // maps the cached pages around it too, and a pass reading here and there fills the
        // resident size with pages it never reads: gen10g at 16 threads on the 2-core VM peaked
        // at 1,172–1,292 MB against 940–1,087 MB. (It did make the first writes cheaper — the
        // pages after a fresh one zeroed ahead: the layout's walk busy 14–18 s against 21–22 s.)
        // SAFETY: advice on our own mapping; it changes no contents.
        unsafe { libc::madvise(base, RESERVE as usize, libc::MADV_RANDOM) };
        FD.store(fd, Relaxed);
        // Release: whoever sees the mapping sees the page size and the descriptor stored before.
        BASE.store(base as usize, Release);
        true
    }

    /// Reads the resident size; starts spilling at ¾ of the budget and drops the spill pages
    /// from the process whenever it passes ⅞.
    fn watch(budget: u64, hard: u64) {
        let start = budget / 4 * 3;
        let release = budget / 8 * 7;
        RELEASE_AT.store(release, Relaxed);
        let mut status = String::with_capacity(4096);
        while !STOP.load(Relaxed) {
            if anonymous(&mut status).is_some_and(|a| a > hard) {
                super::fatal(&format!(
                    "this input needs more memory than the budget allows ({} MiB of heap; MEMVIZ_MEMORY_BUDGET raises it) — a corrupt or hostile file?",
                    hard >> 20
                ));
            }
            let rss = resident().unwrap_or(0);
            NEAR.store(rss > start, Relaxed);
            if rss > start {
                SPILLING.store(true, Relaxed);
            }
            if rss > release {
                release_pages();
            }
            std::thread::sleep(if rss > start { WATCH_NEAR } else { WATCH });
        }
    }

    /// The spill file's pages dropped from the process, the range cut in pieces that
    /// [`droppers`] threads take in turn, and with them every thread that calls [`help_drop`]
    /// or [`relieve`] meanwhile (those that page through spilled columns: the read's workers,
    /// the layout, the checkpoints, the minimaps, the allocator's pass, the tiles, the summary,
    /// the writer): on a many-core host they fault pages back in faster than one thread unmaps
    /// them (one `madvise` over the 8 GB range of gen10g took 60 ms at the median, up to 810 ms
    /// on two busy cores, while sixteen threads faulted hundreds of megabytes back); dropping
    /// instead, they fault nothing.
    fn release_pages() {
        release_pages_by(droppers());
    }

    /// [`release_pages`] on `threads` threads (this one and helpers).
    pub(super) fn release_pages_by(threads: usize) {
        let base = BASE.load(Acquire);
        let used = NEXT.load(Relaxed).min(RESERVE) as usize;
        if base == 0 || used == 0 {
            return;
        }
        // A drop under way drops what this one would: help it.
        let Ok(_one) = DROPPING.try_lock() else {
            drop_pieces();
            return;
        };
        let started = std::time::Instant::now();
        DROP_NEXT.store(0, Relaxed);
        DROP_USED.store(used, Release);
        let helpers = threads.clamp(1, used.div_ceil(PIECE)) - 1;
        std::thread::scope(|s| {
            for _ in 0..helpers {
                // A helper that cannot be started leaves its pieces to the others.
                let _ = std::thread::Builder::new().name("memviz-spill-drop".into()).spawn_scoped(s, drop_pieces);
            }
            drop_pieces();
        });
        DROP_USED.store(0, Relaxed);
        let took = started.elapsed().as_nanos() as u64;
        RELEASE_NS.fetch_add(took, Relaxed);
        RELEASE_NS_MAX.fetch_max(took, Relaxed);
        RELEASES.fetch_add(1, Relaxed);
    }

    /// Drops pieces of the drop under way until none is left. A piece is the same range in
    /// every drop, so one taken from a drop that has ended and a later one begun is still
    /// inside the mapping and drops what the later drop would (or, past the range the earlier
    /// drop knew, is left to the next drop).
    fn drop_pieces() {
        let base = BASE.load(Acquire);
        let used = DROP_USED.load(Acquire);
        loop {
            let from = DROP_NEXT.fetch_add(1, Relaxed).saturating_mul(PIECE);
            if from >= used {
                break;
            }
            let len = PIECE.min(used - from);
            // SAFETY: the range is inside our shared file mapping; for a shared mapping
            // DONTNEED only unmaps the pages (their contents stay in the file's page cache and
            // come back on the next access), so no allocation in it loses a byte.
            unsafe { libc::madvise((base + from) as *mut libc::c_void, len, libc::MADV_DONTNEED) };
        }
    }

    /// The pieces a drop is cut in.
    const PIECE: usize = 64 << 20;

    /// An allocation of an eighth of the budget or more goes to the file before the resident
    /// size calls for spilling where, with it, the heap's large allocations would be made for
    /// more than half the budget: a column grown anonymously before spilling began keeps its
    /// capacity in the heap, and filling it afterwards raised the heap past the mark (gen10g:
    /// `RssAnon` 865–871 MB against the ¾ mark of 768), towards the hard limit. Not from a
    /// build's start whatever the heap holds: gen9m's memo (one 128 MiB allocation, written
    /// on the reader's thread) then faulted its pages in through the file system — on ext4
    /// each a block mapped and marked dirty —, half the joins' time in `perf` on the 2-core VM.
    const EARLY: u64 = 8;

    /// Counts a heap allocation of `size` bytes at `ptr` (null: none made) in [`BIG_HEAP`].
    pub fn heap_made(ptr: *mut u8, size: usize) -> *mut u8 {
        if !ptr.is_null() && size >= MIN_SPILL {
            BIG_HEAP.fetch_add(size as u64, Relaxed);
        }
        ptr
    }

    pub fn populate(addr: usize, len: usize) {
        // Not the spill file's pages: they count against the budget the watcher keeps, and a
        // range freed there is a hole that a write would give disk blocks again.
        if owns(addr as *mut u8).is_some() {
            return;
        }
        let page = PAGE.load(Relaxed);
        let (start, end) = (addr / page * page, (addr + len) / page * page);
        if end > start {
            // SAFETY: advice only: it makes pages present as a write would, writing nothing;
            // on a range not mapped it fails, which is ignored.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE) };
        }
    }

    /// Uncounts a heap allocation of `size` bytes, freed.
    pub fn heap_freed(size: usize) {
        if size >= MIN_SPILL {
            BIG_HEAP.fetch_sub(size as u64, Relaxed);
        }
    }

    /// Threads that drop the pages side by side: `MEMVIZ_SPILL_DROPPERS`, else half the cores
    /// this process may use, at most eight.
    fn droppers() -> usize {
        static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *N.get_or_init(|| {
            let chosen = std::env::var("MEMVIZ_SPILL_DROPPERS").ok().and_then(|v| v.trim().parse::<usize>().ok());
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            chosen.unwrap_or((cores / 2).min(8)).max(1)
        })
    }

    /// Anonymous resident bytes of the process (`RssAnon` of `/proc/self/status`).
    fn anonymous(buf: &mut String) -> Option<u64> {
        buf.clear();
        std::fs::File::open("/proc/self/status").ok()?.read_to_string(buf).ok()?;
        let line = buf.lines().find(|l| l.starts_with("RssAnon:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb << 10)
    }

    /// Resident bytes of the process (`/proc/self/statm`, second field, in pages).
    fn resident() -> Option<u64> {
        let mut buf = [0u8; 128];
        let n = std::fs::File::open("/proc/self/statm").ok()?.read(&mut buf).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
        Some(pages * PAGE.load(Relaxed) as u64)
    }

    fn round_up(n: usize) -> usize {
        let page = PAGE.load(Relaxed);
        n.div_ceil(page) * page
    }

    /// The range a spilled allocation of `size` bytes takes: its header page and room to grow
    /// in place [`ROOM`]-fold (address space is cheap: the file is sparse and only written pages
    /// cost anything), a power of two of pages.
    fn range_len(size: usize) -> u64 {
        ((round_up(size) + PAGE.load(Relaxed)).next_power_of_two() as u64).saturating_mul(ROOM)
    }

    /// The offset of a spilled allocation's data in the file.
    fn owns(ptr: *mut u8) -> Option<u64> {
        let base = BASE.load(Acquire);
        let p = ptr as usize;
        (base != 0 && p >= base && ((p - base) as u64) < RESERVE).then(|| (p - base) as u64)
    }

    /// The length of the range an allocation's data at `offset` heads, from its header page.
    fn range_of(offset: u64) -> u64 {
        let header = BASE.load(Acquire) + (offset as usize - PAGE.load(Relaxed));
        // SAFETY: every spilled allocation's data follows its header page, which `take` wrote.
        unsafe { (header as *const u64).read() }
    }

    fn wants(layout: Layout) -> bool {
        let size = layout.size();
        size >= MIN_SPILL
            && layout.align() <= PAGE.load(Relaxed)
            && (SPILLING.load(Relaxed)
                || size >= EARLY_FROM.load(Relaxed)
                    && BIG_HEAP.load(Relaxed).saturating_add(size as u64) > HEAP_SHARE.load(Relaxed))
    }

    /// Reserves the file's blocks for `[offset, offset + len)`, within the spill limit.
    fn reserve(offset: u64, len: usize) -> bool {
        let live = LIVE.fetch_add(len as u64, Relaxed) + len as u64;
        let limit = LIMIT.load(Relaxed);
        if live > limit {
            super::fatal(&format!(
                "this input needs more than {} MiB of temp disk to spill to (the free disk, or MEMVIZ_SPILL_LIMIT) — a corrupt or hostile file?",
                limit >> 20
            ));
        }
        // SAFETY: fallocate on our own descriptor; it touches no memory of ours.
        let ok = unsafe { libc::fallocate(FD.load(Relaxed), 0, offset as libc::off_t, len as libc::off_t) == 0 };
        if !ok {
            LIVE.fetch_sub(len as u64, Relaxed);
        }
        ok
    }

    /// Returns `[offset, offset + len)` to the file system; the mapping's pages go with it.
    fn punch(offset: u64, len: usize) {
        if len == 0 {
            return;
        }
        LIVE.fetch_sub((len as u64).min(LIVE.load(Relaxed)), Relaxed);
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: as `reserve`; the range belongs to an allocation being freed or shrunk.
        unsafe { libc::fallocate(FD.load(Relaxed), mode, offset as libc::off_t, len as libc::off_t) };
    }

    /// A fresh range for `size` bytes, or `None` (no room left: the system allocator's turn).
    fn take(size: usize) -> Option<*mut u8> {
        let len = range_len(size);
        let page = PAGE.load(Relaxed);
        let region = NEXT.fetch_add(len, Relaxed);
        if region.saturating_add(len) > RESERVE || !reserve(region, page + round_up(size)) {
            return None;
        }
        let header = BASE.load(Acquire) + region as usize;
        // SAFETY: the header page of a range no one else was given, its blocks just reserved.
        unsafe { (header as *mut u64).write(len) };
        SPILLED.fetch_add(size as u64, Relaxed);
        Some((header + page) as *mut u8)
    }

    pub fn alloc(layout: Layout) -> Option<*mut u8> {
        if !wants(layout) {
            return None;
        }
        take(layout.size())
    }

    /// Test helper: a drop of the first `used` bytes under way, helped by this thread; the
    /// pieces that were left to take afterwards.
    #[cfg(test)]
    pub fn help_with(used: usize) -> usize {
        let _one = DROPPING.lock().unwrap_or_else(|e| e.into_inner());
        DROP_NEXT.store(0, Relaxed);
        DROP_USED.store(used, Release);
        super::help_drop();
        DROP_USED.store(0, Relaxed);
        used.div_ceil(PIECE).saturating_sub(DROP_NEXT.load(Relaxed))
    }

    /// Test helper: frees `ptr` when the system allocator made it (spilling had not started).
    #[cfg(test)]
    pub fn dealloc_if_not_spilled(ptr: *mut u8, layout: Layout) -> bool {
        if owns(ptr).is_some() {
            return false;
        }
        // SAFETY: the system allocator made `ptr` with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        heap_freed(layout.size());
        true
    }

    pub fn dealloc(ptr: *mut u8, layout: Layout) -> bool {
        let Some(offset) = owns(ptr) else { return false };
        let page = PAGE.load(Relaxed);
        punch(offset - page as u64, page + round_up(layout.size()));
        true
    }

    /// # Safety
    /// As `GlobalAlloc::realloc`.
    pub unsafe fn realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        match owns(ptr) {
            Some(offset) => {
                let (have, need) = (round_up(old), round_up(new_size));
                if need <= have {
                    punch(offset + need as u64, have - need);
                    return ptr;
                }
                let room = range_of(offset) - PAGE.load(Relaxed) as u64;
                if need as u64 <= room && reserve(offset + have as u64, need - have) {
                    SPILLED.fetch_add((new_size - old) as u64, Relaxed);
                    return ptr;
                }
                // SAFETY: as `GlobalAlloc::realloc`: `new_size` is valid for `layout.align()`.
                let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                let to = take(new_size).unwrap_or_else(|| heap_made(unsafe { System.alloc(new) }, new_size));
                if !to.is_null() {
                    // SAFETY: both ranges are at least `old` bytes and belong to different owners.
                    unsafe { std::ptr::copy_nonoverlapping(ptr, to, old) };
                    let page = PAGE.load(Relaxed);
                    punch(offset - page as u64, page + have);
                }
                to
            }
            None => {
                // SAFETY: as `GlobalAlloc::realloc`.
                let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                if wants(new)
                    && let Some(to) = take(new_size)
                {
                    // SAFETY: `ptr` holds `old` bytes and `to` `new_size`: copy what both hold.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, to, old.min(new_size));
                        System.dealloc(ptr, layout);
                    }
                    heap_freed(old);
                    return to;
                }
                // SAFETY: the caller's arguments, for the allocator that made `ptr`.
                let to = unsafe { System.realloc(ptr, layout, new_size) };
                if !to.is_null() {
                    heap_freed(old);
                }
                heap_made(to, new_size)
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::path::Path;

    use super::SpillStats;

    pub fn install() {}
    pub fn relieve() {}
    pub fn help_drop() {}
    pub fn heap_made(ptr: *mut u8, _size: usize) -> *mut u8 {
        ptr
    }
    pub fn heap_freed(_size: usize) {}
    pub fn populate(_addr: usize, _len: usize) {}
    pub fn stats() -> SpillStats {
        SpillStats::default()
    }
    pub fn activate(_dir: &Path, _budget: u64, _hard: u64, _limit: u64) -> bool {
        false
    }
    pub fn deactivate() {}
    pub fn alloc(_layout: Layout) -> Option<*mut u8> {
        None
    }
    pub fn dealloc(_ptr: *mut u8, _layout: Layout) -> bool {
        false
    }
    /// # Safety
    /// As `GlobalAlloc::realloc`.
    pub unsafe fn realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Called directly (the test binary's allocator is the system's): spilled allocations hold
    /// their bytes through growth in place, a move, a shrink and their pages being dropped.
    #[cfg(target_os = "linux")]
    #[test]
    fn spilled_allocations_keep_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        install();
        // An eighth of the budget goes to the file before any spilling (the watcher, given 1 GiB,
        // has no reason to start it) once the heap's large allocations would pass half the
        // budget with it: four go to the heap (untouched, they cost no memory), the fifth not.
        let early = Active { on: imp::activate(dir.path(), 1 << 30, u64::MAX, u64::MAX) };
        assert!(early.on);
        let big = Layout::from_size_align(128 << 20, 8).unwrap();
        // SAFETY: a layout of non-zero size, each freed with it.
        let heap: Vec<*mut u8> = (0..4).map(|_| unsafe { Spilling.alloc(big) }).collect();
        let p = unsafe { Spilling.alloc(big) };
        assert!(!imp::dealloc_if_not_spilled(p, big), "past half the budget made in the heap");
        unsafe { Spilling.dealloc(p, big) };
        for q in heap {
            assert!(imp::dealloc_if_not_spilled(q, big), "an eighth of the budget spilled early");
        }
        drop(early);
        // Spilling at once; never stopped for the heap, which the tests beside this one share.
        let active = Active { on: imp::activate(dir.path(), 0, u64::MAX, u64::MAX) };
        assert!(active.on);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let layout = Layout::from_size_align(3 << 20, 8).unwrap();
        // SAFETY: a layout of non-zero size; the pointer is used within it.
        let mut p = unsafe { Spilling.alloc(layout) };
        while imp::dealloc_if_not_spilled(p, layout) {
            assert!(std::time::Instant::now() < deadline, "spilling never started");
            std::thread::sleep(std::time::Duration::from_millis(5));
            p = unsafe { Spilling.alloc(layout) };
        }
        let fill = |p: *mut u8, from: usize, to: usize| {
            for i in from..to {
                // SAFETY: `i` is inside the allocation.
                unsafe { *p.add(i) = (i % 251) as u8 };
            }
        };
        let check = |p: *const u8, len: usize| (0..len).all(|i| unsafe { *p.add(i) } == (i % 251) as u8);
        fill(p, 0, 3 << 20);
        let releases = stats().releases;
        // 3 MiB has room for 32 MiB less its header page: growing to 20 MiB stays, to 40 MiB moves.
        let q = unsafe { Spilling.realloc(p, layout, 20 << 20) };
        assert_eq!(q, p);
        fill(q, 3 << 20, 4 << 20);
        let r = unsafe { Spilling.realloc(q, Layout::from_size_align(20 << 20, 8).unwrap(), 40 << 20) };
        assert_ne!(r, q);
        while stats().releases == releases {
            assert!(std::time::Instant::now() < deadline, "the pages were never dropped");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(check(r, 4 << 20), "bytes lost through the move or the dropped pages");
        // The ranges taken so far span more than one piece of a drop: dropped by four threads.
        imp::release_pages_by(4);
        assert!(check(r, 4 << 20), "bytes lost through a drop in pieces");
        // A pass that helps a drop under way takes every piece left.
        assert_eq!(imp::help_with(3 * (64 << 20) + 1), 0, "pieces left to the drop's own threads");
        assert!(check(r, 4 << 20), "bytes lost through a helped drop");
        let s = unsafe { Spilling.realloc(r, Layout::from_size_align(40 << 20, 8).unwrap(), 2 << 20) };
        assert_eq!(s, r);
        assert!(check(s, 2 << 20));
        unsafe { Spilling.dealloc(s, Layout::from_size_align(2 << 20, 8).unwrap()) };
        assert!(stats().spilled_bytes >= 40 << 20);
        drop(active);
    }

    #[test]
    fn budgets_read_with_units() {
        assert_eq!(parse_bytes("123"), Some(123));
        assert_eq!(parse_bytes("64K"), Some(64 << 10));
        assert_eq!(parse_bytes(" 512m "), Some(512 << 20));
        assert_eq!(parse_bytes("2G"), Some(2 << 30));
        assert_eq!(parse_bytes("2T"), None);
        assert_eq!(parse_bytes("lots"), None);
    }
}
