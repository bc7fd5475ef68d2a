//! A streaming pickle VM that decodes PyTorch memory snapshots straight into the columnar model.
//!
//! Input: a byte stream (protocol 2–5; protocol 0/1 container opcodes are accepted too).
//! Output: a [`Snapshot`] — never a generic tree of millions of dicts.
//!
//! How it works: the opcode loop runs a normal pickle stack machine, but with tiny values (see
//! `value`). When a dict receives its items (`SETITEMS`), it is classified by its keys:
//!
//! ```text
//!   {action, addr, size, ...}     → one row pushed onto the event columns  → Val::Event(id)
//!   {name, filename, line}        → one interned frame                      → Val::Frame(id)
//!   anything else                 → a small arena dict (segment, block, annotation, top level)
//! ```
//!
//! Frame lists are interned as stacks the first time an event or block uses them; the memo keeps
//! pointing at the interned list, so a list shared by 100k events is interned once.
//!
//! Where things are: `input` is the window, `value` the 16-byte `Val` and the arena's containers,
//! `memo` the 4-byte memo, `recent` a cache of short strings, `convert` turns dicts and frame lists
//! into rows as they arrive, `convert/fast` reads a trace event of torch's usual shape straight
//! from the window (giving the rest back to the VM) and `convert/toplevel` reads the finished top
//! level. The per-event path
//! avoids building values in temporaries: see "The reader" in ARCHITECTURE.md for why.
//!
//! Safety posture: opcodes that construct objects or call code (GLOBAL, STACK_GLOBAL, REDUCE,
//! BUILD, INST, OBJ, NEWOBJ, EXT*, PERSID, out-of-band buffers) are refused. Memory is bounded by
//! the input size: every opcode consumes input, lengths are honoured only as data arrives.

mod convert;
mod input;
mod memo;
mod recent;
#[cfg(test)]
mod tests;
mod value;

use std::io::Read;

pub use convert::State;
use convert::Wave;
pub use input::Mapped;
use input::{Input, Source};
use value::{Obj, Val, long_from_le};

use super::builder::{NotASnapshot, RowSink};
use super::schema::SchemaError;
use crate::model::{NONE, Snapshot};

#[derive(Debug, thiserror::Error)]
pub enum PickleError {
    #[error("byte {offset}: the data ends in the middle of the pickle (truncated file?)")]
    Truncated { offset: u64 },
    #[error("byte {offset}: not a pickle opcode: 0x{opcode:02x}")]
    UnknownOpcode { opcode: u8, offset: u64 },
    #[error(
        "byte {offset}: refusing pickle opcode {name}: it constructs Python objects, which a memory snapshot never contains"
    )]
    Refused { name: &'static str, offset: u64 },
    #[error("byte {offset}: unsupported pickle opcode {name}")]
    Unsupported { name: &'static str, offset: u64 },
    #[error("byte {offset}: malformed pickle: {what}")]
    Malformed { what: &'static str, offset: u64 },
    #[error("byte {offset}: {count} {what} — no memory snapshot has that many (a corrupt or hostile file)")]
    TooLarge { what: &'static str, count: u64, offset: u64 },
    #[error("byte {offset}: {problem}")]
    Schema { problem: SchemaError, offset: u64 },
    #[error("byte {offset}: {error}")]
    Io { error: std::io::Error, offset: u64 },
    #[error(transparent)]
    Shape(#[from] NotASnapshot),
}

/// What the decoder saw besides the snapshot.
#[derive(Debug, Clone, Default)]
pub struct PickleInfo {
    /// The `PROTO` number; 1 for a pickle without one (see `decode`).
    pub protocol: u8,
    pub bytes: u64,
}

/// Decodes one snapshot pickle from `reader`.
pub fn decode<R: Read>(reader: R) -> Result<(Snapshot, PickleInfo), PickleError> {
    decode_observed(reader, None)
}

/// [`decode`], its events' large columns going to `rows` (`None`: into the model).
pub fn decode_observed<R: Read>(
    reader: R,
    rows: Option<Box<dyn RowSink>>,
) -> Result<(Snapshot, PickleInfo), PickleError> {
    decode_with(reader, rows, range_bytes())
}

/// [`decode`] with its batches of trace events read in ranges of `every` bytes on rayon's
/// current pool, as `memviz index` does on more than one thread: the same snapshot, or the same
/// error (for the tests and the differential fuzz target that check it).
pub fn decode_in_ranges<R: Read>(reader: R, every: usize) -> Result<(Snapshot, PickleInfo), PickleError> {
    decode_with(reader, None, Some(every.max(1)))
}

fn decode_with<R: Read>(
    reader: R,
    rows: Option<Box<dyn RowSink>>,
    every: Option<usize>,
) -> Result<(Snapshot, PickleInfo), PickleError> {
    let inp = match every {
        Some(_) => Input::with_window(reader, WAVE),
        None => Input::new(reader),
    };
    run_vm(inp, rows, every)
}

/// [`decode_observed`] over a mapped file's bytes (`ingest::read_path_observed` maps a plain
/// pickle): the decoder's window moves over the mapping instead of being filled from it.
pub fn decode_mapped(src: Mapped<'_>, rows: Option<Box<dyn RowSink>>) -> Result<(Snapshot, PickleInfo), PickleError> {
    decode_mapped_with(src, rows, range_bytes())
}

/// [`decode_mapped`] read serially (`every`: `None`) or in ranges of `every` bytes on rayon's
/// current pool: the same snapshot, or the same error (for the tests and the differential fuzz
/// target that check it).
pub fn decode_mapped_with(
    src: Mapped<'_>,
    rows: Option<Box<dyn RowSink>>,
    every: Option<usize>,
) -> Result<(Snapshot, PickleInfo), PickleError> {
    run_vm(Input::mapped(src, if every.is_some() { WAVE } else { 0 }), rows, every)
}

fn run_vm<S: Source>(
    inp: Input<S>,
    rows: Option<Box<dyn RowSink>>,
    every: Option<usize>,
) -> Result<(Snapshot, PickleInfo), PickleError> {
    let st = State::with_rows(rows);
    let mut vm = Vm {
        inp,
        stack: Vec::with_capacity(1024),
        marks: Vec::new(),
        st,
        every,
        wave: Wave::default(),
        no_wave_before: 0,
        ranged: (0, 0),
        times: (0.0, 0.0, 0.0),
    };
    let mut info = PickleInfo::default();
    let top = vm.run(&mut info)?;
    if info.protocol == 0 {
        // No PROTO: protocol 0 or 1. Protocol 0 writes its strings as text (STRING / UNICODE,
        // refused above), so a snapshot that decoded without one is protocol 1.
        info.protocol = 1;
    }
    info.bytes = vm.inp.offset();
    if vm.every.is_some() && crate::timings::enabled() {
        let (waves, events) = vm.ranged;
        let (read, joined, filled) = vm.times;
        eprintln!(
            "timing:   decode: {waves} waves, {events} events read in ranges on the pool: waves read in {read:.3} s, \
             ranges joined in {joined:.3} s, the window filled in {filled:.3} s"
        );
    }
    let snap = vm.st.finish(top, info.bytes)?;
    Ok((snap, info))
}

/// What the window holds at least (when the data goes on) as an event dict is tried: events
/// are ~100 bytes, a few KB with a long stack.
const EVENT_BYTES: usize = 16 << 10;

/// The input a wave of event batches reads ahead at most (`convert::ranged`).
const WAVE: usize = 16 << 20;

/// The bytes of the ranges a wave is read in, or `None`: one thread reads it all. The reader must
/// run on a rayon pool (`memviz index`'s) of two threads or more. By default ranges of
/// [`RANGE_BYTES`]; `MEMVIZ_DECODE_RANGE=BYTES` sets their size (`0`: never). Since a range no
/// longer walks the opcodes before it (a third of the waves, when they were on only from 8
/// threads), ranges read gen9m in 1.2–1.4 s on this project's 2-core VM against 1.65 s on one
/// thread, the whole index level with it there (docs/performance.md); the tests set tiny
/// ranges, so that fetches across ranges happen in small snapshots.
fn range_bytes() -> Option<usize> {
    rayon::current_thread_index()?;
    if rayon::current_num_threads() < 2 {
        return None;
    }
    match std::env::var("MEMVIZ_DECODE_RANGE") {
        Ok(v) => v.trim().parse::<usize>().ok().filter(|&n| n > 0),
        Err(_) => Some(RANGE_BYTES),
    }
}

/// A range's bytes by default: 32 ranges to a wave of [`WAVE`] (ranges of 256 KiB to 1 MiB
/// measured alike at 8 and 16 threads, 4 MiB slower: too few ranges to share out).
const RANGE_BYTES: usize = 512 << 10;

struct Vm<S> {
    inp: Input<S>,
    stack: Vec<Val>,
    marks: Vec<usize>,
    st: State,
    /// Ranges' bytes when batches of events are read on every core.
    every: Option<usize>,
    /// The ranges read, not yet joined.
    wave: Wave,
    /// A wave here found nothing the workers could read: none before this offset.
    no_wave_before: u64,
    /// Waves read, and the events of them joined.
    ranged: (u64, u64),
    /// Seconds reading waves, joining ranges and filling the window for waves.
    times: (f64, f64, f64),
}

mod op {
    pub const MARK: u8 = b'(';
    pub const STOP: u8 = b'.';
    pub const POP: u8 = b'0';
    pub const POP_MARK: u8 = b'1';
    pub const DUP: u8 = b'2';
    pub const FLOAT: u8 = b'F';
    pub const INT: u8 = b'I';
    pub const BININT: u8 = b'J';
    pub const BININT1: u8 = b'K';
    pub const LONG: u8 = b'L';
    pub const BININT2: u8 = b'M';
    pub const NONE: u8 = b'N';
    pub const PERSID: u8 = b'P';
    pub const BINPERSID: u8 = b'Q';
    pub const REDUCE: u8 = b'R';
    pub const STRING: u8 = b'S';
    pub const BINSTRING: u8 = b'T';
    pub const SHORT_BINSTRING: u8 = b'U';
    pub const UNICODE: u8 = b'V';
    pub const BINUNICODE: u8 = b'X';
    pub const APPEND: u8 = b'a';
    pub const BUILD: u8 = b'b';
    pub const GLOBAL: u8 = b'c';
    pub const DICT: u8 = b'd';
    pub const EMPTY_DICT: u8 = b'}';
    pub const APPENDS: u8 = b'e';
    pub const GET: u8 = b'g';
    pub const BINGET: u8 = b'h';
    pub const INST: u8 = b'i';
    pub const LONG_BINGET: u8 = b'j';
    pub const LIST: u8 = b'l';
    pub const EMPTY_LIST: u8 = b']';
    pub const OBJ: u8 = b'o';
    pub const PUT: u8 = b'p';
    pub const BINPUT: u8 = b'q';
    pub const LONG_BINPUT: u8 = b'r';
    pub const SETITEM: u8 = b's';
    pub const TUPLE: u8 = b't';
    pub const EMPTY_TUPLE: u8 = b')';
    pub const SETITEMS: u8 = b'u';
    pub const BINFLOAT: u8 = b'G';
    pub const PROTO: u8 = 0x80;
    pub const NEWOBJ: u8 = 0x81;
    pub const EXT1: u8 = 0x82;
    pub const EXT2: u8 = 0x83;
    pub const EXT4: u8 = 0x84;
    pub const TUPLE1: u8 = 0x85;
    pub const TUPLE2: u8 = 0x86;
    pub const TUPLE3: u8 = 0x87;
    pub const NEWTRUE: u8 = 0x88;
    pub const NEWFALSE: u8 = 0x89;
    pub const LONG1: u8 = 0x8a;
    pub const LONG4: u8 = 0x8b;
    pub const BINBYTES: u8 = b'B';
    pub const SHORT_BINBYTES: u8 = b'C';
    pub const SHORT_BINUNICODE: u8 = 0x8c;
    pub const BINUNICODE8: u8 = 0x8d;
    pub const BINBYTES8: u8 = 0x8e;
    pub const EMPTY_SET: u8 = 0x8f;
    pub const ADDITEMS: u8 = 0x90;
    pub const FROZENSET: u8 = 0x91;
    pub const NEWOBJ_EX: u8 = 0x92;
    pub const STACK_GLOBAL: u8 = 0x93;
    pub const MEMOIZE: u8 = 0x94;
    pub const FRAME: u8 = 0x95;
    pub const BYTEARRAY8: u8 = 0x96;
    pub const NEXT_BUFFER: u8 = 0x97;
    pub const READONLY_BUFFER: u8 = 0x98;
}

fn refused_name(opcode: u8) -> Option<&'static str> {
    Some(match opcode {
        op::GLOBAL => "GLOBAL",
        op::STACK_GLOBAL => "STACK_GLOBAL",
        op::REDUCE => "REDUCE",
        op::BUILD => "BUILD",
        op::INST => "INST",
        op::OBJ => "OBJ",
        op::NEWOBJ => "NEWOBJ",
        op::NEWOBJ_EX => "NEWOBJ_EX",
        op::EXT1 => "EXT1",
        op::EXT2 => "EXT2",
        op::EXT4 => "EXT4",
        op::PERSID => "PERSID",
        op::BINPERSID => "BINPERSID",
        op::NEXT_BUFFER => "NEXT_BUFFER",
        op::READONLY_BUFFER => "READONLY_BUFFER",
        _ => return None,
    })
}

/// The longest string a snapshot may hold: frame names and file paths are short, and the
/// longest (an `allocator_settings` or `user_metadata`) is kilobytes. A longer one is an error.
pub const MAX_STRING: u64 = 64 << 20;
/// Items on the pickle stack at once: pickle writes lists and dicts in batches of 1,000, so a
/// snapshot's stack stays small; 2^24 items (256 MiB) is far past any.
pub const MAX_STACK: usize = 1 << 24;
/// MARKs open at once: a snapshot nests a few levels deep.
pub const MAX_MARKS: usize = 1 << 16;

impl<S: Source> Vm<S> {
    /// Runs opcodes until STOP and returns the top value.
    fn run(&mut self, info: &mut PickleInfo) -> Result<Val, PickleError> {
        loop {
            let at = self.inp.offset();
            let opcode = self.inp.u8()?;
            match opcode {
                op::BINGET => {
                    let i = self.inp.u8()? as u32;
                    self.check_stack(at)?;
                    self.st.memo_push_to(i, &mut self.stack, at)?;
                }
                op::LONG_BINGET => {
                    let i = u32::from_le_bytes(self.inp.array()?);
                    self.check_stack(at)?;
                    self.st.memo_push_to(i, &mut self.stack, at)?;
                }
                op::MEMOIZE => {
                    let top = self.top(at)?;
                    let v = self.st.memo_push(top);
                    *self.stack.last_mut().expect("top checked") = v;
                }
                op::BINPUT | op::LONG_BINPUT => {
                    let i = if opcode == op::BINPUT {
                        self.inp.u8()? as u32
                    } else {
                        u32::from_le_bytes(self.inp.array()?)
                    };
                    let top = self.top(at)?;
                    let v = self.st.memo_put(i, top, at)?;
                    *self.stack.last_mut().expect("top checked") = v;
                }
                op::BININT1 => {
                    let v = self.inp.u8()?;
                    self.stack.push(Val::Int(v as i64));
                }
                op::BININT2 => {
                    let v = u16::from_le_bytes(self.inp.array()?);
                    self.stack.push(Val::Int(v as i64));
                }
                op::BININT => {
                    let v = i32::from_le_bytes(self.inp.array()?);
                    self.stack.push(Val::Int(v as i64));
                }
                op::LONG1 => {
                    let n = self.inp.u8()? as usize;
                    let b = self.inp.bytes(n)?.expect("LONG1 fits the window");
                    self.stack.push(long_from_le(b));
                }
                op::LONG4 => {
                    let n = i32::from_le_bytes(self.inp.array()?);
                    let n = u64::try_from(n).map_err(|_| malformed("negative LONG4 length", at))?;
                    let v = match self.inp.bytes(n as usize)? {
                        Some(b) => long_from_le(b),
                        None => {
                            self.inp.read_long(n, &mut self.st.scratch)?;
                            long_from_le(&self.st.scratch)
                        }
                    };
                    self.stack.push(v);
                }
                op::SHORT_BINUNICODE => {
                    let n = self.inp.u8()? as usize;
                    let b = self.inp.bytes(n)?.expect("short string fits the window");
                    let v = self.st.string(b);
                    self.push_new(v);
                }
                op::BINUNICODE | op::BINSTRING => {
                    let n = u32::from_le_bytes(self.inp.array()?) as u64;
                    let v = self.read_string(n)?;
                    self.push_new(v);
                }
                op::BINUNICODE8 => {
                    let n = u64::from_le_bytes(self.inp.array()?);
                    let v = self.read_string(n)?;
                    self.push_new(v);
                }
                op::SHORT_BINSTRING => {
                    let n = self.inp.u8()? as u64;
                    let v = self.read_string(n)?;
                    self.push_new(v);
                }
                op::SHORT_BINBYTES => {
                    let n = self.inp.u8()? as u64;
                    self.skip_bytes(n)?;
                }
                op::BINBYTES => {
                    let n = u32::from_le_bytes(self.inp.array()?) as u64;
                    self.skip_bytes(n)?;
                }
                op::BINBYTES8 | op::BYTEARRAY8 => {
                    let n = u64::from_le_bytes(self.inp.array()?);
                    self.skip_bytes(n)?;
                }
                op::NONE => self.push_checked(Val::None, at)?,
                op::NEWTRUE => self.push_checked(Val::Bool(true), at)?,
                op::NEWFALSE => self.push_checked(Val::Bool(false), at)?,
                op::BINFLOAT => {
                    let v = f64::from_be_bytes(self.inp.array()?);
                    self.stack.push(Val::Float(v));
                }
                op::EMPTY_DICT => {
                    // A trace event, read in one go when it has torch's usual shape.
                    self.inp.prefetch(EVENT_BYTES)?;
                    match self.st.try_event(self.inp.window()) {
                        Some((used, id)) => {
                            self.inp.advance(used);
                            self.stack.push(Val::Event(id));
                        }
                        None => self.push_new(Val::NewDict(NONE)),
                    }
                }
                op::EMPTY_LIST => {
                    let v = self.st.alloc(Obj::List, Vec::new());
                    self.push_new(v);
                }
                op::EMPTY_TUPLE => {
                    let v = self.st.alloc(Obj::Tuple, Vec::new());
                    self.stack.push(v);
                }
                op::EMPTY_SET => {
                    let v = self.st.alloc(Obj::Set, Vec::new());
                    self.stack.push(v);
                }
                op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => {
                    let n = (opcode - op::TUPLE1 + 1) as usize;
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + n {
                        return Err(malformed("tuple needs more items than the stack holds", at));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    let v = self.st.alloc(Obj::Tuple, items);
                    self.stack.push(v);
                }
                op::MARK => {
                    if let Some(every) = self.every
                        && let Some(to) = self.batches(at, every)?
                    {
                        self.inp.advance((to - self.inp.offset()) as usize);
                        continue;
                    }
                    if self.marks.len() >= MAX_MARKS {
                        let count = self.marks.len() as u64 + 1;
                        return Err(PickleError::TooLarge { what: "MARKs open at once", count, offset: at });
                    }
                    self.marks.push(self.stack.len());
                }
                op::TUPLE | op::LIST | op::FROZENSET => {
                    let m = self.pop_mark(at)?;
                    let items = self.stack.split_off(m);
                    let make = match opcode {
                        op::TUPLE => Obj::Tuple,
                        op::LIST => Obj::List,
                        _ => Obj::Set,
                    };
                    let v = self.st.alloc(make, items);
                    self.stack.push(v);
                }
                op::DICT => {
                    let m = self.pop_mark(at)?;
                    self.stack.insert(m, Val::NewDict(NONE));
                    self.set_items(m, m + 1, at)?;
                }
                op::SETITEMS => {
                    let m = self.pop_mark(at)?;
                    if m == 0 {
                        return Err(malformed("SETITEMS without a dict below the mark", at));
                    }
                    self.set_items(m - 1, m, at)?;
                }
                op::SETITEM => {
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + 3 {
                        return Err(malformed("SETITEM needs a dict, a key and a value", at));
                    }
                    let target = self.stack.len() - 3;
                    self.set_items(target, target + 1, at)?;
                }
                op::APPENDS | op::ADDITEMS => {
                    let m = self.pop_mark(at)?;
                    if m == 0 {
                        return Err(malformed("APPENDS without a list below the mark", at));
                    }
                    self.st.append(self.stack[m - 1], &self.stack[m..], at)?;
                    self.stack.truncate(m);
                }
                op::APPEND => {
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + 2 {
                        return Err(malformed("APPEND needs a list and a value", at));
                    }
                    let n = self.stack.len();
                    self.st.append(self.stack[n - 2], &self.stack[n - 1..], at)?;
                    self.stack.truncate(n - 1);
                }
                op::POP => {
                    if self.marks.last() == Some(&self.stack.len()) {
                        self.marks.pop();
                    } else {
                        self.top(at)?;
                        self.stack.pop();
                    }
                }
                op::POP_MARK => {
                    let m = self.pop_mark(at)?;
                    self.stack.truncate(m);
                }
                op::DUP => {
                    let v = self.top(at)?;
                    self.stack.push(v);
                }
                op::PROTO => {
                    info.protocol = self.inp.u8()?;
                    if info.protocol > 5 {
                        return Err(PickleError::Unsupported {
                            name: "PROTO > 5 (newer than Python knows)",
                            offset: at,
                        });
                    }
                }
                op::FRAME => {
                    // Frames only help readers that buffer; we stream, so the length is unused.
                    self.inp.array::<8>()?;
                }
                op::INT | op::LONG => {
                    let line = self.inp.line()?;
                    let v = parse_text_int(&line).ok_or_else(|| malformed("bad text integer", at))?;
                    self.stack.push(v);
                }
                op::FLOAT => {
                    let line = self.inp.line()?;
                    let v = std::str::from_utf8(&line).ok().and_then(|s| s.trim().parse::<f64>().ok());
                    self.stack.push(Val::Float(v.ok_or_else(|| malformed("bad text float", at))?));
                }
                op::PUT | op::GET => {
                    let line = self.inp.line()?;
                    let i = std::str::from_utf8(&line).ok().and_then(|s| s.trim().parse::<u32>().ok());
                    let i = i.ok_or_else(|| malformed("bad memo index", at))?;
                    if opcode == op::GET {
                        let v = self.st.memo_get(i, at)?;
                        self.stack.push(v);
                    } else {
                        let top = self.top(at)?;
                        let v = self.st.memo_put(i, top, at)?;
                        *self.stack.last_mut().expect("top checked") = v;
                    }
                }
                op::STOP => {
                    if !self.marks.is_empty() || self.stack.len() != 1 {
                        return Err(malformed("STOP with more than one value on the stack", at));
                    }
                    return Ok(self.stack.pop().expect("one value"));
                }
                op::STRING => {
                    return Err(PickleError::Unsupported { name: "STRING (protocol 0 text string)", offset: at });
                }
                op::UNICODE => {
                    return Err(PickleError::Unsupported { name: "UNICODE (protocol 0 text string)", offset: at });
                }
                _ => {
                    return Err(match refused_name(opcode) {
                        Some(name) => PickleError::Refused { name, offset: at },
                        None => PickleError::UnknownOpcode { opcode, offset: at },
                    });
                }
            }
        }
    }

    /// Pushes a value just made, memoizing it at once when MEMOIZE follows (protocol 4 memoizes
    /// nearly every str, dict and list). Besides skipping a dispatch, this avoids reading the
    /// value back from the stack right after writing it, which stalls store forwarding.
    #[inline(always)]
    fn push_new(&mut self, v: Val) {
        let v = if self.inp.eat(op::MEMOIZE) { self.st.memo_push(v) } else { v };
        self.stack.push(v);
    }

    #[inline]
    fn top(&self, at: u64) -> Result<Val, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() > floor {
            Ok(*self.stack.last().expect("non-empty"))
        } else {
            Err(malformed("the stack is empty", at))
        }
    }

    #[inline]
    fn pop_mark(&mut self, at: u64) -> Result<usize, PickleError> {
        self.marks.pop().ok_or_else(|| malformed("no MARK on the stack", at))
    }

    fn set_items(&mut self, target: usize, items: usize, at: u64) -> Result<(), PickleError> {
        if !(self.stack.len() - items).is_multiple_of(2) {
            return Err(malformed("odd number of items for a dict", at));
        }
        let (below, items_slice) = self.stack.split_at_mut(items);
        self.st.set_items(&mut below[target], items_slice, at)?;
        self.stack.truncate(items);
        Ok(())
    }

    fn read_string(&mut self, n: u64) -> Result<Val, PickleError> {
        if n > MAX_STRING {
            return Err(PickleError::TooLarge { what: "bytes in one string", count: n, offset: self.inp.offset() });
        }
        if let Some(b) = self.inp.bytes(n as usize)? {
            return Ok(self.st.string(b));
        }
        let mut buf = std::mem::take(&mut self.st.scratch);
        self.inp.read_long(n, &mut buf)?;
        let v = self.st.string(&buf);
        self.st.scratch = buf;
        Ok(v)
    }

    /// A bytes object is passed over, never kept (nothing of a snapshot is bytes).
    fn skip_bytes(&mut self, n: u64) -> Result<(), PickleError> {
        if self.inp.bytes(n as usize)?.is_none() {
            self.inp.skip_long(n)?;
        }
        self.push_checked(Val::Bytes, self.inp.offset())
    }

    /// Pushes where a hostile pickle could grow the stack without bound (`NONE` × 4·10⁹).
    #[inline]
    fn push_checked(&mut self, v: Val, at: u64) -> Result<(), PickleError> {
        self.check_stack(at)?;
        self.stack.push(v);
        Ok(())
    }

    /// At a MARK (at offset `at`, just read) that starts a batch of trace events appended to the
    /// list on top of the stack: joins the range read from here. Where none starts here, the
    /// workers read a new wave from here first (up to the next range held: what the range
    /// before it did not take, it having stopped at an event its worker could not read).
    /// Where the reader goes on, or `None` to read the batch here.
    #[cold]
    fn batches(&mut self, at: u64, every: usize) -> Result<Option<u64>, PickleError> {
        let Some(&top) = self.stack.last() else { return Ok(None) };
        if !self.st.is_list(top) || !self.st.batch_ahead(self.inp.window()) {
            return Ok(None);
        }
        let next = self.wave.next_start(at);
        if next != Some(at) {
            let room = next.map(|n| (n - at) as usize);
            if at < self.no_wave_before || room.is_some_and(|r| r < every) {
                return Ok(None);
            }
            let t0 = std::time::Instant::now();
            self.inp.unread();
            self.inp.prefetch(self.inp.capacity())?;
            self.times.2 += t0.elapsed().as_secs_f64();
            let window = self.inp.window();
            // The next range's start is a batch start: the new ranges end there (it must be in
            // the window, with the bytes a candidate is found by).
            let end = room.filter(|&r| r + 4 <= window.len());
            let wave = &window[..end.map_or(window.len(), |r| r + 4)];
            let t0 = std::time::Instant::now();
            let ranges = self.st.read_wave(wave, at, every, end);
            self.times.0 += t0.elapsed().as_secs_f64();
            self.inp.advance(1);
            self.ranged.0 += 1;
            if !convert::first_read(&ranges) {
                // Its first event is not one the workers read: not again before `every` bytes.
                self.no_wave_before = at + every as u64;
            }
            self.wave.put_first(ranges);
        }
        let t0 = std::time::Instant::now();
        let joined = self.st.join_at(&mut self.wave, at, top)?;
        self.times.1 += t0.elapsed().as_secs_f64();
        Ok(joined.map(|(to, events)| {
            self.ranged.1 += events as u64;
            #[cfg(test)]
            convert::knob::RANGED_EVENTS.set(convert::knob::RANGED_EVENTS.get() + events);
            to
        }))
    }

    /// Room for one more item on the stack ([`MAX_STACK`]).
    #[inline]
    fn check_stack(&self, at: u64) -> Result<(), PickleError> {
        if self.stack.len() >= MAX_STACK {
            return Err(PickleError::TooLarge {
                what: "items on the pickle stack",
                count: self.stack.len() as u64 + 1,
                offset: at,
            });
        }
        Ok(())
    }
}

fn malformed(what: &'static str, offset: u64) -> PickleError {
    PickleError::Malformed { what, offset }
}

/// Protocol 0 `INT` / `LONG` arguments: decimal, optional trailing `L`, `00`/`01` for bools.
fn parse_text_int(line: &[u8]) -> Option<Val> {
    let s = std::str::from_utf8(line).ok()?.trim().trim_end_matches('L');
    match s {
        "00" => return Some(Val::Bool(false)),
        "01" => return Some(Val::Bool(true)),
        _ => {}
    }
    let v: i128 = s.parse().ok()?;
    Some(if let Ok(i) = i64::try_from(v) {
        Val::Int(i)
    } else if let Ok(u) = u64::try_from(v) {
        Val::UInt(u)
    } else {
        Val::Huge
    })
}
