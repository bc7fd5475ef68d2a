//! Hand-made timelines for the answers' unit tests: a few events with sites, times and spans.

use crate::derive::timeline::{NamedSpan, TimelineRef};
use crate::layout::{Checkpoints, Layout};
use crate::model::{Action, Annotation, EventRow, Snapshot, Stage};
use crate::schema::FrameRow;
use crate::schema::builder::{Builder, TraceList};

/// A snapshot of one device laid out, with everything a [`TimelineRef`] borrows.
pub struct Tiny {
    pub snap: Snapshot,
    pub layout: Layout,
    pub checkpoints: Checkpoints,
    pub sites: Vec<u32>,
    pub times: Vec<i64>,
    pub spans: Vec<NamedSpan<'static>>,
}

/// `events`: (action, addr, size, site) with site an index into `sites`, each site a list of
/// `(function, file, line)` innermost first; event `i` happens at time `100 + 10 i` µs.
pub fn tiny(events: &[(&str, u64, u64, usize)], sites: &[&[(&str, &str, i64)]], spans: &[NamedSpan<'static>]) -> Tiny {
    let mut b = Builder::default();
    let stacks: Vec<u32> = sites
        .iter()
        .map(|frames| {
            let ids: Vec<u32> = frames
                .iter()
                .map(|&(name, file, line)| {
                    let (name, filename) = (Some(b.intern_str(name)), Some(b.intern_str(file)));
                    b.frame(FrameRow { name, filename, line, ..FrameRow::new() })
                })
                .collect();
            b.stack(&ids)
        })
        .collect();
    for (i, &(action, addr, size, site)) in events.iter().enumerate() {
        let row = EventRow {
            action: Action::from_name(action.as_bytes()),
            addr: Some(addr),
            size: Some(size),
            time_us: 100 + 10 * i as i64,
            stack: stacks[site],
            ..EventRow::default()
        };
        b.push_event(&row);
    }
    for s in spans {
        let name = b.intern_str(s.name);
        b.push_annotation(Annotation { name, stage: Stage::Start, device: 0, time_us: s.start_us });
        if let Some(end) = s.end_us {
            b.push_annotation(Annotation { name, stage: Stage::End, device: 0, time_us: end });
        }
    }
    let snap = b.finish(vec![TraceList::Range(0, events.len() as u32)], None, false).unwrap();
    let layout = Layout::build(&snap, crate::model::DeviceId(0));
    let view = layout.view();
    let checkpoints = Checkpoints::build_every(view, 2);
    let sites = crate::derive::sites::element_stacks(&snap, view);
    let times = crate::derive::timeline::model_action_times(&snap, view);
    let spans = spans.to_vec();
    Tiny { snap, layout, checkpoints, sites, times, spans }
}

impl Tiny {
    pub fn timeline(&self) -> TimelineRef<'_> {
        TimelineRef {
            layout: self.layout.view(),
            checkpoints: self.checkpoints.view(),
            sites: &self.sites,
            spans: &self.spans,
            times: &self.times,
            trace_start_us: Some(100),
            time_base_us: Some(100),
            attrs: &(),
            steps: None,
            categories: None,
            pools: None,
        }
    }
}
