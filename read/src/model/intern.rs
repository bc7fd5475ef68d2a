//! Interned strings and stacks: every distinct value is stored once.

use std::collections::HashMap;

use super::{FrameId, NONE, StackId, StrId};
use rustc_hash::FxBuildHasher;

/// One Python or C++ frame, as `{name, filename, line}`; `name` / `filename` are [`NONE`] when
/// the snapshot had no string there (shown as `??`), `line` is [`super::NO_LINE`] when it had no
/// usable number (shown as `?`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Frame {
    pub name: StrId,
    pub filename: StrId,
    pub line: i64,
    pub fx: FxInfo,
}

/// The FX graph node behind a compiled frame (`_dump_snapshot(augment_with_fx_traces=True)`):
/// `fx_node_op`, `fx_node_name`, `fx_node_target`, `fx_original_trace`, `fx_node_info`, each a
/// string id or [`NONE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FxInfo {
    pub node_op: StrId,
    pub node_name: StrId,
    pub node_target: StrId,
    pub original_trace: StrId,
    pub node_info: StrId,
}

impl FxInfo {
    pub const NONE: FxInfo =
        FxInfo { node_op: NONE, node_name: NONE, node_target: NONE, original_trace: NONE, node_info: NONE };

    pub fn is_none(&self) -> bool {
        *self == FxInfo::NONE
    }

    pub fn to_array(self) -> [StrId; 5] {
        [self.node_op, self.node_name, self.node_target, self.original_trace, self.node_info]
    }

    pub fn from_array(a: [StrId; 5]) -> FxInfo {
        FxInfo { node_op: a[0], node_name: a[1], node_target: a[2], original_trace: a[3], node_info: a[4] }
    }

    /// Labels of [`Self::to_array`]'s entries, as the snapshot names them.
    pub const KEYS: [&'static str; 5] =
        ["fx_node_op", "fx_node_name", "fx_node_target", "fx_original_trace", "fx_node_info"];
}

impl Default for FxInfo {
    fn default() -> Self {
        FxInfo::NONE
    }
}

/// Distinct strings, each stored once. Id order is first-seen order.
#[derive(Debug, Default, Clone)]
pub struct Strings {
    list: Vec<Box<str>>,
    index: HashMap<Box<str>, StrId, FxBuildHasher>,
}

impl Strings {
    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.list.len() as StrId;
        self.list.push(s.into());
        self.index.insert(s.into(), id);
        id
    }

    /// Interns bytes that should be UTF-8 (invalid sequences become U+FFFD).
    pub fn intern_bytes(&mut self, bytes: &[u8]) -> StrId {
        match std::str::from_utf8(bytes) {
            Ok(s) => self.intern(s),
            Err(_) => self.intern(&String::from_utf8_lossy(bytes)),
        }
    }

    /// The string, or `""` for [`NONE`].
    pub fn get(&self, id: StrId) -> &str {
        if id == NONE { "" } else { &self.list[id as usize] }
    }

    pub fn lookup(&self, s: &str) -> Option<StrId> {
        self.index.get(s).copied()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|s| &**s)
    }
}

/// Distinct frame lists, flattened: stack `i` is `frames[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone)]
pub struct Stacks {
    pub offsets: Vec<u32>,
    pub frames: Vec<FrameId>,
    index: HashMap<Box<[FrameId]>, StackId, FxBuildHasher>,
}

impl Default for Stacks {
    fn default() -> Self {
        Stacks { offsets: vec![0], frames: Vec::new(), index: HashMap::default() }
    }
}

impl Stacks {
    pub fn intern(&mut self, frames: &[FrameId]) -> StackId {
        if let Some(&id) = self.index.get(frames) {
            return id;
        }
        let id = self.len() as StackId;
        self.frames.extend_from_slice(frames);
        self.offsets.push(self.frames.len() as u32);
        self.index.insert(frames.into(), id);
        id
    }

    /// The stack with these frames, if interned.
    pub fn lookup(&self, frames: &[FrameId]) -> Option<StackId> {
        self.index.get(frames).copied()
    }

    /// Frames of a stack, innermost first; empty for [`NONE`].
    pub fn get(&self, id: StackId) -> &[FrameId] {
        if id == NONE {
            return &[];
        }
        let (a, b) = (self.offsets[id as usize], self.offsets[id as usize + 1]);
        &self.frames[a as usize..b as usize]
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Interns frames by content so that unshared copies (JSON input) still dedupe.
#[derive(Debug, Default)]
pub struct FrameInterner {
    index: HashMap<Frame, FrameId, FxBuildHasher>,
}

impl FrameInterner {
    /// The id of `frame`, and whether it is new.
    pub fn intern(&mut self, frames: &mut Vec<Frame>, frame: Frame) -> (FrameId, bool) {
        let mut new = false;
        let id = *self.index.entry(frame).or_insert_with(|| {
            new = true;
            frames.push(frame);
            (frames.len() - 1) as FrameId
        });
        (id, new)
    }
}
