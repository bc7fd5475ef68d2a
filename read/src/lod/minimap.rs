//! Min/max of the totals over buckets of actions, coarsening by 4 per level: the minimap draws
//! any zoom of total memory from the level whose buckets are just finer than a pixel.

use std::collections::VecDeque;

/// One level: bucket `i` covers actions `[i * per_bucket, (i + 1) * per_bucket)`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MinMax {
    pub actions_per_bucket: u64,
    pub min: Vec<u64>,
    pub max: Vec<u64>,
}

/// Actions per bucket of the finest stored level (finer views read the totals directly).
pub const FINEST_BUCKET: u64 = 64;
const FACTOR: usize = 4;

/// The lowest of `totals[a..b]`, from min levels (`(actions per bucket, mins)`, finest first)
/// for the whole buckets inside and the totals themselves at the edges: O(√(b − a)), so a
/// column of a 10 GB trace's overview never reads its millions of totals.
pub fn range_min(totals: &[u64], levels: &[(u64, &[u64])], a: usize, b: usize) -> Option<u64> {
    extreme(totals, levels, a, b, false, |v| v.min())
}

/// The highest of `totals[a..b]`, from max levels, like [`range_min`].
pub fn range_max(totals: &[u64], levels: &[(u64, &[u64])], a: usize, b: usize) -> Option<u64> {
    extreme(totals, levels, a, b, false, |v| v.max())
}

/// Ranges this long or longer are widened by [`range_min_outward`] and [`range_max_outward`]:
/// those that span [`OUTWARD_BUCKETS`] of the finest level's buckets. Shorter ones read the
/// totals, at most this many a column: what a view reads stays bounded at any trace length.
pub const OUTWARD_SPAN: usize = (FINEST_BUCKET * OUTWARD_BUCKETS) as usize;

/// Buckets an outward range spans at least: it is widened by less than `1 / OUTWARD_BUCKETS` of
/// itself at each end (an overlay's column is a pixel or two: well under a pixel).
pub const OUTWARD_BUCKETS: u64 = 16;

/// [`range_min`] for an overlay's column: a range of at least [`OUTWARD_SPAN`] actions is widened
/// to the whole buckets it touches, of the coarsest level whose buckets are at most
/// 1/[`OUTWARD_BUCKETS`] of it, so only levels are read, and only 16–64 values a column whatever
/// the trace's length. A column's edges read from the totals are scattered over the whole column
/// of totals (hundreds of MB at 10 GB): cold, the first frame waited on the disk for them; and
/// √span buckets a column (the exact path's level) read the whole finest level, for the floor
/// and the reserved overlay (measured: docs/design/10).
pub fn range_min_outward(totals: &[u64], levels: &[(u64, &[u64])], a: usize, b: usize) -> Option<u64> {
    extreme(totals, levels, a, b, true, |v| v.min())
}

/// [`range_max`] widened like [`range_min_outward`].
pub fn range_max_outward(totals: &[u64], levels: &[(u64, &[u64])], a: usize, b: usize) -> Option<u64> {
    extreme(totals, levels, a, b, true, |v| v.max())
}

fn extreme(
    totals: &[u64],
    levels: &[(u64, &[u64])],
    a: usize,
    b: usize,
    outward: bool,
    pick: fn(&mut dyn Iterator<Item = u64>) -> Option<u64>,
) -> Option<u64> {
    let b = b.min(totals.len());
    if a >= b {
        return None;
    }
    if outward
        && b - a >= OUTWARD_SPAN
        && let Some(&(apb, buckets)) = levels.iter().rfind(|(apb, _)| apb * OUTWARD_BUCKETS <= (b - a) as u64)
    {
        let apb = apb as usize;
        let whole = buckets.get(a / apb..b.div_ceil(apb).min(buckets.len())).filter(|w| !w.is_empty());
        if let Some(whole) = whole {
            return pick(&mut whole.iter().copied());
        }
    }
    let span = (b - a) as f64;
    // The level whose buckets cost about as much as the edges they leave: ~√span actions each.
    let level = levels.iter().rfind(|(apb, _)| (*apb as f64) * (*apb as f64) <= span);
    let Some(&(apb, buckets)) = level else { return pick(&mut totals[a..b].iter().copied()) };
    let apb = apb as usize;
    let (first, last) = (a.div_ceil(apb), b / apb);
    if first >= last {
        return pick(&mut totals[a..b].iter().copied());
    }
    let inner = pick(&mut buckets.get(first..last.min(buckets.len())).unwrap_or(&[]).iter().copied());
    let edges = pick(&mut totals[a..first * apb].iter().chain(&totals[(last * apb).min(b)..b]).copied());
    pick(&mut inner.into_iter().chain(edges))
}

/// Levels from [`FINEST_BUCKET`] actions per bucket up to a single bucket.
pub fn build(totals: &[u64]) -> Vec<MinMax> {
    let mut acc = Accumulator::new(totals.len());
    for (k, &v) in totals.iter().enumerate() {
        crate::pace::at(k);
        acc.add(k, v);
    }
    acc.finish()
}

/// The levels of a series whose values arrive one action at a time, in any order (the
/// allocator's series are made last action first): only the finest level is held meanwhile, and
/// only its buckets from the lowest to the highest given a value so far — one part of a pass cut
/// in sixteen holds a sixteenth of it (a whole-series level in each part was most of the index's
/// memory at sixteen threads).
#[derive(Debug, Clone)]
pub struct Accumulator {
    /// Buckets of the whole series.
    buckets: usize,
    /// Buckets `lo..lo + window.len()`, as (min, max).
    lo: usize,
    window: VecDeque<(u64, u64)>,
}

/// A bucket given no value yet.
const UNSET: (u64, u64) = (u64::MAX, 0);

impl Accumulator {
    /// For a series of `actions` values.
    pub fn new(actions: usize) -> Accumulator {
        Accumulator { buckets: actions.div_ceil(FINEST_BUCKET as usize), lo: 0, window: VecDeque::new() }
    }

    /// Bucket `i`, the window grown to it.
    fn bucket(&mut self, i: usize) -> &mut (u64, u64) {
        assert!(i < self.buckets, "bucket {i} of a series of {} buckets", self.buckets);
        if self.window.is_empty() {
            self.lo = i;
        }
        while i < self.lo {
            self.window.push_front(UNSET);
            self.lo -= 1;
        }
        while i >= self.lo + self.window.len() {
            self.window.push_back(UNSET);
        }
        &mut self.window[i - self.lo]
    }

    /// The value after action `k`.
    pub fn add(&mut self, k: usize, v: u64) {
        let b = self.bucket(k / FINEST_BUCKET as usize);
        b.0 = b.0.min(v);
        b.1 = b.1.max(v);
    }

    /// Takes in the values `other` was given (for the same series).
    pub fn merge(&mut self, other: &Accumulator) {
        for (j, &(min, max)) in other.window.iter().enumerate() {
            let b = self.bucket(other.lo + j);
            b.0 = b.0.min(min);
            b.1 = b.1.max(max);
        }
    }

    pub fn finish(self) -> Vec<MinMax> {
        if self.buckets == 0 {
            return Vec::new();
        }
        let (mut min, mut max) = (vec![UNSET.0; self.buckets], vec![UNSET.1; self.buckets]);
        for (j, (lo, hi)) in self.window.into_iter().enumerate() {
            (min[self.lo + j], max[self.lo + j]) = (lo, hi);
        }
        let mut level = MinMax { actions_per_bucket: FINEST_BUCKET, min, max };
        let mut levels = Vec::new();
        loop {
            let done = level.min.len() == 1;
            let next = MinMax {
                actions_per_bucket: level.actions_per_bucket * FACTOR as u64,
                min: level.min.chunks(FACTOR).map(|c| *c.iter().min().expect("non-empty")).collect(),
                max: level.max.chunks(FACTOR).map(|c| *c.iter().max().expect("non-empty")).collect(),
            };
            levels.push(level);
            if done {
                return levels;
            }
            level = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{range_max, range_min};

    #[test]
    fn range_extremes_are_those_of_the_totals() {
        let totals: Vec<u64> = (0..1000u64).map(|k| 500 + (k * 7919) % 301).collect();
        let mins: Vec<u64> = totals.chunks(64).map(|c| *c.iter().min().unwrap()).collect();
        let maxs: Vec<u64> = totals.chunks(64).map(|c| *c.iter().max().unwrap()).collect();
        for (a, b) in [(0, 1000), (3, 700), (64, 128), (100, 101), (990, 1000), (65, 4000), (10, 10)] {
            let t = &totals[a.min(1000)..b.min(1000)];
            assert_eq!(range_min(&totals, &[(64, &mins)], a, b), t.iter().copied().min(), "{a}..{b}");
            assert_eq!(range_max(&totals, &[(64, &maxs)], a, b), t.iter().copied().max(), "{a}..{b}");
        }
    }

    /// Wide ranges read only levels: the extreme of the whole buckets they touch, which holds the
    /// range's own and is within a bucket of it at each end; short ones stay exact.
    #[test]
    fn outward_extremes_read_only_levels_for_wide_ranges() {
        let totals: Vec<u64> = (0..100_000u64).map(|k| 1000 + (k * 7919) % 3001).collect();
        let levels: Vec<super::MinMax> = super::build(&totals);
        let mins: Vec<(u64, &[u64])> = levels.iter().map(|m| (m.actions_per_bucket, m.min.as_slice())).collect();
        let maxs: Vec<(u64, &[u64])> = levels.iter().map(|m| (m.actions_per_bucket, m.max.as_slice())).collect();
        for (a, b) in [(0, 100_000), (3, 70_001), (4_095, 9_000), (17, 4_000), (99_000, 99_500)] {
            let (lo, hi) =
                (super::range_min_outward(&totals, &mins, a, b), super::range_max_outward(&totals, &maxs, a, b));
            let t = &totals[a..b];
            if b - a < super::OUTWARD_SPAN {
                assert_eq!((lo, hi), (t.iter().copied().min(), t.iter().copied().max()), "{a}..{b}");
                continue;
            }
            let (lo, hi) = (lo.unwrap(), hi.unwrap());
            assert!(lo <= *t.iter().min().unwrap() && hi >= *t.iter().max().unwrap(), "{a}..{b}");
            let slack = (b - a) / super::OUTWARD_BUCKETS as usize;
            let wide = &totals[a.saturating_sub(slack)..(b + slack).min(totals.len())];
            assert!(lo >= *wide.iter().min().unwrap() && hi <= *wide.iter().max().unwrap(), "{a}..{b}");
        }
        // Nothing of the totals is read: they could as well be empty past the range's length.
        let zeros = vec![0u64; totals.len()];
        assert_eq!(super::range_max_outward(&zeros, &maxs, 0, 100_000), totals.iter().copied().max());
    }

    #[test]
    fn levels_cover_all_actions() {
        let totals: Vec<u64> = (0..1000).map(|i| (i * 7919) % 1013).collect();
        let levels = super::build(&totals);
        assert_eq!(levels[0].min.len(), 16);
        assert_eq!(levels.last().unwrap().max, vec![*totals.iter().max().unwrap()]);
        assert_eq!(levels.last().unwrap().min, vec![*totals.iter().min().unwrap()]);
        assert_eq!(levels[1].actions_per_bucket, 256);
        assert_eq!(levels[0].max[0], *totals[..64].iter().max().unwrap());
        assert_eq!(levels[0].min[15], *totals[960..].iter().min().unwrap());
    }

    #[test]
    fn values_in_any_order_give_the_same_levels() {
        let totals: Vec<u64> = (0..300).map(|i| (i * 31) % 97).collect();
        let mut acc = super::Accumulator::new(totals.len());
        for k in (0..totals.len()).rev() {
            acc.add(k, totals[k]);
        }
        assert_eq!(acc.finish(), super::build(&totals));
        assert!(super::build(&[]).is_empty());
    }

    /// A pass cut in parts, each given its actions last first and holding only its own buckets,
    /// merged latest part first: the levels of the whole series.
    #[test]
    fn parts_hold_their_own_buckets_and_merge_into_the_whole() {
        let totals: Vec<u64> = (0..5000).map(|i| (i * 7919) % 1013).collect();
        let cuts = [5000, 3210, 1999, 640, 63, 0];
        let mut parts = cuts.windows(2).map(|w| {
            let mut acc = super::Accumulator::new(totals.len());
            for k in (w[1]..w[0]).rev() {
                acc.add(k, totals[k]);
            }
            let held = w[0].div_ceil(64) - w[1] / 64;
            assert_eq!(acc.window.len(), held, "part {}..{}", w[1], w[0]);
            acc
        });
        let mut whole = parts.next().unwrap();
        for p in parts {
            whole.merge(&p);
        }
        assert_eq!(whole.finish(), super::build(&totals));
    }
}
