//! The values the pickle VM moves around.
//!
//! `Val` is 16 bytes and `Copy`. Strings are interned the moment they are read, so a string is
//! its id. Dicts are classified when their items arrive: a trace event becomes a row of the event
//! columns and a frame becomes an interned frame id; neither ever exists as a dict. Everything
//! else that needs a container (segments, blocks, annotations, the frame lists, the top level)
//! lives in the `Obj` arena, which is small next to the events.

use crate::model::{FrameId, StackId, StrId};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Val {
    None,
    Bool(bool),
    Int(i64),
    /// An int in `2^63 .. 2^64` (addresses with the top bit set: LONG1 of 9 bytes).
    UInt(u64),
    /// An int outside `i64::MIN .. 2^64`: kept only as "too large".
    Huge,
    Float(f64),
    Str(StrId),
    Bytes,
    /// A dict that has received no items yet, with its memo slot (or `NONE`) so that the memo
    /// entry can follow when the dict becomes an event, a frame or an arena dict.
    NewDict(u32),
    Obj(u32),
    Event(u32),
    Frame(FrameId),
}

/// Containers that outlive their opcode: 8 bytes each, because a snapshot has millions of
/// frame lists. Item vectors live in a [`Pool`] and are recycled once a list becomes a stack.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Obj {
    List(u32),
    /// A list whose items are events pushed back to back (a device trace): its `start..end`
    /// is entry `k` of the reader's range table.
    Events(u32),
    /// A frame list already interned (frame lists are shared through the memo: intern once).
    Stack(StackId),
    Tuple(u32),
    /// Items stored flat: key, value, key, value, ...
    Dict(u32),
    Set(u32),
}

/// Item vectors of the arena's containers, with a free list.
#[derive(Debug, Default)]
pub struct Pool {
    vecs: Vec<Vec<Val>>,
    free: Vec<u32>,
}

impl Pool {
    pub fn alloc(&mut self, items: Vec<Val>) -> u32 {
        match self.free.pop() {
            Some(i) => {
                // A released vector is empty and keeps its capacity: an empty list (EMPTY_LIST,
                // the start of every frame list) takes it as it is.
                if !items.is_empty() {
                    self.vecs[i as usize] = items;
                }
                i
            }
            None => {
                self.vecs.push(items);
                (self.vecs.len() - 1) as u32
            }
        }
    }

    /// Returns a vector to the free list, keeping its capacity for the next list.
    pub fn release(&mut self, i: u32) {
        self.vecs[i as usize].clear();
        self.free.push(i);
    }

    pub fn get(&self, i: u32) -> &[Val] {
        &self.vecs[i as usize]
    }

    pub fn get_mut(&mut self, i: u32) -> &mut Vec<Val> {
        &mut self.vecs[i as usize]
    }
}

impl Val {
    pub fn type_name(&self, arena: &[Obj]) -> &'static str {
        match self {
            Val::None => "None",
            Val::Bool(_) => "bool",
            Val::Int(_) | Val::UInt(_) | Val::Huge => "int",
            Val::Float(_) => "float",
            Val::Str(_) => "str",
            Val::Bytes => "bytes",
            Val::NewDict(_) | Val::Event(_) | Val::Frame(_) => "dict",
            Val::Obj(i) => match arena[*i as usize] {
                Obj::List(_) | Obj::Events(_) | Obj::Stack(_) => "list",
                Obj::Tuple(_) => "tuple",
                Obj::Dict(_) => "dict",
                Obj::Set(_) => "set",
            },
        }
    }

    pub fn as_i128(&self) -> Option<i128> {
        match *self {
            Val::Int(i) => Some(i as i128),
            Val::UInt(u) => Some(u as i128),
            _ => None,
        }
    }
}

/// Decodes a little-endian two's-complement integer of any length (LONG1 / LONG4).
#[inline]
pub fn long_from_le(bytes: &[u8]) -> Val {
    if bytes.is_empty() {
        return Val::Int(0);
    }
    if bytes.len() <= 8 {
        // The common case (addresses, timestamps), assembled in a register: copying into a
        // buffer and reading it back as one integer would stall store forwarding.
        let shift = 64 - 8 * bytes.len() as u32;
        let v = bytes.iter().rev().fold(0u64, |v, &b| v << 8 | b as u64);
        return Val::Int(((v << shift) as i64) >> shift);
    }
    let last = bytes[bytes.len() - 1];
    let negative = last & 0x80 != 0;
    let fill = if negative { 0xff } else { 0x00 };
    // Strip redundant sign bytes so any length that fits is accepted.
    let mut len = bytes.len();
    while len > 1 && bytes[len - 1] == fill && (bytes[len - 2] & 0x80 != 0) == negative {
        len -= 1;
    }
    if len > 16 {
        return Val::Huge;
    }
    let mut buf = [fill; 16];
    buf[..len].copy_from_slice(&bytes[..len]);
    let v = i128::from_le_bytes(buf);
    if let Ok(i) = i64::try_from(v) {
        Val::Int(i)
    } else if let Ok(u) = u64::try_from(v) {
        Val::UInt(u)
    } else {
        Val::Huge
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values() {
        assert_eq!(std::mem::size_of::<Val>(), 16);
        assert_eq!(std::mem::size_of::<Obj>(), 8);
    }

    #[test]
    fn long_decoding() {
        assert_eq!(long_from_le(&[]), Val::Int(0));
        assert_eq!(long_from_le(&[0xff]), Val::Int(-1));
        assert_eq!(long_from_le(&[0x80, 0x00]), Val::Int(128));
        assert_eq!(long_from_le(&[0x01, 0x02, 0x83]), Val::Int(0x830201 - 0x1000000));
        assert_eq!(long_from_le(&[0, 0, 0, 0, 0, 0, 0, 0x40]), Val::Int(1 << 62));
        assert_eq!(long_from_le(&i64::MAX.to_le_bytes()), Val::Int(i64::MAX));
        for n in [0x1234_5678_9abc_i64, -0x1234_5678_9abc, -1, 0, 1] {
            for len in 6..=8 {
                assert_eq!(long_from_le(&n.to_le_bytes()[..len]), Val::Int(n), "{n} {len}");
            }
        }
        // 2^63 + 0x1000 needs 9 bytes: the top bit of byte 8 is the sign.
        let v: u64 = 0x8000_0000_0000_1000;
        let mut b = v.to_le_bytes().to_vec();
        b.push(0);
        assert_eq!(long_from_le(&b), Val::UInt(v));
        // Redundant sign bytes are fine.
        assert_eq!(long_from_le(&[5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Val::Int(5));
        // 2^80 is too large for a snapshot field.
        let mut big = vec![0u8; 10];
        big.push(1);
        assert_eq!(long_from_le(&big), Val::Huge);
        assert_eq!(long_from_le(&i64::MIN.to_le_bytes()), Val::Int(i64::MIN));
    }
}
