//! Rasterising element ids: columns at sample actions, rows over a byte range.
//!
//! This one routine serves the archive's precomputed tiles and the viewer's on-the-fly detail:
//! replay the live stack from the nearest checkpoint to each column's sample action, then find
//! the element at each row's byte (`column`: O(live + rows) a column for a small
//! stack, O(rows · log live) for a large one).

use super::column::{self, ColumnStack};
use crate::layout::{CheckpointsRef, LayoutRef, LazyStack};

/// Texel of a byte that no live element covers.
pub const EMPTY: u32 = u32::MAX;

/// Texel of the summarized band (`--max-entries`).
pub const AGGREGATED: u32 = u32::MAX - 1;

/// What to draw.
#[derive(Debug, Clone, Copy)]
pub struct RasterSpec<'s> {
    /// Per column, the action whose aftermath it shows; non-decreasing.
    pub samples: &'s [u32],
    pub rows: u32,
    /// Bytes `[byte_lo, byte_hi)` shown, row 0 at `byte_lo` (the bottom).
    pub byte_lo: u64,
    pub byte_hi: u64,
    /// Which elements are drawn individually, and the band the others form.
    pub keep: Option<Band<'s>>,
}

/// Elements not drawn individually form one band at the bottom; the kept ones stack on top of it.
/// With `--max-entries` the band's height is their live total (MemoryViz's summarized entry);
/// in the private-pools view, `at_least[k]` raises it after action `k` (a pool's reserved
/// memory, when more than its live tensors).
#[derive(Debug, Clone, Copy)]
pub struct Band<'s> {
    /// Indexed by element id.
    pub keep: &'s [bool],
    pub at_least: Option<&'s [u64]>,
}

impl<'s> Band<'s> {
    pub fn keep(keep: &'s [bool]) -> Band<'s> {
        Band { keep, at_least: None }
    }
}

/// Whether `id` is drawn on its own (every element without a mask).
pub(super) fn kept(band: Option<Band<'_>>, id: u32) -> bool {
    band.is_none_or(|b| b.keep.get(id as usize).copied().unwrap_or(true))
}

/// The band's height after `applied` actions with `ids` live: the live total of the elements not
/// kept, at least `at_least` of the action; 0 without a mask. The kept elements stack above it.
fn band_bytes(applied: usize, ids: &[u32], sizes: &[u64], band: Option<Band<'_>>) -> u64 {
    let Some(b) = band else { return 0 };
    let live: u64 = ids.iter().filter(|&&id| !kept(band, id)).map(|&id| sizes[id as usize]).sum();
    live.max(band_floor(b, applied))
}

/// The least the band holds after `applied` actions (`at_least` of the last action; 0 without).
pub(super) fn band_floor(band: Band<'_>, applied: usize) -> u64 {
    applied.checked_sub(1).and_then(|k| band.at_least?.get(k).copied()).unwrap_or(0)
}

/// The drawn stack after the replay's current action: `(band bytes, [(id, offset)])`, the kept
/// elements' offsets starting above the band ([`rasterize`] walks the same without collecting).
pub fn drawn_stack(stack: &mut LazyStack<'_>, sizes: &[u64], band: Option<Band<'_>>) -> (u64, Vec<(u32, u64)>) {
    let applied = stack.next_action;
    let ids = stack.ids();
    let bytes = band_bytes(applied, ids, sizes, band);
    let mut off = bytes;
    let drawn = ids
        .iter()
        .filter(|&&id| kept(band, id))
        .map(|&id| {
            let here = off;
            off += sizes[id as usize];
            (id, here)
        })
        .collect();
    (bytes, drawn)
}

/// The `n` largest elements (ties by id): the mask for `--max-entries n`.
pub fn largest(sizes: &[u64], n: usize) -> Vec<bool> {
    let mut keep = vec![false; sizes.len()];
    if n >= sizes.len() {
        keep.iter_mut().for_each(|k| *k = true);
        return keep;
    }
    let mut order: Vec<u32> = (0..sizes.len() as u32).collect();
    if n > 0 {
        order.select_nth_unstable_by(n - 1, |&a, &b| sizes[b as usize].cmp(&sizes[a as usize]).then(a.cmp(&b)));
        for &id in &order[..n] {
            keep[id as usize] = true;
        }
    }
    keep
}

/// Element ids from the largest to the smallest (ties by id): the first `n` are those
/// [`largest`] keeps, so once this order is made a mask for any `n` is a fill ([`first_of`]).
pub fn by_size(sizes: &[u64]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..sizes.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| sizes[b as usize].cmp(&sizes[a as usize]).then(a.cmp(&b)));
    order
}

/// The mask of `len` elements keeping the first `n` of `order` ([`by_size`]): [`largest`]'s.
pub fn first_of(order: &[u32], len: usize, n: usize) -> Vec<bool> {
    let mut keep = vec![false; len];
    for &id in &order[..n.min(order.len())] {
        keep[id as usize] = true;
    }
    keep
}

/// Element ids, row-major, row 0 at the bottom.
#[derive(Debug, Clone, PartialEq)]
pub struct Raster {
    pub columns: u32,
    pub rows: u32,
    pub texels: Vec<u32>,
}

impl RasterSpec<'_> {
    /// The byte a row stands for: the middle of its byte range.
    pub fn row_byte(&self, r: u32) -> u64 {
        let span = (self.byte_hi - self.byte_lo) as u128;
        self.byte_lo + ((2 * r as u128 + 1) * span / (2 * self.rows as u128)) as u64
    }
}

/// Index of the first maximum of `totals[a0..a1]` (`a0 < a1`).
pub fn argmax(totals: &[u64], a0: usize, a1: usize) -> u32 {
    let mut best = a0;
    for k in a0 + 1..a1 {
        if totals[k] > totals[best] {
            best = k;
        }
    }
    best as u32
}

/// Sample actions of every column of level `level` (2^level actions per column), computed from
/// the finer level pairwise so the whole pyramid costs O(actions).
pub fn sample_actions(totals: &[u64], finer: Option<&[u32]>, level: u32) -> Vec<u32> {
    match finer {
        Some(f) => f
            .chunks(2)
            .map(|c| if c.len() == 2 && totals[c[1] as usize] > totals[c[0] as usize] { c[1] } else { c[0] })
            .collect(),
        None => {
            let per = 1usize << level;
            (0..totals.len().div_ceil(per))
                .map(|c| {
                    crate::pace::at(c * per);
                    argmax(totals, c * per, ((c + 1) * per).min(totals.len()))
                })
                .collect()
        }
    }
}

/// Rasterises `spec` from the layout and its checkpoints.
pub fn rasterize(layout: LayoutRef<'_>, cps: CheckpointsRef<'_>, spec: RasterSpec<'_>) -> Raster {
    rasterize_with(layout, cps, spec, column::TREE_FROM)
}

/// [`rasterize`], finding rows' elements in a tree from `tree_from` live entries.
fn rasterize_with(layout: LayoutRef<'_>, cps: CheckpointsRef<'_>, spec: RasterSpec<'_>, tree_from: usize) -> Raster {
    let columns = spec.samples.len() as u32;
    let mut texels = vec![EMPTY; columns as usize * spec.rows as usize];
    if spec.samples.is_empty() || spec.rows == 0 {
        return Raster { columns, rows: spec.rows, texels };
    }
    let row_bytes: Vec<u64> = (0..spec.rows).map(|r| spec.row_byte(r)).collect();
    let mut stack = ColumnStack::at(layout, cps, spec.samples[0] as usize + 1, spec.keep, tree_from);
    let mut column = vec![EMPTY; spec.rows as usize];
    let mut shown: Option<u32> = None;
    for (c, &a) in spec.samples.iter().enumerate() {
        if shown != Some(a) {
            let applied = a as usize + 1;
            // Backwards, or past a saved state: restore (coarse levels' samples are far apart).
            if applied < stack.applied() || cps.saved_at(applied) > stack.applied() {
                stack = ColumnStack::at(layout, cps, applied, spec.keep, tree_from);
            } else {
                stack.advance_to(applied);
            }
            stack.fill(&row_bytes, &mut column);
            shown = Some(a);
        }
        for (r, &id) in column.iter().enumerate() {
            texels[r * columns as usize + c] = id;
        }
    }
    Raster { columns, rows: spec.rows, texels }
}

/// Sample action of each screen column: column `c` covers the action ranges `ranges[c]`
/// (`[first, last)`), and shows the one with the highest total; `None` where it covers none.
pub fn samples_for_ranges(totals: &[u64], ranges: impl Iterator<Item = (usize, usize)>) -> Vec<Option<u32>> {
    ranges
        .map(|(a, b)| {
            let b = b.min(totals.len());
            (a < b).then(|| argmax(totals, a, b))
        })
        .collect()
}

/// Action ranges of `columns` equal columns over fractional actions `[x0, x1)`: action `k`
/// occupies `[k, k + 1)`.
pub fn action_columns(x0: f64, x1: f64, columns: u32) -> impl Iterator<Item = (usize, usize)> {
    let w = (x1 - x0) / f64::from(columns.max(1));
    (0..columns).map(move |c| {
        let a = x0 + w * f64::from(c);
        let b = a + w;
        (a.floor().max(0.0) as usize, b.ceil().max(0.0) as usize)
    })
}

/// Non-decreasing action times searched by a predicate as `[i64]::partition_point` does: a
/// slice, or an archive's times read a chunk at a time.
pub trait SortedTimes {
    /// The number of leading times `pred` holds for.
    fn partition_point<P: Fn(i64) -> bool>(&self, pred: P) -> usize;
}

impl SortedTimes for [i64] {
    fn partition_point<P: Fn(i64) -> bool>(&self, pred: P) -> usize {
        <[i64]>::partition_point(self, |&t| pred(t))
    }
}

/// Action ranges of columns over wall time `[t0, t1)` µs, given each action's time
/// (non-decreasing): action `k` lasts from its time to the next action's.
pub fn time_columns<T: SortedTimes + ?Sized>(
    times: &T,
    t0: f64,
    t1: f64,
    columns: u32,
) -> impl Iterator<Item = (usize, usize)> + '_ {
    let w = (t1 - t0) / f64::from(columns.max(1));
    (0..columns).map(move |c| {
        let a = t0 + w * f64::from(c);
        let b = a + w;
        let first = times.partition_point(|t| (t as f64) <= a).saturating_sub(1);
        let end = times.partition_point(|t| (t as f64) < b);
        if end == 0 { (0, 0) } else { (first, end) }
    })
}

/// Rasterises screen columns that may show nothing (outside the trace): `None` columns stay
/// [`EMPTY`]; the rest must be non-decreasing, as [`samples_for_ranges`] makes them.
pub fn rasterize_columns(
    layout: LayoutRef<'_>,
    cps: CheckpointsRef<'_>,
    samples: &[Option<u32>],
    rows: u32,
    byte_lo: u64,
    byte_hi: u64,
    keep: Option<Band<'_>>,
) -> Raster {
    let columns = samples.len() as u32;
    let mut texels = vec![EMPTY; columns as usize * rows as usize];
    let first = samples.iter().position(Option::is_some);
    let last = samples.iter().rposition(Option::is_some);
    if let (Some(first), Some(last)) = (first, last) {
        let inner: Vec<u32> = samples[first..=last].iter().map(|s| s.unwrap_or(0)).collect();
        let spec = RasterSpec { samples: &inner, rows, byte_lo, byte_hi: byte_hi.max(byte_lo + 1), keep };
        let r = rasterize(layout, cps, spec);
        for row in 0..rows as usize {
            let dst = row * columns as usize + first;
            texels[dst..dst + inner.len()].copy_from_slice(&r.texels[row * inner.len()..(row + 1) * inner.len()]);
        }
    }
    Raster { columns, rows, texels }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::tiny::tiny;

    /// A (100 B), B (200 B), C (300 B) allocated, then A freed: element ids 0, 1, 2.
    fn abc() -> crate::analysis::tiny::Tiny {
        let site: &[(&str, &str, i64)] = &[("f", "f.py", 1)];
        tiny(
            &[("alloc", 1, 100, 0), ("alloc", 2, 200, 0), ("alloc", 3, 300, 0), ("free_completed", 1, 100, 0)],
            &[site],
            &[],
        )
    }

    fn column(r: &Raster, c: u32) -> Vec<u32> {
        (0..r.rows).map(|row| r.texels[(row * r.columns + c) as usize]).collect()
    }

    #[test]
    fn columns_show_the_stack_after_their_sample_action() {
        let t = abc();
        let (l, cps) = (t.layout.view(), t.checkpoints.view());
        // Six rows over [0, 600): they stand for bytes 50, 150, …, 550.
        let spec = RasterSpec { samples: &[0, 1, 2, 3], rows: 6, byte_lo: 0, byte_hi: 600, keep: None };
        assert_eq!((0..6).map(|r| spec.row_byte(r)).collect::<Vec<_>>(), [50, 150, 250, 350, 450, 550]);
        let r = rasterize(l, cps, spec);
        const E: u32 = EMPTY;
        assert_eq!(column(&r, 0), [0, E, E, E, E, E]);
        assert_eq!(column(&r, 1), [0, 1, 1, E, E, E]);
        assert_eq!(column(&r, 2), [0, 1, 1, 2, 2, 2]);
        // A is freed: B and C drop by its 100 bytes.
        assert_eq!(column(&r, 3), [1, 1, 2, 2, 2, E]);
        // Columns may repeat or go back: each is rebuilt from the checkpoints.
        let back = rasterize(l, cps, RasterSpec { samples: &[3, 3], ..spec });
        assert_eq!((column(&back, 0), column(&back, 1)), (column(&r, 3), column(&r, 3)));
    }

    #[test]
    fn the_summarized_band_sits_under_the_kept_elements() {
        let t = abc();
        let sizes = &t.layout.elements.size;
        let keep = largest(sizes, 1);
        assert_eq!(keep, [false, false, true]);
        let spec = RasterSpec { samples: &[2], rows: 6, byte_lo: 0, byte_hi: 600, keep: Some(Band::keep(&keep)) };
        let r = rasterize(t.layout.view(), t.checkpoints.view(), spec);
        assert_eq!(column(&r, 0), [AGGREGATED, AGGREGATED, AGGREGATED, 2, 2, 2]);
        // A floor under the band (a pool's reserved bytes) lifts what stacks on top of it.
        let floor = [0, 0, 400, 0];
        let band = Band { keep: &keep, at_least: Some(&floor) };
        let r = rasterize(t.layout.view(), t.checkpoints.view(), RasterSpec { keep: Some(band), ..spec });
        assert_eq!(column(&r, 0), [AGGREGATED, AGGREGATED, AGGREGATED, AGGREGATED, 2, 2]);
    }

    /// A mask made from the elements sorted once is the one `largest` selects, for every `n`.
    #[test]
    fn the_sorted_order_keeps_what_largest_keeps() {
        let sizes: Vec<u64> = (0..500u64).map(|k| 512 * ((k * 7919) % 37)).collect();
        let order = by_size(&sizes);
        for n in [0, 1, 2, 13, 36, 37, 250, 499, 500, 900] {
            assert_eq!(first_of(&order, sizes.len(), n), largest(&sizes, n), "n = {n}");
        }
    }

    /// Drawing every element (no mask) draws what a mask keeping every element draws, over the
    /// whole height or a zoomed byte range, and on a raster of a row per byte.
    #[test]
    fn drawing_every_element_equals_keeping_every_element() {
        let (layout, cps) = super::super::gpt2_small();
        let samples: Vec<u32> = (0..layout.actions.len() as u32).step_by(7).collect();
        let keep = vec![true; layout.elements.size.len()];
        let peak = layout.peak_bytes.max(3);
        for (byte_lo, byte_hi, rows) in [(0, peak, 97), (peak / 3, peak / 3 * 2, 64), (peak / 2, peak / 2 + 1, 5)] {
            let spec = RasterSpec { samples: &samples, rows, byte_lo, byte_hi, keep: None };
            let all = rasterize(layout.view(), cps.view(), spec);
            let kept = rasterize(layout.view(), cps.view(), RasterSpec { keep: Some(Band::keep(&keep)), ..spec });
            assert!(all == kept, "bytes {byte_lo}..{byte_hi}");
            assert!(all.texels.iter().any(|&t| t != EMPTY), "bytes {byte_lo}..{byte_hi}");
        }
        // A row a byte (rows land on the elements' edges too).
        let t = abc();
        let spec = RasterSpec { samples: &[0, 1, 2, 3], rows: 600, byte_lo: 0, byte_hi: 600, keep: None };
        let keep = [true; 3];
        let all = rasterize(t.layout.view(), t.checkpoints.view(), spec);
        let kept =
            rasterize(t.layout.view(), t.checkpoints.view(), RasterSpec { keep: Some(Band::keep(&keep)), ..spec });
        // After A's free: B over bytes [0, 200), C over [200, 500).
        assert_eq!(column(&all, 3)[199..201], [1, 2]);
        assert_eq!(column(&all, 3)[499..501], [2, EMPTY]);
        assert!(all == kept);
    }

    /// The tree a large stack keeps finds every row's element where the walk of a small one
    /// does: every column of a real trace, sequential and far apart, with and without a band;
    /// and a stack that grows past the threshold and shrinks under it again in one replay (the
    /// tree made from the walk's heights, the heights again after a compaction).
    #[test]
    fn a_large_stack_draws_what_a_walk_draws() {
        let (layout, cps) = super::super::gpt2_small();
        let (l, cps) = (layout.view(), cps.view());
        let live = |w: &[u32]| (w[1] - w[0]) as usize;
        let (least, most) =
            (cps.starts.windows(2).map(live).min().unwrap(), cps.starts.windows(2).map(live).max().unwrap());
        assert!(least + 64 < most, "the live stack's size varies: {least}..{most}");
        let between = (least + most) / 2;
        let every: Vec<u32> = (0..layout.actions.len() as u32).collect();
        let sparse: Vec<u32> = (0..layout.actions.len() as u32).step_by(997).collect();
        let keep = largest(&layout.elements.size, 40);
        let floor: Vec<u64> = layout.totals.iter().map(|t| t / 3).collect();
        let bands = [None, Some(Band::keep(&keep)), Some(Band { keep: &keep, at_least: Some(&floor) })];
        let peak = layout.peak_bytes.max(3);
        for samples in [&every, &sparse] {
            for band in bands {
                for (byte_lo, byte_hi, rows) in [(0, peak, 211), (peak / 3, peak / 2, 64)] {
                    let spec = RasterSpec { samples, rows, byte_lo, byte_hi, keep: band };
                    let tree = rasterize_with(l, cps, spec, 0);
                    let walk = rasterize_with(l, cps, spec, usize::MAX);
                    assert!(rasterize_with(l, cps, spec, between) == walk, "{} samples, from {between}", samples.len());
                    assert!(
                        tree == walk,
                        "{} samples, band {}, bytes {byte_lo}..{byte_hi}",
                        samples.len(),
                        band.is_some()
                    );
                    assert!(walk.texels.iter().any(|&t| t != EMPTY && t != AGGREGATED));
                }
            }
        }
    }

    #[test]
    fn screen_columns_outside_the_trace_stay_empty() {
        let t = abc();
        let totals = &t.layout.totals;
        assert_eq!(totals, &[100, 300, 600, 500]);
        assert_eq!(argmax(totals, 0, 4), 2);
        assert_eq!(sample_actions(totals, None, 1), [1, 2]);
        let samples = samples_for_ranges(totals, [(0, 2), (2, 4), (4, 6)].into_iter());
        assert_eq!(samples, [Some(1), Some(2), None]);
        let r = rasterize_columns(t.layout.view(), t.checkpoints.view(), &samples, 2, 0, 600, None);
        // Two rows stand for bytes 150 and 450.
        assert_eq!((column(&r, 0), column(&r, 1), column(&r, 2)), (vec![1, EMPTY], vec![1, 2], vec![EMPTY, EMPTY]));
        let cols: Vec<(usize, usize)> = action_columns(0.0, 4.0, 2).collect();
        assert_eq!(cols, [(0, 2), (2, 4)]);
        let times = [10i64, 20, 30, 40];
        let by_time: Vec<(usize, usize)> = time_columns(&times[..], 0.0, 40.0, 4).collect();
        assert_eq!(by_time, [(0, 0), (0, 1), (1, 2), (2, 3)]);
    }
}
