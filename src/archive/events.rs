//! An archive's event columns as [`EventColumns`], read chunk by chunk: an undo walks backwards
//! through fewer than K events, so it touches one or two chunks of each column; the last chunk
//! of each is kept decoded.

use std::cell::RefCell;

use memviz_format::rkyv::vec::ArchivedVec;
use memviz_format::schema::{ArchivedChunk, ArchivedRoot};

use super::attrs::{run, sparse};
use super::chunks::{self, Scalar};
use crate::allocator::EventColumns;
use crate::model::{Action, EventIdx};

/// One column with its last decoded chunk.
struct Column<'s, T> {
    chunks: &'s ArchivedVec<ArchivedChunk>,
    rows: usize,
    decode: fn(&ArchivedChunk) -> Result<Vec<T>, chunks::ChunkError>,
    last: RefCell<Option<(usize, Vec<T>)>>,
}

impl<'s, T: Scalar> Column<'s, T> {
    fn new(chunks: &'s ArchivedVec<ArchivedChunk>, rows: usize) -> Self {
        Column { chunks, rows: rows.max(1), decode: chunks::decode::<T>, last: RefCell::new(None) }
    }
}

impl<'s> Column<'s, i64> {
    /// A delta-coded column (`time_us`).
    fn deltas(chunks: &'s ArchivedVec<ArchivedChunk>, rows: usize) -> Self {
        Column { chunks, rows: rows.max(1), decode: chunks::decode_deltas, last: RefCell::new(None) }
    }
}

impl<T: Copy + Default> Column<'_, T> {
    /// The value at event `e` (the default when its chunk does not decode: the verify that
    /// opened the archive says so already).
    fn get(&self, e: usize) -> T {
        let (c, i) = (e / self.rows, e % self.rows);
        let mut last = self.last.borrow_mut();
        if last.as_ref().is_none_or(|(have, _)| *have != c) {
            let values = self.chunks.get(c).and_then(|ch| (self.decode)(ch).ok()).unwrap_or_default();
            *last = Some((c, values));
        }
        last.as_ref().and_then(|(_, v)| v.get(i).copied()).unwrap_or_default()
    }
}

pub struct ArchiveEvents<'s> {
    root: &'s ArchivedRoot,
    action: Column<'s, u8>,
    addr: Column<'s, u64>,
    size: Column<'s, u64>,
    stack: Column<'s, u32>,
    time_us: Column<'s, i64>,
}

impl<'s> ArchiveEvents<'s> {
    pub fn new(root: &'s ArchivedRoot) -> Self {
        let rows = root.events.chunk_rows.to_native() as usize;
        let t = &root.events;
        ArchiveEvents {
            root,
            action: Column::new(&t.action, rows),
            addr: Column::new(&t.addr, rows),
            size: Column::new(&t.size, rows),
            stack: Column::new(&t.stack, rows),
            time_us: Column::deltas(&t.time_us, rows),
        }
    }

    /// The stack of absolute event `e`.
    pub fn stack(&self, e: usize) -> u32 {
        self.stack.get(e)
    }

    /// The time of event `e` (`None`: not recorded).
    pub fn time_us(&self, e: usize) -> Option<i64> {
        Some(self.time_us.get(e)).filter(|&t| t != crate::model::NO_TIME)
    }

    /// The device's free memory an `oom` event recorded.
    pub fn device_free(&self, e: usize) -> Option<u64> {
        sparse(&self.root.events.device_free, EventIdx::at(e)).map(|v| v.to_native())
    }
}

impl EventColumns for ArchiveEvents<'_> {
    fn action(&self, e: usize) -> Action {
        Action::from_code(self.action.get(e))
    }
    fn addr(&self, e: usize) -> u64 {
        self.addr.get(e)
    }
    fn size(&self, e: usize) -> u64 {
        self.size.get(e)
    }
    fn stream(&self, e: usize) -> u64 {
        run(&self.root.events.stream, EventIdx::at(e)).map_or(0, |s| s.to_native())
    }
    fn pool(&self, e: usize) -> Option<(i64, i64)> {
        sparse(&self.root.events.pool_id, EventIdx::at(e)).map(|p| (p.0.to_native(), p.1.to_native()))
    }
}
