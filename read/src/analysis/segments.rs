//! `memviz segments`: the allocator's memory map after one event, as text — per segment its
//! address, size, stream and pool, used and free bytes, its holes and the largest, and a bar of
//! its blocks — and the totals: reserved, allocated, pending free, rounding waste, fragmentation.

use std::fmt::Write as _;

use serde::Serialize;

use super::units;
use crate::allocator::Summary;
use crate::model::DeviceId;

/// Characters of a segment's bar.
const BAR: usize = 48;

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct MemoryMap {
    pub device: DeviceId,
    /// Raw trace event index within the device (−1: before the first).
    pub event: i64,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub requested_bytes: u64,
    pub pending_free_bytes: u64,
    /// Allocated minus requested: what rounding to blocks costs.
    pub rounding_waste_bytes: u64,
    pub free_bytes: u64,
    pub largest_free_bytes: u64,
    /// 1 − largest free block / free bytes.
    pub fragmentation: f64,
    pub segments: Vec<SegmentOut>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct SegmentOut {
    pub addr: u64,
    pub size: u64,
    pub stream: u64,
    pub pool: Option<(i64, i64)>,
    pub used_bytes: u64,
    pub free_bytes: u64,
    /// `[addr, size]` of each hole, in address order.
    pub holes: Vec<(u64, u64)>,
    pub largest_hole_bytes: u64,
    /// `[addr, size, requested, pending_free]` of each block.
    pub blocks: Vec<(u64, u64, u64, bool)>,
}

/// The memory map of `device` from the allocator's summary after one event.
pub fn memory_map(device: DeviceId, s: &Summary) -> MemoryMap {
    let segments = s
        .segments
        .iter()
        .map(|m| {
            let used: u64 = m.blocks.iter().map(|b| b.size).sum();
            let holes = m.holes();
            SegmentOut {
                addr: m.segment.addr,
                size: m.segment.size,
                stream: m.segment.stream,
                pool: m.segment.pool,
                used_bytes: used,
                free_bytes: m.segment.size.saturating_sub(used),
                largest_hole_bytes: holes.iter().map(|h| h.1).max().unwrap_or(0),
                holes,
                blocks: m.blocks.iter().map(|b| (b.addr, b.size, b.requested, b.pending_free)).collect(),
            }
        })
        .collect();
    MemoryMap {
        device,
        event: s.event,
        reserved_bytes: s.reserved,
        allocated_bytes: s.allocated,
        requested_bytes: s.requested,
        pending_free_bytes: s.pending_free,
        rounding_waste_bytes: s.allocated.saturating_sub(s.requested),
        free_bytes: s.free(),
        largest_free_bytes: s.largest_free,
        fragmentation: s.fragmentation(),
        segments,
    }
}

/// `█` allocated, `▒` pending free, `·` free, one character per `size / BAR` bytes (a character
/// is the state of the most bytes in it).
fn bar(s: &SegmentOut) -> String {
    let per = s.size.div_ceil(BAR as u64).max(1);
    let mut cells = vec![(0u64, 0u64); BAR]; // (allocated, pending) bytes per cell
    for &(addr, size, _, pending) in &s.blocks {
        let (mut a, end) = (addr.saturating_sub(s.addr), (addr + size).saturating_sub(s.addr).min(s.size));
        while a < end {
            let c = (a / per) as usize;
            let cell_end = ((c as u64 + 1) * per).min(end);
            let slot = &mut cells[c.min(BAR - 1)];
            if pending {
                slot.1 += cell_end - a
            } else {
                slot.0 += cell_end - a
            }
            a = cell_end;
        }
    }
    cells
        .iter()
        .take(s.size.div_ceil(per) as usize)
        .map(|&(used, pending)| {
            let free = per.saturating_sub(used + pending);
            if used >= pending && used >= free {
                '█'
            } else if pending >= free {
                '▒'
            } else {
                '·'
            }
        })
        .collect()
}

pub fn render_text(out: &mut String, m: &MemoryMap, top: usize) {
    let b = units::bytes;
    let when = if m.event < 0 {
        "before the first event".to_owned()
    } else {
        format!("after event {}", units::thousands(m.event as u64))
    };
    let _ =
        writeln!(out, "device {} — {when}: {}", m.device, units::count(m.segments.len() as u64, "segment", "segments"));
    let _ = writeln!(
        out,
        "  reserved {} · allocated {} · pending free {} · rounding waste {} · free {} (largest {}) · fragmentation {:.1}%",
        b(m.reserved_bytes),
        b(m.allocated_bytes),
        b(m.pending_free_bytes),
        b(m.rounding_waste_bytes),
        b(m.free_bytes),
        b(m.largest_free_bytes),
        m.fragmentation * 100.0
    );
    let shown = if m.segments.len() == top + 1 { m.segments.len() } else { top };
    // Largest first: the segments that hold most of the memory (and most of the holes).
    let mut order: Vec<&SegmentOut> = m.segments.iter().collect();
    order.sort_by(|x, y| y.size.cmp(&x.size).then(x.addr.cmp(&y.addr)));
    let _ = writeln!(
        out,
        "    {:<16}  {:>9}  {:>9}  {:>9}  {:>6}  {:>9}  stream / pool  blocks (█ allocated ▒ pending free · free)",
        "address", "size", "used", "free", "holes", "largest"
    );
    for s in order.iter().take(shown) {
        let stream = if s.stream == 0 { "0".to_owned() } else { format!("{:#x}", s.stream) };
        let pool = s.pool.map_or(String::new(), |(a, p)| format!(" pool ({a}, {p})"));
        let _ = writeln!(
            out,
            "    {:<16}  {:>9}  {:>9}  {:>9}  {:>6}  {:>9}  {:<13}  {}",
            format!("{:#x}", s.addr),
            b(s.size),
            b(s.used_bytes),
            b(s.free_bytes),
            s.holes.len(),
            b(s.largest_hole_bytes),
            format!("{stream}{pool}"),
            bar(s)
        );
    }
    if m.segments.len() > shown {
        let rest = (m.segments.len() - shown) as u64;
        let _ =
            writeln!(out, "    … {} (--top, or --json for all)", units::count(rest, "more segment", "more segments"));
    }
}
