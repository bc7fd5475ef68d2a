//! Serializing a [`Root`] in stages, so the archive's first bytes are written while the rest is
//! still being computed: the root's fields before `devices` and the first device's fields before
//! `checkpoints` (its element columns, actions and totals — most of a one-device archive) first,
//! then the first device's `checkpoints` and `tiles` once they exist (the allocator's pass still
//! runs), the rest once it exists.
//!
//! rkyv writes a struct's out-of-line data field by field, in declaration order, then the struct
//! itself; a `Vec` its items' out-of-line data, then the items. The stages below make the same
//! calls in the same order, so the bytes equal [`rkyv::api::high::to_bytes_in`]'s of the whole
//! root (the indexer's tests compare them). A field added to [`Root`] or [`Device`] fails to
//! compile here until it is placed in a stage.

use std::cell::Cell;

use rkyv::rancor::{Fallible, Source as _};
use rkyv::ser::{Allocator, Writer};
use rkyv::vec::ArchivedVec;
use rkyv::{Archive, Place, Serialize, SerializeUnsized as _};

use super::{Device, DeviceResolver, Root, RootResolver};

type R<T> = <T as Archive>::Resolver;

/// The resolvers of a root's fields before `devices`.
pub struct RootHead {
    source: R<super::Source>,
    strings: R<Vec<String>>,
    frames: R<super::FrameTable>,
    stacks: R<super::StackTable>,
    events: R<super::EventTable>,
    traces: R<Vec<(u32, u32)>>,
    host_trace: R<(u32, u32)>,
    segments: R<Vec<super::Segment>>,
    blocks: R<Vec<super::Block>>,
    annotations: R<Vec<super::Annotation>>,
    allocator_settings: R<Option<String>>,
    legacy: R<bool>,
    unknown_keys: R<Vec<(String, u64)>>,
    tolerated: R<Vec<(String, u64)>>,
}

/// The resolvers of a device's fields before `checkpoints`.
pub struct DeviceHead {
    device: R<u32>,
    elements: R<super::Elements>,
    actions: R<Vec<u32>>,
    action_time_us: R<Vec<super::Chunk>>,
    initial: R<Vec<u32>>,
    initial_total: R<u64>,
    totals: R<Vec<u64>>,
    peak_bytes: R<u64>,
    peak_action: R<i64>,
    minimap: R<Vec<super::MinMax>>,
}

/// The resolvers of a device's `checkpoints` and `tiles`.
pub struct DeviceLods {
    checkpoints: R<super::Checkpoints>,
    tiles: R<Vec<super::TileLevel>>,
}

/// The resolvers of a device's fields after `tiles`.
struct DeviceTail {
    spans: R<Vec<super::Span>>,
    reserved: R<super::Reserved>,
    allocator: R<super::AllocatorSection>,
    segment_timeline: R<super::SegmentTimeline>,
    summary: R<Option<super::Summary>>,
}

/// Writes the out-of-line data of `root`'s fields before `devices` (its `devices` are not read).
pub fn root_head<S>(root: &Root, s: &mut S) -> Result<RootHead, S::Error>
where
    S: Fallible + Allocator + Writer + ?Sized,
    S::Error: rkyv::rancor::Source,
{
    Ok(RootHead {
        source: root.source.serialize(s)?,
        strings: root.strings.serialize(s)?,
        frames: root.frames.serialize(s)?,
        stacks: root.stacks.serialize(s)?,
        events: root.events.serialize(s)?,
        traces: root.traces.serialize(s)?,
        host_trace: root.host_trace.serialize(s)?,
        segments: root.segments.serialize(s)?,
        blocks: root.blocks.serialize(s)?,
        annotations: root.annotations.serialize(s)?,
        allocator_settings: root.allocator_settings.serialize(s)?,
        legacy: root.legacy.serialize(s)?,
        unknown_keys: root.unknown_keys.serialize(s)?,
        tolerated: root.tolerated.serialize(s)?,
    })
}

/// Writes the out-of-line data of `d`'s fields before `checkpoints` (the later ones are not read).
pub fn device_head<S>(d: &Device, s: &mut S) -> Result<DeviceHead, S::Error>
where
    S: Fallible + Allocator + Writer + ?Sized,
    S::Error: rkyv::rancor::Source,
{
    Ok(DeviceHead {
        device: d.device.serialize(s)?,
        elements: d.elements.serialize(s)?,
        actions: d.actions.serialize(s)?,
        action_time_us: d.action_time_us.serialize(s)?,
        initial: d.initial.serialize(s)?,
        initial_total: d.initial_total.serialize(s)?,
        totals: d.totals.serialize(s)?,
        peak_bytes: d.peak_bytes.serialize(s)?,
        peak_action: d.peak_action.serialize(s)?,
        minimap: d.minimap.serialize(s)?,
    })
}

/// Writes the out-of-line data of `d`'s `checkpoints` and `tiles` (the other fields are not read).
pub fn device_lods<S>(d: &Device, s: &mut S) -> Result<DeviceLods, S::Error>
where
    S: Fallible + Allocator + Writer + ?Sized,
    S::Error: rkyv::rancor::Source,
{
    Ok(DeviceLods { checkpoints: d.checkpoints.serialize(s)?, tiles: d.tiles.serialize(s)? })
}

/// Writes the out-of-line data of `d`'s fields after `tiles`.
fn device_tail<S>(d: &Device, s: &mut S) -> Result<DeviceTail, S::Error>
where
    S: Fallible + Allocator + Writer + ?Sized,
    S::Error: rkyv::rancor::Source,
{
    Ok(DeviceTail {
        spans: d.spans.serialize(s)?,
        reserved: d.reserved.serialize(s)?,
        allocator: d.allocator.serialize(s)?,
        segment_timeline: d.segment_timeline.serialize(s)?,
        summary: d.summary.serialize(s)?,
    })
}

/// What of the first device is written already: its head, and its checkpoints and tiles if
/// they were written after it.
pub type First = (DeviceHead, Option<DeviceLods>);

/// Finishes `root` after its head (`head`; `first`: what of the first device is written
/// already): each device's out-of-line data still to write — its head but the first's, its
/// checkpoints and tiles but the first's if written, its tail —, the devices, then the root
/// object.
pub fn finish<S>(root: &Root, head: RootHead, mut first: Option<First>, s: &mut S) -> Result<(), S::Error>
where
    S: Fallible + Allocator + Writer + ?Sized,
    S::Error: rkyv::rancor::Source,
{
    let mut staged = Vec::with_capacity(root.devices.len());
    for d in &root.devices {
        let (h, lods) = match first.take() {
            Some(first) => first,
            None => (device_head(d, s)?, None),
        };
        let lods = match lods {
            Some(lods) => lods,
            None => device_lods(d, s)?,
        };
        staged.push(Staged::new(d, device_resolver(h, lods, device_tail(d, s)?)));
    }
    let devices = ArchivedVec::<<Device as Archive>::Archived>::serialize_from_slice(&staged, s)?;
    let resolver = RootResolver {
        source: head.source,
        strings: head.strings,
        frames: head.frames,
        stacks: head.stacks,
        events: head.events,
        traces: head.traces,
        host_trace: head.host_trace,
        segments: head.segments,
        blocks: head.blocks,
        annotations: head.annotations,
        allocator_settings: head.allocator_settings,
        legacy: head.legacy,
        unknown_keys: head.unknown_keys,
        tolerated: head.tolerated,
        devices,
    };
    Staged::new(root, resolver).serialize_unsized(s)?;
    Ok(())
}

/// A device of `head`'s fields before `checkpoints`, `lods`' `checkpoints` and `tiles` (`tail`'s
/// when `None`) and `tail`'s fields after them (the stages [`device_head`], [`device_lods`] and
/// [`finish`] write).
pub fn joined(head: Device, lods: Option<Device>, tail: Device) -> Device {
    let lods = lods.unwrap_or_else(|| Device { checkpoints: tail.checkpoints, tiles: tail.tiles, ..Device::default() });
    Device {
        checkpoints: lods.checkpoints,
        tiles: lods.tiles,
        spans: tail.spans,
        reserved: tail.reserved,
        allocator: tail.allocator,
        segment_timeline: tail.segment_timeline,
        summary: tail.summary,
        ..head
    }
}

fn device_resolver(h: DeviceHead, l: DeviceLods, t: DeviceTail) -> DeviceResolver {
    DeviceResolver {
        device: h.device,
        elements: h.elements,
        actions: h.actions,
        action_time_us: h.action_time_us,
        initial: h.initial,
        initial_total: h.initial_total,
        totals: h.totals,
        peak_bytes: h.peak_bytes,
        peak_action: h.peak_action,
        minimap: h.minimap,
        checkpoints: l.checkpoints,
        tiles: l.tiles,
        spans: t.spans,
        reserved: t.reserved,
        allocator: t.allocator,
        segment_timeline: t.segment_timeline,
        summary: t.summary,
    }
}

#[derive(Debug)]
struct StageError(&'static str);

impl std::fmt::Display for StageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for StageError {}

/// A value whose out-of-line data is already written: serializing it hands back its resolver
/// (once), and resolving it resolves the value.
struct Staged<'a, T: Archive> {
    value: &'a T,
    resolver: Cell<Option<T::Resolver>>,
}

impl<'a, T: Archive> Staged<'a, T> {
    fn new(value: &'a T, resolver: T::Resolver) -> Self {
        Staged { value, resolver: Cell::new(Some(resolver)) }
    }
}

impl<T: Archive> Archive for Staged<'_, T> {
    type Archived = T::Archived;
    type Resolver = T::Resolver;

    fn resolve(&self, resolver: Self::Resolver, out: Place<Self::Archived>) {
        self.value.resolve(resolver, out);
    }
}

impl<T: Archive, S: Fallible + ?Sized> Serialize<S> for Staged<'_, T>
where
    S::Error: rkyv::rancor::Source,
{
    fn serialize(&self, _: &mut S) -> Result<Self::Resolver, S::Error> {
        self.resolver.take().ok_or_else(|| S::Error::new(StageError("a staged value is serialized once")))
    }
}

#[cfg(test)]
mod tests {
    use rkyv::rancor::{Error, Strategy};
    use rkyv::ser::Serializer;
    use rkyv::ser::sharing::Share;
    use rkyv::util::{AlignedVec, with_arena};

    use super::*;
    use crate::schema as f;

    /// A root of two devices with something in every stage's fields.
    fn root() -> Root {
        let device = |d: u32| Device {
            device: d,
            elements: f::Elements { addr: vec![1, 2, 3], size: vec![4, 5, 6], stack: vec![7; 3], ..Default::default() },
            actions: vec![0, 1, 2, 0],
            action_time_us: vec![f::Chunk { rows: 2, data: vec![9; 5] }],
            initial: vec![d],
            initial_total: 10,
            totals: vec![1, 2, 3, 4],
            peak_bytes: 4,
            peak_action: 3,
            minimap: vec![f::MinMax { actions_per_bucket: 4, min: vec![1], max: vec![4] }],
            checkpoints: f::Checkpoints { every: 2, starts: vec![0, 1], ids: vec![2] },
            tiles: vec![f::TileLevel { level: 1, columns: 2, sample: vec![0, 2], tiles: vec![f::Chunk::default()] }],
            spans: vec![f::Span { name: 3, start_us: 1, end_us: 2, depth: 0 }],
            summary: Some(f::Summary { trace_start_us: 5, oom_events: vec![1], ..Default::default() }),
            ..Default::default()
        };
        Root {
            strings: vec!["a".into(), "bc".into()],
            traces: vec![(0, 4), (4, 8)],
            unknown_keys: vec![("x.y".into(), 2)],
            allocator_settings: Some("{}".into()),
            devices: vec![device(0), device(1)],
            ..Default::default()
        }
    }

    #[test]
    fn staged_bytes_equal_the_whole_roots() {
        for (devices, lods_early) in [(0, false), (1, false), (1, true), (2, false), (2, true)] {
            let mut root = root();
            root.devices.truncate(devices);
            let whole = rkyv::to_bytes::<Error>(&root).unwrap();
            let staged = with_arena(|arena| {
                let mut ser = Serializer::new(AlignedVec::<16>::new(), arena.acquire(), Share::new());
                let s = Strategy::<_, Error>::wrap(&mut ser);
                let head = root_head(&root, s).unwrap();
                let first = root.devices.first().map(|d| {
                    let h = device_head(d, s).unwrap();
                    (h, lods_early.then(|| device_lods(d, s).unwrap()))
                });
                finish(&root, head, first, s).unwrap();
                ser.into_writer()
            });
            assert!(whole.as_slice() == staged.as_slice(), "{devices} devices: the bytes differ");
        }
    }
}
