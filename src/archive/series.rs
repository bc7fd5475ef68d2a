//! The allocator section of a device: its saved states and its per-action series, from one pass
//! backwards from the dump. Values arrive last action first; each series is compressed a chunk at a
//! time as it fills and keeps only its finest min/max level meanwhile, so memory stays that of
//! one chunk per series however long the trace.

use std::collections::{BTreeMap, BTreeSet};

use memviz_format::schema::{self as f, Chunk};

use super::chunks::{self, CHUNK_ROWS};
use crate::allocator::{self, EventColumns, Figures};
use crate::layout::LayoutRef;
use crate::lod::minimap::{self, MinMax};
use crate::model::{ActionIdx, Snapshot};

/// The section of `l`'s device, undoing `events` (the snapshot's, or its compressed chunks).
pub fn allocator_section(snap: &Snapshot, events: &dyn EventColumns, l: &LayoutRef<'_>) -> f::AllocatorSection {
    let device = l.device;
    let n = l.actions.len();
    let mut series: [SeriesBuilder; 7] = std::array::from_fn(|_| SeriesBuilder::new(n));
    let mut pools = PoolsBuilder::default();
    // One pass: the series and the saved states (each compressed as it is made: the raw words
    // are never all held), K sized from an estimate of the states' summed size.
    let every = allocator::every_for(allocator::estimate_words(snap, events, device));
    let mut states = Vec::new();
    allocator::pass(
        snap,
        events,
        device,
        n,
        |k| l.action_event(ActionIdx::at(k)).0,
        every,
        |k, fig| {
            for (s, v) in series.iter_mut().zip(values(fig)) {
                s.push(k, v);
            }
            pools.at(k, &fig.pools);
        },
        |w| states.push(chunks::encode::<u64>(w)),
    );
    let [reserved, allocated, requested, pending_free, unallocated, largest_free, segments] =
        series.map(SeriesBuilder::finish);
    f::AllocatorSection {
        events: snap.trace(device).len() as u32,
        every,
        states,
        reserved,
        allocated,
        requested,
        pending_free,
        unallocated,
        largest_free,
        segments,
        pools: pools.finish(),
    }
}

/// The series' values, in the order of [`f::AllocatorSection`]'s fields.
fn values(f: &Figures) -> [u64; 7] {
    [
        f.reserved,
        f.allocated,
        f.requested,
        f.pending_free,
        f.unallocated(),
        f.largest_free().expect("the pass tracks the largest free block"),
        f.segments,
    ]
}

/// One series, fed last action first.
struct SeriesBuilder {
    block: Vec<i64>,
    chunks: Vec<Chunk>,
    levels: minimap::Accumulator,
}

impl SeriesBuilder {
    fn new(actions: usize) -> SeriesBuilder {
        SeriesBuilder { block: Vec::new(), chunks: Vec::new(), levels: minimap::Accumulator::new(actions) }
    }

    fn push(&mut self, k: usize, v: u64) {
        self.block.push(v as i64);
        self.levels.add(k, v);
        // Chunks start at multiples of CHUNK_ROWS, as every chunked column's do.
        if k.is_multiple_of(CHUNK_ROWS) {
            self.block.reverse();
            self.chunks.push(chunks::encode_deltas(&self.block));
            self.block.clear();
        }
    }

    fn finish(mut self) -> f::Series {
        self.chunks.reverse();
        let levels = self.levels.finish().into_iter().map(|m: MinMax| f::MinMax {
            actions_per_bucket: m.actions_per_bucket,
            min: m.min,
            max: m.max,
        });
        f::Series { chunks: self.chunks, levels: levels.collect() }
    }
}

/// Each private pool's reserved bytes as change points, fed last action first. Pools change only
/// at segment events, so the points are few, and two neighbouring actions' pools are compared in
/// O(pools).
#[derive(Default)]
struct PoolsBuilder {
    /// The pools right after the action handed in last (the next one in trace order).
    later: Option<BTreeMap<(i64, i64), u64>>,
    /// Every pool seen, with `(action, reserved)` where its value changes, latest first.
    points: BTreeMap<(i64, i64), Vec<(u32, u64)>>,
}

impl PoolsBuilder {
    fn at(&mut self, k: usize, now: &BTreeMap<(i64, i64), u64>) {
        match &self.later {
            Some(later) if later == now => return,
            Some(later) => {
                let pools: BTreeSet<(i64, i64)> = later.keys().chain(now.keys()).copied().collect();
                for p in pools {
                    let (after, here) = (later.get(&p).copied().unwrap_or(0), now.get(&p).copied().unwrap_or(0));
                    if after != here {
                        // Action k + 1 starts a new value of the pool.
                        self.points.entry(p).or_default().push(((k + 1) as u32, after));
                    }
                }
            }
            None => {}
        }
        for &p in now.keys() {
            self.points.entry(p).or_default();
        }
        self.later = Some(now.clone());
    }

    fn finish(self) -> Vec<f::PoolSeries> {
        let first = self.later.unwrap_or_default();
        self.points
            .into_iter()
            .map(|(pool, mut points)| {
                points.push((0, first.get(&pool).copied().unwrap_or(0)));
                points.reverse();
                let (actions, reserved) = points.into_iter().unzip();
                f::PoolSeries { pool, actions, reserved }
            })
            .collect()
    }
}
