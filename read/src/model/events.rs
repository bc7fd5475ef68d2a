//! Trace events stored column by column.

use super::{NO_TIME, NONE, StackId, StrId};

/// What a trace event did. Unknown actions keep their name in `Events::other_action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    /// Legacy merged free (older PyTorch): ends an allocation like `free_completed`.
    Free,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Snapshot,
    Oom,
    Unknown = 10,
    /// `torch.cuda.memory._annotate_tensor`: attaches `user_metadata` to the allocation at
    /// `addr`. Not a layout action.
    Annotate = 11,
}

impl Action {
    pub const KNOWN: [Action; 11] = [
        Action::Alloc,
        Action::FreeRequested,
        Action::FreeCompleted,
        Action::Free,
        Action::SegmentAlloc,
        Action::SegmentFree,
        Action::SegmentMap,
        Action::SegmentUnmap,
        Action::Snapshot,
        Action::Oom,
        Action::Annotate,
    ];

    pub fn from_name(name: &[u8]) -> Action {
        match name {
            b"alloc" => Action::Alloc,
            b"free_requested" => Action::FreeRequested,
            b"free_completed" => Action::FreeCompleted,
            b"free" => Action::Free,
            b"segment_alloc" => Action::SegmentAlloc,
            b"segment_free" => Action::SegmentFree,
            b"segment_map" => Action::SegmentMap,
            b"segment_unmap" => Action::SegmentUnmap,
            b"snapshot" => Action::Snapshot,
            b"oom" => Action::Oom,
            b"annotate" => Action::Annotate,
            _ => Action::Unknown,
        }
    }

    /// The inverse of `action as u8` (archives store actions as these codes; 10 is unknown).
    pub fn from_code(code: u8) -> Action {
        // A table rather than a search of `KNOWN`: undoing reads one action per event.
        const BY_CODE: [Action; 12] = {
            let mut t = [Action::Unknown; 12];
            let mut i = 0;
            while i < Action::KNOWN.len() {
                t[Action::KNOWN[i] as usize] = Action::KNOWN[i];
                i += 1;
            }
            t
        };
        BY_CODE.get(code as usize).copied().unwrap_or(Action::Unknown)
    }

    pub fn name(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::Free => "free",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Snapshot => "snapshot",
            Action::Oom => "oom",
            Action::Annotate => "annotate",
            Action::Unknown => "unknown",
        }
    }

    /// Ends the allocation at `addr` (SPEC §2: `free_completed` or a merged `free`).
    pub fn ends_allocation(self) -> bool {
        matches!(self, Action::FreeCompleted | Action::Free)
    }

    /// Signed change of reserved memory caused by this action, as a multiplier of `size`.
    pub fn reserved_sign(self) -> i64 {
        match self {
            Action::SegmentAlloc | Action::SegmentMap => 1,
            Action::SegmentFree | Action::SegmentUnmap => -1,
            _ => 0,
        }
    }
}

/// One row per trace event. Fields that rarely change are run-length encoded ([`Runs`]); fields
/// that are rarely present live in sparse `(event, value)` tables sorted by event.
#[derive(Debug, Default, Clone)]
pub struct Events {
    pub action: Vec<Action>,
    pub addr: Vec<u64>,
    pub size: Vec<u64>,
    /// µs since the Unix epoch, or [`NO_TIME`].
    pub time_us: Vec<i64>,
    /// Stack at the event, or [`NONE`] when no `frames` were captured.
    pub stack: Vec<StackId>,
    pub stream: Runs<u64>,
    pub compile_context: Runs<StrId>,
    pub user_metadata: Runs<StrId>,
    /// `internal_metadata` (written by torch only where non-empty).
    pub internal_metadata: Runs<StrId>,
    /// `category` of re-exported snapshots (MemoryViz-style JSON), [`NONE`] when absent.
    pub category: Runs<StrId>,
    /// `(event, name)` of every event whose action is [`Action::Unknown`].
    pub other_action: Vec<(u32, StrId)>,
    /// `(event, bytes)`: free memory reported by `oom` events.
    pub device_free: Vec<(u32, u64)>,
    /// `(event, stack)`: `forward_frames` (autograd's forward stack of a backward allocation).
    pub forward_stack: Vec<(u32, StackId)>,
    /// `(event, pool id)` when the event names a private memory pool.
    pub pool_id: Vec<(u32, (i64, i64))>,
}

/// The large columns of one row (`addr`, `size`, `time_us`, `stack`): ~28 bytes an event, the
/// bulk of a model. A reader that keeps them elsewhere (an index read hands them to its workers
/// and lets them go) pushes events without them ([`Events::push_without_values`]) and answers
/// for them through [`EventValues`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RowValues {
    pub addr: u64,
    pub size: u64,
    pub time_us: i64,
    pub stack: StackId,
}

impl RowValues {
    /// `row`'s (zeros where it has no address or size, as the columns hold them).
    pub fn of(row: &EventRow) -> RowValues {
        RowValues { addr: row.addr.unwrap_or(0), size: row.size.unwrap_or(0), time_us: row.time_us, stack: row.stack }
    }
}

/// Whether `a` is a block event (an index read lets go of their rows; it keeps the rest: segment
/// events, OOMs, annotations, snapshots, unknown actions).
pub fn is_block_event(a: Action) -> bool {
    matches!(a, Action::Alloc | Action::FreeRequested | Action::FreeCompleted | Action::Free)
}

/// One event's fields, as a reader assembles them before pushing.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub action: Action,
    pub other_action: StrId,
    pub addr: Option<u64>,
    pub size: Option<u64>,
    pub stream: u64,
    pub time_us: i64,
    pub stack: StackId,
    pub compile_context: StrId,
    pub user_metadata: StrId,
    pub internal_metadata: StrId,
    pub category: StrId,
    pub device_free: Option<u64>,
    pub forward_stack: StackId,
    pub pool_id: Option<(i64, i64)>,
}

impl Default for EventRow {
    fn default() -> Self {
        EventRow {
            action: Action::Unknown,
            other_action: NONE,
            addr: None,
            size: None,
            stream: 0,
            time_us: NO_TIME,
            stack: NONE,
            compile_context: NONE,
            user_metadata: NONE,
            internal_metadata: NONE,
            category: NONE,
            device_free: None,
            forward_stack: NONE,
            pool_id: None,
        }
    }
}

impl Events {
    pub fn len(&self) -> usize {
        self.action.len()
    }

    pub fn is_empty(&self) -> bool {
        self.action.is_empty()
    }

    /// Frees the per-event columns (action, addr, size, time, stack) once the event table holds
    /// them compressed; the run-length and sparse columns stay. `len` is 0 after this.
    pub fn drop_rows(&mut self) {
        self.action = Vec::new();
        self.addr = Vec::new();
        self.size = Vec::new();
        self.time_us = Vec::new();
        self.stack = Vec::new();
    }

    /// Whether the large columns hold every row (not so for a model an index read made: its
    /// reader kept them elsewhere, see [`EventValues`]).
    pub fn holds_values(&self) -> bool {
        self.addr.len() == self.action.len()
    }

    /// Event `e`'s address, size, time and stack; `None` past the columns.
    pub fn values(&self, e: usize) -> Option<RowValues> {
        Some(RowValues { addr: *self.addr.get(e)?, size: self.size[e], time_us: self.time_us[e], stack: self.stack[e] })
    }

    pub fn push(&mut self, row: &EventRow) -> u32 {
        self.addr.push(row.addr.unwrap_or(0));
        self.size.push(row.size.unwrap_or(0));
        self.time_us.push(row.time_us);
        self.stack.push(row.stack);
        self.push_without_values(row)
    }

    /// Room for `n` more events in the per-event columns.
    pub fn reserve(&mut self, n: usize) {
        self.action.reserve(n);
        self.addr.reserve(n);
        self.size.reserve(n);
        self.time_us.reserve(n);
        self.stack.reserve(n);
    }

    /// Keeps the first `n` events.
    pub fn truncate(&mut self, n: usize) {
        self.action.truncate(n);
        self.addr.truncate(n);
        self.size.truncate(n);
        self.time_us.truncate(n);
        self.stack.truncate(n);
        let n32 = n as u32;
        for runs in
            [&mut self.compile_context, &mut self.user_metadata, &mut self.internal_metadata, &mut self.category]
        {
            runs.truncate(n32);
        }
        self.stream.truncate(n32);
        self.other_action.retain(|e| e.0 < n32);
        self.device_free.retain(|e| e.0 < n32);
        self.forward_stack.retain(|e| e.0 < n32);
        self.pool_id.retain(|e| e.0 < n32);
    }

    /// Appends `other`'s events (as if each of its rows were pushed), all but their large
    /// columns, which the reader keeps elsewhere ([`Self::append_values`] appends those);
    /// returns the first one's id.
    pub fn append_without_values(&mut self, other: &Events) -> u32 {
        let first = self.action.len() as u32;
        self.action.extend_from_slice(&other.action);
        self.stream.append(&other.stream);
        self.compile_context.append(&other.compile_context);
        self.user_metadata.append(&other.user_metadata);
        self.internal_metadata.append(&other.internal_metadata);
        self.category.append(&other.category);
        fn shifted<T: Copy>(into: &mut Vec<(u32, T)>, from: &[(u32, T)], first: u32) {
            into.extend(from.iter().map(|&(e, v)| (first + e, v)));
        }
        shifted(&mut self.other_action, &other.other_action, first);
        shifted(&mut self.device_free, &other.device_free, first);
        shifted(&mut self.forward_stack, &other.forward_stack, first);
        shifted(&mut self.pool_id, &other.pool_id, first);
        first
    }

    /// Appends `other`'s large columns (after [`Self::append_without_values`] of the same).
    pub fn append_values(&mut self, other: &Events) {
        self.addr.extend_from_slice(&other.addr);
        self.size.extend_from_slice(&other.size);
        self.time_us.extend_from_slice(&other.time_us);
        self.stack.extend_from_slice(&other.stack);
    }

    /// Pushes every column of `row` but the large ones ([`RowValues`]), which the reader keeps
    /// elsewhere.
    pub fn push_without_values(&mut self, row: &EventRow) -> u32 {
        let id = self.action.len() as u32;
        self.action.push(row.action);
        self.stream.push(id, row.stream);
        self.compile_context.push(id, row.compile_context);
        self.user_metadata.push(id, row.user_metadata);
        self.internal_metadata.push(id, row.internal_metadata);
        self.category.push(id, row.category);
        if row.action == Action::Unknown {
            self.other_action.push((id, row.other_action));
        }
        if let Some(free) = row.device_free {
            self.device_free.push((id, free));
        }
        if row.forward_stack != NONE {
            self.forward_stack.push((id, row.forward_stack));
        }
        if let Some(pool) = row.pool_id {
            self.pool_id.push((id, pool));
        }
        id
    }

    /// Reads one event back as a row (the inverse of [`Events::push`]).
    pub fn row(&self, id: u32) -> EventRow {
        self.row_with(id, self.values(id as usize).unwrap_or_default())
    }

    /// Event `id` as a row, its large columns `v` (from wherever the reader keeps them).
    pub fn row_with(&self, id: u32, v: RowValues) -> EventRow {
        EventRow {
            action: self.action[id as usize],
            other_action: sparse_get(&self.other_action, id).unwrap_or(NONE),
            addr: Some(v.addr),
            size: Some(v.size),
            stream: self.stream.get(id),
            time_us: v.time_us,
            stack: v.stack,
            compile_context: self.compile_context.get(id),
            user_metadata: self.user_metadata.get(id),
            internal_metadata: self.internal_metadata.get(id),
            category: self.category.get(id),
            device_free: sparse_get(&self.device_free, id),
            forward_stack: sparse_get(&self.forward_stack, id).unwrap_or(NONE),
            pool_id: sparse_get(&self.pool_id, id),
        }
    }

    /// Overwrites one event (used when a pickle adds keys to an event dict after creating it).
    pub fn set_row(&mut self, id: u32, row: &EventRow) {
        let i = id as usize;
        self.addr[i] = row.addr.unwrap_or(0);
        self.size[i] = row.size.unwrap_or(0);
        self.time_us[i] = row.time_us;
        self.stack[i] = row.stack;
        self.set_row_without_values(id, row);
    }

    /// [`Self::set_row`] but for the large columns, which the reader keeps elsewhere.
    pub fn set_row_without_values(&mut self, id: u32, row: &EventRow) {
        self.action[id as usize] = row.action;
        self.stream.set(id, row.stream);
        self.compile_context.set(id, row.compile_context);
        self.user_metadata.set(id, row.user_metadata);
        self.internal_metadata.set(id, row.internal_metadata);
        self.category.set(id, row.category);
        sparse_set(&mut self.other_action, id, (row.action == Action::Unknown).then_some(row.other_action));
        sparse_set(&mut self.device_free, id, row.device_free);
        sparse_set(&mut self.forward_stack, id, (row.forward_stack != NONE).then_some(row.forward_stack));
        sparse_set(&mut self.pool_id, id, row.pool_id);
    }

    /// Free memory reported by the `oom` event `id`.
    pub fn device_free_of(&self, id: u32) -> Option<u64> {
        sparse_get(&self.device_free, id)
    }

    /// The action name, including unknown ones.
    pub fn action_name<'a>(&self, id: u32, strings: &'a super::Strings) -> &'a str {
        match self.action[id as usize] {
            Action::Unknown => sparse_get(&self.other_action, id).map_or("unknown", |s| strings.get(s)),
            known => known.name(),
        }
    }
}

/// Where each event's large columns ([`RowValues`]) are: the model's own columns
/// ([`Events`]), or the rows a reader kept of them (an index read keeps the rare events' and
/// the last chunks': `index::held` in the native crate). What reads them from a model being
/// indexed (the segment timeline, reserved memory, a walked trace's last rows) takes one.
pub trait EventValues: Sync {
    /// Event `e`'s values, `None` when they are not held.
    fn values(&self, e: usize) -> Option<RowValues>;
}

impl EventValues for Events {
    fn values(&self, e: usize) -> Option<RowValues> {
        Events::values(self, e)
    }
}

/// Sparse tables are sorted by event id because events are pushed in order.
fn sparse_get<T: Copy>(table: &[(u32, T)], id: u32) -> Option<T> {
    table.binary_search_by_key(&id, |&(e, _)| e).ok().map(|j| table[j].1)
}

fn sparse_set<T: Copy>(table: &mut Vec<(u32, T)>, id: u32, value: Option<T>) {
    match (table.binary_search_by_key(&id, |&(e, _)| e), value) {
        (Ok(j), Some(v)) => table[j].1 = v,
        (Ok(j), None) => {
            table.remove(j);
        }
        (Err(j), Some(v)) => table.insert(j, (id, v)),
        (Err(_), None) => {}
    }
}

/// A column stored as runs of equal values: `values[j]` holds from event `starts[j]` on.
/// `compile_context`, `user_metadata` and `stream` are the same for millions of events in a row.
#[derive(Debug, Clone, PartialEq)]
pub struct Runs<T> {
    pub starts: Vec<u32>,
    pub values: Vec<T>,
    /// Number of events pushed.
    pub len: u32,
}

impl<T> Default for Runs<T> {
    fn default() -> Self {
        Runs { starts: Vec::new(), values: Vec::new(), len: 0 }
    }
}

impl<T: Copy + PartialEq> Runs<T> {
    /// Appends the value of event `id`, which must be the next event.
    pub fn push(&mut self, id: u32, v: T) {
        debug_assert_eq!(id, self.len);
        if self.values.last() != Some(&v) {
            self.starts.push(id);
            self.values.push(v);
        }
        self.len = id + 1;
    }

    fn run_of(&self, id: u32) -> usize {
        self.starts.partition_point(|&s| s <= id) - 1
    }

    /// The value at event `id` (< `len`).
    pub fn get(&self, id: u32) -> T {
        self.values[self.run_of(id)]
    }

    /// Appends `other`'s events after this one's `len` (as if each were pushed).
    pub fn append(&mut self, other: &Runs<T>) {
        let offset = self.len;
        for (&start, &v) in other.starts.iter().zip(&other.values) {
            if self.values.last() != Some(&v) {
                self.starts.push(offset + start);
                self.values.push(v);
            }
        }
        self.len = offset + other.len;
    }

    /// Keeps the first `n` events.
    pub fn truncate(&mut self, n: u32) {
        let runs = self.starts.partition_point(|&s| s < n);
        self.starts.truncate(runs);
        self.values.truncate(runs);
        self.len = self.len.min(n);
    }

    /// Changes the value of one pushed event; its run is split around it.
    pub fn set(&mut self, id: u32, v: T) {
        let j = self.run_of(id);
        let old = self.values[j];
        if old == v {
            return;
        }
        let run_end = self.starts.get(j + 1).copied().unwrap_or(self.len);
        if id + 1 < run_end {
            self.starts.insert(j + 1, id + 1);
            self.values.insert(j + 1, old);
        }
        if self.starts[j] == id {
            self.values[j] = v;
        } else {
            self.starts.insert(j + 1, id);
            self.values.insert(j + 1, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Action, EventRow, Events, Runs};

    /// Events of every kind of column: runs that change and repeat, sparse fields now and then.
    fn rows(n: u32) -> Vec<EventRow> {
        (0..n)
            .map(|i| EventRow {
                action: if i % 7 == 3 { Action::Unknown } else { Action::KNOWN[(i % 5) as usize] },
                other_action: i % 3,
                addr: (i % 4 != 0).then_some(u64::from(i) * 512),
                size: Some(u64::from(i % 9)),
                stream: u64::from(i / 10),
                time_us: i64::from(i) * 3,
                stack: i % 6,
                compile_context: i / 4 % 2,
                user_metadata: i / 5 % 3,
                internal_metadata: i / 11,
                category: 7,
                device_free: (i % 13 == 0).then_some(u64::from(i)),
                forward_stack: if i % 8 == 1 { i } else { crate::model::NONE },
                pool_id: (i % 17 == 2).then_some((1, i64::from(i))),
            })
            .collect()
    }

    fn pushed(rows: &[EventRow]) -> Events {
        let mut e = Events::default();
        for r in rows {
            e.push(r);
        }
        e
    }

    fn same(a: &Events, b: &Events) {
        assert_eq!(
            (&a.action, &a.addr, &a.size, &a.time_us, &a.stack),
            (&b.action, &b.addr, &b.size, &b.time_us, &b.stack)
        );
        assert_eq!(
            (&a.stream, &a.compile_context, &a.user_metadata),
            (&b.stream, &b.compile_context, &b.user_metadata)
        );
        assert_eq!(
            (&a.internal_metadata, &a.category, &a.other_action),
            (&b.internal_metadata, &b.category, &b.other_action)
        );
        assert_eq!((&a.device_free, &a.forward_stack, &a.pool_id), (&b.device_free, &b.forward_stack, &b.pool_id));
    }

    /// Events appended in blocks (a joined range's) are the events pushed one by one, and a
    /// block truncated (a range's last batch dropped) is the block of its first rows — at every
    /// split, runs meeting across it included.
    #[test]
    fn appending_and_truncating_events_equals_pushing_them() {
        let all = rows(120);
        let whole = pushed(&all);
        for split in [0, 1, 5, 33, 60, 119, 120] {
            let mut joined = pushed(&all[..split]);
            let rest = pushed(&all[split..]);
            let first = joined.append_without_values(&rest);
            joined.append_values(&rest);
            assert_eq!(first as usize, split);
            same(&joined, &whole);
            let mut cut = pushed(&all);
            cut.truncate(split);
            same(&cut, &pushed(&all[..split]));
        }
    }

    #[test]
    fn runs_push_get_set() {
        let mut r = Runs::default();
        for (i, v) in [1, 1, 1, 2, 2, 1].into_iter().enumerate() {
            r.push(i as u32, v);
        }
        assert_eq!(r.starts, vec![0, 3, 5]);
        let all = |r: &Runs<i32>| (0..6).map(|i| r.get(i)).collect::<Vec<_>>();
        assert_eq!(all(&r), vec![1, 1, 1, 2, 2, 1]);
        r.set(1, 7);
        assert_eq!(all(&r), vec![1, 7, 1, 2, 2, 1]);
        r.set(0, 9);
        assert_eq!(all(&r), vec![9, 7, 1, 2, 2, 1]);
        r.set(5, 3);
        assert_eq!(all(&r), vec![9, 7, 1, 2, 2, 3]);
        r.set(4, 2);
        assert_eq!(all(&r), vec![9, 7, 1, 2, 2, 3]);
    }
}
