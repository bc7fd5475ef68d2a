//! `memviz export`: the layout in the golden schemas of `timeline_oracle.py`.
//!
//! `layout`: every element with its start/end action and every change of its offset.
//! `sampled`: the whole live stack with offsets after every N-th action.
//! `state`: the allocator's segments and blocks after chosen events (`allocator_oracle.py state`).
//! `segments`: the Active Cached Segment Timeline, in `layout`'s schema over segments.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::json;

use crate::allocator::{self, Summary};
use crate::layout::{LayoutRef, StackChange};
use crate::model::{ActionIdx, DeviceId, ElementId, Snapshot};

#[derive(Serialize, schemars::JsonSchema)]
pub struct LayoutExport<'a> {
    pub devices: Vec<DeviceLayout<'a>>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct DeviceLayout<'a> {
    device: crate::model::DeviceId,
    actions: usize,
    peak_bytes: u64,
    totals: &'a [u64],
    elements: Vec<ElementOut>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct ElementOut {
    id: ElementId,
    addr: u64,
    size: u64,
    origin: &'static str,
    start: i64,
    end: Option<ActionIdx>,
    offsets: Vec<(i64, u64)>,
}

/// Every element and every offset change (O(actions × live) offsets: meant for small traces).
pub fn device_layout(layout: LayoutRef<'_>) -> DeviceLayout<'_> {
    let mut offsets: Vec<Vec<(i64, u64)>> = vec![Vec::new(); layout.elements.len()];
    let mut current = vec![0u64; layout.elements.len()];
    let mut replay = layout.replay();
    for (id, off) in replay.with_offsets() {
        offsets[id.index()].push((-1, off));
        current[id.index()] = off;
    }
    let mut total = layout.initial_total;
    let mut k = 0i64;
    while let Some(step) = replay.step() {
        match step {
            StackChange::Pushed { id } => {
                offsets[id.index()].push((k, total));
                current[id.index()] = total;
                total += layout.elements.size[id.index()];
            }
            StackChange::Removed { id, pos } => {
                let size = layout.elements.size[id.index()];
                for &above in &replay.ids[pos..] {
                    current[above as usize] -= size;
                    offsets[above as usize].push((k, current[above as usize]));
                }
                total -= size;
            }
        }
        k += 1;
    }
    let elements = offsets
        .into_iter()
        .enumerate()
        .map(|(id, offsets)| (ElementId::at(id), layout.element(ElementId::at(id)), offsets))
        .map(|(id, el, offsets)| ElementOut {
            id,
            addr: el.addr,
            size: el.size,
            origin: el.origin.name(),
            start: el.start_i64(),
            end: el.end_opt(),
            offsets,
        })
        .collect();
    DeviceLayout {
        device: layout.device,
        actions: layout.actions.len(),
        peak_bytes: layout.peak_bytes,
        totals: layout.totals,
        elements,
    }
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct SampledExport {
    pub devices: Vec<DeviceSampled>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct DeviceSampled {
    device: crate::model::DeviceId,
    actions: usize,
    peak_bytes: u64,
    peak_action: i64,
    elements: usize,
    samples: Vec<Sample>,
}

#[derive(Serialize, schemars::JsonSchema)]
struct Sample {
    action: usize,
    total: u64,
    stack: Vec<(ElementId, u64)>,
}

/// The live stack after every `every`-th action (`k % every == every - 1`).
pub fn device_sampled(layout: LayoutRef<'_>, every: usize) -> DeviceSampled {
    assert!(every > 0, "the CLI rejects --every 0");
    let mut replay = layout.replay();
    let mut samples = Vec::new();
    let mut k = 0usize;
    while replay.step().is_some() {
        if k % every == every - 1 {
            samples.push(Sample { action: k, total: replay.total, stack: replay.with_offsets().collect() });
        }
        k += 1;
    }
    DeviceSampled {
        device: layout.device,
        actions: layout.actions.len(),
        peak_bytes: layout.peak_bytes,
        peak_action: layout.peak_k(),
        elements: layout.elements.len(),
        samples,
    }
}

/// `memviz export state`: `allocator_oracle.py state`'s schema, so goldens compare as JSON.
pub fn device_state(snap: &Snapshot, device: DeviceId, wanted: &BTreeSet<i64>) -> serde_json::Value {
    let (states, ooms) = allocator::states(snap, device, wanted);
    let summary = |s: &Summary| {
        let segments: Vec<serde_json::Value> = s
            .segments
            .iter()
            .map(|m| {
                let g = &m.segment;
                let blocks: Vec<serde_json::Value> =
                    m.blocks.iter().map(|b| json!([b.addr, b.size, b.requested, b.pending_free])).collect();
                json!({"addr": g.addr, "size": g.size, "stream": g.stream, "pool": g.pool.map(|p| [p.0, p.1]), "blocks": blocks})
            })
            .collect();
        json!({
            "event": s.event, "reserved": s.reserved, "allocated": s.allocated, "requested": s.requested,
            "pending_free": s.pending_free, "largest_free": s.largest_free, "segments": segments,
        })
    };
    let ooms: Vec<serde_json::Value> = ooms
        .iter()
        .map(|o| {
            let b = &o.before;
            json!({
                "event": o.event, "requested": o.requested, "device_free": o.device_free,
                "allocated": b.allocated, "reserved": b.reserved, "reserved_unallocated": b.free(),
                "largest_free": b.largest_free,
            })
        })
        .collect();
    json!({
        "device": device,
        "events": snap.trace(device).len(),
        "states": states.iter().map(summary).collect::<Vec<_>>(),
        "ooms": ooms,
    })
}
