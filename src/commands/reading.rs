//! Answering from an archive without reading all of it, and still never giving a wrong answer
//! or a panic for a corrupted or hostile file.
//!
//! An answer reads a few scattered pages of a large archive: checking the whole file first (its
//! checksum and every id) would cost more than the answer, seconds at 10 GB. So a command reads
//! what it needs, and then:
//! - before its answer is printed or written, every block of every archive it opened that it
//!   read is checked against the archive's block table ([`crate::archive::Archive::verify_read`]),
//!   so corrupted bytes are the one-line error instead of a wrong answer;
//! - a panic while answering (an index out of range, read from a file that memviz did not write
//!   or that was corrupted where the check has not been yet) is caught here, and the archives
//!   are checked in full: if one is inconsistent, that is the one-line error; if none is, the
//!   panic was memviz's own bug and goes on as one.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use anyhow::Context as _;

use crate::archive::{Session, guard};

/// How a command opens its inputs, and what it opened: through the snapshot cache or not, the
/// archives a server keeps mapped between calls ([`Kept`]), and the archives this command read,
/// to check before it answers. One per command run (per MCP call): nothing here is global.
pub struct Opening<'k> {
    pub cache: bool,
    kept: Option<&'k Kept>,
    opened: Mutex<Vec<Arc<Session>>>,
}

impl<'k> Opening<'k> {
    pub fn new(cache: bool) -> Opening<'static> {
        Opening { cache, kept: None, opened: Mutex::new(Vec::new()) }
    }

    /// Opening through `kept`: an archive opened once stays mapped for the next call.
    pub fn keeping(cache: bool, kept: &'k Kept) -> Opening<'k> {
        Opening { cache, kept: Some(kept), opened: Mutex::new(Vec::new()) }
    }

    /// Registers an archive the command reads in place: what it read is checked before the
    /// answer leaves [`guarded`].
    pub fn opened(&self, session: &Arc<Session>) {
        self.opened.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::clone(session));
    }

    pub fn kept(&self, path: &Path) -> Option<Arc<Session>> {
        self.kept?.get(path)
    }

    pub fn keep(&self, path: &Path, session: &Arc<Session>) {
        if let Some(kept) = self.kept {
            kept.insert(path, session);
        }
    }

    fn sessions(&self) -> Vec<Arc<Session>> {
        self.opened.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Every block read so far of every archive opened, against its block table: what a command
    /// that writes as it goes (an export) calls before writing.
    pub fn check_what_was_read(&self) -> anyhow::Result<()> {
        for s in self.sessions() {
            s.archive.verify_read().with_context(|| s.archive.path.display().to_string())?;
        }
        Ok(())
    }

    /// Every archive opened, checked in full (checksum and ids): the first that fails.
    fn check_in_full(&self) -> Option<anyhow::Error> {
        self.sessions().into_iter().find_map(|s| {
            let checked = s.archive.verify_read().and_then(|()| s.archive.check_ids());
            checked.err().map(|e| anyhow::Error::new(e).context(s.archive.path.display().to_string()))
        })
    }
}

/// The archives `memviz mcp` opened, kept mapped between calls: by path, while the file's size
/// and modification time stay the same.
#[derive(Default)]
pub struct Kept(Mutex<HashMap<PathBuf, (Stamp, Arc<Session>)>>);

/// A file's size and modification time: it is the same file while both are.
type Stamp = (u64, Option<SystemTime>);

impl Kept {
    fn stamp(path: &Path) -> Stamp {
        std::fs::metadata(path).map_or((0, None), |m| (m.len(), m.modified().ok()))
    }

    fn get(&self, path: &Path) -> Option<Arc<Session>> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (when, s) = kept.get(path)?;
        (*when == Kept::stamp(path)).then(|| Arc::clone(s))
    }

    fn insert(&self, path: &Path, s: &Arc<Session>) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.insert(path.to_owned(), (Kept::stamp(path), Arc::clone(s)));
    }
}

/// Runs a command: an error or a panic that comes from a corrupted archive becomes the one-line
/// error that says so, and an answer leaves only once what it read was checked (see the module
/// docs).
pub fn guarded<T>(opening: &Opening<'_>, command: impl FnOnce(&Opening<'_>) -> anyhow::Result<T>) -> anyhow::Result<T> {
    let deferring = guard::Deferring::new();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| command(opening)));
    drop(deferring);
    match result {
        Ok(Ok(answer)) => opening.check_what_was_read().map(|()| answer),
        // An error read from corrupted bytes would be wrong: say what is wrong instead.
        Ok(Err(e)) => Err(opening.check_what_was_read().err().unwrap_or(e)),
        Err(panic) => match opening.check_in_full() {
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
