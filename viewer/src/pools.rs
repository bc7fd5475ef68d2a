//! The *Allocated Memory (incl. Private Pools)* view's data: which private pool each element
//! lives in, and per action each pool's band — max(its live tensors, its reserved bytes) — as
//! PyTorch's viewer draws private pools since 2026 (a CUDA graph's pool keeps its memory reserved
//! between replays, so its tensors one by one say little; the pool's footprint says it).
//!
//! An element's pool is its event's `pool_id` when recorded, else the pool of the segment that
//! held its address when it was allocated (the archive's segment timeline: a segment's pool from
//! its events, or from the dump for a segment still there at the end, as the allocator's state
//! has it). Worked out once on a named thread.

use std::sync::Arc;

use super::data::{Plane, Session};
use super::worker::Mask;
use crate::model::DeviceIdx;

/// At most this many pools get a band each; the rest share the last one.
const MAX_POOLS: usize = 8;

#[derive(Debug, PartialEq)]
pub struct Pools {
    /// The pools with a band, by first reserved bytes; the last one may stand for several.
    pub ids: Vec<(i64, i64)>,
    /// Per pool (as `ids`), its band after each action: max(live bytes, reserved bytes).
    pub bands: Vec<Vec<u64>>,
    /// Per pool, its live bytes after each action.
    pub active: Vec<Vec<u64>>,
    /// Elements of the default pool are drawn (`keep`); the bands' sum is the band's floor.
    pub mask: Arc<Mask>,
}

impl Pools {
    /// The pool whose band holds byte `byte` after action `k` (bands stack from 0 in `ids`
    /// order), with its live and band bytes.
    pub fn at(&self, k: usize, byte: f64) -> Option<(usize, u64, u64)> {
        let mut bottom = 0u64;
        for (p, band) in self.bands.iter().enumerate() {
            let h = *band.get(k)?;
            if byte < (bottom + h) as f64 {
                return Some((p, self.active[p][k], h));
            }
            bottom += h;
        }
        None
    }
}

/// [`compute`]'s answer as a web worker sends it back ([`decode`]): 0 for none; else 1, the pool
/// count, each pool's id (two `i64`s), each pool's bands then its live bytes (a length and the
/// words), and each element's `keep` (a length and a byte each, 0 or 1). The floor is summed
/// again.
pub fn encode(pools: Option<&Pools>) -> Vec<u8> {
    let mut w = crate::wire::Writer::default();
    let Some(p) = pools else {
        w.u64(0);
        return w.0;
    };
    w.u64(1);
    w.u64(p.ids.len() as u64);
    for (i, &(a, b)) in p.ids.iter().enumerate() {
        w.i64(a);
        w.i64(b);
        w.u64s(&p.bands[i]);
        w.u64s(&p.active[i]);
    }
    w.bytes(&p.mask.keep.iter().map(|&k| u8::from(k)).collect::<Vec<u8>>());
    w.0
}

/// What [`encode`] wrote (`Some(None)`: no pools); `None` for anything else.
pub fn decode(bytes: &[u8]) -> Option<Option<Pools>> {
    let mut r = crate::wire::Reader(bytes);
    match r.u64()? {
        0 => return r.end().map(|()| None),
        1 => {}
        _ => return None,
    }
    let count = r.count(32)?;
    let (mut ids, mut bands, mut active) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..count {
        ids.push((r.i64()?, r.i64()?));
        bands.push(r.u64s()?);
        active.push(r.u64s()?);
    }
    let keep: Vec<bool> = r.bytes()?.iter().map(|&k| (k <= 1).then_some(k == 1)).collect::<Option<_>>()?;
    r.end()?;
    let n = bands.first().map_or(0, Vec::len);
    if bands.iter().chain(&active).any(|b| b.len() != n) {
        return None;
    }
    let floor = (0..n).map(|k| bands.iter().try_fold(0u64, |sum, b| sum.checked_add(b[k]))).collect::<Option<_>>()?;
    Some(Some(Pools { ids, bands, active, mask: Arc::new(Mask { keep, at_least: Some(floor) }) }))
}

/// `None` when the device has no private pool (or the archive predates format 4).
pub fn compute(session: &Session, d: DeviceIdx) -> Option<Pools> {
    let a = &session.device(d).allocator;
    if a.pools.is_empty() {
        return None;
    }
    session.stacked(d, Plane::Segments)?;
    let el = session.elements(d).layout;

    // Pools by their largest reserved, the rest folded into the last band.
    let mut pools: Vec<((i64, i64), u64)> = a
        .pools
        .iter()
        .map(|p| {
            ((p.pool.0.to_native(), p.pool.1.to_native()), p.reserved.iter().map(|r| r.to_native()).max().unwrap_or(0))
        })
        .collect();
    pools.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    let ids: Vec<(i64, i64)> = pools.iter().take(MAX_POOLS).map(|p| p.0).collect();
    let band_of = |pool: (i64, i64)| ids.iter().position(|&p| p == pool).map(|i| i.min(MAX_POOLS - 1));

    // Each element's pool, by the session's one rule.
    let of_element: Vec<Option<usize>> = session.element_pools(d).into_iter().map(|p| p.and_then(band_of)).collect();

    // Live bytes per pool after each action, and the bands.
    let n = el.actions.len();
    let bands_n = ids.len();
    let mut live = vec![0u64; bands_n];
    for &id in el.initial {
        if let Some(p) = of_element[id as usize] {
            live[p] += el.elements.size[id as usize];
        }
    }
    let reserved_at = |p: &memviz_format::schema::ArchivedPoolSeries, k: usize| -> u64 {
        let actions = memviz_format::view::u32s(&p.actions);
        let j = actions.partition_point(|&a| a as usize <= k);
        j.checked_sub(1).map_or(0, |j| p.reserved[j].to_native())
    };
    let mut active = vec![Vec::with_capacity(n); bands_n];
    let mut bands = vec![Vec::with_capacity(n); bands_n];
    for k in 0..n {
        let id = el.actions[k] as usize;
        if let Some(p) = of_element[id] {
            if el.elements.start[id] as usize == k {
                live[p] += el.elements.size[id];
            } else {
                live[p] = live[p].saturating_sub(el.elements.size[id]);
            }
        }
        let mut reserved = vec![0u64; bands_n];
        for s in a.pools.iter() {
            if let Some(p) = band_of((s.pool.0.to_native(), s.pool.1.to_native())) {
                reserved[p] += reserved_at(s, k);
            }
        }
        for p in 0..bands_n {
            active[p].push(live[p]);
            bands[p].push(live[p].max(reserved[p]));
        }
    }
    let floor: Vec<u64> = (0..n).map(|k| bands.iter().map(|b| b[k]).sum()).collect();
    let keep = of_element.iter().map(Option::is_none).collect();
    Some(Pools { ids, bands, active, mask: Arc::new(Mask { keep, at_least: Some(floor) }) })
}

/// The pools of one device, filled in by a background thread.
impl super::timeline::Open {
    /// The pools view's bands over the raster's grey band: one colour per pool, stacked from 0 in
    /// the order of [`Pools::ids`], column by column of the raster drawn (the same sample action
    /// as its texels, which the raster's worker found); hovering one tells its pool, live and
    /// band bytes.
    pub fn pools_overlay(&mut self, ui: &eframe::egui::Ui) {
        use eframe::egui;
        if !self.doc.pools_view || self.doc.time_axis {
            return;
        }
        let Some(pools) = self.pools().map(Arc::clone) else { return };
        let rect = self.plot.plot_rect;
        if let Some((spec, samples)) = self.drawn_raster_samples() {
            let columns = self.band_rects(&pools, &spec, &samples);
            ui.painter_at(rect).add(super::strip::joined_mesh(&columns, self.plot.pixels_per_point));
        }
        let Some(p) = ui.input(|i| i.pointer.hover_pos()).filter(|p| rect.contains(*p)) else { return };
        let (x, byte) = self.doc.view.data_from_screen(rect, p);
        let Some(k) = self.action_at(x) else { return };
        let Some((i, live, band)) = pools.at(k, byte) else { return };
        let b = crate::analysis::units::bytes;
        let (a, c) = pools.ids[i];
        let more = if i + 1 == MAX_POOLS && pools.ids.len() > MAX_POOLS { " and smaller pools" } else { "" };
        let id = ui.scope_id().with("memviz-pool-tip");
        egui::Tooltip::always_open(ui.ctx().clone(), ui.layer_id(), id, egui::PopupAnchor::Pointer).show(|ui| {
            ui.strong(format!("private pool ({a}, {c}){more}"));
            ui.label(format!("{} live in tensors, {} held (max of live and reserved)", b(live), b(band)));
        });
    }

    /// Each pool's band over the columns of the raster `spec` (their sample actions `samples`),
    /// where the view shows them: band by band, so side by side columns of a band at the same
    /// rows join into one quad (`strip::joined_mesh`).
    fn band_rects(
        &self,
        pools: &Pools,
        spec: &super::worker::ViewSpec,
        samples: &[Option<u32>],
    ) -> Vec<(eframe::egui::Rect, eframe::egui::Color32)> {
        use eframe::egui::{Rect, pos2};
        let rect = self.plot.plot_rect;
        let w = (spec.x1 - spec.x0) / samples.len().max(1) as f64;
        let mut bottoms: Vec<u64> = vec![0; samples.len()];
        let mut out = Vec::with_capacity(samples.len() * pools.bands.len());
        for (p, band) in pools.bands.iter().enumerate() {
            let colour = pool_colour(p);
            for (c, sample) in samples.iter().enumerate() {
                let Some(h) = sample.and_then(|k| band.get(k as usize).copied()) else { continue };
                let bottom = bottoms[c];
                let (y0, y1) = (
                    self.doc.view.screen_from_bytes(rect, bottom as f64),
                    self.doc.view.screen_from_bytes(rect, (bottom + h) as f64),
                );
                let (x0, x1) = (
                    self.doc.view.screen_from_action(rect, spec.x0 + w * c as f64),
                    self.doc.view.screen_from_action(rect, spec.x0 + w * (c + 1) as f64),
                );
                out.push((Rect::from_min_max(pos2(x0, y1), pos2(x1, y0)), colour));
                bottoms[c] = bottom + h;
            }
        }
        out
    }
}

/// A pool's band colour: distinct from the palette's pastel sites.
pub fn pool_colour(p: usize) -> eframe::egui::Color32 {
    const COLOURS: [(u8, u8, u8); MAX_POOLS] = [
        (70, 130, 255),
        (255, 170, 40),
        (120, 220, 120),
        (230, 90, 200),
        (60, 200, 220),
        (240, 240, 90),
        (170, 120, 255),
        (160, 160, 170),
    ];
    let (r, g, b) = COLOURS[p % MAX_POOLS];
    eframe::egui::Color32::from_rgb(r, g, b)
}
