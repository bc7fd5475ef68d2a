//! Turning pickle values into model rows as they arrive: dict classification (event, frame or
//! generic dict), frame lists to stacks, the memo. The finished top level is read in
//! [`toplevel`].

mod fast;
#[cfg(test)]
pub use fast::knob;
mod ranged;
mod toplevel;

pub use ranged::{Wave, first_read};

use std::collections::HashMap;

use super::memo::Memo;
use super::recent::RecentStrings;
use super::value::{Obj, Pool, Val};
use super::{PickleError, malformed};
use crate::ingest::builder::{Builder, RowSink};
use crate::ingest::schema::{self, Field, FrameRow, Scalar};
use crate::model::{Action, EventRow, NONE, Oddity, StackId};

/// Memo entries beyond `len + MEMO_SLACK` go to a sparse map, so a hostile `LONG_BINPUT 4e9`
/// cannot allocate gigabytes.
const MEMO_SLACK: u32 = 1 << 16;

/// Everything the VM builds besides its stack.
#[derive(Default)]
pub struct State {
    b: Builder,
    arena: Vec<Obj>,
    /// `start..end` of each `Obj::Events` list (kept out of `Obj` to keep it 8 bytes).
    event_ranges: Vec<(u32, u32)>,
    pool: Pool,
    memo: Memo,
    far_memo: HashMap<u32, Val>,
    /// Slots the dense memo was grown over without a value (a `PUT` past its end): at most
    /// what the pickle has put plus [`MEMO_SLACK`], so the memo's size follows what the pickle
    /// made, not the indices it names (a ladder of `LONG_BINPUT len + 65,536` stays sparse).
    memo_holes: u64,
    memo_puts: u64,
    /// The schema field of each interned string, computed once per distinct string.
    str_field: Vec<Field>,
    /// The action each interned string names, for `action` values.
    str_action: Vec<Action>,
    frame_buf: Vec<u32>,
    /// The stack `stack_of` interned last.
    last_stack: Option<StackId>,
    /// Per stack, the arena slot holding it for the frame lists the fast path read (`NONE`:
    /// none yet): a used frame list is immutable, so lists with the same frames share one.
    stack_slots: Vec<u32>,
    recent: RecentStrings,
    pub scratch: Vec<u8>,
}

impl State {
    /// A state whose builder sends its events' large columns to `rows` (`None`: into the model).
    pub fn with_rows(rows: Option<Box<dyn RowSink>>) -> State {
        State { b: Builder::with_rows(rows), ..State::default() }
    }

    fn push_obj(&mut self, obj: Obj) -> Val {
        self.arena.push(obj);
        Val::Obj((self.arena.len() - 1) as u32)
    }

    /// A new container holding `items`; `make` picks its kind (`Obj::List`, `Obj::Tuple`, ...).
    pub fn alloc(&mut self, make: fn(u32) -> Obj, items: Vec<Val>) -> Val {
        let p = self.pool.alloc(items);
        self.push_obj(make(p))
    }

    #[inline]
    pub fn string(&mut self, bytes: &[u8]) -> Val {
        let key = RecentStrings::key(bytes);
        if let Some(id) = key.and_then(|k| self.recent.get(k)) {
            return Val::Str(id);
        }
        let id = self.b.intern_bytes(bytes);
        if let Some(k) = key {
            self.recent.insert(k, id);
        }
        // Strings interned elsewhere (placeholders) get their field here too.
        while self.str_field.len() < self.b.strings().len() {
            let s = self.b.strings().get(self.str_field.len() as u32);
            self.str_field.push(Field::of(s.as_bytes()));
            self.str_action.push(Action::from_name(s.as_bytes()));
        }
        Val::Str(id)
    }

    #[inline]
    fn field(&self, key: Val) -> Field {
        match key {
            Val::Str(s) => self.str_field.get(s as usize).copied().unwrap_or(Field::Unknown),
            _ => Field::Unknown,
        }
    }

    #[inline]
    pub fn memo_push(&mut self, v: Val) -> Val {
        let i = self.memo.len() as u32;
        let v = match v {
            Val::NewDict(NONE) => Val::NewDict(i),
            v => v,
        };
        self.memo.push(v);
        v
    }

    pub fn memo_put(&mut self, i: u32, v: Val, at: u64) -> Result<Val, PickleError> {
        let v = match v {
            Val::NewDict(NONE) => Val::NewDict(i),
            v => v,
        };
        let len = self.memo.len() as u32;
        self.memo_puts += 1;
        let holes = u64::from(i.saturating_sub(len));
        if i < len || (i - len <= MEMO_SLACK && self.memo_holes + holes <= self.memo_puts + u64::from(MEMO_SLACK)) {
            self.memo_holes += holes;
            self.memo.set(i as usize, v);
        } else if self.far_memo.len() < (1 << 24) {
            self.far_memo.insert(i, v);
        } else {
            return Err(malformed("too many sparse memo entries", at));
        }
        Ok(v)
    }

    /// BINGET: pushes memo entry `i` onto `stack`.
    #[inline(always)]
    pub fn memo_push_to(&self, i: u32, stack: &mut Vec<Val>, at: u64) -> Result<(), PickleError> {
        if self.memo.push_to(i as usize, stack) {
            Ok(())
        } else {
            stack.push(self.far_memo_get(i, at)?);
            Ok(())
        }
    }

    #[cold]
    fn far_memo_get(&self, i: u32, at: u64) -> Result<Val, PickleError> {
        self.far_memo.get(&i).copied().ok_or_else(|| malformed("memo key read before it was written", at))
    }

    #[inline]
    pub fn memo_get(&self, i: u32, at: u64) -> Result<Val, PickleError> {
        match self.memo.get(i as usize) {
            Some(v) => Ok(v),
            None => self.far_memo.get(&i).copied().ok_or_else(|| malformed("memo key read before it was written", at)),
        }
    }

    /// A `NewDict` that has since received items is whatever its memo slot now holds.
    #[inline]
    fn resolve(&self, v: Val) -> Val {
        match v {
            Val::NewDict(m) if m != NONE => self.resolve_dict(v, m),
            v => v,
        }
    }

    fn resolve_dict(&self, v: Val, m: u32) -> Val {
        match self.memo.get(m as usize).or_else(|| self.far_memo.get(&m).copied()) {
            Some(Val::NewDict(_)) | None => v,
            Some(now) => now,
        }
    }

    /// Replaces a `NewDict` everywhere it is referenced by identity (its memo slot).
    fn settle(&mut self, m: u32, now: Val) {
        if m == NONE {
            return;
        }
        if (m as usize) < self.memo.len() {
            self.memo.set(m as usize, now);
        } else if let Some(slot) = self.far_memo.get_mut(&m) {
            *slot = now;
        }
    }

    /// SETITEM(S): adds `items` (key, value, key, value, ...) to `target` and replaces `target`
    /// with its new value. Each branch writes its result in place: returning a `Val` through
    /// the large `Result` and copying it stalled store forwarding once per event.
    pub fn set_items(&mut self, target: &mut Val, items: &[Val], at: u64) -> Result<(), PickleError> {
        match self.resolve(*target) {
            Val::NewDict(m) => {
                if items.chunks_exact(2).any(|kv| self.field(kv[0]).marks_event()) {
                    let mut row = EventRow::default();
                    self.apply_event(&mut row, items, at)?;
                    schema::finish_event(&row, &mut self.b.snap.tolerated)
                        .map_err(|source| PickleError::Schema { problem: source, offset: at })?;
                    let id = self.b.push_event(&row);
                    self.settle(m, Val::Event(id));
                    *target = Val::Event(id);
                } else if self.looks_like_frame(items) {
                    let mut row = FrameRow::new();
                    for kv in items.chunks_exact(2) {
                        let field = self.field(kv[0]);
                        let v = self.scalar(kv[1], field);
                        if !schema::set_frame(&mut row, field, v) {
                            self.unknown_key(schema::CTX_FRAME, kv[0]);
                        }
                    }
                    let id = self.b.frame(row);
                    self.settle(m, Val::Frame(id));
                    *target = Val::Frame(id);
                } else {
                    let now = self.alloc(Obj::Dict, items.to_vec());
                    self.settle(m, now);
                    *target = now;
                }
                Ok(())
            }
            Val::Obj(i) => match self.arena[i as usize] {
                Obj::Dict(p) => {
                    self.pool.get_mut(p).extend_from_slice(items);
                    *target = Val::Obj(i);
                    Ok(())
                }
                _ => Err(malformed("SETITEMS on a value that is not a dict", at)),
            },
            Val::Event(id) => {
                // A pickler that splits an event dict over several SETITEMS (never seen in
                // practice, legal pickle): apply the extra keys to the row.
                let mut row = self.b.event_row(id);
                self.apply_event(&mut row, items, at)?;
                self.b.set_event(id, &row);
                *target = Val::Event(id);
                Ok(())
            }
            Val::Frame(_) => Err(malformed("a frame dict received keys after it was used", at)),
            _ => Err(malformed("SETITEMS on a value that is not a dict", at)),
        }
    }

    fn apply_event(&mut self, row: &mut EventRow, items: &[Val], at: u64) -> Result<(), PickleError> {
        for kv in items.chunks_exact(2) {
            let field = self.field(kv[0]);
            if self.set_event_fast(row, field, kv[1]) {
                continue;
            }
            let v = self.scalar(kv[1], field);
            let (strings, tol) = self.b.schema_ctx();
            let known = schema::set_event(row, field, v, strings, tol)
                .map_err(|source| PickleError::Schema { problem: source, offset: at })?;
            if !known {
                self.unknown_key(schema::CTX_EVENT, kv[0]);
            }
        }
        Ok(())
    }

    /// The value types torch writes, applied without building a [`Scalar`]; `false` sends the
    /// key through `schema::set_event` (other types, their errors, unknown keys).
    #[inline(always)]
    fn set_event_fast(&mut self, row: &mut EventRow, field: Field, v: Val) -> bool {
        fast::set_event_fast(self, row, field, v)
    }

    fn looks_like_frame(&self, items: &[Val]) -> bool {
        let mut named = false;
        for kv in items.chunks_exact(2) {
            match self.field(kv[0]) {
                Field::Name | Field::Filename => named = true,
                f if f.is_frame_key() || f == Field::Unknown => {}
                _ => return false,
            }
        }
        named
    }

    fn unknown_key(&mut self, context: &'static str, key: Val) {
        let id = match key {
            Val::Str(s) => s,
            _ => self.b.intern_str("<non-string key>"),
        };
        self.b.unknown_key(context, id);
    }

    /// Reduces a value for the schema; frame lists and pairs are converted where `field` wants
    /// them, and anything but a string under a text field becomes its compact JSON.
    fn scalar(&mut self, v: Val, field: Field) -> Scalar {
        let v = self.resolve(v);
        if field.is_text() && !matches!(v, Val::Str(_) | Val::None) {
            return self.text_of(v);
        }
        match v {
            Val::None => Scalar::None,
            Val::Bool(b) => Scalar::Bool(b),
            Val::Int(i) => Scalar::Int(i as i128),
            Val::UInt(u) => Scalar::Int(u as i128),
            Val::Huge => Scalar::HugeInt,
            Val::Float(f) => Scalar::Float(f),
            Val::Str(s) => Scalar::Str(s),
            Val::Obj(i) => match field {
                Field::Frames | Field::ForwardFrames => self.stack_of(i),
                Field::PoolId | Field::SegmentPoolId => self.pair_of(i),
                _ => Scalar::Other(v.type_name(&self.arena)),
            },
            other => Scalar::Other(other.type_name(&self.arena)),
        }
    }

    /// A value under a text field as compact JSON text (dicts and lists kept whole).
    fn text_of(&mut self, v: Val) -> Scalar {
        let text = match self.to_json(v, 0) {
            Ok(j) => j.to_string(),
            Err(_) => "<nested too deeply>".to_owned(),
        };
        Scalar::Text(self.b.intern_str(&text))
    }

    /// Interns a frame list once; the arena slot (and so every memo reference) becomes the stack
    /// and the item vector goes back to the pool. A tuple is read as the list; items that are not
    /// frames are left out (both counted).
    fn stack_of(&mut self, i: u32) -> Scalar {
        match self.arena[i as usize] {
            Obj::Stack(s) => Scalar::Stack(s),
            Obj::List(p) if let Some(s) = self.is_last_stack(self.pool.get(p)) => {
                self.arena[i as usize] = Obj::Stack(s);
                self.pool.release(p);
                Scalar::Stack(s)
            }
            Obj::List(p) | Obj::Tuple(p) => {
                if matches!(self.arena[i as usize], Obj::Tuple(_)) {
                    self.b.tolerate(Oddity::TupleAsList);
                }
                let mut frames = std::mem::take(&mut self.frame_buf);
                frames.clear();
                let mut not_frames = 0;
                for j in 0..self.pool.get(p).len() {
                    match self.resolve(self.pool.get(p)[j]) {
                        Val::Frame(f) => frames.push(f),
                        Val::Str(s) => {
                            let text = self.b.strings().get(s).to_owned();
                            frames.push(self.b.text_frame(&text));
                        }
                        _ => not_frames += 1,
                    }
                }
                self.b.snap.tolerated.add_n(Oddity::NotAFrame, not_frames);
                self.frame_buf = frames;
                let s = self.intern_frame_buf();
                self.arena[i as usize] = Obj::Stack(s);
                self.pool.release(p);
                Scalar::Stack(s)
            }
            _ => Scalar::Other(Val::Obj(i).type_name(&self.arena)),
        }
    }

    /// Interns the frames in `frame_buf` as a stack, the one interned last from now on.
    fn intern_frame_buf(&mut self) -> StackId {
        let s = self.b.stack(&self.frame_buf);
        self.last_stack = Some(s);
        s
    }

    /// The stack interned last, when `items` are exactly its frames. Consecutive events usually
    /// carry the same stack (most of them, in training loops), and this check is cheaper than
    /// collecting, hashing and looking up the list.
    #[inline]
    fn is_last_stack(&self, items: &[Val]) -> Option<StackId> {
        let s = self.last_stack?;
        let last = self.b.stack_frames(s);
        let same = items.len() == last.len() && items.iter().zip(last).all(|(&v, &f)| v == Val::Frame(f));
        same.then_some(s)
    }

    fn pair_of(&self, i: u32) -> Scalar {
        match self.arena[i as usize] {
            Obj::Tuple(p) | Obj::List(p) if self.pool.get(p).len() == 2 => {
                let items = self.pool.get(p);
                match (items[0].as_i128(), items[1].as_i128()) {
                    (Some(a), Some(b)) => Scalar::Pair(a, b),
                    _ => Scalar::Other("pair of non-integers"),
                }
            }
            _ => Scalar::Other(Val::Obj(i).type_name(&self.arena)),
        }
    }

    /// [`Self::append`] of events `first..first + n` (a joined range's), without making the
    /// list of them where the target takes them as a run (`Self::extend_run`).
    pub fn append_events(&mut self, target: Val, first: u32, n: u32, at: u64) -> Result<(), PickleError> {
        if let Val::Obj(i) = target
            && self.extend_run(i, first, n)
        {
            return Ok(());
        }
        let items: Vec<Val> = (first..first + n).map(Val::Event).collect();
        self.append(target, &items, at)
    }

    /// Events `first..first + n` (`n` > 0) appended to list object `i` as a run of event ids,
    /// where it holds a run they continue or nothing yet; `false`, changing nothing, elsewhere.
    fn extend_run(&mut self, i: u32, first: u32, n: u32) -> bool {
        match self.arena.get(i as usize) {
            Some(&Obj::Events(k)) if self.event_ranges[k as usize].1 == first => {
                self.event_ranges[k as usize].1 = first + n;
                true
            }
            Some(&Obj::List(p)) if self.pool.get(p).is_empty() && n > 0 => {
                self.pool.release(p);
                self.event_ranges.push((first, first + n));
                self.arena[i as usize] = Obj::Events((self.event_ranges.len() - 1) as u32);
                true
            }
            _ => false,
        }
    }

    /// APPEND(S): adds `items` to the list `target`.
    pub fn append(&mut self, target: Val, items: &[Val], at: u64) -> Result<(), PickleError> {
        let Val::Obj(i) = target else {
            return Err(malformed("APPENDS on a value that is not a list", at));
        };
        let contiguous_from = |start: u32| items.iter().enumerate().all(|(k, v)| *v == Val::Event(start + k as u32));
        if let Some(&Val::Event(first)) = items.first()
            && contiguous_from(first)
            && self.extend_run(i, first, items.len() as u32)
        {
            return Ok(());
        }
        match self.arena[i as usize] {
            Obj::List(p) | Obj::Set(p) => self.pool.get_mut(p).extend_from_slice(items),
            // Items that do not continue its run: the list is made of the run, then them.
            Obj::Events(k) if !items.is_empty() => {
                let (start, end) = self.event_ranges[k as usize];
                let mut list: Vec<Val> = (start..end).map(Val::Event).collect();
                list.extend_from_slice(items);
                let p = self.pool.alloc(list);
                self.arena[i as usize] = Obj::List(p);
            }
            Obj::Events(_) => {}
            Obj::Stack(_) => {
                return Err(malformed("a frame list received items after it was used", at));
            }
            Obj::Tuple(_) | Obj::Dict(_) => {
                return Err(malformed("APPENDS on a value that is not a list", at));
            }
        }
        Ok(())
    }
}
