//! The views of an open archive, switched in the top bar. Their names are PyTorch's viewer's, so
//! its users find them; all of them read one [`super::selection::Selection`].

/// What the window shows of an open archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tab {
    /// The Active Memory Timeline: live tensors stacked over the actions.
    #[default]
    Timeline,
    /// Allocated Memory (incl. Private Pools): the timeline with each private pool one band.
    Pools,
    /// The Active Cached Segment Timeline: segments stacked over the segment actions.
    Segments,
    /// The Allocator State: the timeline with the memory map at the selected event below it.
    State,
    /// The Allocator Settings the snapshot recorded.
    Settings,
}

impl Tab {
    pub const ALL: [Tab; 5] = [Tab::Timeline, Tab::Pools, Tab::Segments, Tab::State, Tab::Settings];

    /// The name `--view` takes.
    pub fn arg(self) -> &'static str {
        match self {
            Tab::Timeline => "timeline",
            Tab::Pools => "pools",
            Tab::Segments => "segments",
            Tab::State => "state",
            Tab::Settings => "settings",
        }
    }

    /// The view `--view` (or a page's `view=`) names.
    pub fn from_arg(name: &str) -> Option<Tab> {
        Tab::ALL.into_iter().find(|t| t.arg() == name)
    }

    pub fn title(self) -> &'static str {
        match self {
            Tab::Timeline => "Active Memory Timeline",
            Tab::Pools => "Allocated Memory (incl. Private Pools)",
            Tab::Segments => "Active Cached Segment Timeline",
            Tab::State => "Allocator State",
            Tab::Settings => "Allocator Settings",
        }
    }
}

/// The instant the viewer opens on (`--event`, `--action`, `--oom`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenAt {
    /// After this device-relative raw event.
    Event(i64),
    /// After this action of the element timeline.
    Action(i64),
    /// Just before the N-th OOM event (1-based; 0: the last).
    Oom(usize),
    /// The last action at or before this time (µs since the snapshot's start; `--time` adds half
    /// the unit of its last digit, as the commands do).
    Time(i64),
}

/// The element pinned on opening (`--pin ADDR`, `--element ID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// The allocation covering this address at the view's instant (else the last one that ever
    /// covered it).
    Addr(u64),
    Element(u32),
}
