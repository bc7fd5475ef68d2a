//! An element's descriptive attributes (stream, pool, compile context, metadata, forward
//! stack), read from the archive's run-length and sparse event columns in place: a binary
//! search each, no chunk decompressed.

use memviz_format::rkyv::rend::u32_le;
use memviz_format::rkyv::tuple::ArchivedTuple2;
use memviz_format::rkyv::vec::ArchivedVec;
use memviz_format::schema::{ArchivedRoot, ArchivedSegment};

use super::restore::str_at;
use crate::derive::timeline::{Attributes, ElementAttrs};
use crate::layout::{LayoutRef, Origin};
use crate::model::{ElementId, EventIdx, NONE};

/// One device's elements with the archive they came from.
#[derive(Clone, Copy)]
pub struct DeviceAttrs<'s> {
    pub root: &'s ArchivedRoot,
    pub layout: LayoutRef<'s>,
}

/// The run of a run-length column (`(first event, value)`, ascending) that holds `event`.
pub(super) fn run<T>(runs: &ArchivedVec<ArchivedTuple2<u32_le, T>>, event: EventIdx) -> Option<&T> {
    let i = runs.partition_point(|p| p.0.to_native() <= event.0).checked_sub(1)?;
    Some(&runs[i].1)
}

/// The value of a sparse column (`(event, value)`, ascending) at `event`.
pub(super) fn sparse<T>(col: &ArchivedVec<ArchivedTuple2<u32_le, T>>, event: EventIdx) -> Option<&T> {
    col.binary_search_by_key(&event.0, |p| p.0.to_native()).ok().map(|j| &col[j].1)
}

impl DeviceAttrs<'_> {
    /// The dump segment holding block `b` (segments list their blocks in order).
    fn segment_of_block(&self, b: u32) -> Option<&ArchivedSegment> {
        let segs = &self.root.segments;
        let i = segs.partition_point(|s| s.blocks.0.to_native() <= b).checked_sub(1)?;
        let s = &segs[i];
        (b < s.blocks.1.to_native()).then_some(s)
    }
}

impl Attributes for DeviceAttrs<'_> {
    fn attrs(&self, id: ElementId) -> ElementAttrs<'_> {
        let r = self.root;
        let els = &self.layout.elements;
        if id.index() >= els.len() {
            return ElementAttrs::EMPTY;
        }
        let el = els.get(id);
        let annotated = els.annotation_of(id).map_or("", |s| str_at(r, s));
        if el.origin == Origin::Ghost {
            let seg = self.segment_of_block(el.block);
            return ElementAttrs {
                stream: seg.map(|s| s.stream.to_native()),
                pool: seg.and_then(|s| s.pool_id.as_ref().map(|p| (p.0.to_native(), p.1.to_native()))),
                annotated,
                forward_stack: r.blocks.get(el.block as usize).map_or(NONE, |b| b.forward_stack.to_native()),
                ..ElementAttrs::EMPTY
            };
        }
        let (e, t) = (el.event(), &r.events);
        let text = |runs| run(runs, e).map_or("", |s: &u32_le| str_at(r, s.to_native()));
        ElementAttrs {
            stream: run(&t.stream, e).map(|s| s.to_native()),
            pool: sparse(&t.pool_id, e).map(|p| (p.0.to_native(), p.1.to_native())),
            compile_context: text(&t.compile_context),
            user_metadata: text(&t.user_metadata),
            internal_metadata: text(&t.internal_metadata),
            annotated,
            forward_stack: sparse(&t.forward_stack, e).map_or(NONE, |s| s.to_native()),
            category: text(&t.category),
        }
    }
}
