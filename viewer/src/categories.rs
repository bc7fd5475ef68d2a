//! "Colour by category": every element's category (`analysis::categories`) and the stacked
//! category overview (bytes per category over the trace, in the minimap's place), worked out
//! once per device on a named thread (`background::Pending`) so the UI never waits for them.
//!
//! The overview keeps, per bucket of actions, each category's bytes at the bucket's highest
//! total — the composition of the bucket's peak, so the stack of areas reaches the timeline's
//! own envelope.

use std::sync::Arc;

use eframe::egui::Color32;

use super::data::{DeviceData, Session};
use crate::analysis::categories::{self, Category};
use crate::model::DeviceIdx;

/// Buckets of the overview at most.
const OVERVIEW_BUCKETS: usize = 4096;

/// A device's categories and overview.
pub struct DeviceCategories {
    /// Per element, the index of its category in [`Category::ALL`] (what the shader reads).
    pub of: Arc<Vec<u32>>,
    pub categories: Vec<Category>,
    /// Actions per bucket, and per bucket each category's bytes (in [`Category::ALL`] order).
    pub per_bucket: usize,
    pub buckets: Vec<[u64; Category::ALL.len()]>,
    /// The categories some element has (bit i: `Category::ALL[i]`), for the legend.
    pub present: u16,
    /// The bucket with the highest total (the last of equal ones): each category's bytes there,
    /// the legend's share of the peak.
    pub at_peak: [u64; Category::ALL.len()],
    /// The highest bucket total (at least 1): the overview's y scale.
    pub peak: u64,
}

impl DeviceCategories {
    pub fn compute(session: &Session, d: DeviceIdx) -> DeviceCategories {
        let data = DeviceData::new(session, d);
        let t = data.timeline();
        let cats = categories::classify(&t, session.root(), &session.element_pools(d), &()).of;
        let index = |c: Category| Category::ALL.iter().position(|&x| x == c).unwrap_or(Category::ALL.len() - 1);
        let of: Vec<u32> = cats.iter().map(|&c| index(c) as u32).collect();
        let l = t.layout;
        let n = l.actions.len();
        let per_bucket = n.div_ceil(OVERVIEW_BUCKETS).max(1);
        let mut live = [0u64; Category::ALL.len()];
        for &id in l.initial {
            live[of[id as usize] as usize] += l.elements.size[id as usize];
        }
        let mut buckets = Vec::with_capacity(n.div_ceil(per_bucket));
        let (mut best, mut best_total) = (live, 0u64);
        for k in 0..n {
            let id = l.actions[k] as usize;
            let c = of[id] as usize;
            if l.elements.start[id] as usize == k {
                live[c] += l.elements.size[id];
            } else {
                live[c] = live[c].saturating_sub(l.elements.size[id]);
            }
            if k % per_bucket == 0 || l.totals[k] > best_total {
                (best, best_total) = (live, l.totals[k]);
            }
            if (k + 1) % per_bucket == 0 || k + 1 == n {
                buckets.push(best);
                best_total = 0;
            }
        }
        let present = present_set(&of);
        let (at_peak, peak) = peak_of(&buckets);
        DeviceCategories { of: Arc::new(of), categories: cats, per_bucket, buckets, present, at_peak, peak }
    }
}

impl DeviceCategories {
    /// The bytes a worker sends back ([`Self::decode`]): the element count and each element's
    /// category index (a byte), the actions per bucket, the bucket count and each bucket's bytes
    /// per category (little-endian `u64`s); the rest is derived again.
    pub fn encode(&self) -> Vec<u8> {
        let n = Category::ALL.len();
        let mut out = Vec::with_capacity(24 + self.of.len() + self.buckets.len() * n * 8);
        out.extend((self.of.len() as u64).to_le_bytes());
        out.extend(self.of.iter().map(|&c| c as u8));
        out.extend((self.per_bucket as u64).to_le_bytes());
        out.extend((self.buckets.len() as u64).to_le_bytes());
        for b in &self.buckets {
            b.iter().for_each(|v| out.extend(v.to_le_bytes()));
        }
        out
    }

    /// What [`Self::encode`] wrote; `None` for bytes it did not write.
    pub fn decode(bytes: &[u8]) -> Option<DeviceCategories> {
        let mut rest = bytes;
        let mut take = |len: usize| {
            let (got, after) = rest.split_at_checked(len)?;
            rest = after;
            Some(got)
        };
        let word = |b: &[u8]| usize::try_from(u64::from_le_bytes(b.try_into().ok()?)).ok();
        let elements = word(take(8)?)?;
        let of: Vec<u32> = take(elements)?.iter().map(|&c| u32::from(c)).collect();
        if of.iter().any(|&c| c as usize >= Category::ALL.len()) {
            return None;
        }
        let (per_bucket, count) = (word(take(8)?)?, word(take(8)?)?);
        let n = Category::ALL.len();
        let values = take(count.checked_mul(n * 8)?)?;
        if !rest.is_empty() {
            return None;
        }
        let buckets: Vec<[u64; Category::ALL.len()]> = values
            .chunks_exact(n * 8)
            .map(|b| std::array::from_fn(|i| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"))))
            .collect();
        // A bucket's bytes are summed (its total): no real bucket's overflow.
        if buckets.iter().any(|b| b.iter().try_fold(0u64, |sum, &v| sum.checked_add(v)).is_none()) {
            return None;
        }
        let categories = of.iter().map(|&c| Category::ALL[c as usize]).collect();
        let present = present_set(&of);
        let (at_peak, peak) = peak_of(&buckets);
        Some(DeviceCategories { of: Arc::new(of), categories, per_bucket, buckets, present, at_peak, peak })
    }
}

/// The categories of `of` (indices into [`Category::ALL`]) as a set: bit i for `Category::ALL[i]`.
fn present_set(of: &[u32]) -> u16 {
    of.iter().fold(0u16, |set, &c| set | 1 << c)
}

/// The bucket with the highest total (the last of equal ones, as `max_by_key` picks) and the
/// highest total, at least 1.
fn peak_of(buckets: &[[u64; Category::ALL.len()]]) -> ([u64; Category::ALL.len()], u64) {
    let total = |b: &[u64; Category::ALL.len()]| b.iter().sum::<u64>();
    let at_peak = buckets.iter().max_by_key(|b| total(b)).copied().unwrap_or_default();
    (at_peak, total(&at_peak).max(1))
}

/// The colour of a category (fixed, so a legend reads the same in every file).
pub fn colour(c: Category) -> Color32 {
    match c {
        Category::Parameter => Color32::from_rgb(86, 156, 214),
        Category::Gradient => Color32::from_rgb(197, 134, 192),
        Category::OptimizerState => Color32::from_rgb(220, 170, 90),
        Category::Activation => Color32::from_rgb(106, 190, 120),
        Category::Temporary => Color32::from_rgb(150, 150, 160),
        Category::Autograd => Color32::from_rgb(230, 120, 110),
        Category::Communication => Color32::from_rgb(80, 200, 200),
        Category::CudaGraph => Color32::from_rgb(240, 220, 100),
        Category::KvCache => Color32::from_rgb(170, 120, 240),
        Category::Input => Color32::from_rgb(240, 150, 200),
        Category::Unknown => Color32::from_rgb(95, 100, 110),
    }
}

/// Hidden categories are drawn in this colour.
pub const HIDDEN: Color32 = Color32::from_rgb(45, 48, 54);

/// The palette the shader indexes by category index: packed RGBA8 (R in the low byte).
pub fn palette(hidden: u16) -> Vec<u32> {
    Category::ALL
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let col = if hidden & (1 << i) != 0 { HIDDEN } else { colour(c) };
            u32::from(col.r()) | u32::from(col.g()) << 8 | u32::from(col.b()) << 16 | 0xff << 24
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_sent_as_bytes_read_back_the_same() {
        let mut buckets = vec![[0u64; Category::ALL.len()]; 3];
        (buckets[0][1], buckets[1][4], buckets[2][10]) = (7, 1 << 40, 3);
        let of = vec![1u32, 4, 10, 4, 0];
        let (at_peak, peak) = peak_of(&buckets);
        let c = DeviceCategories {
            categories: of.iter().map(|&i| Category::ALL[i as usize]).collect(),
            present: present_set(&of),
            of: Arc::new(of),
            per_bucket: 17,
            buckets,
            at_peak,
            peak,
        };
        let bytes = c.encode();
        let back = DeviceCategories::decode(&bytes).expect("decodes");
        assert_eq!((&back.of, &back.categories, back.per_bucket), (&c.of, &c.categories, c.per_bucket));
        assert_eq!((&back.buckets, back.present, back.at_peak, back.peak), (&c.buckets, c.present, c.at_peak, c.peak));
        // Cut short, or a category past the table: refused.
        assert!(DeviceCategories::decode(&bytes[..bytes.len() - 1]).is_none());
        let mut bad = bytes.clone();
        bad[8] = Category::ALL.len() as u8;
        assert!(DeviceCategories::decode(&bad).is_none());
        // A bucket whose bytes sum past u64 (found by the fuzz target `worker_answers`).
        let mut huge = bytes.clone();
        let n = huge.len();
        huge[n - 16..].fill(0xff);
        assert!(DeviceCategories::decode(&huge).is_none());
    }

    #[test]
    fn the_present_set_and_the_peak_are_those_of_the_elements_and_buckets() {
        assert_eq!(present_set(&[3, 0, 3, 10]), 1 | 1 << 3 | 1 << 10);
        assert_eq!(present_set(&[]), 0);
        let mut a = [0u64; Category::ALL.len()];
        let (mut b, mut c) = (a, a);
        (a[0], b[1], b[2], c[4]) = (5, 4, 3, 7);
        // b and c tie at 7: the last one, as the legend always picked.
        assert_eq!(peak_of(&[a, b, c]), (c, 7));
        assert_eq!(peak_of(&[]), ([0; Category::ALL.len()], 1));
    }
}
