//! A plain pickle file read through a mapping instead of `read` calls: the decoder's window
//! moves over the mapped bytes (`pickle::Mapped`), so its thread copies nothing into a buffer,
//! and the waves' workers fault the pages in as they read them.
//!
//! The pages already read are unmapped behind the decoder (`MADV_DONTNEED` every [`STRIDE`]
//! bytes: a read-only file mapping loses nothing, the next access maps them again), so the
//! resident size holds only the bytes near the decoder, as the window did.
//!
//! Only files below [`super::behind::LARGE`] are mapped: a larger one is read and dropped from
//! the page cache behind the reader ([`super::behind`]). Mapped, gen10g (9.8 GB, not in the page
//! cache) read in 32.6 s instead of 22–26 here: the waves' workers waited on the disk page
//! fault by page fault, and its mapped pages, counted in the resident size, made the spill
//! watcher drop the spilled columns' pages 768 times instead of 12.
//!
//! A file truncated while it is mapped raises `SIGBUS` where its missing pages are read: every
//! command turns that into one error line and exit code 1 (`temp_files::report_bus_errors`).
//!
//! With `spill.rs`, `temp_files.rs`, `file/mod.rs` and `main.rs`, one of the few places with
//! `unsafe`: making the mapping, dropping its pages, reading the page size.

#![allow(unsafe_code)]

use std::cell::Cell;
use std::fs::File;

use memmap2::{Mmap, UncheckedAdvice};

use super::behind::STRIDE;

/// `file` of `len` bytes mapped read-only; `None` where it cannot be (the caller reads it).
pub fn map(file: &File, len: u64) -> Option<Mmap> {
    if len == 0 || usize::try_from(len).is_err() {
        return None;
    }
    // No `MADV_SEQUENTIAL`: with it the waves' workers took 1.5 s instead of 0.77 on gen9m here
    // (two threads), the kernel mapping fewer pages around each fault.
    // SAFETY: a read-only private mapping of a regular file. Its bytes change only if another
    // process writes the file meanwhile (reading then sees some new bytes, which the decoder
    // treats as any input); a truncation raises SIGBUS, which the commands report and exit on.
    unsafe { Mmap::map(file) }.ok()
}

/// Drops the pages of `map` behind the decoder as it moves on, and reports the bytes read.
pub struct Behind<'m> {
    map: &'m Mmap,
    dropped: Cell<u64>,
    progress: &'m dyn Fn(u64),
}

impl<'m> Behind<'m> {
    pub fn new(map: &'m Mmap, progress: &'m dyn Fn(u64)) -> Behind<'m> {
        Behind { map, dropped: Cell::new(0), progress }
    }

    /// The decoder has read the bytes before `at`.
    pub fn at(&self, at: u64) {
        (self.progress)(at);
        let from = self.dropped.get();
        if at < from + STRIDE {
            return;
        }
        let page = page_size();
        let to = at / page * page;
        let Some(len) = to.checked_sub(from).filter(|&l| l > 0) else { return };
        // SAFETY: `[from, to)` lies within the mapping (`to` ≤ `at` ≤ its length), which is
        // read-only and backed by the file: a page dropped reads the same bytes when it is
        // touched again (MADV_DONTNEED loses data only in private *written* pages).
        let _ = unsafe { self.map.unchecked_advise_range(UncheckedAdvice::DontNeed, from as usize, len as usize) };
        self.dropped.set(to);
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().filter(|&p| p > 0).unwrap_or(4096)
}
