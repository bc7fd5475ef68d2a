//! Getting a command's input: a `.memviz` archive, or a snapshot — through its cached archive
//! when one matches, else by reading it (and then writing the cache for next time).
//!
//! Cache lookup for `run/x.pickle`: `run/x.memviz`, then `$XDG_CACHE_HOME/memviz/` (or
//! `~/.cache/memviz/`) `x-<fingerprint>.memviz`. An archive is used only while its header's source
//! stamp (size, mtime, head/tail hash) matches the snapshot and its version is ours; anything else
//! is rebuilt, never misread.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use std::sync::atomic::{AtomicU32, Ordering};

use crate::archive::{Archive, Session, restore};
use crate::ingest::{self, SourceInfo};
use crate::layout::Layout;
use crate::model::Snapshot;
use memviz_format::SourceStamp;

/// A command's input, fully in memory.
pub struct Loaded {
    pub snapshot: Snapshot,
    /// Every device with data, ascending.
    pub layouts: Vec<Layout>,
    /// How the data was stored, for titles: `pickle protocol 4, gzip` or `archive of …`.
    pub described: String,
    pub file_bytes: u64,
    /// Set when the input was a snapshot that had no matching archive: write one.
    pub pending_cache: Option<PendingCache>,
    /// The archive it was read from (the input, or the snapshot's cache), for what answers from
    /// an archive faster than from the model (the allocator's saved states).
    pub archive: Option<Archive>,
}

/// Where to write the archive of a snapshot just read.
pub struct PendingCache {
    pub path: PathBuf,
    pub stamp: SourceStamp,
    pub source: SourceInfo,
    pub name: String,
}

/// Reads `path`: an archive directly, a snapshot through its cache.
pub fn load(path: &Path, use_cache: bool) -> anyhow::Result<Loaded> {
    let context = || path.display().to_string();
    if crate::file::is_archive(path) {
        return from_archive(crate::file::open_verified(path).with_context(context)?, false).with_context(context);
    }
    if ingest::is_stream(path) {
        // Standard input or a pipe: read once, and no cache (nothing to stamp it by, nowhere
        // beside it to put one).
        let (snapshot, source) = ingest::read_path(path).with_context(context)?;
        let layouts = super::reading::lay_out(&snapshot);
        let (described, file_bytes) = (source.to_string(), source.decoded_bytes);
        return Ok(Loaded { snapshot, layouts, described, file_bytes, pending_cache: None, archive: None });
    }
    let stamp = crate::file::write::stamp(path).with_context(context)?;
    if use_cache && let Some(a) = find_cache(path, &stamp) {
        return from_archive(a, true).with_context(context);
    }
    let (snapshot, source) = ingest::read_path(path).with_context(context)?;
    let layouts = super::reading::lay_out(&snapshot);
    let pending_cache = use_cache.then(|| PendingCache {
        path: cache_path(path, &stamp),
        stamp,
        source: source.clone(),
        name: file_name(path),
    });
    Ok(Loaded {
        snapshot,
        layouts,
        described: source.to_string(),
        file_bytes: source.file_bytes,
        pending_cache,
        archive: None,
    })
}

/// The archive of `snapshot`: the cached one if it matches, else a fresh one (written beside
/// it, or in the user cache directory). `progress` gets the bytes read so far.
pub fn archive_for(snapshot: &Path, progress: &dyn Fn(u64)) -> anyhow::Result<PathBuf> {
    match lookup(snapshot)? {
        Cached::Found(path) => Ok(path),
        Cached::Missing(path, stamp) => {
            super::pipeline::build_archive(snapshot, stamp, &path, progress, &|_| {})?;
            Ok(path)
        }
    }
}

/// Where `snapshot`'s archive is in the cache ([`lookup`]).
pub enum Cached {
    /// A current one, at this path.
    Found(PathBuf),
    /// None: one goes at this path, made from the snapshot with this stamp.
    Missing(PathBuf, SourceStamp),
}

/// Looks for `snapshot`'s current archive in the cache (`memviz serve` builds a missing one in
/// a child process, [`archive_for`] in this one).
pub fn lookup(snapshot: &Path) -> anyhow::Result<Cached> {
    let stamp = crate::file::write::stamp(snapshot).with_context(|| snapshot.display().to_string())?;
    Ok(match find_cache(snapshot, &stamp) {
        Some(a) => Cached::Found(a.path),
        None => Cached::Missing(cache_path(snapshot, &stamp), stamp),
    })
}

/// An open archive of `snapshot`: the cached one (built on first use), or — without the cache —
/// one built in the temp folder, mapped, and removed at once (the mapping stays valid).
pub fn open_session(snapshot: &Path, cache: bool, progress: &dyn Fn(u64)) -> anyhow::Result<Session> {
    if cache && !ingest::is_stream(snapshot) {
        open_cached(snapshot, progress)
    } else {
        open_temporary(snapshot, progress)
    }
}

fn open_cached(path: &Path, progress: &dyn Fn(u64)) -> anyhow::Result<Session> {
    let at = archive_for(path, progress)?;
    Ok(Session::from_archive(crate::file::open(&at).with_context(|| path.display().to_string())?))
}

/// Builds the archive in the temp folder, maps it, and removes the file.
fn open_temporary(path: &Path, progress: &dyn Fn(u64)) -> anyhow::Result<Session> {
    let context = || path.display().to_string();
    static BUILT: AtomicU32 = AtomicU32::new(0);
    let stamp = if ingest::is_stream(path) {
        SourceStamp::default()
    } else {
        crate::file::write::stamp(path).with_context(context)?
    };
    let tmp = std::env::temp_dir().join(format!(
        ".memviz-{}-{}-{}",
        std::process::id(),
        BUILT.fetch_add(1, Ordering::Relaxed),
        crate::index::default_path(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    let built = super::pipeline::build_archive(path, stamp, &tmp, progress, &|_| {}).map(drop);
    let opened = built.and_then(|()| crate::file::open(&tmp).with_context(context));
    // Mapped (or failed): the file is no longer needed either way.
    let _ = std::fs::remove_file(&tmp);
    Ok(Session::from_archive(opened?))
}

pub fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The model of an archive: one given as the input (described as an archive), or the cache of
/// the snapshot given (described as that snapshot: its format and size).
fn from_archive(a: Archive, cache_of_input: bool) -> anyhow::Result<Loaded> {
    let root = a.root();
    let snapshot =
        restore::snapshot(root).map_err(|e| anyhow::anyhow!("{e}; re-run `memviz index` on the snapshot"))?;
    let layouts = root.devices.iter().map(restore::layout).collect();
    let (described, file_bytes) = if cache_of_input {
        (root.source.format.as_str().to_owned(), root.source.file_bytes.to_native())
    } else {
        (format!("archive of {} ({})", root.source.name, root.source.format), a.file_len())
    };
    Ok(Loaded { snapshot, layouts, described, file_bytes, pending_cache: None, archive: Some(a) })
}

/// The first candidate archive that opens, validates, matches the snapshot's stamp and is of
/// this build's format version (an older one lacks what a rebuild would show: it is replaced).
pub fn find_cache(snapshot: &Path, stamp: &SourceStamp) -> Option<Archive> {
    candidates(snapshot, stamp).into_iter().find_map(|p| {
        if !trusted(&p) {
            return None;
        }
        let a = crate::file::open(&p).ok()?;
        let current = a.format_version() == memviz_format::FORMAT_VERSION;
        (current && a.header().source == *stamp && a.verify().is_ok()).then_some(a)
    })
}

fn candidates(snapshot: &Path, stamp: &SourceStamp) -> Vec<PathBuf> {
    let mut v = vec![crate::index::default_path(snapshot)];
    if let Some(dir) = crate::output::user_cache_dir() {
        v.push(dir.join(cache_name(snapshot, stamp)));
    }
    v
}

/// Beside the snapshot when that folder is writable and no one else's to write in, else the
/// user cache directory.
pub fn cache_path(snapshot: &Path, stamp: &SourceStamp) -> PathBuf {
    let beside = crate::index::default_path(snapshot);
    let dir = beside.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if writable(dir) && private_folder(dir) {
        return beside;
    }
    match crate::output::user_cache_dir() {
        Some(d) if std::fs::create_dir_all(&d).is_ok() => d.join(cache_name(snapshot, stamp)),
        _ => beside,
    }
}

fn cache_name(snapshot: &Path, stamp: &SourceStamp) -> String {
    let stem =
        crate::index::default_path(snapshot).file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{stem}-{:016x}.memviz", stamp.fingerprint ^ stamp.size)
}

/// A cached archive is used only when the current user owns it (a regular file, not a link, that
/// only its owner can write)
/// and no one else can write in its folder — as ssh treats its keys: an archive planted in a
/// shared folder, with the victim snapshot's stamp copied in, would otherwise be answered from.
/// Anything else is rebuilt in the user's own cache (said once).
fn trusted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(meta) = path.symlink_metadata() else { return false };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // SAFETY: getuid has no preconditions.
    #[allow(unsafe_code)]
    let me = unsafe { libc::getuid() };
    let ok = meta.is_file() && meta.uid() == me && meta.mode() & 0o022 == 0 && private_folder(dir);
    if !ok {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!(
                "note: not using {}: it is not yours, or others can write in its folder; using your own cache",
                path.display()
            );
        });
    }
    ok
}

/// No one but its owner (the current user, or root) can write in `dir`.
fn private_folder(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(meta) = dir.metadata() else { return false };
    // SAFETY: getuid has no preconditions.
    #[allow(unsafe_code)]
    let me = unsafe { libc::getuid() };
    (meta.uid() == me || meta.uid() == 0) && meta.mode() & 0o022 == 0
}

/// Whether a file can be made in `dir`: a probe at an unguessable name, made with `O_EXCL`
/// (never through a planted link) and removed at once.
fn writable(dir: &Path) -> bool {
    tempfile::Builder::new().prefix(".memviz-probe-").tempfile_in(dir).is_ok()
}
