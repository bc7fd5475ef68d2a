//! The allocator section of a device: its saved states and its per-action series, from one pass
//! backwards from the dump (on a long trace, two parts of it side by side, stitched after).
//! Values arrive last action first; each series is compressed a chunk at a time as it fills and
//! keeps only its finest min/max level meanwhile, so memory stays that of one chunk per series
//! however long the trace.

use std::collections::{BTreeMap, BTreeSet};

use memviz_format::schema::{self as f, Chunk};
use rayon::prelude::*;

use crate::allocator::{self, Cut, EventColumns, Figures, Part, State, Stretch};
use crate::archive::chunks::{self, CHUNK_ROWS};
use crate::layout::LayoutRef;
use crate::lod::minimap::{self, MinMax};
use crate::model::{ActionIdx, Snapshot};

/// Traces of at least this many events run their pass as two parts side by side
/// ([`allocator::Part`]): one worker starts the late part at once; the other first makes the
/// checkpoints and tiles (`build.rs`), then settles the cut from how far the late part got
/// ([`allocator::Cut`]) and runs the early part, which undoes the late part's events again with
/// no figures (a fraction of the work per event, [`UNTRACKED_COST`]) before tracking its own.
const SPLIT_EVENTS: usize = 1 << 20;

/// An untracked undo's cost next to a tracked one's, as measured (docs/design/10). The early part, settling its cut when
/// the late part has undone `r` of `n` events, takes `c` events for the late part such that
/// both end together: `c − r = 0.13 c + (n − c)`.
const UNTRACKED_COST: f64 = 0.13;

/// How a device's pass runs: K, and, for a long trace, where it is cut.
#[derive(Debug)]
pub struct Plan {
    every: u32,
    split: Split,
}

/// How a long trace's pass is cut.
#[derive(Debug)]
enum Split {
    Whole,
    /// Two parts, the cut settled while the late part runs (two cores).
    InTwo(Cut),
    /// On more cores, a span for each thread but one (which makes the checkpoints and tiles
    /// meanwhile), cut beforehand: the undone-event counts where each starts, then the trace's
    /// events.
    Spans(Vec<usize>),
}

impl Plan {
    /// K sized from an estimate of the states' summed size (one pass over the event kinds); a
    /// long trace runs as two parts, its cut settled while the late part runs, or — given three
    /// `threads` or more — as one span fewer than the threads: a span left over would start
    /// only when another ended (measured on 16 threads: the pass's wall 0.60 s, 0.1–0.2 s of it
    /// the sixteenth span alone, docs/performance.md). The spans hold at most `room` bytes
    /// between them (`span_bytes`): fewer spans than threads on a host of many cores.
    pub fn new(snap: &Snapshot, l: &LayoutRef<'_>, threads: usize, room: u64) -> Plan {
        let n = snap.trace(l.device).len();
        let words = state_words(snap, l);
        let split = match threads {
            _ if n < SPLIT_EVENTS => Split::Whole,
            0..=2 => Split::InTwo(Cut::open(n)),
            _ => {
                let fit = room / span_bytes(words / n.max(1) as u64);
                Split::Spans(span_cuts(n, (threads - 1).min(fit.max(2) as usize)))
            }
        };
        Plan { every: allocator::every_for(words), split }
    }

    /// A plan cut after the last `undone` events, whatever the trace's length (tests).
    #[cfg(test)]
    fn cut_at(snap: &Snapshot, l: &LayoutRef<'_>, undone: Option<usize>) -> Plan {
        let n = snap.trace(l.device).len();
        Plan::with(snap, l, undone.map_or(Split::Whole, |u| Split::InTwo(Cut::at(n, u))))
    }

    /// Reads the snapshot's raw action column (before the rows are dropped).
    #[cfg(test)]
    fn with(snap: &Snapshot, l: &LayoutRef<'_>, split: Split) -> Plan {
        Plan { every: allocator::every_for(state_words(snap, l)), split }
    }

    /// The spans of a pass cut beforehand (`from`, `to` undone events, the latest first).
    pub fn spans(&self) -> Vec<(usize, usize)> {
        match &self.split {
            Split::Spans(cuts) => cuts.windows(2).map(|w| (w[0], w[1])).collect(),
            _ => Vec::new(),
        }
    }
}

/// The states' summed size in words, estimated from the snapshot's raw action column (before
/// the rows are dropped): what K is sized from.
fn state_words(snap: &Snapshot, l: &LayoutRef<'_>) -> u64 {
    allocator::estimate_words(snap, &snap.events.action, l.device)
}

/// What a span of a pass holds while it runs, whatever the trace's length, from the states'
/// average size in words: its start state and the state it undoes (a word is 8 bytes; the maps
/// around them about as much again), the block being filled of each of its seven series, its
/// cursor's decoded chunk of the events' action, address and size, and its thread's zstd
/// contexts and kept chunk buffers (`archive::chunks`) — pieces under what spills, so
/// anonymous: on 128 threads gen9m's 127 spans passed the heap's hard limit (1 GiB), ~8.5 MB
/// a span as measured.
fn span_bytes(state_words: u64) -> u64 {
    let chunk = (CHUNK_ROWS * 8) as u64;
    2 * state_words * 8 * 2 + (7 + 3 + 2) * chunk + (2 << 20)
}

/// Where `parts` spans of a pass over `n` events start, and `n`: as many events each, since a
/// span starts from its state worked out beforehand ([`span_starts`]). Cuts never change the
/// archive's bytes, only when each part ends.
fn span_cuts(n: usize, parts: usize) -> Vec<usize> {
    (0..=parts.max(1)).map(|i| n * i / parts.max(1)).collect()
}

/// What one part of a pass made: the series and pools of its actions, its saved states.
pub struct PartOut {
    figures: FiguresBuilder,
    states: Vec<Chunk>,
}

/// The early part of `l`'s pass — its cut settled now, where both parts end together — or the
/// whole pass when it is not cut; `None` when the late part was the whole pass (it got to the
/// first event before the cut was settled), undoing `events` (the snapshot's, or its compressed
/// chunks).
pub fn early_part(snap: &Snapshot, events: &dyn EventColumns, l: &LayoutRef<'_>, plan: &Plan) -> Option<PartOut> {
    let cut = match &plan.split {
        Split::Whole => {
            return Some(crate::timings::timed("allocator pass", || run(snap, events, l, plan, Part::Whole)));
        }
        Split::InTwo(cut) => cut,
        Split::Spans(_) => return None,
    };
    let n = cut.events();
    let undone = cut.settle(|reached| ((n + reached) as f64 / (2.0 - UNTRACKED_COST)) as usize);
    (undone < n).then(|| {
        crate::timings::timed("allocator pass, early part", || run(snap, events, l, plan, Part::Early { undone }))
    })
}

/// The late part of `l`'s pass, if it is cut in two.
pub fn late_part(snap: &Snapshot, events: &dyn EventColumns, l: &LayoutRef<'_>, plan: &Plan) -> Option<PartOut> {
    let Split::InTwo(cut) = &plan.split else { return None };
    Some(crate::timings::timed("allocator pass, late part", || run(snap, events, l, plan, Part::Late(cut))))
}

/// One span of `l`'s pass cut beforehand ([`Plan::spans`]), from `start`, the state where it
/// starts ([`span_starts`]; `None`: undone untracked to there first).
pub fn span_part(
    snap: &Snapshot,
    events: &dyn EventColumns,
    l: &LayoutRef<'_>,
    plan: &Plan,
    (from, to): (usize, usize),
    start: Option<&State>,
) -> PartOut {
    crate::timings::timed("allocator pass, a span", || run(snap, events, l, plan, Part::Span { from, to, start }))
}

/// The state where each span of `l`'s pass starts: the stretches between the spans' starts read
/// side by side on the pool, each through its own `events()` ([`Stretch::of`]: what undoing it
/// does, without the state before it), then applied one after another from the dump — a few
/// hash-map entries per address each, instead of every span first undoing all the events after
/// it (0.13 of a tracked undo each: at 16 spans, each span cost 0.146 of the whole pass).
pub fn span_starts<E: EventColumns>(
    snap: &Snapshot,
    events: &(impl Fn() -> E + Sync),
    l: &LayoutRef<'_>,
    plan: &Plan,
) -> Vec<State> {
    let starts: Vec<usize> = plan.spans().iter().map(|&(from, _)| from).collect();
    let end = snap.trace(l.device).end;
    let stretches: Vec<Stretch> =
        starts.par_windows(2).with_max_len(1).map(|w| Stretch::of(&events(), end - w[1]..end - w[0])).collect();
    let ev = events();
    let mut states = Vec::with_capacity(starts.len());
    let mut state = State::at_dump(snap, l.device);
    for stretch in &stretches {
        let next = state.clone().undo_stretch(&ev, stretch);
        states.push(std::mem::replace(&mut state, next));
    }
    states.push(state);
    states.truncate(starts.len());
    states
}

fn run(snap: &Snapshot, events: &dyn EventColumns, l: &LayoutRef<'_>, plan: &Plan, part: Part<'_>) -> PartOut {
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
        |w| {
            states.push(chunks::encode::<u64>(w));
            // The pass pages through the layout's spilled actions.
            crate::spill::help_drop();
        },
    );
    PartOut { figures, states }
}

/// The section of `l`'s device from its pass's parts, the latest first (a late part, then its
/// early part; or the spans): what the whole pass would have made.
pub fn section(snap: &Snapshot, l: &LayoutRef<'_>, plan: &Plan, parts: Vec<PartOut>) -> f::AllocatorSection {
    // The parts' states in order; each series' parts stitched and finished on its own thread
    // (on a long trace cut in many spans, the seven one after another were 0.5 s on one thread).
    let mut states = Vec::new();
    let mut series: [Vec<SeriesBuilder>; 7] = std::array::from_fn(|_| Vec::new());
    let mut pools: Option<PoolsBuilder> = None;
    for part in parts {
        states.extend(part.states);
        let FiguresBuilder { series: each, pools: p } = part.figures;
        for (all, s) in series.iter_mut().zip(each) {
            all.push(s);
        }
        pools = Some(match pools {
            Some(later) => later.then(p),
            None => p,
        });
    }
    let finished: Vec<f::Series> = series
        .into_par_iter()
        .map(|parts| {
            let mut parts = parts.into_iter();
            let first = parts.next().expect("a pass has at least one part");
            parts.fold(first, SeriesBuilder::then).finish()
        })
        .collect();
    let Ok([reserved, allocated, requested, pending_free, unallocated, largest_free, segments]) =
        <[f::Series; 7]>::try_from(finished)
    else {
        unreachable!("seven series")
    };
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
        pools: pools.expect("a pass has at least one part").finish(),
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
    /// The first chunk's values, compressed as the chunk is: an early part's first chunk is
    /// completed by what its late part left over, so it is decoded again when the parts are
    /// stitched ([`Self::then`]). Kept raw, it was half a span's memory — 3.5 MB of the seven
    /// series, anonymous (a chunk's 512 KiB is under what spills): on 128 threads gen9m's
    /// spans passed the heap's hard limit.
    head: Option<Chunk>,
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
            let done = chunk(&self.block);
            if self.head.is_none() && self.chunks.is_empty() {
                self.head = Some(done);
            } else {
                self.chunks.push(done);
            }
            self.block.clear();
        }
    }

    /// This (late part's) series followed by the early part's below it.
    fn then(self, early: SeriesBuilder) -> SeriesBuilder {
        let mut chunks: Vec<Chunk> = self.head.into_iter().chain(self.chunks).collect();
        let mut block = self.block;
        match early.head {
            Some(head) => {
                let values = chunks::decode_deltas_owned(&head).expect("a chunk made here decodes");
                block.extend(values.iter().rev());
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
        let mut chunks: Vec<Chunk> = self.head.into_iter().chain(self.chunks).collect();
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

    /// `n` actions' series, fed the values of `range` last first.
    fn fed(n: usize, range: std::ops::Range<usize>) -> SeriesBuilder {
        let mut s = SeriesBuilder::new(n);
        for k in range.rev() {
            s.push(k, (k as u64 * 104_729) % 100_003);
        }
        s
    }

    /// A late part's builder followed by an early part's gives the whole pass's series, wherever
    /// the cut falls: on a chunk's first action, inside a chunk, at either end; and so do many
    /// parts stitched latest first (a part may hold no chunk boundary, or no action at all).
    #[test]
    fn a_series_cut_anywhere_is_the_whole_series() {
        let n = 3 * CHUNK_ROWS + 1234;
        let whole = fed(n, 0..n).finish();
        assert_eq!(whole.chunks.len(), 4);
        for cut in [0, 1, 17, CHUNK_ROWS - 1, CHUNK_ROWS, CHUNK_ROWS + 1, 2 * CHUNK_ROWS + 5, n - 1, n] {
            assert_eq!(fed(n, cut..n).then(fed(n, 0..cut)).finish(), whole, "cut at action {cut}");
        }
        let bounds = [n, n - 2, 2 * CHUNK_ROWS + 1, CHUNK_ROWS + 10, CHUNK_ROWS + 10, CHUNK_ROWS, 4, 3, 0];
        let mut parts = bounds.windows(2).map(|w| fed(n, w[1]..w[0]));
        let first = parts.next().unwrap();
        assert_eq!(parts.fold(first, SeriesBuilder::then).finish(), whole, "cut at {bounds:?}");
    }

    /// `check(name, snap, layout, whole)` on each device of five real traces (private pools and
    /// expandable segments among them), with the section of its whole pass.
    fn each_real_trace(mut check: impl FnMut(&str, &Snapshot, &LayoutRef<'_>, &f::AllocatorSection)) {
        for name in ["cudagraph", "expandable", "frag_oom", "oom_streams", "gpt2_small"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/{name}.pickle"));
            let (snap, _) = crate::ingest::read_path(&path).unwrap();
            for layout in super::super::reading::lay_out(&snap) {
                let l = layout.view();
                let plan = Plan::cut_at(&snap, &l, None);
                let whole = section(&snap, &l, &plan, early_part(&snap, &snap.events, &l, &plan).into_iter().collect());
                let n = snap.trace(l.device).len();
                assert!(whole.states.len() > 1 || n < 512, "{name}: states");
                check(name, &snap, &l, &whole);
            }
        }
    }

    /// The pass run as two parts gives the section the whole pass gives, cut anywhere.
    #[test]
    fn a_pass_in_two_parts_gives_the_whole_section() {
        each_real_trace(|name, snap, l, whole| {
            let (n, ev) = (snap.trace(l.device).len(), &snap.events);
            for cut in [0, 1, n / 5, n / 2, n - n / 3, n - 1, n] {
                let plan = Plan::cut_at(snap, l, Some(cut));
                let parts = late_part(snap, ev, l, &plan).into_iter().chain(early_part(snap, ev, l, &plan));
                assert!(section(snap, l, &plan, parts.collect()) == *whole, "{name} {:?}: cut {cut} of {n}", l.device);
            }
        });
    }

    /// The pass run as spans cut beforehand gives the whole pass's section.
    #[test]
    fn a_pass_in_spans_gives_the_whole_section() {
        each_real_trace(|name, snap, l, whole| {
            let (n, ev) = (snap.trace(l.device).len(), &snap.events);
            for parts in [3, 5, 16] {
                let plan = Plan::with(snap, l, Split::Spans(span_cuts(n, parts)));
                assert!(early_part(snap, ev, l, &plan).is_none() && late_part(snap, ev, l, &plan).is_none());
                let spans = plan.spans().into_iter().map(|s| span_part(snap, ev, l, &plan, s, None)).collect();
                assert!(section(snap, l, &plan, spans) == *whole, "{name} {:?}: {parts} spans", l.device);
                // From their starts worked out beforehand, stretch by stretch: the same.
                let starts = span_starts(snap, &|| ev, l, &plan);
                assert_eq!(starts.len(), parts);
                let spans = plan.spans().into_iter().zip(&starts);
                let spans = spans.map(|(s, start)| span_part(snap, ev, l, &plan, s, Some(start))).collect();
                assert!(
                    section(snap, l, &plan, spans) == *whole,
                    "{name} {:?}: {parts} spans from their starts",
                    l.device
                );
            }
        });
    }

    /// The cuts of a pass in spans: from 0 to the trace's end, never backwards, as many events
    /// each (one more or less).
    #[test]
    fn span_cuts_cover_the_trace_evenly() {
        for (n, parts) in [(10_000_000, 16), (1 << 20, 3), (5, 8), (0, 4)] {
            let cuts = span_cuts(n, parts);
            assert_eq!((cuts.len(), cuts[0], *cuts.last().unwrap()), (parts + 1, 0, n), "{n} in {parts}");
            assert!(cuts.windows(2).all(|w| w[0] <= w[1]), "{cuts:?}");
            let lens: Vec<usize> = cuts.windows(2).map(|w| w[1] - w[0]).collect();
            assert!(lens.iter().all(|&l| l.abs_diff(n / parts) <= 1), "{lens:?}");
        }
    }

    /// A cut settled while the late part runs — before it starts, part way, after it ended
    /// (then it was the whole pass) — gives the whole pass's section.
    #[test]
    fn a_cut_settled_while_the_late_part_runs_gives_the_whole_section() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gpt2_small.pickle");
        let (snap, _) = crate::ingest::read_path(&path).unwrap();
        let layouts = super::super::reading::lay_out(&snap);
        let l = layouts[0].view();
        let n = snap.trace(l.device).len();
        assert!(n > 4 * allocator::cut::CHECK, "{n} events");
        let ev = &snap.events;
        let whole = {
            let plan = Plan::cut_at(&snap, &l, None);
            section(&snap, &l, &plan, early_part(&snap, ev, &l, &plan).into_iter().collect())
        };
        for when in ["before", "meanwhile", "after"] {
            let plan = Plan::with(&snap, &l, Split::InTwo(Cut::open(n)));
            let (early, late) = std::thread::scope(|s| {
                let early = (when == "before").then(|| early_part(&snap, ev, &l, &plan));
                let late = s.spawn(|| late_part(&snap, ev, &l, &plan));
                let early = match (early, when) {
                    (Some(early), _) => early,
                    (None, "meanwhile") => early_part(&snap, ev, &l, &plan),
                    (None, _) => {
                        while !late.is_finished() {
                            std::thread::yield_now();
                        }
                        let early = early_part(&snap, ev, &l, &plan);
                        assert!(early.is_none(), "the late part was the whole pass");
                        early
                    }
                };
                (early, late.join().unwrap())
            });
            assert!(section(&snap, &l, &plan, late.into_iter().chain(early).collect()) == whole, "settled {when}");
        }
    }
}
