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
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;

use crate::archive::{Session, guard};

/// Archives opened by the command running, to check before writing: held until it ends, so that
/// they can still be checked after a panic unwound the command's own references.
static OPENED: Mutex<Vec<Arc<Session>>> = Mutex::new(Vec::new());

/// Registers an archive a command reads in place: what it read is checked before any output.
pub fn opened(session: &Arc<Session>) {
    OPENED.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::clone(session));
    crate::output::check_before_writing(check_what_was_read);
}

fn sessions() -> Vec<Arc<Session>> {
    OPENED.lock().unwrap_or_else(PoisonError::into_inner).clone()
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
    let deferring = guard::Deferring::new();
    let result = std::panic::catch_unwind(AssertUnwindSafe(command));
    drop(deferring);
    let answer = judge(result);
    OPENED.lock().unwrap_or_else(PoisonError::into_inner).clear();
    answer
}

fn judge<T>(result: std::thread::Result<anyhow::Result<T>>) -> anyhow::Result<T> {
    match result {
        Ok(Ok(answer)) => Ok(answer),
        // An error read from corrupted bytes would be wrong: say what is wrong instead.
        Ok(Err(e)) => Err(check_what_was_read().err().unwrap_or(e)),
        Err(panic) => match check_in_full() {
            Some(corrupt) => {
                guard::take_deferred();
                Err(corrupt)
            }
            None => {
                guard::print_deferred();
                std::panic::resume_unwind(panic)
            }
        },
    }
}
