//! Temporary files beside an output, safe in a shared folder and gone after an interruption.
//!
//! - **Names nobody can guess**: `.NAME.tmp-PID-RANDOM`, created with `O_CREAT|O_EXCL` (which
//!   never follows a symlink) by the `tempfile` crate, mode 0600: another user of a shared,
//!   non-sticky folder cannot plant a link that makes memviz truncate or overwrite their victim.
//!   Once written, the file gets 0644 less the umask (readable as a plain create makes it,
//!   writable by its owner only: a cached archive no one else may change), set through its own
//!   descriptor, never a path.
//! - **Removed on SIGINT, SIGTERM and SIGHUP**: every temp file in use is registered in a fixed
//!   table of C strings that the signal handler walks with `unlink` (async-signal-safe), before
//!   `_exit(128 + signal)`; [`remove_all`] does the same for a fatal limit (`spill`).
//! - **Stale ones swept**: after a `kill -9`, the next write into that folder removes the
//!   `.*.tmp-PID-*` files of the current user whose process is gone ([`sweep_stale`]).
//!
//! - **A bus error is one line**: a mapped input truncated while it is read (`SIGBUS`) ends in
//!   one error line and exit code 1, the temp files removed ([`report_bus_errors`]).
//!
//! `unsafe` here: the signal handlers' installation and the table of C strings (libc).

#![allow(unsafe_code)]

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};

/// Temp files in use at once, at most (more are created, just not removed by a signal).
const SLOTS: usize = 64;
static SLOTS_IN_USE: [AtomicPtr<libc::c_char>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

/// A temp file beside `target`: created (empty, 0600, never through a link), registered for
/// removal on a signal, removed when dropped unless [`TempFile::persist`] renamed it.
pub struct TempFile {
    path: PathBuf,
    /// The file as created (its mode is set through it).
    file: std::fs::File,
    slot: Option<usize>,
    kept: bool,
}

impl TempFile {
    /// Creates `.NAME.tmp-PID-RANDOM` in `target`'s folder (stale ones there swept first).
    pub fn beside(target: &Path) -> std::io::Result<(TempFile, std::fs::File)> {
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        sweep_stale(dir);
        let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        // The handlers first, and each name registered before its file exists: a signal at any
        // moment finds the file (or only its name, which it unlinks harmlessly) in the table.
        install_handlers();
        let mut slot = None;
        let made = tempfile::Builder::new()
            .prefix(&format!(".{name}.tmp-{}-", std::process::id()))
            .rand_bytes(8)
            .make_in(dir, |path| {
                slot = register(path);
                // O_CREAT | O_EXCL, 0600: never through a planted link.
                let opened = create_new(path);
                if opened.is_err()
                    && let Some(taken) = slot.take()
                {
                    unregister(taken);
                }
                opened
            })
            .and_then(|t| t.keep().map_err(|e| e.error))
            // The error names the output asked for (the caller's context), not the temp file.
            .map_err(|e| {
                e.raw_os_error()
                    .map_or_else(|| std::io::Error::new(e.kind(), "no temp file"), std::io::Error::from_raw_os_error)
            });
        let (file, path) = match made {
            Ok(made) => made,
            Err(e) => {
                if let Some(taken) = slot.take() {
                    unregister(taken);
                }
                return Err(e);
            }
        };
        let own = match file.try_clone() {
            Ok(own) => own,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                if let Some(taken) = slot.take() {
                    unregister(taken);
                }
                return Err(e);
            }
        };
        Ok((TempFile { path, file: own, slot, kept: false }, file))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the finished file to `target` (all or nothing), made readable as a plain create
    /// makes it and writable by its owner only (0644 less the umask).
    pub fn persist(mut self, target: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt as _;
        self.file.set_permissions(std::fs::Permissions::from_mode(finished_mode()))?;
        std::fs::rename(&self.path, target)?;
        self.kept = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            unregister(slot);
        }
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The mode of a finished file: 0644 less the umask. The temp file's 0600 guards it only while
/// it is written: an archive in a shared cache, an exported page, a PNG are read by others as a
/// plain create lets them; no one but its owner writes one (the cache trusts no archive others
/// can change).
fn finished_mode() -> u32 {
    0o644 & !umask()
}

/// The process's umask, as `/proc/self/status` says it (asking `umask(2)` sets it, for a moment,
/// under the other threads' feet); 022 where that cannot be read.
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find_map(|l| l.strip_prefix("Umask:"));
    line.and_then(|v| u32::from_str_radix(v.trim(), 8).ok()).unwrap_or(0o022)
}

/// A new file at `path`, read-write for its owner only; an error if anything is there already.
fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(path)
}

fn register(path: &Path) -> Option<usize> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = CString::new(path.as_os_str().as_bytes()).ok()?.into_raw();
    for (i, slot) in SLOTS_IN_USE.iter().enumerate() {
        if slot.compare_exchange(std::ptr::null_mut(), c, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            return Some(i);
        }
    }
    // SAFETY: `c` came from `into_raw` just above and was stored nowhere.
    drop(unsafe { CString::from_raw(c) });
    None
}

fn unregister(slot: usize) {
    let c = SLOTS_IN_USE[slot].swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !c.is_null() {
        // SAFETY: every pointer in the table came from `CString::into_raw`, and the swap took it out.
        drop(unsafe { CString::from_raw(c) });
    }
}

/// Unlinks every registered temp file (async-signal-safe: no allocation, no lock).
pub fn remove_all() {
    for slot in &SLOTS_IN_USE {
        let c = slot.load(Ordering::Acquire);
        if !c.is_null() {
            // SAFETY: a NUL-terminated path that stays allocated while registered.
            unsafe { libc::unlink(c) };
        }
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    remove_all();
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(128 + signal) };
}

/// The line a bus error ends the process with.
const BUS_ERROR: &[u8] = b"error: a file memviz had mapped got shorter while it was read (SIGBUS): was it truncated or rewritten meanwhile?\n";

extern "C" fn on_bus_error(_: libc::c_int) {
    remove_all();
    // SAFETY: write and _exit are async-signal-safe; the message is a static byte string.
    unsafe {
        libc::write(2, BUS_ERROR.as_ptr().cast(), BUS_ERROR.len());
        libc::_exit(1)
    };
}

/// A mapped file (an archive, a pickle: `ingest::mapped`) truncated while it is read raises
/// SIGBUS where its missing pages are read: from now on that is one error line and exit code 1,
/// the temp files removed, instead of a crash. Every command installs it (`commands::run`).
pub fn report_bus_errors() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| install(libc::SIGBUS, on_bus_error));
}

/// `handler` for `signal`; it must call only async-signal-safe functions.
fn install(signal: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: the handlers given here only call async-signal-safe functions.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as usize;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
    }
}

/// SIGINT, SIGTERM and SIGHUP remove the temp files and exit 130, 143 and 129 (once, on first use).
fn install_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            install(signal, on_signal);
        }
    });
}

/// Removes `dir`'s `.*.tmp-PID-*` files that belong to the current user and whose process is
/// gone (a `kill -9` left them).
pub fn sweep_stale(dir: &Path) {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = stale_pid(&name.to_string_lossy()) else { continue };
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        if !meta.is_file() || meta.uid() != me || pid == std::process::id() {
            continue;
        }
        // SAFETY: signal 0 only checks whether the process exists.
        let gone = unsafe { libc::kill(pid as libc::pid_t, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The PID in a temp file's name: `.NAME.tmp-PID-RANDOM` (or the older `.NAME.tmp-PID`).
fn stale_pid(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    let (_, tail) = name.rsplit_once(".tmp-")?;
    tail.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_carry_the_pid() {
        assert_eq!(stale_pid(".run.memviz.tmp-4242-a8Xk2QpZ"), Some(4242));
        assert_eq!(stale_pid(".run.memviz.tmp-4242"), Some(4242));
        assert_eq!(stale_pid("run.memviz.tmp-4242"), None);
        assert_eq!(stale_pid(".run.memviz"), None);
    }

    #[test]
    fn a_temp_file_is_made_beside_unguessable_and_gone_unless_kept() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.memviz");
        let (t, _) = TempFile::beside(&target).unwrap();
        let name = t.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(&format!(".out.memviz.tmp-{}-", std::process::id())), "{name}");
        let path = t.path().to_owned();
        drop(t);
        assert!(!path.exists());
        let (t, _) = TempFile::beside(&target).unwrap();
        t.persist(&target).unwrap();
        assert!(target.exists());
        // Kept, it is readable as a plain create makes it (the umask applied), writable by its
        // owner only, also where it replaced a file others could write.
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&target), 0o644 & !umask());
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o666)).unwrap();
        let (t, _) = TempFile::beside(&target).unwrap();
        t.persist(&target).unwrap();
        assert_eq!(mode(&target), 0o644 & !umask());
        // A dead process's leftover is swept; one of a live process is not.
        let dead = dir.path().join(".x.memviz.tmp-999999999-abc");
        let live = dir.path().join(format!(".y.memviz.tmp-{}-abc", std::process::id()));
        std::fs::write(&dead, b"").unwrap();
        std::fs::write(&live, b"").unwrap();
        sweep_stale(dir.path());
        assert!(!dead.exists() && live.exists());
    }
}
