//! Reading an archive whose ids are not checked yet. Checking every id of a large archive
//! before reading any of it costs more than most reads (0.47 s at 10 GB), and a file memviz did
//! not write can hold an id out of range: reading it panics. So readers go ahead and, while a
//! [`Deferring`] is alive, a panic's message waits here instead of being printed; whoever catches
//! the panic then checks the archive in full: an inconsistent archive is its one-line error (the
//! message is dropped), a consistent one means the panic is memviz's own bug, and the messages
//! are printed ([`print_deferred`]) as the panic goes on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once, PoisonError};

static DEFERRING: AtomicUsize = AtomicUsize::new(0);
static DEFERRED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// While alive, panic messages (of every thread) wait for [`take_deferred`] / [`print_deferred`].
pub struct Deferring(());

impl Deferring {
    pub fn new() -> Deferring {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let default = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if DEFERRING.load(Ordering::SeqCst) > 0 {
                    DEFERRED.lock().unwrap_or_else(PoisonError::into_inner).push(info.to_string());
                } else {
                    default(info);
                }
            }));
        });
        DEFERRING.fetch_add(1, Ordering::SeqCst);
        Deferring(())
    }
}

impl Default for Deferring {
    fn default() -> Self {
        Deferring::new()
    }
}

impl Drop for Deferring {
    fn drop(&mut self) {
        DEFERRING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The messages of the panics deferred so far (they are consequences of a bad archive: drop them).
pub fn take_deferred() -> Vec<String> {
    std::mem::take(&mut *DEFERRED.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Prints the deferred messages (the archive was fine: they were bugs).
pub fn print_deferred() {
    for message in take_deferred() {
        eprintln!("{message}");
    }
}
