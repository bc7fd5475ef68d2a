//! Opening a snapshot in the window: its cached archive when one matches, else indexing on a
//! named worker thread while the window shows progress (with `--no-cache`, into a temporary
//! archive that is mapped and removed).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;

use eframe::egui;

use super::app::Content;

pub fn start(platform: &crate::platform::PlatformRef, path: &Path, ctx: &egui::Context, cache: bool) -> Content {
    let total = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let progress = Arc::new(AtomicU64::new(0));
    let (tx, done) = sync_channel(1);
    let (p, c, owned, platform) = (Arc::clone(&progress), ctx.clone(), path.to_owned(), platform.clone());
    let spawned = std::thread::Builder::new().name("memviz-index".into()).spawn(move || {
        let result = platform.open_snapshot(&owned, cache, &|n| p.store(n, Ordering::Relaxed));
        let _ = tx.send(result);
        c.request_repaint();
    });
    match spawned {
        Ok(_) => Content::Indexing { path: path.to_owned(), progress, total, done },
        Err(e) => Content::Failed(e.to_string()),
    }
}
