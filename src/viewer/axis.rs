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
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(items[i].2), i));
    let mut taken: Vec<(f32, f32)> = Vec::new();
    let mut shown = vec![false; items.len()];
    for i in order {
        let (x, w, _) = items[i];
        let (a, b) = (x, x + w);
        if taken.iter().all(|&(ta, tb)| b + gap <= ta || a >= tb + gap) {
            taken.push((a, b));
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
    }

    #[test]
    fn capacities() {
        assert_eq!(gpu_capacity("H200").unwrap().1, 141 << 30);
        assert!(gpu_capacity("tpu").is_none());
    }
}
