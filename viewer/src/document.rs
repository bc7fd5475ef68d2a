//! An open archive as the viewer shows it: which device and plane, the view, the colour mode,
//! the selection and the search — what "copy link" carries and what the panels read. The plot
//! (`timeline::Timeline`) draws a document and holds only what drawing takes — workers,
//! textures, caches; `timeline::Open` is the two together.

use std::sync::Arc;

use super::data::{Plane, Session};
use super::search::Search;
use super::selection::Selection;
use super::view::View;
use crate::model::DeviceIdx;

pub struct Document {
    pub session: Arc<Session>,
    /// Told when the first frame is drawn: the session's background checks start then
    /// (`Platform::start_checks`; a document whose checks nobody started tells nobody).
    pub first_frame: Arc<crate::platform::FirstFrame>,
    pub device: DeviceIdx,
    /// The elements' timeline or the segments' (the Active Cached Segment Timeline).
    pub plane: Plane,
    pub view: View,
    pub time_axis: bool,
    pub colour_by_site: bool,
    /// Colour by category (over `colour_by_site` once the categories are in), with the legend's
    /// hidden categories (bit i: `Category::ALL[i]`).
    pub colour_by_category: bool,
    pub hidden_categories: u16,
    /// Hovered and pinned elements, the selected range: shared with every panel.
    pub selection: Selection,
    /// The search (Ctrl/Cmd+F): its matches and their marks for the shader.
    pub search: Search,
    /// *Allocated Memory (incl. Private Pools)*: each private pool drawn as one band.
    pub pools_view: bool,
    /// `--max-entries` / the detail slider: draw only the N largest individually.
    pub max_entries: Option<usize>,
    /// The card's capacity drawn as a line (`--gpu`): the y fit reaches it.
    pub capacity: Option<u64>,
    /// Only the archive's first-frame parts are here (`Archive::first_frame_ranges`: a page
    /// draws while the rest arrives): the plot draws its coarse tiles and nothing is worked out
    /// or checked from the rest, whose bytes are not the archive's yet.
    pub preview: bool,
}

impl Document {
    /// The session's first device, its element timeline, the whole trace in view, coloured by
    /// site, nothing selected.
    pub fn new(session: Arc<Session>) -> Document {
        Document {
            session,
            first_frame: Arc::default(),
            device: DeviceIdx(0),
            plane: Plane::Elements,
            view: View::fit(1, 1),
            time_axis: false,
            colour_by_site: true,
            colour_by_category: false,
            hidden_categories: 0,
            selection: Selection::default(),
            search: Search::default(),
            pools_view: false,
            max_entries: None,
            capacity: None,
            preview: false,
        }
    }
}
