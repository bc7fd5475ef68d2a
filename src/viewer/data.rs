//! The viewer's data: one mapped archive, read in place, plus the few derived tables that are
//! decompressed on a background thread after the first frame (action times).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use memviz_format::schema::{ArchivedDevice, ArchivedRoot};
use memviz_format::view::{i64s, u32s, u64s};

use crate::archive::{Archive, ArchiveError, chunks, restore};
use crate::layout::{CheckpointsRef, LayoutRef};

/// An opened archive shared by the UI and the tile workers.
pub struct Session {
    pub archive: Archive,
    /// Set by the background checksum when the archive's bytes do not match its header.
    pub corrupt: std::sync::atomic::AtomicBool,
    /// Per device: `time_us` of each action, once decompressed.
    action_times: Vec<OnceLock<Vec<i64>>>,
}

impl Session {
    pub fn open(path: &Path) -> Result<Arc<Session>, ArchiveError> {
        let archive = Archive::open(path)?;
        let n = archive.root().devices.len();
        Ok(Arc::new(Session {
            archive,
            corrupt: std::sync::atomic::AtomicBool::new(false),
            action_times: (0..n).map(|_| OnceLock::new()).collect(),
        }))
    }

    pub fn root(&self) -> &ArchivedRoot {
        self.archive.root()
    }

    pub fn device(&self, d: usize) -> &ArchivedDevice {
        &self.root().devices[d]
    }

    pub fn devices(&self) -> usize {
        self.root().devices.len()
    }

    pub fn layout(&self, d: usize) -> LayoutRef<'_> {
        restore::layout_ref(self.device(d))
    }

    pub fn checkpoints(&self, d: usize) -> CheckpointsRef<'_> {
        restore::checkpoints_ref(self.device(d))
    }

    /// Element id → stack id (the allocation site), for colouring and tooltips.
    pub fn sites(&self, d: usize) -> &[u32] {
        u32s(&self.device(d).elements.stack)
    }

    pub fn str(&self, id: u32) -> &str {
        restore::str_at(self.root(), id)
    }

    /// Time of each action (decompressed on first use; `spawn_decompress` does it early).
    pub fn action_times(&self, d: usize) -> &[i64] {
        self.action_times[d].get_or_init(|| {
            let mut out = Vec::new();
            for c in self.device(d).action_time_us.iter() {
                match chunks::decode_deltas(c) {
                    Ok(v) => out.extend(v),
                    Err(_) => return Vec::new(),
                }
            }
            out
        })
    }

    /// Times if already decompressed (never blocks the UI).
    pub fn action_times_ready(&self, d: usize) -> Option<&[i64]> {
        self.action_times[d].get().map(Vec::as_slice)
    }

    /// On a named background thread: checks the archive's checksum (opening only validated its
    /// structure, to stay O(1)), then decompresses every device's action times.
    pub fn spawn_decompress(self: &Arc<Self>) {
        let s = Arc::clone(self);
        let _ = std::thread::Builder::new().name("memviz-verify".into()).spawn(move || {
            if s.archive.verify().is_err() {
                s.corrupt.store(true, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            for d in 0..s.devices() {
                s.action_times(d);
            }
        });
    }

    pub fn minimap(&self, d: usize) -> Vec<(u64, &[u64], &[u64])> {
        self.device(d).minimap.iter().map(|m| (m.actions_per_bucket.to_native(), u64s(&m.min), u64s(&m.max))).collect()
    }

    /// Annotation spans of a device: (name, start µs, end µs or None, depth).
    pub fn spans(&self, d: usize) -> Vec<(u32, i64, Option<i64>, u32)> {
        self.device(d)
            .spans
            .iter()
            .map(|s| {
                let end = s.end_us.to_native();
                (s.name.to_native(), s.start_us.to_native(), (end != i64::MIN).then_some(end), s.depth.to_native())
            })
            .collect()
    }

    /// Reserved memory points (time µs, bytes) of a device.
    pub fn reserved(&self, d: usize) -> (u64, &[i64], &[u64]) {
        let r = &self.device(d).reserved;
        (r.initial.to_native(), i64s(&r.time_us), u64s(&r.bytes))
    }
}
