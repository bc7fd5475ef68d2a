//! Element → allocation site: the stack that explains each element, written to the archive as
//! the `stack` column of a device's elements (colour by site, tables by site).

use crate::layout::{LayoutRef, Origin};
use crate::model::{ElementId, Snapshot, StackId};

/// The stack that explains element `id` of `layout`.
pub fn element_stack(snap: &Snapshot, layout: LayoutRef<'_>, id: ElementId) -> StackId {
    let el = layout.element(id);
    match el.origin {
        Origin::Ghost => snap.blocks[el.block as usize].stack,
        _ => snap.events.stack[el.event().index()],
    }
}
