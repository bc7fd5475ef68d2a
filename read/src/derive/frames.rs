//! Where frames come from — the in-memory model or a mapped archive — behind one trait, so the
//! answers and the viewer read stacks the same way from either.

use crate::model::{FrameId, FxInfo, Snapshot, StackId};

/// Where frames come from: the in-memory model or a mapped archive.
pub trait FrameSource {
    /// Frames of a stack, innermost first (empty for none).
    fn stack(&self, stack: StackId) -> &[FrameId];
    fn name(&self, f: FrameId) -> &str;
    fn file(&self, f: FrameId) -> &str;
    /// [`crate::model::NO_LINE`] when the snapshot had no usable line.
    fn line(&self, f: FrameId) -> i64;
    /// The FX node behind a compiled frame (string ids; [`FxInfo::NONE`] for most frames).
    fn fx(&self, f: FrameId) -> FxInfo;
    /// An interned string (`""` for [`crate::model::NONE`]).
    fn text(&self, s: u32) -> &str;
}

impl FrameSource for Snapshot {
    fn stack(&self, stack: StackId) -> &[FrameId] {
        self.stacks.get(stack)
    }
    fn name(&self, f: FrameId) -> &str {
        self.str(self.frames[f as usize].name)
    }
    fn file(&self, f: FrameId) -> &str {
        self.str(self.frames[f as usize].filename)
    }
    fn line(&self, f: FrameId) -> i64 {
        self.frames[f as usize].line
    }
    fn fx(&self, f: FrameId) -> FxInfo {
        self.frames[f as usize].fx
    }
    fn text(&self, s: u32) -> &str {
        self.str(s)
    }
}
