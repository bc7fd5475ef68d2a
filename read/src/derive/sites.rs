//! Element → allocation site: the stack that explains each element, written to the archive as
//! the `stack` column of a device's elements (colour by site, tables by site).

use crate::layout::{LayoutRef, Origin};
use crate::model::{ElementId, EventValues, Snapshot, StackId};

/// The stack of each segment of a segment timeline (`Layout::segments`): its `segment_alloc`
/// (or, for one whose alloc the trace lost, its `segment_free`) event's, for a segment of the
/// dump the dump's.
/// `rows`: where the events' values are (`&snap.events` but for an index read's model).
pub fn segment_stacks(snap: &Snapshot, rows: &dyn EventValues, segments: LayoutRef<'_>) -> Vec<StackId> {
    let dump: std::collections::HashMap<u64, StackId> =
        snap.device_segments(segments.device).map(|s| (s.address, s.stack)).collect();
    (0..segments.elements.len())
        .map(|i| {
            let el = segments.element(ElementId::at(i));
            match el.origin {
                Origin::Ghost => dump.get(&el.addr).copied().unwrap_or(crate::model::NONE),
                // A segment event's row is held even where an index read let go of the block events'.
                _ => rows.values(el.event().index()).expect("segment events' rows are kept").stack,
            }
        })
        .collect()
}

/// The stack that explains each element of `layout` (the archive's `stack` column).
pub fn element_stacks(snap: &Snapshot, layout: LayoutRef<'_>) -> Vec<StackId> {
    (0..layout.elements.len()).map(|id| element_stack(snap, layout, ElementId::at(id))).collect()
}

/// The stack that explains element `id` of `layout`.
pub fn element_stack(snap: &Snapshot, layout: LayoutRef<'_>, id: ElementId) -> StackId {
    let el = layout.element(id);
    match el.origin {
        Origin::Ghost => snap.blocks[el.block as usize].stack,
        _ => snap.events.values(el.event().index()).expect("an element's event row is held").stack,
    }
}
