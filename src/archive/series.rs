//! The allocator section of a device: its saved states and its per-action series, from one pass
//! backwards from the dump (on a long trace, two parts of it side by side, stitched after).
//! Values arrive last action first; each series is compressed a chunk at a time as it fills and
//! keeps only its finest min/max level meanwhile, so memory stays that of one chunk per series
//! however long the trace.

use std::collections::{BTreeMap, BTreeSet};

use memviz_format::schema::{self as f, Chunk};

use super::chunks::{self, CHUNK_ROWS};
use crate::allocator::{self, EventColumns, Figures, Part};
use crate::layout::LayoutRef;
use crate::lod::minimap::{self, MinMax};
use crate::model::{ActionIdx, Snapshot};

/// Traces of at least this many events run their pass as two parts side by side
/// ([`allocator::Part`]), cut near the middle ([`LATE_PERMILLE`]): the early part undoes the late
/// part's events again with no figures (a tenth of the work per event); the checkpoints and tiles
/// wait beside the late part for the first worker free (`build.rs`; gen9m,
/// when it was first cut: early 1.8–2.1 s, late 1.7–2.1 s, tiles 0.8–1.0 s; the whole pass alone
/// took 3.5–3.9 s).
const SPLIT_EVENTS: usize = 1 << 20;

/// The late part's share of a cut trace's events, in thousandths. An untracked undo costs ~0.13 of a tracked
/// one (gen9m, the cut in the middle: early part 1.0–1.15 s, late 0.9–1.05 s, interleaved
/// runs), so the parts end together when the late part takes 1 / (2 − 0.13) ≈ 0.535 of the events.
const LATE_PERMILLE: u64 = 535;

/// How a device's pass runs: K, and where it is cut (the late part's events) if it is.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    every: u32,
    cut: Option<usize>,
}

impl Plan {
    /// K sized from an estimate of the states' summed size (one pass over the event kinds); a
    /// long trace cut so both parts take about as long: the late part gets [`LATE_PERMILLE`] of
    /// the events, since the early part also undoes those untracked first.
    pub fn new(snap: &Snapshot, l: &LayoutRef<'_>) -> Plan {
        let n = snap.trace(l.device).len();
        let late = (n as u64 * LATE_PERMILLE / 1000) as usize;
        Plan::cut_at(snap, l, (n >= SPLIT_EVENTS).then_some(late))
    }

    /// Reads the snapshot's raw action column (before the rows are dropped).
    fn cut_at(snap: &Snapshot, l: &LayoutRef<'_>, cut: Option<usize>) -> Plan {
        Plan { every: allocator::every_for(allocator::estimate_words(snap, &snap.events.action, l.device)), cut }
    }
}

/// What one part of a pass made: the series and pools of its actions, its saved states.
pub struct PartOut {
    figures: FiguresBuilder,
    states: Vec<Chunk>,
}

/// The early part of `l`'s pass (the whole pass when it is not cut), undoing `events` (the
/// snapshot's, or its compressed chunks).
pub fn early_part(snap: &Snapshot, events: &dyn EventColumns, l: &LayoutRef<'_>, plan: Plan) -> PartOut {
    let (part, what) = match plan.cut {
        None => (Part::Whole, "allocator pass"),
        Some(undone) => (Part::Early { undone }, "allocator pass, early part"),
    };
    super::timed(what, || run(snap, events, l, plan, part))
}

/// The late part of `l`'s pass, if it is cut.
pub fn late_part(snap: &Snapshot, events: &dyn EventColumns, l: &LayoutRef<'_>, plan: Plan) -> Option<PartOut> {
    let undone = plan.cut?;
    Some(super::timed("allocator pass, late part", || run(snap, events, l, plan, Part::Late { undone })))
}

fn run(snap: &Snapshot, events: &dyn EventColumns, l: &LayoutRef<'_>, plan: Plan, part: Part) -> PartOut {
    let n = l.actions.len();
    let mut figures = FiguresBuilder::new(n);
    // Each state is compressed as it is made: the raw words are never all held.
    let mut states = Vec::new();
    allocator::pass(
        snap,
        events,
        l.device,
        n,
        |k| l.action_event(ActionIdx::at(k)).0,
        plan.every,
        part,
        |k, fig| figures.push(k, fig),
        |w| states.push(chunks::encode::<u64>(w)),
    );
    PartOut { figures, states }
}

/// The section of `l`'s device from its pass's parts: the series and states of the late part
/// (if any) followed by the early part's.
pub fn section(
    snap: &Snapshot,
    l: &LayoutRef<'_>,
    plan: Plan,
    early: PartOut,
    late: Option<PartOut>,
) -> f::AllocatorSection {
    let (figures, states) = match late {
        None => (early.figures, early.states),
        Some(mut late) => {
            late.states.extend(early.states);
            (late.figures.then(early.figures), late.states)
        }
    };
    let FiguresBuilder { series, pools } = figures;
    let [reserved, allocated, requested, pending_free, unallocated, largest_free, segments] =
        series.map(SeriesBuilder::finish);
    f::AllocatorSection {
        events: snap.trace(l.device).len() as u32,
        every: plan.every,
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

/// The series and pools of one pass (or part of one), fed last action first.
struct FiguresBuilder {
    series: [SeriesBuilder; 7],
    pools: PoolsBuilder,
}

impl FiguresBuilder {
    fn new(actions: usize) -> FiguresBuilder {
        FiguresBuilder { series: std::array::from_fn(|_| SeriesBuilder::new(actions)), pools: PoolsBuilder::default() }
    }

    fn push(&mut self, k: usize, fig: &Figures) {
        for (s, v) in self.series.iter_mut().zip(values(fig)) {
            s.push(k, v);
        }
        self.pools.at(k, &fig.pools);
    }

    /// The figures of a late part followed by those of the early part below it: what one whole
    /// pass would have built.
    fn then(self, early: FiguresBuilder) -> FiguresBuilder {
        let mut below = early.series.into_iter();
        let series = self.series.map(|late| late.then(below.next().expect("as many series")));
        FiguresBuilder { series, pools: self.pools.then(early.pools) }
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
    /// The values since the last chunk, last first.
    block: Vec<i64>,
    /// The first chunk's values (last first), compressed only at the end: an early part's first
    /// chunk is completed by what its late part left over.
    head: Option<Vec<i64>>,
    /// The chunks after the head, last first.
    chunks: Vec<Chunk>,
    levels: minimap::Accumulator,
}

/// A chunk of values given last first.
fn chunk(values: &[i64]) -> Chunk {
    chunks::encode_deltas_last_first(values)
}

impl SeriesBuilder {
    fn new(actions: usize) -> SeriesBuilder {
        let levels = minimap::Accumulator::new(actions);
        SeriesBuilder { block: Vec::with_capacity(CHUNK_ROWS), head: None, chunks: Vec::new(), levels }
    }

    fn push(&mut self, k: usize, v: u64) {
        self.block.push(v as i64);
        self.levels.add(k, v);
        // Chunks start at multiples of CHUNK_ROWS, as every chunked column's do. The block's
        // memory is kept for the next chunk (a fresh one grew by doubling into fresh pages).
        if k.is_multiple_of(CHUNK_ROWS) {
            if self.head.is_none() && self.chunks.is_empty() {
                self.head = Some(std::mem::replace(&mut self.block, Vec::with_capacity(CHUNK_ROWS)));
            } else {
                self.chunks.push(chunk(&self.block));
                self.block.clear();
            }
        }
    }

    /// This (late part's) series followed by the early part's below it.
    fn then(self, early: SeriesBuilder) -> SeriesBuilder {
        let mut chunks: Vec<Chunk> = self.head.as_deref().map(chunk).into_iter().chain(self.chunks).collect();
        let mut block = self.block;
        match early.head {
            Some(head) => {
                block.extend(head);
                chunks.push(chunk(&block));
                chunks.extend(early.chunks);
                block = early.block;
            }
            None => block.extend(early.block),
        }
        let mut levels = self.levels;
        levels.merge(&early.levels);
        SeriesBuilder { block, head: None, chunks, levels }
    }

    fn finish(self) -> f::Series {
        let mut chunks: Vec<Chunk> = self.head.as_deref().map(chunk).into_iter().chain(self.chunks).collect();
        if !self.block.is_empty() {
            chunks.push(chunk(&self.block));
        }
        chunks.reverse();
        let levels = self.levels.finish().into_iter().map(|m: MinMax| f::MinMax {
            actions_per_bucket: m.actions_per_bucket,
            min: m.min,
            max: m.max,
        });
        f::Series { chunks, levels: levels.collect() }
    }
}

/// Reserved bytes per private pool.
type Pools = BTreeMap<(i64, i64), u64>;

/// Each private pool's reserved bytes as change points, fed last action first. Pools change only
/// at segment events, so the points are few, and two neighbouring actions' pools are compared in
/// O(pools).
#[derive(Default)]
struct PoolsBuilder {
    /// The pools right after the action handed in last (the next one in trace order).
    later: Option<Pools>,
    /// The pools after the action handed in first, and which it was.
    first: Option<(usize, Pools)>,
    /// Every pool seen, with `(action, reserved)` where its value changes, latest first.
    points: BTreeMap<(i64, i64), Vec<(u32, u64)>>,
}

impl PoolsBuilder {
    /// This (late part's) builder followed by the early part's below it: the change points
    /// between the two parts' neighbouring actions, then the early part's.
    fn then(mut self, early: PoolsBuilder) -> PoolsBuilder {
        if let Some((k, first)) = &early.first {
            self.at(*k, first);
        }
        for (pool, points) in early.points {
            self.points.entry(pool).or_default().extend(points);
        }
        self.later = early.later.or(self.later);
        self
    }

    fn at(&mut self, k: usize, now: &Pools) {
        if self.first.is_none() {
            self.first = Some((k, now.clone()));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A late part's builder followed by an early part's gives the whole pass's series, wherever
    /// the cut falls: on a chunk's first action, inside a chunk, at either end.
    #[test]
    fn a_series_cut_in_two_is_the_whole_series() {
        let n = 3 * CHUNK_ROWS + 1234;
        let value = |k: usize| (k as u64 * 7919) % 100_003;
        let fed = |range: std::ops::Range<usize>| {
            let mut s = SeriesBuilder::new(n);
            for k in range.rev() {
                s.push(k, value(k));
            }
            s
        };
        let whole = fed(0..n).finish();
        assert_eq!(whole.chunks.len(), 4);
        for cut in [0, 1, 17, CHUNK_ROWS - 1, CHUNK_ROWS, CHUNK_ROWS + 1, 2 * CHUNK_ROWS + 5, n - 1, n] {
            assert_eq!(fed(cut..n).then(fed(0..cut)).finish(), whole, "cut at action {cut}");
        }
    }

    /// The pass run as two parts gives the section the whole pass gives, on real traces (private
    /// pools and expandable segments among them), cut anywhere.
    #[test]
    fn a_pass_in_two_parts_gives_the_whole_section() {
        for name in ["cudagraph", "expandable", "frag_oom", "oom_streams", "gpt2_small"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/{name}.pickle"));
            let (snap, _) = crate::ingest::read_path(&path).unwrap();
            for layout in super::super::reading::lay_out(&snap) {
                let l = layout.view();
                let n = snap.trace(l.device).len();
                let ev = &snap.events;
                let at = |cut| {
                    let plan = Plan::cut_at(&snap, &l, cut);
                    section(&snap, &l, plan, early_part(&snap, ev, &l, plan), late_part(&snap, ev, &l, plan))
                };
                let whole = at(None);
                assert!(whole.states.len() > 1 || n < 512, "{name}: states");
                for cut in [0, 1, n / 5, n / 2, n - n / 3, n - 1, n] {
                    assert!(at(Some(cut)) == whole, "{name} device {:?}: cut {cut} of {n}", l.device);
                }
            }
        }
    }
}
