//! Marks along the x axis — the OOM markers, the search's ticks — drawn from positions sorted
//! once, off the UI thread: a frame binary-searches the visible range and draws at most one mark
//! per gap (a pixel, a point), so its cost follows the screen, not the number of marks.

/// Indices into `xs` (ascending) of the marks drawn in `[lo, hi]`: the first one there, then
/// each first one at least `gap` after the one drawn before. Each is found by a binary search, so
/// a frame costs O(marks drawn · log marks).
pub fn thinned(xs: &[f64], lo: f64, hi: f64, gap: f64) -> Vec<usize> {
    let end = xs.partition_point(|&x| x <= hi);
    let mut i = xs.partition_point(|&x| x < lo);
    let mut out = Vec::new();
    while i < end {
        out.push(i);
        let next = xs[i] + gap;
        i = (i + 1).max(xs.partition_point(|&x| x < next));
    }
    out
}

/// The last index into `xs` (ascending) whose x lies in `[lo, hi]`: the mark a pointer over that
/// range picks (the one drawn last, on top).
pub fn last_within(xs: &[f64], lo: f64, hi: f64) -> Option<usize> {
    let i = xs.partition_point(|&x| x <= hi).checked_sub(1)?;
    (xs[i] >= lo).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a walk over every mark drew: each one at least `gap` after the last drawn, in range.
    fn walked(xs: &[f64], lo: f64, hi: f64, gap: f64) -> Vec<usize> {
        let mut last = f64::NEG_INFINITY;
        let mut out = Vec::new();
        for (i, &x) in xs.iter().enumerate() {
            if (lo..=hi).contains(&x) && x >= last + gap {
                out.push(i);
                last = x;
            }
        }
        out
    }

    #[test]
    fn the_visible_range_thinned_is_what_a_walk_over_every_mark_draws() {
        let xs: Vec<f64> = (0..5000u64).map(|k| ((k * k * 7919) % 100_003) as f64 / 10.0).collect();
        let mut xs = xs;
        xs.sort_by(f64::total_cmp);
        for (lo, hi, gap) in [(0.0, 1e9, 1.0), (100.0, 2000.0, 0.25), (5000.5, 5001.0, 3.0), (-5.0, -1.0, 1.0)] {
            assert_eq!(thinned(&xs, lo, hi, gap), walked(&xs, lo, hi, gap), "{lo}..{hi} every {gap}");
        }
        // Equal positions: the first is drawn, the rest share its pixel.
        assert_eq!(thinned(&[1.0, 1.0, 1.0, 2.5], 0.0, 10.0, 1.0), [0, 3]);
        assert_eq!(thinned(&[], 0.0, 10.0, 1.0), Vec::<usize>::new());
    }

    #[test]
    fn the_pointer_picks_the_last_mark_in_its_range() {
        let xs = [1.0, 3.0, 3.0, 8.0];
        assert_eq!(last_within(&xs, 2.0, 4.0), Some(2));
        assert_eq!(last_within(&xs, 4.0, 7.0), None);
        assert_eq!(last_within(&xs, 0.0, 0.5), None);
        assert_eq!(last_within(&xs, 8.0, 9.0), Some(3));
    }
}
