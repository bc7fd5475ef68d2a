//! The live stack as [`super::raster::rasterize`] replays it, column after column: which element
//! covers each row's byte at a column's sample action.
//!
//! A small stack is walked bottom-up against the rows (both ascend: O(live + rows) a column).
//! Past [`TREE_FROM`] entries a walk per column would make a trace with millions of live
//! allocations cost O(live × columns) — 10⁷ live ones took minutes — so the stack keeps a
//! Fenwick tree of its entries' drawn sizes, updated in O(log live) per action, and each row's
//! element is a descent of the tree: O(rows · log live) a column. Both give the same texels.

use super::raster::{AGGREGATED, Band, EMPTY, band_floor, kept};
use crate::layout::{CheckpointsRef, DEAD, LayoutRef, LazyChange, LazyStack};

/// Entries from which a column's elements are found in the tree rather than by a walk (the walk
/// costs about one step an entry, the tree about `rows · log₂ entries` plus its upkeep).
pub const TREE_FROM: usize = 1 << 14;

/// The live stack with what a column needs: the bytes of the band and, while large, the tree.
pub struct ColumnStack<'a> {
    stack: LazyStack<'a>,
    sizes: &'a [u64],
    band: Option<Band<'a>>,
    /// Live bytes of the elements the band holds (`band.keep` false).
    hidden: u64,
    /// While the stack is small (no tree), each entry's drawn size (0 for dead or banded ones)
    /// in entry order: the walk reads these one after another instead of each entry's size at
    /// random in the elements' column (gen9m's tiles: the walk was a sixth of their time).
    heights: Vec<u64>,
    /// Fenwick tree of the entries' drawn sizes (0 for dead or banded ones), 1-based:
    /// `tree[i]` sums entries `(i − lowbit(i), i]`. Empty while the stack is small.
    tree: Vec<u64>,
    /// Entries from which the tree is kept ([`TREE_FROM`]; tests choose theirs).
    tree_from: usize,
}

impl<'a> ColumnStack<'a> {
    /// The stack after `applied` actions, restored from the nearest checkpoint, keeping the tree
    /// from `tree_from` entries.
    pub fn at(
        layout: LayoutRef<'a>,
        cps: CheckpointsRef<'_>,
        applied: usize,
        band: Option<Band<'a>>,
        tree_from: usize,
    ) -> Self {
        let stack = cps.lazy_stack_at(layout, applied);
        let mut column = ColumnStack {
            stack,
            sizes: layout.elements.size,
            band,
            hidden: 0,
            heights: Vec::new(),
            tree: Vec::new(),
            tree_from,
        };
        column.recount();
        column
    }

    /// Actions applied so far.
    pub fn applied(&self) -> usize {
        self.stack.next_action
    }

    /// Applies actions until `applied` are done (or the trace ends).
    pub fn advance_to(&mut self, applied: usize) {
        while self.stack.next_action < applied {
            match self.stack.step_lazily() {
                None => break,
                Some(LazyChange::Pushed { id }) => {
                    let drawn = self.drawn(id);
                    self.hidden += self.size(id) - drawn;
                    match self.tree.is_empty() {
                        true => self.heights.push(drawn),
                        false => push(&mut self.tree, drawn),
                    }
                }
                Some(LazyChange::Removed { id, pos }) => {
                    let drawn = self.drawn(id);
                    self.hidden -= self.size(id) - drawn;
                    match self.tree.is_empty() {
                        true => self.heights[pos] = 0,
                        false => subtract(&mut self.tree, pos + 1, drawn),
                    }
                    if self.stack.compact_if_sparse() {
                        self.recount();
                    }
                }
                Some(LazyChange::Unchanged) => {}
            }
        }
        if self.tree.is_empty() && self.stack.entries().len() >= self.tree_from {
            self.tree = tree(std::mem::take(&mut self.heights).into_iter());
        }
    }

    /// Fills `column` (one texel a row, bottom first) with the element covering each of
    /// `row_bytes` (ascending): [`AGGREGATED`] under the band, [`EMPTY`] above the stack.
    pub fn fill(&self, row_bytes: &[u64], column: &mut [u32]) {
        let band = self.band.map_or(0, |b| self.hidden.max(band_floor(b, self.stack.next_action)));
        let entries = self.stack.entries();
        let rows = row_bytes.iter().zip(column.iter_mut());
        if !self.tree.is_empty() {
            for (&b, texel) in rows {
                *texel = if b < band {
                    AGGREGATED
                } else {
                    entries.get(find(&self.tree, b - band)).copied().unwrap_or(EMPTY)
                };
            }
            return;
        }
        // Walk the entries and the rows together, both ascending, each entry's top summed on
        // the way: a row shows the first entry ending above it (never one drawn 0 bytes high —
        // dead, banded or empty: the one under it ends as high).
        let heights = &self.heights;
        let (mut i, mut top) = (0, band + heights.first().copied().unwrap_or(0));
        for (&b, texel) in rows {
            if b < band {
                *texel = AGGREGATED;
                continue;
            }
            while i < heights.len() && top <= b {
                i += 1;
                top += heights.get(i).copied().unwrap_or(0);
            }
            *texel = entries.get(i).copied().unwrap_or(EMPTY);
        }
    }

    fn size(&self, id: u32) -> u64 {
        self.sizes.get(id as usize).copied().unwrap_or(0)
    }

    fn kept(&self, id: u32) -> bool {
        kept(self.band, id)
    }

    /// The bytes `id` adds to the drawn stack (0 when the band holds it).
    fn drawn(&self, id: u32) -> u64 {
        if self.kept(id) { self.size(id) } else { 0 }
    }

    /// The band's bytes, and the heights or the tree, from the entries (after a restore or a
    /// compaction).
    fn recount(&mut self) {
        let entries = self.stack.entries();
        self.hidden = entries.iter().filter(|&&id| id != DEAD).map(|&id| self.size(id) - self.drawn(id)).sum();
        let heights = entries.iter().map(|&id| if id == DEAD { 0 } else { self.drawn(id) });
        (self.heights, self.tree) = match entries.len() >= self.tree_from {
            true => (Vec::new(), tree(heights)),
            false => (heights.collect(), Vec::new()),
        };
    }
}

fn lowbit(i: usize) -> usize {
    i & i.wrapping_neg()
}

/// The Fenwick tree of `weights` in O(n).
fn tree(weights: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut tree: Vec<u64> = std::iter::once(0).chain(weights).collect();
    let n = tree.len() - 1;
    for i in 1..=n {
        let j = i + lowbit(i);
        if j <= n {
            tree[j] += tree[i];
        }
    }
    tree
}

/// Appends an entry of `weight`: its node sums the entries its range covers before it.
fn push(tree: &mut Vec<u64>, weight: u64) {
    let i = tree.len();
    let (mut sum, stop, mut j) = (weight, i - lowbit(i), i - 1);
    while j > stop {
        sum += tree[j];
        j -= lowbit(j);
    }
    tree.push(sum);
}

/// Takes `weight` from entry `i` (1-based).
fn subtract(tree: &mut [u64], mut i: usize, weight: u64) {
    while i < tree.len() {
        tree[i] -= weight;
        i += lowbit(i);
    }
}

/// The 0-based entry whose weight covers byte `t` of the drawn stack: the first whose running
/// sum passes `t` (the number of entries whose running sum stays at or below it); the number
/// of entries when the stack ends below `t`.
fn find(tree: &[u64], mut t: u64) -> usize {
    let n = tree.len() - 1;
    let (mut pos, mut bit) = (0, if n == 0 { 0 } else { 1 << n.ilog2() });
    while bit > 0 {
        let next = pos + bit;
        if next <= n && tree[next] <= t {
            pos = next;
            t -= tree[next];
        }
        bit >>= 1;
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_finds_what_a_walk_finds() {
        let weights: Vec<u64> = (0..1000u64).map(|i| (i * 7919) % 13).collect();
        let mut t = tree(weights[..500].iter().copied());
        for &w in &weights[500..] {
            push(&mut t, w);
        }
        assert_eq!(t, tree(weights.iter().copied()), "appending builds the same tree");
        let mut weights = weights;
        for i in (0..1000).step_by(3) {
            subtract(&mut t, i + 1, weights[i]);
            weights[i] = 0;
        }
        let total: u64 = weights.iter().sum();
        for b in 0..total + 3 {
            let mut run = 0;
            let want = weights.iter().position(|&w| {
                run += w;
                run > b
            });
            assert_eq!(find(&t, b), want.unwrap_or(1000), "byte {b}");
        }
    }
}
