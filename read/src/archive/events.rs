//! An archive's event columns as [`EventColumns`], read chunk by chunk: an undo walks backwards
//! through fewer than K events, so it touches one or two chunks of each column; the last chunk
//! of each is kept decoded.

use memviz_format::schema::{ArchivedChunk, ArchivedRoot};

use super::attrs::{run, sparse};
use super::chunks::{self, Cursor};
use crate::allocator::EventColumns;
use crate::model::{Action, EventIdx};

type Column<'s, T> = Cursor<'s, ArchivedChunk, T>;

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
            action: Cursor::new(&t.action, rows, chunks::decode),
            addr: Cursor::new(&t.addr, rows, chunks::decode),
            size: Cursor::new(&t.size, rows, chunks::decode),
            stack: Cursor::new(&t.stack, rows, chunks::decode),
            time_us: Cursor::new(&t.time_us, rows, chunks::decode_deltas),
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
