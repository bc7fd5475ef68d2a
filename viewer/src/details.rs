//! Everything shown about one element (tooltip, bottom bar, clipboard), gathered from the
//! archive in place: O(frames of its stack), well under a millisecond.

use super::data::{Plane, Session};
use crate::analysis::annotations::AnnotationFilter;
use crate::analysis::shapes::ModelDims;
use crate::analysis::{frames, units};
use crate::archive::attrs::DeviceAttrs;
use crate::derive::timeline::{Attributes as _, ElementAttrs};
use crate::model::{ActionIdx, DeviceIdx, ElementId};

#[derive(Debug, Clone, PartialEq)]
pub struct ElementInfo {
    pub id: ElementId,
    pub size: u64,
    pub addr: u64,
    pub origin: &'static str,
    pub start: Option<ActionIdx>,
    pub end: Option<ActionIdx>,
    pub alloc_time_us: Option<i64>,
    pub free_time_us: Option<i64>,
    /// Live bytes before its alloc and right after it.
    pub total_before: Option<u64>,
    pub total_after: Option<u64>,
    pub top_frame: Option<String>,
    pub annotation: Vec<String>,
    pub stack: u32,
    /// Tensor shapes that account for the size (with `--model`).
    pub shapes: Vec<String>,
    /// `(label, text)` of what the snapshot recorded besides the stack: stream, pool,
    /// compile context, metadata, the `annotate` label.
    pub attributes: Vec<(&'static str, String)>,
    /// `forward_frames`: where the forward ran that this backward allocation belongs to.
    pub forward_stack: u32,
}

impl ElementInfo {
    /// Element `id` of device `device`'s timeline of `plane` (a segment of the segment timeline:
    /// its size, address, stream, pool and the stack of its `segment_alloc`; segment actions have
    /// no stored times).
    pub fn gather(
        session: &Session,
        device: DeviceIdx,
        plane: Plane,
        id: ElementId,
        model: Option<&ModelDims>,
        filter: &AnnotationFilter,
    ) -> Option<ElementInfo> {
        let stacked = session.stacked(device, plane)?;
        let l = stacked.layout;
        if id.index() >= l.elements.len() {
            return None;
        }
        let el = l.element(id);
        let time_of = |k: ActionIdx| if plane == Plane::Elements { session.action_time(device, k) } else { None };
        let (start, end) = (el.start_opt(), el.end_opt());
        let stack = stacked.sites.get(id.index()).copied().unwrap_or(crate::model::NONE);
        let root = session.root();
        let alloc_time_us = start.and_then(time_of);
        let device_attrs = DeviceAttrs { root, layout: l };
        let attrs = device_attrs.attrs(id);
        let spans = session.named_spans(device);
        let annotation = alloc_time_us
            .map(|t| {
                let kept = spans.iter().filter(|s| filter.keeps(s.name));
                crate::derive::timeline::open_at(kept, t).into_iter().map(str::to_owned).collect()
            })
            .unwrap_or_default();
        Some(ElementInfo {
            id,
            size: el.size,
            addr: el.addr,
            origin: el.origin.name(),
            start,
            end,
            alloc_time_us,
            free_time_us: end.and_then(time_of),
            total_before: start.map(|k| l.total_after(k.signed() - 1)),
            total_after: start.map(|k| l.total_after(k.signed())),
            top_frame: frames::top_frame(root, stack).map(|f| frames::describe(root, f, true)),
            annotation,
            stack,
            shapes: model.map(|m| m.explain(el.size, 3).into_iter().map(|f| f.text).collect()).unwrap_or_default(),
            attributes: attribute_lines(&attrs),
            forward_stack: attrs.forward_stack,
        })
    }

    /// The lines of the tooltip and of the bottom bar's header.
    pub fn lines(&self, trace_start_us: Option<i64>) -> Vec<(String, String)> {
        let since = |t: i64| trace_start_us.map_or(String::new(), |s| format!("+{}", units::instant_us(t - s)));
        let mut v = vec![
            ("size".into(), format!("{} ({} B)", units::bytes(self.size), units::thousands(self.size))),
            ("address".into(), format!("{:#x}", self.addr)),
            ("origin".into(), self.origin.to_owned()),
        ];
        v.push((
            "allocated".into(),
            match (self.start, self.alloc_time_us) {
                (Some(k), Some(t)) => format!("action {}, {}", units::thousands(u64::from(k.0)), since(t)),
                (Some(k), None) => format!("action {}", units::thousands(u64::from(k.0))),
                (None, _) => "before the trace".into(),
            },
        ));
        v.push((
            "freed".into(),
            match (self.end, self.free_time_us) {
                (Some(k), Some(t)) => format!("action {}, {}", units::thousands(u64::from(k.0)), since(t)),
                (Some(k), None) => format!("action {}", units::thousands(u64::from(k.0))),
                (None, _) => "never (live at the end)".into(),
            },
        ));
        if let (Some(a), Some(b)) = (self.alloc_time_us, self.free_time_us) {
            v.push(("lifetime".into(), units::duration_us(b - a)));
        }
        if let (Some(b), Some(a)) = (self.total_before, self.total_after) {
            v.push(("total".into(), format!("{} before, {} after", units::bytes(b), units::bytes(a))));
        }
        if !self.annotation.is_empty() {
            v.push(("during".into(), self.annotation.join(" > ")));
        }
        if !self.shapes.is_empty() {
            v.push(("shape".into(), self.shapes.join("  |  ")));
        }
        v.push(("frame".into(), self.top_frame.clone().unwrap_or_else(|| "(no stack recorded)".into())));
        v.extend(self.attributes.iter().map(|(k, t)| ((*k).to_owned(), t.clone())));
        v
    }
}

/// The attributes worth a line: what was recorded, without torch's placeholders ('N/A', '').
fn attribute_lines(a: &ElementAttrs<'_>) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    match a.stream {
        Some(0) => {}
        Some(s) => v.push(("stream", format!("{s:#x}"))),
        None => {}
    }
    if let Some((x, y)) = a.pool.filter(|&p| p != (0, 0)) {
        v.push(("pool", format!("private pool ({x}, {y})")));
    }
    let texts = [
        ("annotated", a.annotated),
        ("metadata", a.user_metadata),
        ("internal", a.internal_metadata),
        ("compile context", a.compile_context),
    ];
    for (label, text) in texts {
        if !text.is_empty() && text != "N/A" {
            v.push((label, text.to_owned()));
        }
    }
    v
}

/// The stack as text for the clipboard: every shown frame, full paths.
pub fn stack_text(session: &Session, stack: u32) -> String {
    frames::shown_lines(session.root(), stack, false).join("\n")
}
