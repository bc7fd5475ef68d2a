//! Reading an archive back: zero-copy views for the viewer, and the whole model (events
//! decompressed) for commands that answer from every event, like `stats` and `export`.

use memviz_format::rkyv;
use std::collections::BTreeMap;

use memviz_format::rkyv::rend::{u32_le, u64_le};
use memviz_format::rkyv::vec::ArchivedVec;
use memviz_format::schema::{ArchivedCheckpoints, ArchivedDevice, ArchivedElements, ArchivedRoot};
use memviz_format::view::{u32s, u64s};

use super::chunks::{self, ChunkError};
use crate::layout::{CheckpointsRef, Elements, ElementsRef, Layout, LayoutRef};
use crate::model::{
    Action, ActionIdx, Annotation, Block, BlockState, DeviceId, Events, Frame, FxInfo, Oddity, Runs, Segment, Snapshot,
    Stage, Tolerated,
};

/// The device's layout, read in place.
pub fn layout_ref(d: &ArchivedDevice) -> LayoutRef<'_> {
    let parts = Parts { elements: &d.elements, actions: &d.actions, initial: &d.initial, totals: &d.totals };
    stacked_ref(
        d.device.to_native(),
        parts,
        d.initial_total.to_native(),
        d.peak_bytes.to_native(),
        d.peak_action.to_native(),
    )
}

/// A device's Active Cached Segment Timeline; `None` for an archive made before format 4.
pub fn segment_layout_ref(d: &ArchivedDevice) -> Option<LayoutRef<'_>> {
    let t = &d.segment_timeline;
    if t.checkpoints.every.to_native() == 0 {
        return None;
    }
    let parts = Parts { elements: &t.elements, actions: &t.actions, initial: &t.initial, totals: &t.totals };
    Some(stacked_ref(
        d.device.to_native(),
        parts,
        t.initial_total.to_native(),
        t.peak_bytes.to_native(),
        t.peak_action.to_native(),
    ))
}

/// The column vectors a stacked timeline (the elements' or the segments') is made of.
struct Parts<'a> {
    elements: &'a ArchivedElements,
    actions: &'a ArchivedVec<u32_le>,
    initial: &'a ArchivedVec<u32_le>,
    totals: &'a ArchivedVec<u64_le>,
}

fn stacked_ref(device: u32, p: Parts<'_>, initial_total: u64, peak_bytes: u64, peak_action: i64) -> LayoutRef<'_> {
    let e = p.elements;
    LayoutRef {
        device: DeviceId(device),
        elements: ElementsRef {
            addr: u64s(&e.addr),
            size: u64s(&e.size),
            start: u32s(&e.start),
            end: u32s(&e.end),
            origin: e.origin.as_slice(),
            alloc_event: u32s(&e.alloc_event),
            free_event: u32s(&e.free_event),
            block: u32s(&e.block),
            slot: u32s(&e.slot),
            annotated: u32s(&e.annotated),
            annotation: u32s(&e.annotation),
        },
        actions: u32s(p.actions),
        initial: u32s(p.initial),
        initial_total,
        totals: u64s(p.totals),
        peak_bytes,
        peak_action: u32::try_from(peak_action).ok().map(ActionIdx),
    }
}

pub fn checkpoints_ref(d: &ArchivedDevice) -> CheckpointsRef<'_> {
    checkpoints_of(&d.checkpoints)
}

/// The segment timeline's checkpoints (see [`segment_layout_ref`]).
pub fn segment_checkpoints_ref(d: &ArchivedDevice) -> CheckpointsRef<'_> {
    checkpoints_of(&d.segment_timeline.checkpoints)
}

fn checkpoints_of(c: &ArchivedCheckpoints) -> CheckpointsRef<'_> {
    CheckpointsRef { every: c.every.to_native(), starts: u32s(&c.starts), ids: u32s(&c.ids) }
}

/// An owned copy of a device's layout.
pub fn layout(d: &ArchivedDevice) -> Layout {
    let v = layout_ref(d);
    let e = v.elements;
    Layout {
        device: v.device,
        elements: Elements {
            addr: e.addr.to_vec(),
            size: e.size.to_vec(),
            start: e.start.to_vec(),
            end: e.end.to_vec(),
            origin: e.origin.to_vec(),
            alloc_event: e.alloc_event.to_vec(),
            free_event: e.free_event.to_vec(),
            block: e.block.to_vec(),
            slot: e.slot.to_vec(),
            annotated: e.annotated.to_vec(),
            annotation: e.annotation.to_vec(),
        },
        actions: v.actions.to_vec(),
        initial: v.initial.to_vec(),
        initial_total: v.initial_total,
        totals: v.totals.to_vec(),
        peak_bytes: v.peak_bytes,
        peak_action: v.peak_action,
    }
}

/// The whole model, exactly as the reader produced it.
pub fn snapshot(r: &ArchivedRoot) -> Result<Snapshot, ChunkError> {
    let mut snap = Snapshot::default();
    for s in r.strings.iter() {
        snap.strings.intern(s.as_str());
    }
    let f = &r.frames;
    snap.frames = (0..f.name.len())
        .map(|i| Frame {
            name: f.name[i].to_native(),
            filename: f.filename[i].to_native(),
            line: f.line[i].to_native(),
            fx: FxInfo::NONE,
        })
        .collect();
    for (i, fx) in f.fx.iter().map(|p| (p.0.to_native() as usize, p.1.map(|s| s.to_native()))) {
        let frame = snap.frames.get_mut(i).ok_or_else(|| ChunkError::new("fx info of a frame out of range".into()))?;
        frame.fx = FxInfo::from_array(fx);
    }
    let (offsets, frames) = (u32s(&r.stacks.offsets), u32s(&r.stacks.frames));
    for w in offsets.windows(2) {
        snap.stacks.intern(&frames[w[0] as usize..w[1] as usize]);
    }
    snap.events = events(&r.events)?;
    // Ids inside chunks are checked as they are decompressed: the model indexes stacks by them.
    let stacks = snap.stacks.len();
    if let Some(s) = snap.events.stack.iter().find(|&&s| s != crate::model::NONE && s as usize >= stacks) {
        return Err(ChunkError::new(format!("an event's stack {s} is out of range (0..{stacks})")));
    }
    snap.traces = r.traces.iter().map(|t| t.0.to_native()..t.1.to_native()).collect();
    snap.host_trace = r.host_trace.0.to_native()..r.host_trace.1.to_native();
    snap.segments = r
        .segments
        .iter()
        .map(|s| Segment {
            device: DeviceId(s.device.to_native()),
            address: s.address.to_native(),
            total_size: s.total_size.to_native(),
            allocated_size: s.allocated_size.to_native(),
            active_size: s.active_size.to_native(),
            requested_size: s.requested_size.to_native(),
            stream: s.stream.to_native(),
            segment_type: s.segment_type.to_native(),
            pool_id: s.pool_id.as_ref().map(|p| (p.0.to_native(), p.1.to_native())),
            is_expandable: s.is_expandable,
            stack: s.stack.to_native(),
            forward_stack: s.forward_stack.to_native(),
            blocks: s.blocks.0.to_native()..s.blocks.1.to_native(),
        })
        .collect();
    snap.blocks = r
        .blocks
        .iter()
        .map(|b| Block {
            address: b.address.to_native(),
            size: b.size.to_native(),
            requested_size: b.requested_size.to_native(),
            state: match b.state {
                0 => BlockState::ActiveAllocated,
                1 => BlockState::ActivePendingFree,
                2 => BlockState::Inactive,
                _ => BlockState::Other(b.state_str.to_native()),
            },
            stack: b.stack.to_native(),
            forward_stack: b.forward_stack.to_native(),
        })
        .collect();
    snap.annotations = r
        .annotations
        .iter()
        .map(|a| Annotation {
            name: a.name.to_native(),
            stage: match a.stage {
                0 => Stage::Start,
                1 => Stage::End,
                _ => Stage::Other(a.stage_str.to_native()),
            },
            device: a.device.to_native(),
            time_us: a.time_us.to_native(),
        })
        .collect();
    snap.allocator_settings = match r.allocator_settings.as_ref() {
        Some(text) => Some(serde_json::from_str(text.as_str()).map_err(|e| ChunkError::new(e.to_string()))?),
        None => None,
    };
    snap.legacy = r.legacy;
    snap.unknown_keys =
        r.unknown_keys.iter().map(|k| (k.0.as_str().to_owned(), k.1.to_native())).collect::<BTreeMap<_, _>>();
    snap.tolerated = tolerated(r);
    Ok(snap)
}

/// The tolerated-oddity counts of an archive (kinds this build does not know are skipped).
pub fn tolerated(r: &ArchivedRoot) -> Tolerated {
    let mut t = Tolerated::default();
    for (key, n) in r.tolerated.iter().map(|p| (p.0.as_str(), p.1.to_native())) {
        if let Some(o) = Oddity::from_key(key) {
            t.add_n(o, n);
        }
    }
    t
}

fn events(t: &memviz_format::schema::ArchivedEventTable) -> Result<Events, ChunkError> {
    let len = t.len.to_native();
    let mut time_us = Vec::with_capacity(len as usize);
    for c in t.time_us.iter() {
        time_us.extend(chunks::decode_deltas(c)?);
    }
    let runs32 =
        |v: &rkyv::vec::ArchivedVec<rkyv::tuple::ArchivedTuple2<rkyv::rend::u32_le, rkyv::rend::u32_le>>| Runs {
            starts: v.iter().map(|p| p.0.to_native()).collect(),
            values: v.iter().map(|p| p.1.to_native()).collect(),
            len,
        };
    let ev = Events {
        action: chunks::decode_column::<u8>(&t.action)?.into_iter().map(Action::from_code).collect(),
        addr: chunks::decode_column(&t.addr)?,
        size: chunks::decode_column(&t.size)?,
        time_us,
        stack: chunks::decode_column(&t.stack)?,
        stream: Runs {
            starts: t.stream.iter().map(|p| p.0.to_native()).collect(),
            values: t.stream.iter().map(|p| p.1.to_native()).collect(),
            len,
        },
        compile_context: runs32(&t.compile_context),
        user_metadata: runs32(&t.user_metadata),
        internal_metadata: runs32(&t.internal_metadata),
        category: runs32(&t.category),
        other_action: t.other_action.iter().map(|p| (p.0.to_native(), p.1.to_native())).collect(),
        device_free: t.device_free.iter().map(|p| (p.0.to_native(), p.1.to_native())).collect(),
        forward_stack: t.forward_stack.iter().map(|p| (p.0.to_native(), p.1.to_native())).collect(),
        pool_id: t.pool_id.iter().map(|p| (p.0.to_native(), (p.1.0.to_native(), p.1.1.to_native()))).collect(),
    };
    if [ev.addr.len(), ev.size.len(), ev.time_us.len(), ev.stack.len(), ev.action.len()]
        .iter()
        .any(|&n| n != len as usize)
    {
        return Err(ChunkError::new("event columns of different lengths".into()));
    }
    Ok(ev)
}

impl crate::derive::frames::FrameSource for ArchivedRoot {
    fn stack(&self, stack: u32) -> &[u32] {
        let offsets = u32s(&self.stacks.offsets);
        match (offsets.get(stack as usize), offsets.get(stack as usize + 1)) {
            (Some(&a), Some(&b)) if a <= b => u32s(&self.stacks.frames).get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }
    fn name(&self, f: u32) -> &str {
        str_at(self, self.frames.name.get(f as usize).map_or(crate::model::NONE, |v| v.to_native()))
    }
    fn file(&self, f: u32) -> &str {
        str_at(self, self.frames.filename.get(f as usize).map_or(crate::model::NONE, |v| v.to_native()))
    }
    fn line(&self, f: u32) -> i64 {
        self.frames.line.get(f as usize).map_or(crate::model::NO_LINE, |v| v.to_native())
    }
    fn fx(&self, f: u32) -> FxInfo {
        let fx = &self.frames.fx;
        match fx.binary_search_by_key(&f, |p| p.0.to_native()) {
            Ok(j) => FxInfo::from_array(fx[j].1.map(|s| s.to_native())),
            Err(_) => FxInfo::NONE,
        }
    }
    fn text(&self, s: u32) -> &str {
        str_at(self, s)
    }
}

/// An interned string of the archive (`""` for none or out of range).
/// The absolute event range of the trace of the device with `ordinal`: the host's, or the one at
/// its ordinal; empty for a device only the segments name.
pub fn trace_of(root: &ArchivedRoot, ordinal: u32) -> std::ops::Range<usize> {
    let t = if crate::model::DeviceId(ordinal).is_host() {
        Some(&root.host_trace)
    } else {
        root.traces.get(ordinal as usize)
    };
    t.map_or(0..0, |t| t.0.to_native() as usize..t.1.to_native() as usize)
}

pub fn str_at(root: &ArchivedRoot, id: u32) -> &str {
    root.strings.get(id as usize).map_or("", |s| s.as_str())
}

#[cfg(test)]
mod tests {
    use memviz_format::rkyv;

    use crate::archive::{Archive, chunks};

    /// A stack id out of range inside an event chunk (valid checksums, valid zstd): restoring the
    /// model is an error, not a panic when an answer reads the stack (found by fuzzing).
    #[test]
    fn an_event_stack_out_of_range_is_an_error() {
        let bytes = crate::fixtures::golden(memviz_format::FORMAT_VERSION);
        let a = Archive::from_memory(&bytes, std::path::Path::new("g.memviz")).unwrap();
        let mut root: memviz_format::schema::Root = rkyv::deserialize::<_, rkyv::rancor::Error>(a.root()).unwrap();
        let mut stacks: Vec<u32> = chunks::decode_owned(&root.events.stack[0]).unwrap();
        stacks[0] = 1 << 30;
        root.events.stack[0] = chunks::encode(&stacks);
        let body = rkyv::to_bytes::<rkyv::rancor::Error>(&root).unwrap();
        let file = memviz_format::seal(&body, a.header().source);
        let bad = Archive::from_memory(&file, std::path::Path::new("bad.memviz")).unwrap();
        let err = super::snapshot(bad.root()).unwrap_err().to_string();
        assert!(err.contains("an event's stack 1073741824 is out of range"), "{err}");
    }
}
