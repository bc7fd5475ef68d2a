//! Axis ticks (bytes, actions, µs/ms/s), GPU capacities, and label placement without overlaps.

use crate::analysis::units;

/// Round tick values in `[lo, hi]`: steps of 1, 2 or 5 × 10^k (or powers of 2 for bytes),
/// about `target` of them.
pub fn ticks(lo: f64, hi: f64, target: usize, binary: bool) -> Vec<f64> {
    // NaN-safe: no ticks unless `hi` is strictly above `lo`.
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || target == 0 {
        return Vec::new();
    }
    let raw = (hi - lo) / target as f64;
    let step = if binary {
        let p = 2f64.powf(raw.log2().ceil());
        // Prefer 1/2/4/8 × 2^10k so labels read 256 MiB, 512 MiB, 1 GiB.
        p.max(1.0)
    } else {
        let mag = 10f64.powf(raw.log10().floor());
        let n = raw / mag;
        mag * if n <= 1.0 {
            1.0
        } else if n <= 2.0 {
            2.0
        } else if n <= 5.0 {
            5.0
        } else {
            10.0
        }
    };
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi && out.len() < 1000 {
        out.push(v);
        v += step;
    }
    out
}

pub fn bytes_label(b: f64) -> String {
    units::bytes(b.max(0.0) as u64)
}

pub fn action_label(a: f64) -> String {
    units::thousands(a.max(0.0) as u64)
}

/// Time since the trace start.
pub fn time_label(us_since_start: f64) -> String {
    units::duration_us(us_since_start as i64)
}

/// Named GPU memory capacities for `--gpu` (nominal sizes in GiB).
pub fn gpu_capacity(name: &str) -> Option<(&'static str, u64)> {
    const GIB: u64 = 1 << 30;
    Some(match name.to_ascii_lowercase().as_str() {
        "h100" => ("H100 80 GB", 80 * GIB),
        "a100" | "a100-80" => ("A100 80 GB", 80 * GIB),
        "a100-40" => ("A100 40 GB", 40 * GIB),
        "h200" => ("H200 141 GB", 141 * GIB),
        "a10g" => ("A10G 24 GB", 24 * GIB),
        "l40s" => ("L40S 48 GB", 48 * GIB),
        "v100" | "v100-32" => ("V100 32 GB", 32 * GIB),
        "v100-16" => ("V100 16 GB", 16 * GIB),
        "4090" | "rtx4090" => ("RTX 4090 24 GB", 24 * GIB),
        _ => return None,
    })
}

pub const GPU_NAMES: &str = "h100, a100 (a100-40, a100-80), h200, a10g, l40s, v100 (v100-16, v100-32), 4090";

/// Greedy placement of labels along one axis: `(x, width, priority)`, higher priority first;
/// returns which are shown so that none overlap (with `gap` between them).
pub fn place_labels(items: &[(f32, f32, u32)], gap: f32) -> Vec<bool> {
    let places: Vec<(f32, u32)> = items.iter().map(|&(x, _, p)| (x, p)).collect();
    place_labels_lazily(&places, gap, |i| items[i].1)
}

/// [`place_labels`] for `(x, priority)` items whose widths cost something to measure (text
/// layout): a label starting inside one already placed is refused without measuring it, so
/// thousands of annotation spans cost a few layouts. O(n log n).
pub fn place_labels_lazily(items: &[(f32, u32)], gap: f32, mut width: impl FnMut(usize) -> f32) -> Vec<bool> {
    #[derive(PartialEq, PartialOrd)]
    struct X(f32);
    impl Eq for X {}
    #[allow(clippy::derive_ord_xor_partial_ord)]
    impl Ord for X {
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            self.0.total_cmp(&other.0)
        }
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(items[i].1), i));
    // Placed labels by start: disjoint, so only the last one starting before an end can reach it.
    let mut taken: std::collections::BTreeMap<X, f32> = std::collections::BTreeMap::new();
    let reaches = |taken: &std::collections::BTreeMap<X, f32>, a: f32, b: f32| {
        taken.range(..X(b + gap)).next_back().is_some_and(|(_, &tb)| tb + gap > a)
    };
    let mut shown = vec![false; items.len()];
    for i in order {
        let a = items[i].0;
        if reaches(&taken, a, a) {
            continue;
        }
        let b = a + width(i);
        if !reaches(&taken, a, b) {
            taken.insert(X(a), b);
            shown[i] = true;
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 10.0, 5, false), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let b = ticks(0.0, 1024.0 * 1024.0, 4, true);
        assert_eq!(b[1], 262_144.0);
        assert!(ticks(5.0, 5.0, 4, false).is_empty());
    }

    #[test]
    fn labels_never_overlap() {
        let items = [(0.0, 50.0, 1), (30.0, 50.0, 5), (100.0, 20.0, 0), (110.0, 20.0, 2)];
        assert_eq!(place_labels(&items, 4.0), vec![false, true, false, true]);
        // The same as checking every placed label, on many crowded ones.
        let many: Vec<(f32, f32, u32)> =
            (0..500u32).map(|i| ((i * 37 % 997) as f32, 5.0 + (i * 13 % 60) as f32, i * 7 % 11)).collect();
        let mut order: Vec<usize> = (0..many.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(many[i].2), i));
        let mut taken: Vec<(f32, f32)> = Vec::new();
        let mut want = vec![false; many.len()];
        for i in order {
            let (a, b) = (many[i].0, many[i].0 + many[i].1);
            if taken.iter().all(|&(ta, tb)| b + 6.0 <= ta || a >= tb + 6.0) {
                taken.push((a, b));
                want[i] = true;
            }
        }
        assert_eq!(place_labels(&many, 6.0), want);
    }

    #[test]
    fn capacities() {
        assert_eq!(gpu_capacity("H200").unwrap().1, 141 << 30);
        assert!(gpu_capacity("tpu").is_none());
    }
}
