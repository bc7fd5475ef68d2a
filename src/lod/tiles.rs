//! The tile pyramid: every level from the coarsest (the whole trace in one tile) down to a
//! chosen finest level, each tile rasterised independently (in parallel) from checkpoints.

use rayon::prelude::*;

use super::raster::{RasterSpec, rasterize, sample_actions};
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
/// `encode` with its level.
pub fn build_pyramid<T: Send>(
    layout: LayoutRef<'_>,
    cps: CheckpointsRef<'_>,
    min_level: u32,
    tile_w: u32,
    tile_h: u32,
    encode: impl Fn(u32, &[u32]) -> T + Sync,
) -> Vec<TileLevel<T>> {
    let actions = layout.actions.len();
    if actions == 0 {
        return Vec::new();
    }
    let top = top_level(actions, tile_w);
    let min_level = min_level.min(top);
    // Level 0 samples every action; each coarser level picks the higher of two neighbours.
    let mut samples: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut level_samples: Vec<u32> = (0..actions as u32).collect();
    for level in 0..=top {
        if level > 0 {
            level_samples = sample_actions(layout.totals, Some(&level_samples), level);
        }
        if level >= min_level {
            samples.push((level, level_samples.clone()));
        }
    }
    let jobs: Vec<(usize, usize)> = samples
        .iter()
        .enumerate()
        .flat_map(|(li, (_, s))| (0..s.len().div_ceil(tile_w as usize)).map(move |t| (li, t)))
        .collect();
    let peak = layout.peak_bytes.max(1);
    let encoded: Vec<T> = jobs
        .par_iter()
        .map(|&(li, t)| {
            let (level, s) = (samples[li].0, &samples[li].1);
            let cols = &s[t * tile_w as usize..((t + 1) * tile_w as usize).min(s.len())];
            let raster = rasterize(
                layout,
                cps,
                RasterSpec { samples: cols, rows: tile_h, byte_lo: 0, byte_hi: peak, keep: None },
            );
            if cols.len() == tile_w as usize {
                encode(level, &raster.texels)
            } else {
                // Pad the last tile to full width so every tile uploads the same way.
                let mut full = vec![super::raster::EMPTY; (tile_w * tile_h) as usize];
                for r in 0..tile_h as usize {
                    let src = &raster.texels[r * cols.len()..(r + 1) * cols.len()];
                    full[r * tile_w as usize..r * tile_w as usize + cols.len()].copy_from_slice(src);
                }
                encode(level, &full)
            }
        })
        .collect();
    let mut encoded = encoded.into_iter();
    samples
        .into_iter()
        .map(|(level, sample)| {
            let n = sample.len().div_ceil(tile_w as usize);
            TileLevel { level, columns: sample.len() as u32, tiles: encoded.by_ref().take(n).collect(), sample }
        })
        .collect()
}
