//! A trace's event batches read on every core (issue 44; docs/design/12 §2, its first step:
//! the events the fast path takes).
//!
//! Torch pickles a trace as batches `MARK (event dict)×≤1000 APPENDS`, and an event's keys, its
//! action and its frames are memo fetches of objects made earlier. When the serial reader stands
//! at such a batch on a pool of more than one thread, it takes a *wave* — the next bytes of its
//! input window — and:
//!
//! 1. finds candidate batch starts in it by their bytes (`( } MEMOIZE (`, about `every` bytes
//!    apart): nothing proves them here. One inside a string starts a range the serial reader
//!    never stands at, so it is never joined — the range before it reads on past it;
//! 2. reads each range on its own core with the event fast path ([`super::fast::read_event`])
//!    against the frozen state — the memo, strings and stacks as they were when the wave began:
//!    whole batches, until an event the fast path does not take or anything but a batch. The rest
//!    is the serial reader's. A range does not know the memo index it starts at (that would take
//!    a walk over every opcode before it, which cost a third of the waves' time): a fetch of an
//!    entry the frozen memo does not hold is an *alias*, made in the wave before the range or by
//!    the range itself, told apart and looked up at the join;
//! 3. as the serial reader reaches each range's start, joins it ([`State::join_at`]) where its
//!    aliases are what it took them for (a frame, a string) and no fetch was of an entry not yet
//!    made: the range's new strings, then its new stacks, interned in the order it first saw
//!    them; its rows pushed; its memo entries appended; its events added to the trace list.
//!
//! The serial reader interns strings and stacks in the byte order they are first seen, and the
//! joins visit ranges in byte order, each after the bytes before it were read: so ids, rows and
//! memo come out as the serial reader makes them, byte for byte, at any thread count and range
//! size. Whatever a worker does not take the serial reader reads as always (errors and their
//! offsets included).

use std::cell::Cell;
use std::collections::VecDeque;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::State;
use super::fast::{EventReader, LIST, read_event};
use crate::ingest::pickle::memo::Memo;
use crate::ingest::pickle::op;
use crate::ingest::pickle::recent::RecentStrings;
use crate::ingest::pickle::value::{Obj, Val};
use crate::ingest::schema::{self, Field};
use crate::model::{Action, EventRow, Events, NONE, StackId, Stacks, StrId, Strings, Tolerated};

/// The bytes a batch of events starts with: MARK, then an event dict's EMPTY_DICT MEMOIZE MARK.
const BATCH: &[u8] = b"(}\x94(";

/// Frame and string ids from this one on (below `NONE`) stand for memo entry `frozen + id - ALIAS`:
/// one made in the wave before the range or by the range itself, which the join looks up (a
/// frame, or a string, in the memo; a string among the range's own entries) before anything is
/// committed.
const ALIAS: u32 = 1 << 31;

/// The serial reader's tables while a wave's ranges are read: read only, shared by the workers.
struct Frozen<'a> {
    memo: &'a Memo,
    str_field: &'a [Field],
    str_action: &'a [Action],
    strings: &'a Strings,
    stacks: &'a Stacks,
    arena: &'a [Obj],
    /// The arena slot holding each stack's frame list, where one was made (`State::stack_slot`).
    stack_slots: &'a [u32],
    /// The memo writes by index so far (`PUT`s): one after the wave was read may have rewritten
    /// an entry a range took as it was, so none of its ranges is joined then.
    puts: u64,
}

/// What a string alias stands for at the join.
enum Aliased {
    /// A string of the reader's, made before the range.
    Reader(StrId),
    /// A string in the range's numbering (a frozen one, or its own): one it memoized itself.
    Range(StrId),
}

/// A memo entry a range made.
#[derive(Debug, Clone, Copy)]
enum Made {
    /// A string (ids from [`RangeOut::strings_from`] on are the range's own).
    Val(Val),
    /// The range's `k`-th event.
    Event(u32),
    /// A frame list, as its stack (ids from [`RangeOut::stacks_from`] on are the range's own).
    Stack(StackId),
}

/// The fewest pickle bytes of an event a range holds (its dict, keys fetched from the memo, an
/// action string, address, size, stream and time): room for its rows is made from it.
const EVENT_BYTES_AT_LEAST: usize = 40;

/// The fewest pickle bytes a memo entry a range makes takes (the MEMOIZE and what it names).
const MADE_BYTES_AT_LEAST: usize = 8;

/// What a worker read of one range.
#[derive(Debug)]
pub struct RangeOut {
    /// Offsets: where it starts and where its last whole batch ended.
    start: u64,
    end: u64,
    /// The memo's length when the range was read (its aliases count from there), and the
    /// `PUT`s made by then.
    frozen_memo: usize,
    puts: u64,
    /// The largest of `j - k` over the range's fetches of an entry `j` past the frozen memo,
    /// `k` the entries the range had made: the memo must be longer than this where the range
    /// starts, or a fetch was of an entry not yet made (the serial reader's error). A cell: the
    /// fetches that raise it read the range through `&self`.
    alias_bound: Cell<Option<usize>>,
    /// The frozen tables' lengths: ids at or past them are the range's own, in these lists.
    strings_from: u32,
    stacks_from: u32,
    strings: Vec<Box<str>>,
    stacks: Vec<Box<[u32]>>,
    /// The range's events, ids from 0, stored as the model stores them (the join appends them
    /// whole): strings and stacks in the range's numbering (its own past `strings_from` /
    /// `stacks_from`, aliases from [`ALIAS`]).
    events: Events,
    /// The rows whose action string is an alias, as read (the join checks each again with its
    /// action, as the serial reader checks it).
    aliased: Vec<(u32, EventRow)>,
    /// The memo entries the range made, in order, as the memo stores them
    /// ([`Memo::pack_narrow`]: the worker's share of the join), an event's entry with its id in
    /// the range — but for those the join must make itself, a 0 here and the entry in `fixups`
    /// (by its place, in order): a string of the range's own, a stack with no arena slot yet,
    /// what does not fit a narrow slot.
    packed: Vec<u32>,
    fixups: Vec<(u32, Made)>,
    tolerated: Tolerated,
}

impl RangeOut {
    /// Appends memo entry `m` ([`Self::packed`]): packed where it can be (a frozen string as it
    /// is, a frozen stack by its arena slot), else a fixup.
    fn make(&mut self, f: &Frozen<'_>, m: Made) {
        let v = match m {
            Made::Val(Val::Str(s)) if s == NONE || s < self.strings_from => Some(Val::Str(s)),
            Made::Val(Val::Str(_)) => None,
            // Packed by its own slot's index, unknown here.
            Made::Val(Val::NewDict(_)) => None,
            Made::Val(v) => Some(v),
            Made::Event(e) => Some(Val::Event(e)),
            Made::Stack(s) if s != NONE && (s as usize) < f.stacks.len() => {
                f.stack_slots.get(s as usize).filter(|&&slot| slot != NONE).map(|&slot| Val::Obj(slot))
            }
            Made::Stack(_) => None,
        };
        match v.and_then(|v| Memo::pack_narrow(v, 0)) {
            Some(p) => self.packed.push(p),
            None => {
                self.fixups.push((self.packed.len() as u32, m));
                self.packed.push(0);
            }
        }
    }

    /// The `k`-th memo entry the range made, when it is a string: in the range's numbering.
    fn made_str(&self, k: usize) -> Option<StrId> {
        let fixup = self.fixups.binary_search_by_key(&(k as u32), |&(i, _)| i);
        let s = match fixup {
            Ok(i) => match self.fixups[i].1 {
                Made::Val(Val::Str(s)) => s,
                _ => return None,
            },
            Err(_) => Memo::narrow_str(*self.packed.get(k)?)?,
        };
        (s != NONE && s < ALIAS).then_some(s)
    }
}

/// The ranges the workers read, in byte order, joined as the serial reader reaches them.
#[derive(Debug, Default)]
pub struct Wave {
    ranges: VecDeque<RangeOut>,
}

impl Wave {
    /// Where the next range starts at or after `at` (else the reader may take a new wave there).
    pub fn next_start(&self, at: u64) -> Option<u64> {
        self.ranges.iter().map(|r| r.start).find(|&s| s >= at)
    }

    /// Ranges read before `ahead`, which start before the ones held.
    pub fn put_first(&mut self, ahead: Vec<RangeOut>) {
        for r in ahead.into_iter().rev() {
            self.ranges.push_front(r);
        }
    }
}

/// Whether the first of `ranges` read anything (a wave whose first range read nothing is not
/// worth taking again soon).
pub fn first_read(ranges: &[RangeOut]) -> bool {
    ranges.first().is_some_and(|r| !r.events.is_empty())
}

/// Per opcode: the bytes of its argument, or how its length is given ([`LEN1`], [`LEN4`],
/// [`LEN8`]: a little-endian length of so many bytes, then that many), or [`UNKNOWN`] (an opcode
/// that writes the memo by index, a text opcode, one memviz refuses, no opcode): what
/// [`skip_batch`] steps over a batch the fast path does not take with.
const ARG: [u8; 256] = {
    let mut t = [UNKNOWN; 256];
    let none = [
        op::MEMOIZE,
        op::MARK,
        op::STOP,
        op::POP,
        op::POP_MARK,
        op::DUP,
        op::NONE,
        op::APPEND,
        op::DICT,
        op::EMPTY_DICT,
        op::APPENDS,
        op::LIST,
        op::EMPTY_LIST,
        op::SETITEM,
        op::TUPLE,
        op::EMPTY_TUPLE,
        op::SETITEMS,
        op::TUPLE1,
        op::TUPLE2,
        op::TUPLE3,
        op::NEWTRUE,
        op::NEWFALSE,
        op::EMPTY_SET,
        op::ADDITEMS,
        op::FROZENSET,
    ];
    let mut i = 0;
    while i < none.len() {
        t[none[i] as usize] = 0;
        i += 1;
    }
    t[op::BININT1 as usize] = 1;
    t[op::BINGET as usize] = 1;
    t[op::PROTO as usize] = 1;
    t[op::BININT2 as usize] = 2;
    t[op::BININT as usize] = 4;
    t[op::LONG_BINGET as usize] = 4;
    t[op::BINFLOAT as usize] = 8;
    t[op::FRAME as usize] = 8;
    t[op::LONG1 as usize] = LEN1;
    t[op::SHORT_BINUNICODE as usize] = LEN1;
    t[op::SHORT_BINSTRING as usize] = LEN1;
    t[op::SHORT_BINBYTES as usize] = LEN1;
    t[op::LONG4 as usize] = LEN4;
    t[op::BINUNICODE as usize] = LEN4;
    t[op::BINSTRING as usize] = LEN4;
    t[op::BINBYTES as usize] = LEN4;
    t[op::BINUNICODE8 as usize] = LEN8;
    t[op::BINBYTES8 as usize] = LEN8;
    t[op::BYTEARRAY8 as usize] = LEN8;
    t
};
const LEN1: u8 = 0xF1;
const LEN4: u8 = 0xF4;
const LEN8: u8 = 0xF8;
const UNKNOWN: u8 = 0xFF;

/// The bytes of the opcode at `at` and its argument, when it is one a walk knows the length of
/// and it ends within `wave`.
#[inline(always)]
fn op_len(wave: &[u8], at: usize) -> Option<usize> {
    let arg = match ARG[*wave.get(at)? as usize] {
        n @ 0..=8 => usize::from(n),
        LEN1 => 1 + usize::from(*wave.get(at + 1)?),
        LEN4 => {
            let n = u32::from_le_bytes(wave.get(at + 1..at + 5)?.try_into().ok()?);
            // LONG4's length is signed.
            (wave[at] != op::LONG4 || n <= i32::MAX as u32).then_some(4 + n as usize)?
        }
        LEN8 => 8 + usize::try_from(u64::from_le_bytes(wave.get(at + 1..at + 9)?.try_into().ok()?)).ok()?,
        _ => return None,
    };
    let end = at.checked_add(1 + arg)?;
    (end <= wave.len()).then_some(1 + arg)
}

/// The batch at `at` (a MARK) passed over: where it ends (after its APPENDS).
fn skip_batch(wave: &[u8], mut at: usize) -> Option<usize> {
    let mut depth = 0usize;
    loop {
        let opcode = *wave.get(at)?;
        at += op_len(wave, at)?;
        match opcode {
            op::MARK => depth += 1,
            op::APPENDS
            | op::SETITEMS
            | op::TUPLE
            | op::LIST
            | op::DICT
            | op::FROZENSET
            | op::ADDITEMS
            | op::POP_MARK => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return (opcode == op::APPENDS).then_some(at);
                }
            }
            _ => {}
        }
    }
}

/// Where ranges of `wave` (which begins with a batch start) start: there, then candidate batch
/// starts about `every` bytes apart, found by their bytes (one may lie inside a string: see the
/// module doc); `end`, when given, is a batch start known already, the last.
fn boundaries(wave: &[u8], every: usize, end: Option<usize>) -> Vec<usize> {
    let mut starts = vec![0];
    let last = end.unwrap_or(wave.len());
    // Each search starts `every` bytes past the last start: the bytes match at every event dict
    // but for the MARK before it, so a search over the whole wave stops ~100 bytes apart (a
    // fifth of the serial joins' time on gen9m).
    let finder = memchr::memmem::Finder::new(BATCH);
    let mut from = every;
    while let Some(c) = wave.get(from..).and_then(|rest| finder.find(rest)).map(|c| from + c).filter(|&c| c < last) {
        starts.push(c);
        from = c + every;
    }
    if let Some(e) = end.filter(|&e| e > 0) {
        starts.push(e);
    }
    starts
}

/// A worker reading one range: the frozen tables, and what the range made.
struct Worker<'a> {
    f: &'a Frozen<'a>,
    /// The wave's offset.
    base: u64,
    out: RangeOut,
    own_strings: FxHashMap<Box<str>, StrId>,
    own_actions: Vec<Action>,
    own_stacks: FxHashMap<Box<[u32]>, StackId>,
    frame_buf: Vec<u32>,
    last_stack: Option<StackId>,
    /// The strings read last (the serial reader's cache: a value string repeats event after event).
    recent: RecentStrings,
}

impl<'a> Worker<'a> {
    /// The alias of memo entry `j` when the frozen memo does not hold it (made in the wave
    /// before the range, or by the range: the join tells which), its bound noted.
    fn alias(&self, j: usize) -> Option<u32> {
        let k = j.checked_sub(self.f.memo.len())?;
        let a = u32::try_from(k).ok().filter(|&k| k < NONE - ALIAS).map(|k| ALIAS + k)?;
        let bound = j.saturating_sub(self.out.packed.len());
        let b = &self.out.alias_bound;
        b.set(Some(b.get().map_or(bound, |b| b.max(bound))));
        Some(a)
    }

    fn stack_frames(&self, s: StackId) -> &[u32] {
        match s.checked_sub(self.out.stacks_from) {
            Some(k) => &self.out.stacks[k as usize],
            None => self.f.stacks.get(s),
        }
    }

    /// The stack of the frames in `frame_buf`: the last one, a frozen one or the range's own.
    fn stack(&mut self) -> StackId {
        if let Some(s) = self.last_stack
            && self.stack_frames(s) == self.frame_buf.as_slice()
        {
            return s;
        }
        let aliased = self.frame_buf.iter().any(|&f| f >= ALIAS);
        let s = match self.f.stacks.lookup(&self.frame_buf).filter(|_| !aliased) {
            Some(s) => s,
            None => match self.own_stacks.get(self.frame_buf.as_slice()) {
                Some(&s) => s,
                None => {
                    let s = self.out.stacks_from + self.out.stacks.len() as StackId;
                    let frames: Box<[u32]> = self.frame_buf.as_slice().into();
                    self.own_stacks.insert(frames.clone(), s);
                    self.out.stacks.push(frames);
                    s
                }
            },
        };
        self.last_stack = Some(s);
        s
    }

    /// A worker starting a piece at `start` in the wave.
    fn new(f: &'a Frozen<'a>, base: u64, start: usize) -> Worker<'a> {
        let out = RangeOut {
            start: base + start as u64,
            end: base + start as u64,
            frozen_memo: f.memo.len(),
            puts: f.puts,
            alias_bound: Cell::new(None),
            strings_from: f.strings.len() as StrId,
            stacks_from: f.stacks.len() as StackId,
            strings: Vec::new(),
            stacks: Vec::new(),
            events: Events::default(),
            aliased: Vec::new(),
            packed: Vec::new(),
            fixups: Vec::new(),
            tolerated: Tolerated::default(),
        };
        Worker {
            f,
            base,
            out,
            own_strings: FxHashMap::default(),
            own_actions: Vec::new(),
            own_stacks: FxHashMap::default(),
            frame_buf: Vec::new(),
            last_stack: None,
            recent: RecentStrings::default(),
        }
    }

    /// Reads the range from the worker's start to `end` (batch starts): whole batches read here, in pieces
    /// between the batches that are not (an event the fast path does not take: those are the
    /// serial reader's, passed over here).
    fn read_range(mut self, wave: &[u8], end: usize) -> Vec<RangeOut> {
        let mut pieces = Vec::new();
        // Room for every event the range can hold (an event takes ~80 bytes of pickle, and makes
        // a few memo entries): never grown and copied while read. Only what is written is
        // touched, so the room costs no memory beyond it.
        let bytes = end.saturating_sub((self.out.start - self.base) as usize);
        self.out.events.reserve(bytes / EVENT_BYTES_AT_LEAST);
        self.out.packed.reserve(bytes / MADE_BYTES_AT_LEAST);
        loop {
            let (stopped, at) = self.read(wave, end);
            let (f, base) = (self.f, self.base);
            if !self.out.events.is_empty() {
                pieces.push(self.out);
            }
            if !stopped {
                return pieces;
            }
            match skip_batch(wave, at) {
                Some(next) if next < end => self = Worker::new(f, base, next),
                _ => return pieces,
            }
        }
    }

    /// Reads whole batches from the piece's start up to `end`: whether it stopped at a batch it
    /// could not read (rather than at `end` or at something not a batch), and where (the end of
    /// the last whole batch, which the piece ends at).
    fn read(&mut self, wave: &[u8], end: usize) -> (bool, usize) {
        let start = (self.out.start - self.base) as usize;
        let mut at = start;
        let mut kept = (at, 0, 0, 0, 0, Tolerated::default());
        let mut stopped = false;
        while at < end && wave.get(at) == Some(&op::MARK) {
            at += 1;
            let whole = loop {
                match wave.get(at) {
                    Some(&op::EMPTY_DICT) => {
                        let mut row = EventRow::default();
                        let Some(read) = read_event(self, &wave[at + 1..], &mut row) else { break false };
                        at += 1 + read.used;
                        if read.frames {
                            row.stack = self.stack();
                        }
                        let (o, stack, f) = (&mut self.out, row.stack, self.f);
                        let id = o.events.push(&row);
                        o.make(f, Made::Event(id));
                        if row.other_action >= ALIAS && row.other_action != NONE {
                            o.aliased.push((id, row));
                        }
                        for &v in &read.made[..read.n_made] {
                            o.make(f, if v == LIST { Made::Stack(stack) } else { Made::Val(v) });
                        }
                    }
                    Some(&op::APPENDS) => {
                        at += 1;
                        break true;
                    }
                    _ => break false,
                }
            };
            if !whole {
                stopped = true;
                break;
            }
            let o = &self.out;
            kept = (at, o.events.len(), o.packed.len(), o.strings.len(), o.stacks.len(), o.tolerated.clone());
        }
        // Back to the end of the last whole batch.
        let (end, rows, made, strings, stacks, tolerated) = kept;
        let out = &mut self.out;
        out.end = self.base + end as u64;
        out.events.truncate(rows);
        out.aliased.retain(|a| (a.0 as usize) < rows);
        out.packed.truncate(made);
        let fixups = out.fixups.partition_point(|&(k, _)| (k as usize) < made);
        out.fixups.truncate(fixups);
        out.strings.truncate(strings);
        out.stacks.truncate(stacks);
        out.tolerated = tolerated;
        (stopped, end)
    }
}

impl EventReader for Worker<'_> {
    fn key_field(&self, j: usize) -> Option<Field> {
        // A key first memoized past the frozen memo: the serial reader's.
        self.f.str_field.get(self.f.memo.str_at(j)? as usize).copied()
    }

    fn string(&mut self, bytes: &[u8]) -> Val {
        let key = RecentStrings::key(bytes);
        if let Some(id) = key.and_then(|k| self.recent.get(k)) {
            return Val::Str(id);
        }
        let text = String::from_utf8_lossy(bytes);
        let known = self.f.strings.lookup(&text).or_else(|| self.own_strings.get(&*text).copied());
        if let Some(id) = known {
            if let Some(k) = key {
                self.recent.insert(k, id);
            }
            return Val::Str(id);
        }
        let id = self.out.strings_from + self.out.strings.len() as StrId;
        let text: Box<str> = text.into();
        self.own_actions.push(Action::from_name(text.as_bytes()));
        self.own_strings.insert(text.clone(), id);
        self.out.strings.push(text);
        Val::Str(id)
    }

    fn memo_value(&self, j: usize) -> Option<Val> {
        if j < self.f.memo.len() {
            return self.f.memo.get(j);
        }
        // Taken only as a string field's value; the join checks it is a string.
        self.alias(j).map(Val::Str)
    }

    fn frame_at(&self, j: usize) -> Option<u32> {
        self.f.memo.frame_at(j).or_else(|| self.alias(j))
    }

    fn action(&self, s: StrId) -> Action {
        if s >= ALIAS {
            // Known at the join, which checks the event again with it.
            return Action::Unknown;
        }
        match s.checked_sub(self.out.strings_from) {
            Some(k) => self.own_actions[k as usize],
            None => match self.f.str_action.get(s as usize) {
                Some(&a) => a,
                None => Action::from_name(self.f.strings.get(s).as_bytes()),
            },
        }
    }

    fn stack_of_obj(&mut self, i: u32) -> Option<StackId> {
        match self.f.arena.get(i as usize)? {
            Obj::Stack(s) => Some(*s),
            _ => None,
        }
    }

    fn tolerated(&mut self) -> &mut Tolerated {
        &mut self.out.tolerated
    }

    fn frame_buf(&mut self) -> &mut Vec<u32> {
        &mut self.frame_buf
    }
}

impl State {
    /// Whether `after_mark` (the bytes after a MARK) starts a batch of trace events: an event
    /// dict whose first key is an event's.
    pub fn batch_ahead(&self, after_mark: &[u8]) -> bool {
        let key = match after_mark {
            [b'}', op::MEMOIZE, op::MARK, op::BINGET, j, ..] => usize::from(*j),
            [b'}', op::MEMOIZE, op::MARK, op::LONG_BINGET, a, b, c, d, ..] => {
                u32::from_le_bytes([*a, *b, *c, *d]) as usize
            }
            _ => return false,
        };
        self.far_memo.is_empty() && self.key_field(key).is_some_and(Field::marks_event)
    }

    /// Whether `v` is a list (what a batch of events is appended to).
    pub fn is_list(&self, v: Val) -> bool {
        matches!(v, Val::Obj(i) if matches!(self.arena.get(i as usize), Some(Obj::List(_) | Obj::Events(_))))
    }

    /// Reads `wave` — the input from a batch of events at offset `at` on — in ranges of about
    /// `every` bytes on the current rayon pool, against the tables as they are now; up to `end`
    /// (a batch start) when given. Meanwhile the rows of the ranges joined before go to the
    /// sink (their large columns; the joins put them off: a third to a half of a join's time).
    pub fn read_wave(&mut self, wave: &[u8], at: u64, every: usize, end: Option<usize>) -> Vec<RangeOut> {
        let mut off = self.b.take_put_off();
        let mut bounds = boundaries(wave, every, end);
        if end.is_none() {
            // The last range goes on to the wave's end (its worker stops at its last whole batch).
            bounds.push(wave.len());
        }
        let f = Frozen {
            memo: &self.memo,
            str_field: &self.str_field,
            str_action: &self.str_action,
            strings: self.b.strings(),
            stacks: &self.b.snap.stacks,
            arena: &self.arena,
            stack_slots: &self.stack_slots,
            puts: self.memo_puts,
        };
        let read = |b: &[usize]| Worker::new(&f, at, b[0]).read_range(wave, b[1]);
        let events = &self.b.snap.events;
        let (ranges, ()) =
            rayon::join(|| bounds.par_windows(2).flat_map_iter(read).collect(), || off.hand_over(events));
        self.b.give_back(off);
        ranges
    }

    /// The frame alias `a` of range `r` stands for, its memo `base` entries long where the range
    /// starts: memo entry `r.frozen_memo + a - ALIAS`, made before the range (a range makes no
    /// frames), when it holds a frame.
    fn alias_frame(&self, r: &RangeOut, base: usize, a: u32) -> Option<u32> {
        let j = r.frozen_memo + (a - ALIAS) as usize;
        if j < base { self.memo.frame_at(j) } else { None }
    }

    /// The string alias `a` of range `r` stands for, its memo `base` entries long where the
    /// range starts: memo entry `j = r.frozen_memo + a - ALIAS`, made before the range (a
    /// reader's string id) or by it (its `j - base`-th entry: a string in the range's numbering),
    /// when it holds a string.
    fn alias_str(&self, r: &RangeOut, base: usize, a: u32) -> Option<Aliased> {
        let j = r.frozen_memo + (a - ALIAS) as usize;
        match j.checked_sub(base) {
            None => self.memo.str_at(j).map(Aliased::Reader),
            Some(k) => r.made_str(k).map(Aliased::Range),
        }
    }

    /// Joins the range of `wave` that starts at offset `at`, whose events go to the list `top`,
    /// if it read any, the memo is as long as its count says and its aliases are a frame or a
    /// string as it took them: where the reader goes on, and the events joined.
    pub fn join_at(&mut self, wave: &mut Wave, at: u64, top: Val) -> Result<Option<(u64, usize)>, super::PickleError> {
        while wave.ranges.front().is_some_and(|r| r.start < at) {
            wave.ranges.pop_front();
        }
        let Some(r) = wave.ranges.front().filter(|r| r.start == at) else { return Ok(None) };
        // The memo where the range starts: an alias past it is the range's own entry.
        let base = self.memo.len();
        if r.events.is_empty() || self.memo_puts != r.puts || r.alias_bound.get().is_some_and(|b| b >= base) {
            return Ok(None);
        }
        // The entries go in packed: not where the memo's slots are wide or the events' ids would
        // not fit a narrow one (a pickle of ~20 GB): the serial reader reads on there.
        let first = self.b.event_count() as u32;
        if !self.memo.takes_packed(first, r.events.len() as u32) {
            return Ok(None);
        }
        // Every alias checked before anything is committed (a run's value is some row's).
        let frames_ok =
            r.stacks.iter().flatten().filter(|&&f| f >= ALIAS).all(|&a| self.alias_frame(r, base, a).is_some());
        let ev = &r.events;
        let strings_ok = [&ev.compile_context, &ev.user_metadata, &ev.internal_metadata, &ev.category]
            .into_iter()
            .flat_map(|runs| runs.values.iter().copied())
            .filter(|&s| s != NONE && s >= ALIAS)
            .all(|a| self.alias_str(r, base, a).is_some());
        // An action made before the range, or by it where another range stood: its event checked
        // again with it (what it tolerates counted), as the serial reader checks it.
        let mut tolerated = r.tolerated.clone();
        let mut actions = Vec::with_capacity(r.aliased.len());
        for (id, row) in &r.aliased {
            let action = match self.alias_str(r, base, row.other_action) {
                Some(Aliased::Reader(s)) => self.action(s),
                Some(Aliased::Range(s)) => match s.checked_sub(r.strings_from) {
                    Some(k) => Action::from_name(r.strings[k as usize].as_bytes()),
                    None => self.action(s),
                },
                None => return Ok(None),
            };
            let checked = EventRow { action, ..row.clone() };
            if schema::finish_event(&checked, &mut tolerated).is_err() {
                return Ok(None);
            }
            actions.push((*id, action));
        }
        if !frames_ok || !strings_ok {
            return Ok(None);
        }
        let mut r = wave.ranges.pop_front().expect("looked at");
        let mut events = std::mem::take(&mut r.events);
        let n = events.len();
        let strings: Vec<StrId> = r
            .strings
            .iter()
            .map(|s| match self.string(s.as_bytes()) {
                Val::Str(id) => id,
                _ => unreachable!("a string interns as a string"),
            })
            .collect();
        let mut frames = Vec::new();
        let mut stacks = Vec::with_capacity(r.stacks.len());
        for own in &r.stacks {
            frames.clear();
            frames.extend(own.iter().map(|&f| match f >= ALIAS {
                true => self.alias_frame(&r, base, f).expect("checked"),
                false => f,
            }));
            stacks.push(self.b.stack(&frames));
        }
        // A string in the range's numbering in the reader's (an alias looked up in the memo as
        // it was where the range starts, or among the range's own entries).
        let string = |st: &State, s: StrId| {
            let own = |s: StrId| s.checked_sub(r.strings_from).map_or(s, |k| strings[k as usize]);
            if s == NONE || s < ALIAS {
                return if s == NONE { s } else { own(s) };
            }
            match st.alias_str(&r, base, s).expect("checked") {
                Aliased::Reader(s) => s,
                Aliased::Range(s) => own(s),
            }
        };
        // The range's numbering made the reader's: in the runs and the sparse table of other
        // actions (few entries), and in the stack column when the range made stacks.
        if !actions.is_empty() {
            for (id, action) in actions {
                events.action[id as usize] = action;
            }
            // Only an unknown action keeps its name (as `Events::push` keeps it).
            let action = &events.action;
            events.other_action.retain(|&(e, _)| action[e as usize] == Action::Unknown);
        }
        for runs in [
            &mut events.compile_context,
            &mut events.user_metadata,
            &mut events.internal_metadata,
            &mut events.category,
        ] {
            for v in &mut runs.values {
                *v = string(self, *v);
            }
        }
        for (_, s) in &mut events.other_action {
            *s = string(self, *s);
        }
        let stack = |s: StackId| match s.checked_sub(r.stacks_from) {
            Some(k) if s != NONE => stacks[k as usize],
            _ => s,
        };
        if !stacks.is_empty() {
            for s in &mut events.stack {
                *s = stack(*s);
            }
        }
        let pushed = self.b.push_events_later(events);
        debug_assert_eq!(pushed, first);
        // The memo entries the range made, in the reader's numbering: packed by the worker but
        // for the fixups, made here in order (a string as `string` maps it; a new stack slot
        // where the serial reader would make it).
        let entry = |st: &mut State, m: Made| match m {
            Made::Val(Val::Str(s)) => Val::Str(string(st, s)),
            Made::Val(v) => v,
            Made::Event(k) => Val::Event(first + k),
            Made::Stack(s) => st.stack_slot(stack(s)),
        };
        let appended = self.memo.extend_packed(&r.packed, first, n as u32);
        debug_assert!(appended, "checked by takes_packed");
        for &(k, m) in &r.fixups {
            let v = entry(self, m);
            self.memo.set(base + k as usize, v);
        }
        self.append_events(top, first, n as u32, at)?;
        for (o, n) in tolerated.iter() {
            self.b.snap.tolerated.add_n(o, n);
        }
        self.last_stack = None;
        Ok(Some((r.end, n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_start_at_candidates_about_every_bytes_apart() {
        // Three batches of one event each: `( } MEMOIZE ( key value u e`; the second's string
        // value holds the batch bytes, which are no batch start but a candidate all the same
        // (the serial reader never stands there, so its range is never joined).
        let mut wave = Vec::new();
        let mut starts = Vec::new();
        for text in [&b"x"[..], b"(}\x94(", b"y"] {
            starts.push(wave.len());
            wave.extend_from_slice(b"(}\x94(h\x00\x8c");
            wave.push(text.len() as u8);
            wave.extend_from_slice(text);
            wave.extend_from_slice(b"\x94ue");
        }
        let inside = starts[1] + 8;
        assert_eq!(boundaries(&wave, 1, None), [starts[0], starts[1], inside, starts[2]]);
        assert_eq!(boundaries(&wave, 12, None), [starts[0], starts[1], starts[2]]);
        assert_eq!(boundaries(&wave, 1 << 20, None), [0]);
        // Up to a batch start known: the last, whatever lies past it.
        assert_eq!(boundaries(&wave, 1, Some(starts[2])), [starts[0], starts[1], inside, starts[2]]);
        assert_eq!(boundaries(&wave, 1 << 20, Some(starts[2])), [starts[0], starts[2]]);
    }
}
