//! The search (Ctrl/Cmd+F): an address (hex: every allocation that ever covered it) or frame
//! text (a substring, or `/regex/`), as `memviz find` takes them. Matches are marked one bit per
//! element for the shader, which keeps their colour and dims everything else — from the id of
//! each pixel, so a match is highlighted wherever it is drawn, at every zoom level. Enter and
//! Shift+Enter go to the next and the previous match (in allocation order) and pin it.

use std::sync::Arc;

use crate::analysis::find::{self, Query};
use crate::model::{DeviceIdx, ElementId};

#[derive(Default)]
pub struct Search {
    /// The field is shown.
    pub open: bool,
    pub text: String,
    /// What the matches were computed for: the text and the device.
    computed: Option<(String, DeviceIdx)>,
    pub error: Option<String>,
    /// Matches in allocation order (live before the trace first).
    pub matches: Vec<ElementId>,
    /// One bit per element (empty: no search).
    pub marks: Arc<Vec<u32>>,
    /// Changes with every new set of marks (0: none), so the GPU side rebinds them.
    pub generation: u64,
    /// The match last gone to.
    pub current: Option<usize>,
}

static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Search {
    /// True while a search marks something (the shader dims the rest).
    pub fn active(&self) -> bool {
        self.open && !self.text.trim().is_empty() && self.error.is_none()
    }

    /// Recomputes the matches when the text or the device changed.
    pub fn update(&mut self, session: &super::data::Session, d: DeviceIdx) {
        let key = (self.text.trim().to_owned(), d);
        if self.computed.as_ref() == Some(&key) {
            return;
        }
        self.computed = Some(key.clone());
        (self.matches, self.current, self.error) = (Vec::new(), None, None);
        self.marks = Arc::new(Vec::new());
        self.generation = 0;
        if key.0.is_empty() {
            return;
        }
        let query = match Query::parse_any(&key.0) {
            Ok(q) => q,
            Err(e) => {
                self.error = Some(e);
                return;
            }
        };
        let data = super::data::DeviceData::new(session, d);
        let t = data.timeline();
        let mut found = find::matching(&t, session.root(), &query);
        let e = t.layout.elements;
        found.sort_by_key(|id| (e.start[id.index()].wrapping_add(1), id.0));
        let mut marks = vec![0u32; e.len().div_ceil(32)];
        for id in &found {
            marks[id.index() / 32] |= 1 << (id.index() % 32);
        }
        self.matches = found;
        self.marks = Arc::new(marks);
        self.generation = GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The next (or previous) match after the current one, wrapping.
    pub fn step(&mut self, forward: bool) -> Option<ElementId> {
        let n = self.matches.len();
        if n == 0 {
            return None;
        }
        let i = match (self.current, forward) {
            (None, true) => 0,
            (None, false) => n - 1,
            (Some(i), true) => (i + 1) % n,
            (Some(i), false) => (i + n - 1) % n,
        };
        self.current = Some(i);
        Some(self.matches[i])
    }
}
