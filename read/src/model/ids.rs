//! Index newtypes: which table a number indexes is part of its type.
//!
//! The on-disk and in-memory columns stay plain `u32` (they are bytes, read in place from an
//! archive); these types are what functions take and return, so an action index cannot be passed
//! where an event index is wanted. Each wraps the raw column value and converts at the column:
//! `ActionIdx(col[i])`, `ids.index()`.

use std::fmt;

macro_rules! index_type {
    ($(#[$meta:meta])* $name:ident($inner:ty)) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, schemars::JsonSchema)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl $name {
            /// The position it indexes.
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// From a position in its table (tables are far below `u32::MAX` rows: the reader
            /// refuses larger inputs).
            pub fn at(i: usize) -> $name {
                $name(i as $inner)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

index_type!(
    /// An element of a device's timeline (index into `layout::Elements`: creation order,
    /// trace order then ghosts).
    ElementId(u32)
);

index_type!(
    /// An action of a device's timeline: the k-th push or pop of the live stack (index into
    /// `Layout::actions` and `Layout::totals`).
    ActionIdx(u32)
);

index_type!(
    /// A raw trace event: absolute index into `Snapshot::events` (every device back to back),
    /// which is also the archive's event column row.
    EventIdx(u32)
);

index_type!(
    /// A device's position in an opened archive or a snapshot's device list (`0..devices()`),
    /// not its CUDA ordinal, which is [`super::DeviceId`].
    DeviceIdx(usize)
);

impl ActionIdx {
    /// `start` of an element live before the first action.
    pub const BEFORE_TRACE: ActionIdx = ActionIdx(u32::MAX);
    /// `end` of an element still live after the last action.
    pub const NEVER: ActionIdx = ActionIdx(u32::MAX);

    /// `k` as a signed action (the initial state is `-1`), for "live after k" arithmetic.
    pub fn signed(self) -> i64 {
        i64::from(self.0)
    }
}

impl EventIdx {
    /// No such event (an element revealed by the dump has no alloc event).
    pub const NONE: EventIdx = EventIdx(super::NONE);

    pub fn get(self) -> Option<EventIdx> {
        (self != EventIdx::NONE).then_some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_convert_and_print() {
        assert_eq!(ActionIdx::at(7).index(), 7);
        assert_eq!(ElementId(3).to_string(), "3");
        assert_eq!(serde_json::to_string(&EventIdx(9)).unwrap(), "9");
        assert_eq!(EventIdx::NONE.get(), None);
        assert_eq!(EventIdx(2).get(), Some(EventIdx(2)));
        assert_eq!(DeviceIdx(1).index(), 1);
    }
}
