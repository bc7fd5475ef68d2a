//! Min/max of the totals over buckets of actions, coarsening by 4 per level: the minimap draws
//! any zoom of total memory from the level whose buckets are just finer than a pixel.

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

/// Levels from [`FINEST_BUCKET`] actions per bucket up to a single bucket.
pub fn build(totals: &[u64]) -> Vec<MinMax> {
    if totals.is_empty() {
        return Vec::new();
    }
    let chunk = FINEST_BUCKET as usize;
    let mut level = MinMax {
        actions_per_bucket: FINEST_BUCKET,
        min: totals.chunks(chunk).map(|c| *c.iter().min().expect("non-empty")).collect(),
        max: totals.chunks(chunk).map(|c| *c.iter().max().expect("non-empty")).collect(),
    };
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

#[cfg(test)]
mod tests {
    #[test]
    fn levels_cover_all_actions() {
        let totals: Vec<u64> = (0..1000).map(|i| (i * 7919) % 1013).collect();
        let levels = super::build(&totals);
        assert_eq!(levels[0].min.len(), 16);
        assert_eq!(levels.last().unwrap().max, vec![*totals.iter().max().unwrap()]);
        assert_eq!(levels.last().unwrap().min, vec![*totals.iter().min().unwrap()]);
        assert_eq!(levels[1].actions_per_bucket, 256);
    }
}
