//! `memviz export`: the layout in the golden schemas of `timeline_oracle.py`.
//!
//! `layout`: every element with its start/end action and every change of its offset.
//! `sampled`: the whole live stack with offsets after every N-th action.

use serde::Serialize;

use crate::layout::{LayoutRef, StackChange};

#[derive(Serialize)]
pub struct LayoutExport<'a> {
    pub devices: Vec<DeviceLayout<'a>>,
}

#[derive(Serialize)]
pub struct DeviceLayout<'a> {
    device: crate::model::DeviceId,
    actions: usize,
    peak_bytes: u64,
    totals: &'a [u64],
    elements: Vec<ElementOut>,
}

#[derive(Serialize)]
struct ElementOut {
    id: u32,
    addr: u64,
    size: u64,
    origin: &'static str,
    start: i64,
    end: Option<u32>,
    offsets: Vec<(i64, u64)>,
}

/// Every element and every offset change (O(actions × live) offsets: meant for small traces).
pub fn device_layout(layout: LayoutRef<'_>) -> DeviceLayout<'_> {
    let mut offsets: Vec<Vec<(i64, u64)>> = vec![Vec::new(); layout.elements.len()];
    let mut current = vec![0u64; layout.elements.len()];
    let mut replay = layout.replay();
    for (id, off) in replay.with_offsets() {
        offsets[id as usize].push((-1, off));
        current[id as usize] = off;
    }
    let mut total = layout.initial_total;
    let mut k = 0i64;
    while let Some(step) = replay.step() {
        match step {
            StackChange::Pushed { id } => {
                offsets[id as usize].push((k, total));
                current[id as usize] = total;
                total += layout.elements.size[id as usize];
            }
            StackChange::Removed { id, pos } => {
                let size = layout.elements.size[id as usize];
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
        .map(|(id, offsets)| (id as u32, layout.element(id as u32), offsets))
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

#[derive(Serialize)]
pub struct SampledExport {
    pub devices: Vec<DeviceSampled>,
}

#[derive(Serialize)]
pub struct DeviceSampled {
    device: crate::model::DeviceId,
    actions: usize,
    peak_bytes: u64,
    peak_action: i64,
    elements: usize,
    samples: Vec<Sample>,
}

#[derive(Serialize)]
struct Sample {
    action: usize,
    total: u64,
    stack: Vec<(u32, u64)>,
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
        peak_action: layout.peak_action.map_or(-1, i64::from),
        elements: layout.elements.len(),
        samples,
    }
}
