//! The trace event as torch pickles it, read straight from the input window into a row.
//!
//! Nearly all of a snapshot's bytes are trace events of one shape (protocol 4):
//!
//! ```text
//!   }  MEMOIZE  (  h<action> h<"alloc">  h<addr> LONG1 …  h<size> BININT …  h<stream> K …
//!      h<time_us> LONG1 …  h<compile_context> 'N/A' MEMOIZE  …
//!      h<frames> ]  MEMOIZE  (  j<frame> j<frame> …  e  u
//! ```
//!
//! The VM would push two dozen values per event, collect them again at `SETITEMS`, look each
//! key up twice and build the frame list in the arena only to intern and release it. Here the
//! keys and values are decoded in one loop over the window and applied to an [`EventRow`] as
//! they come. Anything else — another opcode, a key that is not a memoized string, a value the
//! schema's fast setters do not take, a memo entry the dict itself made, a dict that is not an
//! event, a window that ends inside the dict — gives up *before anything is committed*, and the
//! VM reads the same bytes the general way. What giving up leaves behind is only what the
//! general way makes too, in the same order: strings interned (interning again finds them; the
//! stack is interned only at commit, where the VM interns it). So both ways build the same
//! model, byte for byte.

use super::State;
use crate::ingest::pickle::op;
use crate::ingest::pickle::value::{Obj, Val, long_from_le};
use crate::ingest::schema::{self, Field, Scalar};
use crate::model::{Action, EventRow, NONE, StackId, StrId, Tolerated};

/// In the list of memo entries a dict made, the place of its frame list (the value itself is
/// made at commit: an arena slot holding the stack).
pub(in crate::ingest::pickle) const LIST: Val = Val::Obj(u32::MAX);

/// A cursor over the window; every read is checked, so a short window is a `None`, never a
/// panic.
struct Bytes<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    #[inline(always)]
    fn u8(&mut self) -> Option<u8> {
        let v = *self.b.get(self.at)?;
        self.at += 1;
        Some(v)
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    #[inline(always)]
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    #[inline(always)]
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    /// A memo index after `BINGET` / `LONG_BINGET`, or `None` for another opcode.
    #[inline(always)]
    fn get_index(&mut self, opcode: u8) -> Option<usize> {
        match opcode {
            op::BINGET => self.u8().map(usize::from),
            op::LONG_BINGET => self.u32().map(|i| i as usize),
            _ => None,
        }
    }
}

/// What reading an event straight from the bytes needs of its reader: the serial reader's
/// [`State`], or a worker reading a range of a wave against a frozen one
/// ([`super::ranged`]). Lookups that find nothing make the event the VM's (or the serial
/// reader's, for a worker).
pub(in crate::ingest::pickle) trait EventReader {
    /// The schema field of the memoized string in memo slot `j` (an event key).
    fn key_field(&self, j: usize) -> Option<Field>;
    /// A string value, interned (a worker's own new strings get ids past the frozen ones).
    fn string(&mut self, bytes: &[u8]) -> Val;
    /// Memo slot `j`'s value.
    fn memo_value(&self, j: usize) -> Option<Val>;
    /// The frame in memo slot `j`.
    fn frame_at(&self, j: usize) -> Option<u32>;
    /// The action string `s` names.
    fn action(&self, s: StrId) -> Action;
    /// The stack of the frame list in arena slot `i` (a memo fetch of a whole list).
    fn stack_of_obj(&mut self, i: u32) -> Option<StackId>;
    fn tolerated(&mut self) -> &mut Tolerated;
    /// Where a frame list's frames are gathered.
    fn frame_buf(&mut self) -> &mut Vec<u32>;
}

/// An event read by [`read_event`], before it is committed.
pub(in crate::ingest::pickle) struct ReadEvent {
    /// The bytes it used.
    pub used: usize,
    /// Memo entries the dict made after its own, in order (the strings and the frame list:
    /// [`LIST`]).
    pub made: [Val; 4],
    pub n_made: usize,
    /// It has a frame list, whose frames are in the reader's `frame_buf`.
    pub frames: bool,
}

/// Reads an event dict from `window`, which starts right after its `EMPTY_DICT`, into `row`;
/// `None` when the VM must read it (see the module doc). Only strings are interned meanwhile.
#[inline(always)]
pub(in crate::ingest::pickle) fn read_event<R: EventReader>(
    rd: &mut R,
    window: &[u8],
    row: &mut EventRow,
) -> Option<ReadEvent> {
    let mut r = Bytes { b: window, at: 0 };
    if r.u8()? != op::MEMOIZE || r.u8()? != op::MARK {
        return None;
    }
    // Memo entries the dict makes, after its own (which becomes the event): the strings and
    // the frame list, in order. None is in the memo before the commit, so a BINGET of one
    // finds nothing and gives up.
    let mut made: [Val; 4] = [Val::None; 4];
    let mut n_made = 0;
    let mut is_event = false;
    let mut frames = false;
    loop {
        let opcode = r.u8()?;
        if opcode == op::SETITEMS {
            break;
        }
        let field = rd.key_field(r.get_index(opcode)?)?;
        is_event |= field.marks_event();
        let v = match r.u8()? {
            op::BININT1 => Val::Int(i64::from(r.u8()?)),
            op::BININT2 => Val::Int(i64::from(u16::from_le_bytes(r.take(2)?.try_into().ok()?))),
            op::BININT => Val::Int(i64::from(i32::from_le_bytes(r.take(4)?.try_into().ok()?))),
            op::LONG1 => {
                let n = r.u8()? as usize;
                long_from_le(r.take(n)?)
            }
            op::SHORT_BINUNICODE => {
                let n = r.u8()? as usize;
                let v = rd.string(r.take(n)?);
                if r.peek() == Some(op::MEMOIZE) {
                    r.at += 1;
                    *made.get_mut(n_made)? = v;
                    n_made += 1;
                }
                v
            }
            op::EMPTY_LIST if field == Field::Frames && !frames => {
                // Its frames wait in `frame_buf`; the stack is interned at commit (where the
                // VM interns it: at SETITEMS) and its memo entry is an arena slot holding it.
                if !frame_list(rd, &mut r) {
                    return None;
                }
                *made.get_mut(n_made)? = LIST;
                n_made += 1;
                frames = true;
                continue;
            }
            g => rd.memo_value(r.get_index(g)?)?,
        };
        if !set_event_fast(rd, row, field, v) {
            return None;
        }
    }
    if !is_event || schema::finish_event(row, rd.tolerated()).is_err() {
        return None;
    }
    Some(ReadEvent { used: r.at, made, n_made, frames })
}

/// The common values of an event's fields: ints, strings and a frame list fetched whole.
#[inline(always)]
pub(super) fn set_event_fast<R: EventReader>(rd: &mut R, row: &mut EventRow, field: Field, v: Val) -> bool {
    match v {
        Val::Int(i) => schema::set_event_int(row, field, i),
        Val::Str(s) => schema::set_event_str(row, field, s, || rd.action(s)),
        Val::Obj(i) if field == Field::Frames => match rd.stack_of_obj(i) {
            Some(s) => {
                row.stack = s;
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// A frame list after its `EMPTY_LIST`: `MEMOIZE`, then `MARK` and memoized frames up to
/// `APPENDS` (or one frame and `APPEND`), possibly several batches, or nothing for an empty
/// list. Leaves its frames in `frame_buf`; `false` gives up.
fn frame_list<R: EventReader>(rd: &mut R, r: &mut Bytes<'_>) -> bool {
    if r.u8() != Some(op::MEMOIZE) {
        return false;
    }
    let mut frames = std::mem::take(rd.frame_buf());
    frames.clear();
    let ok = frames_into(rd, r, &mut frames);
    *rd.frame_buf() = frames;
    ok
}

fn frames_into<R: EventReader>(rd: &R, r: &mut Bytes<'_>, frames: &mut Vec<u32>) -> bool {
    let frame = |r: &mut Bytes<'_>, opcode: u8| rd.frame_at(r.get_index(opcode)?);
    loop {
        match r.peek() {
            Some(op::MARK) => {
                r.at += 1;
                loop {
                    let Some(opcode) = r.u8() else { return false };
                    if opcode == op::APPENDS {
                        break;
                    }
                    match frame(r, opcode) {
                        Some(f) => frames.push(f),
                        None => return false,
                    }
                }
            }
            Some(op::BINGET | op::LONG_BINGET) => {
                let opcode = r.u8().expect("peeked");
                match (frame(r, opcode), r.u8()) {
                    (Some(f), Some(op::APPEND)) => frames.push(f),
                    _ => return false,
                }
            }
            _ => return true,
        }
    }
}

impl EventReader for State {
    #[inline(always)]
    fn key_field(&self, j: usize) -> Option<Field> {
        self.str_field.get(self.memo.str_at(j)? as usize).copied()
    }
    #[inline(always)]
    fn string(&mut self, bytes: &[u8]) -> Val {
        State::string(self, bytes)
    }
    #[inline(always)]
    fn memo_value(&self, j: usize) -> Option<Val> {
        self.memo.get(j)
    }
    #[inline(always)]
    fn frame_at(&self, j: usize) -> Option<u32> {
        self.memo.frame_at(j)
    }
    #[inline(always)]
    fn action(&self, s: StrId) -> Action {
        match self.str_action.get(s as usize) {
            Some(&a) => a,
            None => Action::from_name(self.b.strings().get(s).as_bytes()),
        }
    }
    #[inline(always)]
    fn stack_of_obj(&mut self, i: u32) -> Option<StackId> {
        match self.stack_of(i) {
            Scalar::Stack(s) => Some(s),
            _ => None,
        }
    }
    #[inline(always)]
    fn tolerated(&mut self) -> &mut Tolerated {
        &mut self.b.snap.tolerated
    }
    #[inline(always)]
    fn frame_buf(&mut self) -> &mut Vec<u32> {
        &mut self.frame_buf
    }
}

impl State {
    /// Reads an event dict from `window`, which starts right after its `EMPTY_DICT`: the bytes
    /// it used and the event's id, with the memo entries its `MEMOIZE`s made; `None` when the
    /// VM must read it (see the module doc).
    pub fn try_event(&mut self, window: &[u8]) -> Option<(usize, u32)> {
        #[cfg(test)]
        if knob::GENERAL_ONLY.get() {
            return None;
        }
        let mut row = EventRow::default();
        let read = read_event(self, window, &mut row)?;
        // Committed from here: the stack, the row, the dict's memo entry, then the ones it made.
        if read.frames {
            row.stack = match self.last_stack {
                Some(s) if self.b.stack_frames(s) == self.frame_buf.as_slice() => s,
                _ => self.intern_frame_buf(),
            };
        }
        let id = self.b.push_event(&row);
        self.memo.push(Val::Event(id));
        for &v in &read.made[..read.n_made] {
            let v = if v == LIST { self.stack_slot(row.stack) } else { v };
            self.memo.push(v);
        }
        #[cfg(test)]
        knob::FAST_EVENTS.set(knob::FAST_EVENTS.get() + 1);
        Some((read.used, id))
    }

    /// An arena slot holding `stack`, shared by every frame list the fast path read with those
    /// frames (the VM gives each list its own; as a used frame list cannot change, nothing can
    /// tell them apart), so the arena grows per distinct stack rather than per event.
    pub(super) fn stack_slot(&mut self, stack: StackId) -> Val {
        let i = stack as usize;
        if stack == NONE || i >= self.b.snap.stacks.len() {
            return self.push_obj(Obj::Stack(stack));
        }
        if self.stack_slots.len() <= i {
            self.stack_slots.resize(i + 1, NONE);
        }
        if self.stack_slots[i] == NONE {
            self.arena.push(Obj::Stack(stack));
            self.stack_slots[i] = (self.arena.len() - 1) as u32;
        }
        Val::Obj(self.stack_slots[i])
    }
}

/// Test-only: read every event the general way on this thread, and count the events read here
/// (and those joined from ranges).
#[cfg(test)]
pub mod knob {
    use std::cell::Cell;

    thread_local! {
        pub static GENERAL_ONLY: Cell<bool> = const { Cell::new(false) };
        pub static FAST_EVENTS: Cell<usize> = const { Cell::new(0) };
        /// Events joined from ranges read on the pool (`ranged`).
        pub static RANGED_EVENTS: Cell<usize> = const { Cell::new(0) };
    }
}
