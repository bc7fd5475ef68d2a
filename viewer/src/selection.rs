//! What the user has picked, in one place that every panel and view reads: the element under the
//! pointer, the pinned one, and the last selected range. A view that follows the timeline's
//! cursor (the live & range panel today, a memory map next) reads this, not the timeline.

use crate::model::ElementId;

/// An element under the pointer (or pinned).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub element: ElementId,
    /// Where it was picked, in data space (action or µs, bytes).
    pub x: f64,
    pub byte: f64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Selection {
    pub hovered: Option<Hit>,
    /// Clicked: shown in the bottom bar until an empty click.
    pub pinned: Option<Hit>,
    /// The last range selected with Ctrl/Cmd + drag, in actions `[a, b)`.
    pub range: Option<(u32, u32)>,
    /// The raw event (device-relative; −1: before the first) the memory map shows when the
    /// timeline is not hovered: set by a click on the timeline, ←/→, the event list, an OOM marker.
    pub event: Option<i64>,
    /// The element of the block under the pointer in the memory map (outlined on the timeline).
    pub map_hover: Option<ElementId>,
}

impl Selection {
    /// What the panels follow: the pinned element, else the hovered one.
    pub fn focus(&self) -> Option<Hit> {
        self.pinned.or(self.hovered)
    }

    pub fn clear(&mut self) {
        *self = Selection::default();
    }
}
