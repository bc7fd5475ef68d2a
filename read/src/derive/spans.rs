//! `record_function` annotations paired into spans (written to the archive per device).
//!
//! START/END markers nest per device and per name: an END closes the most recent open START of
//! the same name on the same device. A START never closed stays open to the end of the trace; an
//! END without START is a point annotation.

use crate::model::{NO_TIME, Snapshot, Stage, StrId};

/// One annotation span (or point, when `start_us == end_us`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub name: StrId,
    pub device: i64,
    pub start_us: i64,
    /// `None` when the span never ended.
    pub end_us: Option<i64>,
    /// Nesting depth among the spans open on its device when it started.
    pub depth: u32,
}

impl Span {
    /// Whether the span belongs to `device`'s timeline (the host has none).
    pub fn on(&self, device: crate::model::DeviceId) -> bool {
        !device.is_host() && self.device == i64::from(device.0)
    }

    /// The span with its name, as the answers read it.
    pub fn named<'a>(&self, snap: &'a Snapshot) -> super::timeline::NamedSpan<'a> {
        super::timeline::NamedSpan {
            name: snap.str(self.name),
            start_us: self.start_us,
            end_us: self.end_us,
            depth: self.depth,
            actions: None,
        }
    }
}

/// Pairs the snapshot's annotations into spans, sorted by start time (stable).
pub fn spans(snap: &Snapshot) -> Vec<Span> {
    spans_where(snap, |_| true)
}

/// [`spans`] of the annotations whose name `keep` accepts (depths count kept spans only).
pub fn spans_where(snap: &Snapshot, keep: impl Fn(&str) -> bool) -> Vec<Span> {
    let mut order: Vec<usize> = (0..snap.annotations.len())
        .filter(|&i| snap.annotations[i].time_us != NO_TIME && keep(snap.str(snap.annotations[i].name)))
        .collect();
    order.sort_by_key(|&i| snap.annotations[i].time_us);
    let mut out: Vec<Span> = Vec::new();
    // Open spans: (device, index into `out`), innermost last.
    let mut open: Vec<(i64, usize)> = Vec::new();
    for i in order {
        let a = &snap.annotations[i];
        match a.stage {
            Stage::Start => {
                let depth = open.iter().filter(|(d, _)| *d == a.device).count() as u32;
                open.push((a.device, out.len()));
                out.push(Span { name: a.name, device: a.device, start_us: a.time_us, end_us: None, depth });
            }
            Stage::End => {
                let found = open.iter().rposition(|&(d, s)| d == a.device && out[s].name == a.name);
                match found {
                    Some(j) => {
                        let (_, s) = open.remove(j);
                        out[s].end_us = Some(a.time_us);
                    }
                    None => out.push(Span {
                        name: a.name,
                        device: a.device,
                        start_us: a.time_us,
                        end_us: Some(a.time_us),
                        depth: 0,
                    }),
                }
            }
            Stage::Other(_) => out.push(Span {
                name: a.name,
                device: a.device,
                start_us: a.time_us,
                end_us: Some(a.time_us),
                depth: 0,
            }),
        }
    }
    out.sort_by_key(|s| s.start_us);
    out
}
