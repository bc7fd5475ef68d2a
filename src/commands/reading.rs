//! Answering from an archive without reading all of it, and still never giving a wrong answer
//! or a panic for a corrupted or hostile file.
//!
//! An answer reads a few scattered pages of a large archive: checking the whole file first (its
//! checksum and every id) would cost more than the answer, seconds at 10 GB. So a command reads
//! what it needs, and then:
//! - before anything is printed or written, every block of every archive it opened that it read
//!   is checked against the archive's block table ([`crate::archive::Archive::verify_read`]),
//!   so corrupted bytes are the one-line error instead of a wrong answer;
//! - a panic while answering (an index out of range, read from a file that memviz did not write
//!   or that was corrupted where the check has not been yet) is caught here, and the archives
//!   are checked in full: if one is inconsistent, that is the one-line error; if none is, the
//!   panic was memviz's own bug and goes on as one.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, PoisonError, Weak};

use anyhow::Context as _;

use crate::archive::Session;

/// Archives opened by the commands of this process, to check before writing.
static OPENED: Mutex<Vec<Weak<Session>>> = Mutex::new(Vec::new());
/// Commands running under [`guarded`]: while any does, panic messages wait in `DEFERRED`.
static GUARDS: AtomicUsize = AtomicUsize::new(0);
static DEFERRED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Registers an archive a command reads in place: what it read is checked before any output.
pub fn opened(session: &Arc<Session>) {
    let mut opened = OPENED.lock().unwrap_or_else(PoisonError::into_inner);
    opened.retain(|w| w.strong_count() > 0);
    opened.push(Arc::downgrade(session));
    crate::output::check_before_writing(check_what_was_read);
}

fn sessions() -> Vec<Arc<Session>> {
    OPENED.lock().unwrap_or_else(PoisonError::into_inner).iter().filter_map(Weak::upgrade).collect()
}

/// Every block read so far of every archive opened, against its block table.
fn check_what_was_read() -> anyhow::Result<()> {
    for s in sessions() {
        s.archive.verify_read().with_context(|| s.archive.path.display().to_string())?;
    }
    Ok(())
}

/// Every archive opened, checked in full (checksum and ids): the first that fails.
fn check_in_full() -> Option<anyhow::Error> {
    sessions().into_iter().find_map(|s| {
        let checked = s.archive.verify_read().and_then(|()| s.archive.check_ids());
        checked.err().map(|e| anyhow::Error::new(e).context(s.archive.path.display().to_string()))
    })
}

/// Runs a command: an error or a panic that comes from a corrupted archive becomes the one-line
/// error that says so (see the module docs).
pub fn guarded<T>(command: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if GUARDS.load(Ordering::SeqCst) > 0 {
                DEFERRED.lock().unwrap_or_else(PoisonError::into_inner).push(info.to_string());
            } else {
                default(info);
            }
        }));
    });
    GUARDS.fetch_add(1, Ordering::SeqCst);
    let result = std::panic::catch_unwind(AssertUnwindSafe(command));
    GUARDS.fetch_sub(1, Ordering::SeqCst);
    let deferred = std::mem::take(&mut *DEFERRED.lock().unwrap_or_else(PoisonError::into_inner));
    match result {
        Ok(Ok(answer)) => Ok(answer),
        // An error read from corrupted bytes would be wrong: say what is wrong instead.
        Ok(Err(e)) => Err(check_what_was_read().err().unwrap_or(e)),
        Err(panic) => match check_in_full() {
            Some(corrupt) => Err(corrupt),
            None => {
                for message in deferred {
                    eprintln!("{message}");
                }
                std::panic::resume_unwind(panic)
            }
        },
    }
}
