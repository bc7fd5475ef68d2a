//! Opening a snapshot in the window: its cached archive when one matches, else indexing on a
//! named worker thread while the window shows progress.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;

use eframe::egui;

use super::app::Content;

pub fn start(path: &Path, ctx: &egui::Context) -> Content {
    let total = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let progress = Arc::new(AtomicU64::new(0));
    let (tx, done) = sync_channel(1);
    let (p, c, owned) = (Arc::clone(&progress), ctx.clone(), path.to_owned());
    let spawned = std::thread::Builder::new().name("memviz-index".into()).spawn(move || {
        let result = archive_for(&owned, &|n| p.store(n, Ordering::Relaxed)).map_err(|e| format!("{e:#}"));
        let _ = tx.send(result);
        c.request_repaint();
    });
    match spawned {
        Ok(_) => Content::Indexing { path: path.to_owned(), progress, total, done },
        Err(e) => Content::Failed(e.to_string()),
    }
}

/// The archive of `snapshot`: the cached one if it matches, else a fresh one (written beside
/// it, or in the user cache directory).
pub fn archive_for(snapshot: &Path, progress: &dyn Fn(u64)) -> anyhow::Result<PathBuf> {
    use anyhow::Context as _;
    let stamp = crate::archive::write::stamp(snapshot).with_context(|| snapshot.display().to_string())?;
    if let Some(a) = crate::commands::find_cache(snapshot, &stamp) {
        return Ok(a.path);
    }
    let started = std::time::Instant::now();
    let (snapshot_model, source) =
        crate::ingest::read_path_progress(snapshot, progress).with_context(|| snapshot.display().to_string())?;
    let layouts = crate::commands::lay_out(&snapshot_model);
    let pending = crate::commands::PendingCache {
        path: crate::commands::cache_path(snapshot, &stamp),
        stamp,
        source,
        name: snapshot.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
    };
    crate::commands::write_archive(&pending, snapshot_model, layouts, &|_| {}, started)?;
    Ok(pending.path)
}
