//! The pickle memo, 4 bytes an entry.
//!
//! A snapshot memoizes every event dict, every fresh frame list and many strings: millions of
//! entries that must all be kept, because any of them may be fetched again later. So an entry is
//! one packed integer, not a [`Val`]:
//!
//! ```text
//!   packed = payload << 4 | tag
//!   tag:  0 None   1 Bool   2 Int   3 Str   4 Bytes   5 NewDict   6 Obj   7 Event   8 Frame
//!         9 index into `wide` (floats, UInt, Huge, ints that do not fit)
//!        10 NewDict of this very slot (no payload)   15 unset slot
//! ```
//!
//! A dict is memoized the moment it is made, before its items arrive, as `NewDict(its slot)`:
//! its payload would be the slot's own index, which passes 2^28 once a snapshot has made that
//! many memo entries (a 7 GB pickle), so tag 10 stores it without one.
//!
//! Entries are stored as `u32` (payloads below 2^28: the event, frame and object ids of a
//! pickle up to about 20 GB). The first value that does not fit switches the memo to `u64`
//! entries once, with the same packing and 60-bit payloads, so no input is refused for its
//! size.

use super::value::Val;

#[derive(Debug)]
enum Slots {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

#[derive(Debug)]
pub struct Memo {
    slots: Slots,
    /// Values too wide to pack (rare in a memo: pickle never memoizes numbers).
    wide: Vec<Val>,
}

impl Default for Memo {
    fn default() -> Self {
        Memo { slots: Slots::Narrow(Vec::new()), wide: Vec::new() }
    }
}

const TAG_BITS: u32 = 4;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
const TAG_WIDE: u64 = 9;
const TAG_EVENT: u64 = 7;
/// `NewDict(i)` in slot `i`.
const TAG_OWN_DICT: u64 = 10;
/// Tags whose payload is a u32 id: Str, NewDict, Obj, Event, Frame.
const ID_TAGS: u64 = 1 << 3 | 1 << 5 | 1 << 6 | 1 << 7 | 1 << 8;
/// Marks a slot that was never written (gaps left by BINPUT with a far index).
const UNSET: u64 = TAG_MASK;

impl Memo {
    pub fn len(&self) -> usize {
        match &self.slots {
            Slots::Narrow(s) => s.len(),
            Slots::Wide(s) => s.len(),
        }
    }

    fn box_wide(&mut self, v: Val) -> u64 {
        self.wide.push(v);
        ((self.wide.len() - 1) as u64) << TAG_BITS | TAG_WIDE
    }

    /// Packs `v` for slot `i` with a payload of up to 60 bits, boxing what does not fit.
    fn pack(&mut self, v: Val, i: usize) -> u64 {
        Self::pack_inline(v, i).unwrap_or_else(|| self.box_wide(v))
    }

    /// Packs `v` for slot `i` without the side table; `None` for floats and ints beyond 60 bits.
    #[inline]
    fn pack_inline(v: Val, i: usize) -> Option<u64> {
        let (tag, payload): (u64, u64) = match v {
            Val::NewDict(m) if m as usize == i => (TAG_OWN_DICT, 0),
            Val::None => (0, 0),
            Val::Bool(b) => (1, b as u64),
            Val::Int(i) if (-(1i64 << 59)..(1i64 << 59)).contains(&i) => (2, i as u64 & ((1 << 60) - 1)),
            Val::Str(s) => (3, s as u64),
            Val::Bytes => (4, 0),
            Val::NewDict(m) => (5, m as u64),
            Val::Obj(i) => (6, i as u64),
            Val::Event(i) => (TAG_EVENT, i as u64),
            Val::Frame(i) => (8, i as u64),
            Val::Int(_) | Val::UInt(_) | Val::Huge | Val::Float(_) => return None,
        };
        Some(payload << TAG_BITS | tag)
    }

    /// `v` packed into narrow slot `i`, when the memo is narrow and `v` fits one.
    #[inline]
    fn narrow_slot(&mut self, v: Val, i: usize) -> Option<(&mut Vec<u32>, u32)> {
        match &mut self.slots {
            Slots::Narrow(s) => {
                let p = u32::try_from(Self::pack_inline(v, i)?).ok()?;
                Some((s, p))
            }
            Slots::Wide(_) => None,
        }
    }

    /// Packs `v` for slot `i` at the current slot width, switching to wide slots if it does not
    /// fit.
    fn pack_for_slots(&mut self, v: Val, i: usize) -> u64 {
        let mut p = self.pack(v, i);
        if p > u32::MAX as u64 && matches!(self.slots, Slots::Narrow(_)) {
            if matches!(v, Val::Int(_)) {
                // A negative int: sign bits fill the payload. Box it rather than widen.
                p = self.box_wide(v);
            }
            if let Slots::Narrow(narrow) = &self.slots
                && p > u32::MAX as u64
            {
                self.slots = Slots::Wide(narrow.iter().map(|&n| n as u64).collect());
            }
        }
        p
    }

    /// The value packed as `p` in slot `i`.
    #[inline]
    fn unpack(&self, p: u64, i: usize) -> Option<Val> {
        let payload = p >> TAG_BITS;
        Some(match p & TAG_MASK {
            0 => Val::None,
            1 => Val::Bool(payload != 0),
            2 => Val::Int(((payload << 4) as i64) >> 4),
            3 => Val::Str(payload as u32),
            4 => Val::Bytes,
            5 => Val::NewDict(payload as u32),
            6 => Val::Obj(payload as u32),
            TAG_EVENT => Val::Event(payload as u32),
            8 => Val::Frame(payload as u32),
            9 => self.wide[payload as usize],
            10 => Val::NewDict(i as u32),
            _ => return None,
        })
    }

    /// `v` packed for a narrow slot `i` (what [`Self::push`] would store there), when it fits one.
    #[inline]
    pub fn pack_narrow(v: Val, i: usize) -> Option<u32> {
        u32::try_from(Self::pack_inline(v, i)?).ok()
    }

    /// The string id a narrow entry packed by [`Self::pack_narrow`] holds, when it holds one.
    pub fn narrow_str(p: u32) -> Option<u32> {
        (u64::from(p) & TAG_MASK == 3).then_some(p >> TAG_BITS)
    }

    /// Whether [`Self::extend_packed`] takes entries whose `events` events' ids are raised by
    /// `events_from`: the memo's slots are narrow and the ids fit one.
    pub fn takes_packed(&self, events_from: u32, events: u32) -> bool {
        matches!(self.slots, Slots::Narrow(_)) && u64::from(events_from) + u64::from(events) < 1 << (32 - TAG_BITS)
    }

    /// Appends entries packed by [`Self::pack_narrow`], each event's id raised by `events_from`
    /// (entries packed with ids counted from 0); `false`, appending nothing, when the memo's slots
    /// are wide or an id would not fit a narrow slot.
    pub fn extend_packed(&mut self, packed: &[u32], events_from: u32, events: u32) -> bool {
        if !self.takes_packed(events_from, events) {
            return false;
        }
        let Slots::Narrow(s) = &mut self.slots else { return false };
        let base = events_from << TAG_BITS;
        s.extend(packed.iter().map(|&p| if u64::from(p) & TAG_MASK == TAG_EVENT { p + base } else { p }));
        true
    }

    #[inline]
    pub fn push(&mut self, v: Val) {
        let i = self.len();
        match self.narrow_slot(v, i) {
            Some((s, p)) => s.push(p),
            None => self.push_slow(v),
        }
    }

    fn push_slow(&mut self, v: Val) {
        let p = self.pack_for_slots(v, self.len());
        match &mut self.slots {
            Slots::Narrow(s) => s.push(p as u32),
            Slots::Wide(s) => s.push(p),
        }
    }

    /// Writes slot `i`, filling any gap before it with unset slots.
    #[inline]
    pub fn set(&mut self, i: usize, v: Val) {
        match self.narrow_slot(v, i) {
            Some((s, p)) if i < s.len() => s[i] = p,
            _ => self.set_slow(i, v),
        }
    }

    fn set_slow(&mut self, i: usize, v: Val) {
        let p = self.pack_for_slots(v, i);
        match &mut self.slots {
            Slots::Narrow(s) => {
                if i >= s.len() {
                    s.resize(i + 1, UNSET as u32);
                }
                s[i] = p as u32;
            }
            Slots::Wide(s) => {
                if i >= s.len() {
                    s.resize(i + 1, UNSET);
                }
                s[i] = p;
            }
        }
    }

    /// Pushes the value in slot `i` onto `out` (BINGET); false for a slot never written.
    ///
    /// Each arm pushes its own variant: unpacking into a temporary `Val` and copying that makes
    /// the CPU reload 16 bytes it just wrote in pieces (a store-forwarding stall per BINGET).
    #[inline(always)]
    pub fn push_to(&self, i: usize, out: &mut Vec<Val>) -> bool {
        let Some(p) = self.slot(i) else { return false };
        let (tag, payload) = (p & TAG_MASK, p >> TAG_BITS);
        if ID_TAGS >> tag & 1 != 0 {
            // Nearly every BINGET: one predictable branch, then arms of one shape, which the
            // compiler turns into a table lookup of the variant instead of a jump per tag.
            let id = payload as u32;
            out.push(match tag {
                3 => Val::Str(id),
                5 => Val::NewDict(id),
                6 => Val::Obj(id),
                7 => Val::Event(id),
                _ => Val::Frame(id),
            });
            return true;
        }
        match tag {
            0 => out.push(Val::None),
            1 => out.push(Val::Bool(payload != 0)),
            2 => out.push(Val::Int(((payload << 4) as i64) >> 4)),
            3 => out.push(Val::Str(payload as u32)),
            4 => out.push(Val::Bytes),
            5 => out.push(Val::NewDict(payload as u32)),
            6 => out.push(Val::Obj(payload as u32)),
            7 => out.push(Val::Event(payload as u32)),
            8 => out.push(Val::Frame(payload as u32)),
            9 => out.push(self.wide[payload as usize]),
            10 => out.push(Val::NewDict(i as u32)),
            _ => return false,
        }
        true
    }

    /// The id in slot `i` when it holds a string (`Val::Str`); `None` for anything else.
    #[inline(always)]
    pub fn str_at(&self, i: usize) -> Option<u32> {
        self.id_at(i, 3)
    }

    /// The id in slot `i` when it holds a frame (`Val::Frame`); `None` for anything else.
    #[inline(always)]
    pub fn frame_at(&self, i: usize) -> Option<u32> {
        self.id_at(i, 8)
    }

    #[inline(always)]
    fn id_at(&self, i: usize, tag: u64) -> Option<u32> {
        let p = self.slot(i)?;
        (p & TAG_MASK == tag).then_some((p >> TAG_BITS) as u32)
    }

    /// Slot `i` as packed, whatever the slots' width; `None` past the end.
    #[inline(always)]
    fn slot(&self, i: usize) -> Option<u64> {
        match &self.slots {
            Slots::Narrow(s) => s.get(i).map(|&p| p as u64),
            Slots::Wide(s) => s.get(i).copied(),
        }
    }

    /// The value in slot `i`; `None` for a slot never written.
    #[inline]
    pub fn get(&self, i: usize) -> Option<Val> {
        self.unpack(self.slot(i)?, i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALS: [Val; 15] = [
        Val::None,
        Val::Bool(true),
        Val::Int(-5),
        Val::Int((1 << 59) - 1),
        Val::Int(-(1 << 59)),
        Val::Int(i64::MIN),
        Val::UInt(u64::MAX),
        Val::Huge,
        Val::Float(1.5),
        Val::Str(7),
        Val::Bytes,
        Val::NewDict(3),
        Val::Obj((1 << 28) - 1),
        Val::Event(9),
        Val::Frame(11),
    ];

    #[test]
    fn memo_round_trips_every_value() {
        let mut m = Memo::default();
        for v in VALS {
            m.push(v);
        }
        assert!(matches!(m.slots, Slots::Narrow(_)), "all of these fit 4 bytes");
        m.set(20, Val::Int(1));
        for (i, v) in VALS.iter().enumerate() {
            assert_eq!(m.get(i), Some(*v));
        }
        assert_eq!(m.get(19), None, "gap slots are unset");
        assert_eq!(m.get(20), Some(Val::Int(1)));
        assert_eq!(m.get(21), None);
    }

    /// Entries packed apart (events counted from 0) and appended with their events' ids raised
    /// read back as the same entries pushed one by one; a memo with wide slots, or ids that would
    /// not fit a narrow slot, take none (the caller pushes them).
    #[test]
    fn packed_entries_appended_equal_entries_pushed() {
        let made = [Val::Event(0), Val::Str(7), Val::Obj(12), Val::Event(1), Val::None, Val::Event(2)];
        let mut pushed = Memo::default();
        let mut packed = Memo::default();
        for m in [&mut pushed, &mut packed] {
            m.push(Val::Str(1));
        }
        let first = 40;
        for v in made {
            pushed.push(if let Val::Event(k) = v { Val::Event(first + k) } else { v });
        }
        let p: Vec<u32> = made.iter().enumerate().map(|(k, &v)| Memo::pack_narrow(v, 1 + k).unwrap()).collect();
        assert!(packed.extend_packed(&p, first, 3));
        assert_eq!(
            (0..7).map(|i| packed.get(i)).collect::<Vec<_>>(),
            (0..7).map(|i| pushed.get(i)).collect::<Vec<_>>()
        );
        assert!(!packed.extend_packed(&p, (1 << 28) - 2, 3), "ids past a narrow slot");
        packed.push(Val::Obj(u32::MAX - 1));
        assert!(!packed.extend_packed(&p, first, 3), "wide slots");
        assert_eq!(packed.len(), 8);
    }

    #[test]
    fn a_large_id_widens_the_memo_once() {
        let mut m = Memo::default();
        for v in VALS {
            m.push(v);
        }
        m.push(Val::Obj(u32::MAX - 1));
        assert!(matches!(m.slots, Slots::Wide(_)));
        m.set(30, Val::Event(1 << 30));
        for (i, v) in VALS.iter().enumerate() {
            assert_eq!(m.get(i), Some(*v));
        }
        assert_eq!(m.get(VALS.len()), Some(Val::Obj(u32::MAX - 1)));
        assert_eq!(m.get(29), None);
        assert_eq!(m.get(30), Some(Val::Event(1 << 30)));
    }

    #[test]
    fn a_dict_in_its_own_slot_packs_without_its_index() {
        // A pickle with more than 2^28 memo entries memoizes dicts at slots that wide: packing
        // each as its own slot keeps the memo narrow.
        let far = 1usize << 30;
        let p = Memo::pack_inline(Val::NewDict(far as u32), far).unwrap();
        assert_eq!(p, TAG_OWN_DICT);
        let m = Memo::default();
        assert_eq!(m.unpack(p, far), Some(Val::NewDict(far as u32)));
        // The same dict memoized a second time, at another slot, keeps its first slot.
        assert!(Memo::pack_inline(Val::NewDict(far as u32), 7).unwrap() > u32::MAX as u64);
        let mut m = Memo::default();
        m.push(Val::NewDict(0));
        m.push(Val::NewDict(0));
        m.set(5, Val::NewDict(5));
        assert!(matches!(m.slots, Slots::Narrow(_)));
        assert_eq!(
            [m.get(0), m.get(1), m.get(5)],
            [Some(Val::NewDict(0)), Some(Val::NewDict(0)), Some(Val::NewDict(5))]
        );
        let mut out = Vec::new();
        assert!(m.push_to(5, &mut out) && m.push_to(1, &mut out));
        assert_eq!(out, [Val::NewDict(5), Val::NewDict(0)]);
    }
}
