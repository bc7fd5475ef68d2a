//! The tile pyramid: every level from the coarsest (the whole trace in one tile) down to a
//! chosen finest level. Only the finest level is rasterised (its tiles in parallel, from
//! checkpoints); a coarser column shows the same sample action as one of the two finer columns
//! under it ([`sample_actions`]) over the same rows, so its texels are that column's, copied.
//! The pyramid is built depth first from the top tile, each tile from the two below it, so only
//! the tiles on the way down are held at a time however long the trace.

use super::raster::{EMPTY, RasterSpec, rasterize, sample_actions};
use crate::layout::{CheckpointsRef, LayoutRef};

/// One level: each column covers `2^level` actions.
#[derive(Debug, Clone, PartialEq)]
pub struct TileLevel<T> {
    pub level: u32,
    pub columns: u32,
    /// Sample action of every column.
    pub sample: Vec<u32>,
    /// Tiles left to right, as produced by the caller's `encode`.
    pub tiles: Vec<T>,
}

/// The coarsest level: the smallest `ℓ` with the whole trace in one tile of `tile_w` columns.
pub fn top_level(actions: usize, tile_w: u32) -> u32 {
    let mut level = 0;
    while actions.div_ceil(1 << level) > tile_w as usize {
        level += 1;
    }
    level
}

/// Builds levels `min_level..=top_level`, finest first. Each tile is `tile_w × tile_h` texels
/// (columns past the end of the trace are empty) covering bytes `[0, peak)`, handed to
/// `encode` with its level. At most about `at_once` finest tiles are rasterised side by side
/// (each restores a column stack of the live set: a trace of millions of live allocations
/// holds tens of megabytes a raster); `usize::MAX`: as many as the rayon pool runs.
pub fn build_pyramid<T: Send>(
    layout: LayoutRef<'_>,
    cps: CheckpointsRef<'_>,
    min_level: u32,
    (tile_w, tile_h): (u32, u32),
    at_once: usize,
    encode: impl Fn(u32, &[u32]) -> T + Sync,
) -> Vec<TileLevel<T>> {
    let actions = layout.actions.len();
    if actions == 0 || tile_w == 0 {
        return Vec::new();
    }
    let top = top_level(actions, tile_w);
    let min_level = min_level.min(top);
    // The finest level's columns each sample their first highest action; each coarser level
    // picks the higher of two neighbours (the left one on a tie: the same first highest). The
    // finer levels are never made: level 0 alone was 4 bytes an action (337 MB on gen10g).
    let mut samples: Vec<Vec<u32>> = vec![sample_actions(layout.totals, None, min_level)];
    for level in min_level + 1..=top {
        let coarser = sample_actions(layout.totals, samples.last().map(Vec::as_slice), level);
        samples.push(coarser);
    }
    let pyramid = Pyramid {
        layout,
        cps,
        top: samples.len() - 1,
        // Side by side down to this many levels under the top tile: 2^depth rasters at once.
        depth: at_once.max(1).ilog2() as usize,
        samples: &samples,
        min_level,
        w: tile_w as usize,
        h: tile_h as usize,
        peak: layout.peak_bytes.max(1),
        encode: &encode,
    };
    let (_, mut made) = pyramid.tile(samples.len() - 1, 0);
    made.sort_unstable_by_key(|&(li, t, _)| (li, t));
    let mut made = made.into_iter().map(|(_, _, tile)| tile);
    samples
        .into_iter()
        .enumerate()
        .map(|(li, sample)| {
            let n = sample.len().div_ceil(tile_w as usize);
            let level = min_level + li as u32;
            TileLevel { level, columns: sample.len() as u32, tiles: made.by_ref().take(n).collect(), sample }
        })
        .collect()
}

/// What every tile of one pyramid is made from.
struct Pyramid<'p, E> {
    layout: LayoutRef<'p>,
    cps: CheckpointsRef<'p>,
    /// The sample actions of levels `min_level..=top`.
    samples: &'p [Vec<u32>],
    /// The top level's index in `samples`, and how many levels under it split side by side.
    top: usize,
    depth: usize,
    min_level: u32,
    w: usize,
    h: usize,
    peak: u64,
    encode: &'p E,
}

/// Tiles encoded: `(level − min_level, tile, encoding)`.
type Made<T> = Vec<(usize, usize, T)>;

impl<T: Send, E: Fn(u32, &[u32]) -> T + Sync> Pyramid<'_, E> {
    /// Tile `t` of the `li`-th level from the finest: its texels (`w × h`, row-major, padded
    /// with [`EMPTY`] past the trace's end), and the encodings of it and of every tile under it.
    fn tile(&self, li: usize, t: usize) -> (Vec<u32>, Made<T>) {
        let (w, h) = (self.w, self.h);
        let s = &self.samples[li];
        let cols = &s[t * w..((t + 1) * w).min(s.len())];
        let (texels, mut made) = if li == 0 {
            let spec = RasterSpec { samples: cols, rows: h as u32, byte_lo: 0, byte_hi: self.peak, keep: None };
            let raster = rasterize(self.layout, self.cps, spec);
            (pad(raster.texels, cols.len(), w, h), Vec::new())
        } else {
            // Columns 2c and 2c + 1 of the finer level lie under column c: tiles 2t and 2t + 1.
            let finer = &self.samples[li - 1];
            let right_exists = (2 * t + 1) * w < finer.len();
            let left = || self.tile(li - 1, 2 * t);
            let right = || right_exists.then(|| self.tile(li - 1, 2 * t + 1));
            let ((left, mut made), right) =
                if self.top - li < self.depth { rayon::join(left, right) } else { (left(), right()) };
            let right = right.map(|(texels, more)| {
                made.extend(more);
                texels
            });
            // Which finer column (of the 2w under this tile) each column shows.
            let from: Vec<usize> = (0..cols.len())
                .map(|c| {
                    let f = 2 * (t * w + c);
                    f - 2 * t * w + usize::from(finer[f] != cols[c])
                })
                .collect();
            let mut texels = vec![EMPTY; w * h];
            for r in 0..h {
                let row = &mut texels[r * w..r * w + cols.len()];
                for (dst, &f) in row.iter_mut().zip(&from) {
                    *dst = match (f < w, &right) {
                        (true, _) => left[r * w + f],
                        (false, Some(right)) => right[r * w + f - w],
                        (false, None) => EMPTY,
                    };
                }
            }
            (texels, made)
        };
        made.push((li, t, (self.encode)(self.min_level + li as u32, &texels)));
        (texels, made)
    }
}

/// `texels` of `cols` columns widened to `w` (the last tile of a level: every tile uploads the
/// same way).
fn pad(texels: Vec<u32>, cols: usize, w: usize, h: usize) -> Vec<u32> {
    if cols == w {
        return texels;
    }
    let mut full = vec![EMPTY; w * h];
    for r in 0..h {
        full[r * w..r * w + cols].copy_from_slice(&texels[r * cols..(r + 1) * cols]);
    }
    full
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tile of every level equals its columns rasterised directly (what the pyramid
    /// stands for), on a real trace with several levels and a partial last tile per level.
    #[test]
    fn every_tile_equals_its_columns_rasterised() {
        let (layout, cps) = super::super::gpt2_small();
        let (w, h) = (16, 24);
        let encode = |level, texels: &[u32]| (level, texels.to_vec());
        let levels = build_pyramid(layout.view(), cps.view(), 2, (w, h), usize::MAX, encode);
        assert!(levels.len() >= 4, "{} levels", levels.len());
        // Rasterised one at a time or two, the same pyramid.
        for at_once in [1, 2] {
            assert!(build_pyramid(layout.view(), cps.view(), 2, (w, h), at_once, encode) == levels, "{at_once}");
        }
        assert_eq!(levels.last().unwrap().tiles.len(), 1, "the top level is one tile");
        let peak = layout.peak_bytes.max(1);
        for l in &levels {
            assert_eq!(l.sample.len(), layout.actions.len().div_ceil(1 << l.level));
            assert_eq!(l.tiles.len(), l.sample.len().div_ceil(w as usize));
            for (t, (level, texels)) in l.tiles.iter().enumerate() {
                assert_eq!(*level, l.level);
                let cols = &l.sample[t * w as usize..((t + 1) * w as usize).min(l.sample.len())];
                let spec = RasterSpec { samples: cols, rows: h, byte_lo: 0, byte_hi: peak, keep: None };
                let want = pad(rasterize(layout.view(), cps.view(), spec).texels, cols.len(), w as usize, h as usize);
                assert!(*texels == want, "level {} tile {t}", l.level);
            }
            assert!(l.tiles.iter().any(|(_, texels)| texels.iter().any(|&id| id != EMPTY)));
        }
    }
}
