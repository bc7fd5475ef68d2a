//! [`Attributes`] of an in-memory model's elements (the archive reads the same from its event
//! columns in place: `archive::attrs`), and the one rule for an element's private pool, shared
//! by both.

use std::collections::HashMap;

use super::timeline::{Attributes, ElementAttrs};
use crate::layout::{LayoutRef, Origin};
use crate::model::{ElementId, NONE, Snapshot};

/// One device's elements of the model.
#[derive(Clone, Copy)]
pub struct ModelAttrs<'a> {
    pub snap: &'a Snapshot,
    pub layout: LayoutRef<'a>,
}

impl Attributes for ModelAttrs<'_> {
    fn attrs(&self, id: ElementId) -> ElementAttrs<'_> {
        let (snap, els) = (self.snap, &self.layout.elements);
        if id.index() >= els.len() {
            return ElementAttrs::EMPTY;
        }
        let el = els.get(id);
        let text = |s: u32| if s == NONE { "" } else { snap.str(s) };
        let annotated = els.annotation_of(id).map_or("", text);
        if el.origin == Origin::Ghost {
            let seg = snap.segments.iter().find(|s| s.blocks.contains(&el.block));
            return ElementAttrs {
                stream: seg.map(|s| s.stream),
                pool: seg.and_then(|s| s.pool_id),
                annotated,
                forward_stack: snap.blocks.get(el.block as usize).map_or(NONE, |b| b.forward_stack),
                ..ElementAttrs::EMPTY
            };
        }
        let row = snap.events.row(el.event().0);
        ElementAttrs {
            stream: Some(row.stream),
            pool: row.pool_id,
            compile_context: text(row.compile_context),
            user_metadata: text(row.user_metadata),
            internal_metadata: text(row.internal_metadata),
            annotated,
            forward_stack: row.forward_stack,
            category: text(row.category),
        }
    }
}

/// The private pool of each segment of a segment timeline (`None`: the default pool): what its
/// events recorded (`own`), else — for a segment still there at the end, and a ghost — the
/// dump's `pool_id` at its address (torch 2.11 records no pool on segment events).
pub fn segment_pools(
    seg: LayoutRef<'_>,
    own: impl Fn(ElementId) -> Option<(i64, i64)>,
    dump: &HashMap<u64, Option<(i64, i64)>>,
) -> Vec<Option<(i64, i64)>> {
    (0..seg.elements.len())
        .map(|i| {
            let id = ElementId::at(i);
            let s = seg.element(id);
            let at_dump = || if s.end_opt().is_none() { dump.get(&s.addr).copied().flatten() } else { None };
            let pool = match s.origin {
                Origin::Ghost => at_dump(),
                _ => own(id).or_else(at_dump),
            };
            pool.filter(|&p| p != (0, 0))
        })
        .collect()
}

/// The private pool of each element (`None`: the default pool): its event's `pool_id` (`own`),
/// else the pool of the segment (`seg`, with `seg_pools`) holding its address when it was
/// allocated.
pub fn element_pools(
    el: LayoutRef<'_>,
    own: impl Fn(ElementId) -> Option<(i64, i64)>,
    seg: LayoutRef<'_>,
    seg_pools: &[Option<(i64, i64)>],
) -> Vec<Option<(i64, i64)>> {
    let own = |i: usize| own(ElementId::at(i)).filter(|&p| p != (0, 0));
    if !seg_pools.iter().any(Option::is_some) {
        return (0..el.elements.len()).map(own).collect();
    }
    // Segments with a pool, by address: (start, end, alloc event, free event, pool).
    type PoolSpan = (u64, u64, u32, u32, (i64, i64));
    let mut spans: Vec<PoolSpan> = (0..seg.elements.len().min(seg_pools.len()))
        .filter_map(|i| {
            let s = seg.element(ElementId::at(i));
            Some((s.addr, s.addr + s.size, s.alloc_event.0, s.free_event.0, seg_pools[i]?))
        })
        .collect();
    spans.sort_unstable();
    (0..el.elements.len())
        .map(|i| {
            own(i).or_else(|| {
                let e = el.element(ElementId::at(i));
                let event = e.event().get().map_or(u32::MAX, |x| x.0);
                let end = spans.partition_point(|s| s.0 <= e.addr);
                let found = spans[..end].iter().rev().take(64).find(|s| {
                    let born = s.2 == NONE || s.2 <= event;
                    let alive = s.3 == NONE || s.3 > event;
                    e.addr < s.1 && born && alive
                });
                found.map(|s| s.4)
            })
        })
        .collect()
}

/// The dump's pool of each segment of `device`, by address.
pub fn dump_pools(snap: &Snapshot, device: crate::model::DeviceId) -> HashMap<u64, Option<(i64, i64)>> {
    snap.device_segments(device).map(|s| (s.address, s.pool_id)).collect()
}
