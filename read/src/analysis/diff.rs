//! `memviz diff A B`: two snapshots compared by allocation site — peaks, the bytes each site
//! holds at each one's peak, and the sites that appear or vanish.
//!
//! Stack ids are per file, so a site is identified across files by text: the shown frames from
//! the innermost one up to the site's best frame (`frames::top_frame`; only the Python ones when
//! that frame is Python), each as `name`, `file`, `line`, hashed (XXH64). C++ frames are left
//! out under a Python frame because recording them is an option (`stacks="all"`) and their text
//! varies with the build. The callers above the best frame are left out on purpose: they are the
//! driver around the code that allocates, and they differ between runs of the same code
//! (gpt2_small and expandable run one training loop from two lines of one script: with the whole
//! stack they share 1 site of 33, without the callers all of them). The table shows the site's
//! best frame › innermost Python frame and the first 8 hex digits of the key, which tell apart sites
//! that read alike.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use memviz_format::hash::Xxh64;
use serde::Serialize;

use super::frames::{self, FrameSource};
use super::groups::{SiteNames, clip};
use super::units;
use crate::derive::timeline::TimelineRef;
use crate::layout::Origin;

/// One input of a diff.
pub struct Side<'a, 'f, F: FrameSource> {
    /// How the input is named in the report (its path).
    pub name: String,
    pub timeline: TimelineRef<'a>,
    pub frames: &'f F,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct SideSummary {
    pub name: String,
    pub device: crate::model::DeviceId,
    pub peak_bytes: u64,
    /// −1: the initial state.
    pub peak_action: i64,
    pub live_at_peak: u64,
    /// Distinct sites over the whole trace.
    pub sites: usize,
}

/// A site's bytes and allocation count live at A's peak and at B's.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct SiteDelta {
    /// The site key (see the module docs), 16 hex digits: the same in both files.
    pub site: String,
    /// Best frame › innermost frame.
    pub frame: String,
    pub a_bytes: u64,
    pub b_bytes: u64,
    pub delta_bytes: i64,
    pub a_count: u64,
    pub b_count: u64,
    /// A stack of the site in A and in B (ids of each file; not written).
    #[serde(skip)]
    pub stacks: (Option<u32>, Option<u32>),
    /// With `--stacks`: the site's whole (filtered) stack, innermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
}

/// A site allocating in only one of the two traces.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct OnlyIn {
    pub site: String,
    pub frame: String,
    /// Allocations from it over the whole trace, and their summed size.
    pub allocations: u64,
    pub allocated_bytes: u64,
    /// Live at that trace's peak.
    pub bytes_at_peak: u64,
    /// A stack of the site in the trace it allocates in (not written).
    #[serde(skip)]
    pub stack: Option<u32>,
    /// With `--stacks`: the site's whole (filtered) stack, innermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct DiffReport {
    pub a: SideSummary,
    pub b: SideSummary,
    /// B's peak minus A's, and as a percentage of A's (`null` when A's peak is 0).
    pub peak_delta_bytes: i64,
    pub peak_delta_pct: Option<f64>,
    /// What is live at each peak by category, largest |delta| first (when both were classified).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub categories: Option<Vec<CategoryDelta>>,
    /// Every site live at either peak, largest |delta| first.
    pub sites: Vec<SiteDelta>,
    /// Sites that allocate in B and never in A, and the reverse; largest first.
    pub new_sites: Vec<OnlyIn>,
    pub vanished_sites: Vec<OnlyIn>,
}

/// A category's bytes live at A's peak and at B's.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct CategoryDelta {
    pub category: crate::model::Category,
    pub a_bytes: u64,
    pub b_bytes: u64,
    pub delta_bytes: i64,
}

/// What is live at a side's peak, by category (`None`: not classified).
fn at_peak_by_category<F: FrameSource>(s: &Side<'_, '_, F>) -> Option<Vec<super::categories::CategoryBytes>> {
    let (t, of) = (&s.timeline, s.timeline.categories?);
    let live = t.checkpoints.stack_after(t.layout, t.layout.peak_k());
    Some(super::categories::breakdown(t.layout.elements.size, of, live.elements()))
}

/// What one trace says about one site.
#[derive(Default, Clone, Copy)]
struct SiteStats {
    at_peak: (u64, u64),
    allocations: u64,
    allocated_bytes: u64,
}

struct Summary {
    by_key: BTreeMap<u64, SiteStats>,
    frames: HashMap<u64, String>,
    /// A stack id of each site key.
    stacks: HashMap<u64, u32>,
    side: SideSummary,
}

impl Summary {
    fn stack(&self, key: &u64) -> Option<u32> {
        self.stacks.get(key).copied().filter(|&s| s != crate::model::NONE)
    }
}

/// The site key of a stack: the hash of the text of its shown frames up to the best one —
/// only the Python ones when the best frame is Python, so that a trace recorded with C++ frames
/// (`stacks="all"`) matches one without.
pub fn site_key(frames: &impl FrameSource, stack: u32) -> u64 {
    let mut h = Xxh64::new(0);
    let all = frames.stack(stack);
    let best = frames::top_frame(frames, stack);
    let upto = best.and_then(|b| all.iter().position(|&f| f == b)).map_or(all.len(), |i| i + 1);
    let python = |f: u32| frames.file(f).ends_with(".py");
    let python_only = best.is_some_and(python);
    let counted = |f: u32| Some(f) == best || (frames::is_shown(frames, f) && (!python_only || python(f)));
    for &f in all[..upto].iter().filter(|&&f| counted(f)) {
        h.update(frames.name(f).as_bytes());
        h.update(&[0]);
        h.update(frames.file(f).as_bytes());
        h.update(&[0]);
        h.update(&frames.line(f).to_le_bytes());
    }
    h.finish()
}

fn summarise<F: FrameSource>(s: &Side<'_, '_, F>) -> Summary {
    let t = &s.timeline;
    let l = t.layout;
    // Keys of the sites used, by stack id.
    let mut used: Vec<u32> = t.sites.to_vec();
    used.sort_unstable();
    used.dedup();
    let mut names = SiteNames::new(s.frames);
    let keys: HashMap<u32, u64> = used.iter().map(|&st| (st, site_key(s.frames, st))).collect();
    let (mut frames, mut stacks) = (HashMap::new(), HashMap::new());
    for &st in &used {
        frames.entry(keys[&st]).or_insert_with(|| names.label(st));
        stacks.entry(keys[&st]).or_insert(st);
    }
    let key_of = |st: u32| keys.get(&st).copied().unwrap_or_else(|| site_key(s.frames, st));
    let mut by_key: BTreeMap<u64, SiteStats> = BTreeMap::new();
    for (id, &st) in t.sites.iter().enumerate() {
        if l.elements.origin.get(id) == Some(&(Origin::Alloc as u8)) {
            let e = by_key.entry(key_of(st)).or_default();
            e.allocations += 1;
            e.allocated_bytes += l.elements.size[id];
        }
    }
    let peak_k = l.peak_k();
    let live = t.checkpoints.stack_after(l, peak_k);
    for id in live.elements() {
        let e = by_key.entry(key_of(t.site(id))).or_default();
        e.at_peak.0 += l.elements.size[id.index()];
        e.at_peak.1 += 1;
    }
    let side = SideSummary {
        name: s.name.clone(),
        device: l.device,
        peak_bytes: l.peak_bytes,
        peak_action: peak_k,
        live_at_peak: live.ids.len() as u64,
        sites: keys.values().collect::<std::collections::HashSet<_>>().len(),
    };
    Summary { by_key, frames, stacks, side }
}

fn hex(key: u64) -> String {
    format!("{key:016x}")
}

impl DiffReport {
    /// `--stacks`: each site's whole stack, from A where the site is in A (`a`: A's frames).
    pub fn with_stacks<FA: FrameSource, FB: FrameSource>(&mut self, a: &FA, b: &FB) {
        for s in &mut self.sites {
            s.frames = match s.stacks {
                (Some(x), _) => super::frames::full_stack(a, Some(x)),
                (None, y) => super::frames::full_stack(b, y),
            };
        }
        for s in &mut self.new_sites {
            s.frames = super::frames::full_stack(b, s.stack);
        }
        for s in &mut self.vanished_sites {
            s.frames = super::frames::full_stack(a, s.stack);
        }
    }
}

pub fn diff<FA: FrameSource, FB: FrameSource>(a: &Side<'_, '_, FA>, b: &Side<'_, '_, FB>) -> DiffReport {
    let (sa, sb) = (summarise(a), summarise(b));
    let categories = at_peak_by_category(a).zip(at_peak_by_category(b)).map(|(ca, cb)| {
        let bytes =
            |v: &[super::categories::CategoryBytes], c| v.iter().find(|x| x.category == c).map_or(0, |x| x.bytes);
        let mut out: Vec<CategoryDelta> = crate::model::Category::ALL
            .into_iter()
            .map(|c| (c, bytes(&ca, c), bytes(&cb, c)))
            .filter(|&(_, x, y)| x + y > 0)
            .map(|(category, a_bytes, b_bytes)| CategoryDelta {
                category,
                a_bytes,
                b_bytes,
                delta_bytes: b_bytes as i64 - a_bytes as i64,
            })
            .collect();
        out.sort_by(|x, y| {
            y.delta_bytes.unsigned_abs().cmp(&x.delta_bytes.unsigned_abs()).then(x.category.cmp(&y.category))
        });
        out
    });
    let frame = |k: &u64| sa.frames.get(k).or_else(|| sb.frames.get(k)).cloned().unwrap_or_default();
    let mut sites: Vec<SiteDelta> = sa
        .by_key
        .keys()
        .chain(sb.by_key.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter_map(|k| {
            let (pa, pb) = (sa.by_key.get(k).map(|s| s.at_peak), sb.by_key.get(k).map(|s| s.at_peak));
            let (pa, pb) = (pa.unwrap_or_default(), pb.unwrap_or_default());
            (pa.1 + pb.1 > 0).then(|| SiteDelta {
                site: hex(*k),
                frame: frame(k),
                a_bytes: pa.0,
                b_bytes: pb.0,
                delta_bytes: pb.0 as i64 - pa.0 as i64,
                a_count: pa.1,
                b_count: pb.1,
                stacks: (sa.stack(k), sb.stack(k)),
                frames: Vec::new(),
            })
        })
        .collect();
    sites.sort_by(|x, y| y.delta_bytes.unsigned_abs().cmp(&x.delta_bytes.unsigned_abs()).then(x.site.cmp(&y.site)));
    let only = |from: &Summary, other: &Summary| {
        let mut v: Vec<OnlyIn> = from
            .by_key
            .iter()
            .filter(|(k, s)| s.allocations > 0 && other.by_key.get(k).is_none_or(|o| o.allocations == 0))
            .map(|(k, s)| OnlyIn {
                site: hex(*k),
                frame: frame(k),
                allocations: s.allocations,
                allocated_bytes: s.allocated_bytes,
                bytes_at_peak: s.at_peak.0,
                stack: from.stack(k),
                frames: Vec::new(),
            })
            .collect();
        v.sort_by(|x, y| {
            (y.bytes_at_peak, y.allocated_bytes).cmp(&(x.bytes_at_peak, x.allocated_bytes)).then(x.site.cmp(&y.site))
        });
        v
    };
    let (new_sites, vanished_sites) = (only(&sb, &sa), only(&sa, &sb));
    let (pa, pb) = (sa.side.peak_bytes, sb.side.peak_bytes);
    DiffReport {
        peak_delta_bytes: units::change(pa, pb),
        peak_delta_pct: (pa > 0).then(|| (pb as f64 - pa as f64) * 100.0 / pa as f64),
        a: sa.side,
        b: sb.side,
        categories,
        sites,
        new_sites,
        vanished_sites,
    }
}

/// The aligned text report.
pub fn render_text(out: &mut String, r: &DiffReport, top: usize) {
    let pct = r.peak_delta_pct.map_or("—".into(), |p| format!("{p:+.1}%"));
    let side = |out: &mut String, tag: &str, s: &SideSummary| {
        let at = if s.peak_action < 0 {
            "before the first action".into()
        } else {
            format!("at action {}", units::thousands(s.peak_action as u64))
        };
        let _ = writeln!(
            out,
            "  {tag}  peak {:>10} {at}; {} live, {} sites  {}",
            units::bytes(s.peak_bytes),
            units::thousands(s.live_at_peak),
            units::thousands(s.sites as u64),
            s.name
        );
    };
    let _ = writeln!(out, "device {} vs device {}", r.a.device, r.b.device);
    side(out, "A", &r.a);
    side(out, "B", &r.b);
    let _ = writeln!(out, "  peak delta  {} ({pct})", units::signed_bytes(i128::from(r.peak_delta_bytes)));
    if let Some(cats) = r.categories.as_ref().filter(|c| !c.is_empty()) {
        let _ = writeln!(out, "  live at the peak, by category:");
        let _ = writeln!(out, "    {:>10}  {:>10}  {:>11}  category", "A", "B", "delta");
        for c in cats {
            let _ = writeln!(
                out,
                "    {:>10}  {:>10}  {:>11}  {}",
                units::bytes(c.a_bytes),
                units::bytes(c.b_bytes),
                units::signed_bytes(i128::from(c.delta_bytes)),
                c.category.name()
            );
        }
    }
    let changed: Vec<&SiteDelta> = r.sites.iter().filter(|s| s.delta_bytes != 0).collect();
    if changed.is_empty() {
        let _ = writeln!(out, "  live at the peak: every site holds the same bytes in A and B");
    } else {
        let _ = writeln!(out, "  live at the peak, by site (largest change first):");
        let _ = writeln!(out, "    {:>10}  {:>10}  {:>11}  {:<8}  frame", "A", "B", "delta", "site");
        for s in changed.iter().take(top) {
            let _ = writeln!(
                out,
                "    {:>10}  {:>10}  {:>11}  {:<8}  {}",
                units::bytes(s.a_bytes),
                units::bytes(s.b_bytes),
                units::signed_bytes(i128::from(s.delta_bytes)),
                &s.site[..8],
                clip(&s.frame)
            );
            super::frames::render_stack(out, &s.frames, 53);
        }
        if changed.len() > top {
            let _ = writeln!(out, "    … {} more sites changed", units::thousands((changed.len() - top) as u64));
        }
    }
    for (title, list) in [("new in B", &r.new_sites), ("gone from B", &r.vanished_sites)] {
        if list.is_empty() {
            let _ = writeln!(out, "  {title}: no site");
            continue;
        }
        let _ = writeln!(out, "  {title}: {} site{}", list.len(), if list.len() == 1 { "" } else { "s" });
        let _ = writeln!(out, "    {:>10}  {:>12}  {:>9}  {:<8}  frame", "at peak", "allocated", "allocs", "site");
        for s in list.iter().take(top) {
            let _ = writeln!(
                out,
                "    {:>10}  {:>12}  {:>9}  {:<8}  {}",
                units::bytes(s.bytes_at_peak),
                units::bytes(s.allocated_bytes),
                units::thousands(s.allocations),
                &s.site[..8],
                clip(&s.frame)
            );
            super::frames::render_stack(out, &s.frames, 53);
        }
        if list.len() > top {
            let _ = writeln!(out, "    … {} more", units::thousands((list.len() - top) as u64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::tiny::tiny;

    #[test]
    fn sites_match_by_text_whatever_their_ids_and_callers() {
        let linear = |caller_line| {
            vec![
                ("linear", "/site-packages/torch/nn/functional.py", 10),
                ("train", "t.py", 5),
                ("main", "run.py", caller_line),
            ]
        };
        let (la, lb) = (linear(1), linear(2));
        let embed: &[(&str, &str, i64)] = &[("train", "t.py", 6)];
        let extra: &[(&str, &str, i64)] = &[("cache", "t.py", 7)];
        let a = tiny(&[("alloc", 1, 100, 0), ("alloc", 2, 30, 1)], &[&la, embed], &[]);
        // B: the same two sites (stack ids swapped, called from another line) and a new one.
        let b = tiny(&[("alloc", 2, 50, 0), ("alloc", 1, 100, 1), ("alloc", 3, 8, 2)], &[embed, &lb, extra], &[]);
        let side = |name: &str, t| Side { name: name.into(), timeline: t, frames: &a.snap };
        let (sa, sb) = (side("a", a.timeline()), Side { name: "b".into(), timeline: b.timeline(), frames: &b.snap });
        let r = diff(&sa, &sb);
        assert_eq!((r.a.peak_bytes, r.b.peak_bytes, r.peak_delta_bytes), (130, 158, 28));
        assert!((r.peak_delta_pct.unwrap() - 28.0 * 100.0 / 130.0).abs() < 1e-9);
        let rows: Vec<(&str, u64, u64)> = r.sites.iter().map(|s| (s.frame.as_str(), s.a_bytes, s.b_bytes)).collect();
        assert_eq!(
            rows,
            [
                ("train (t.py:6)", 30, 50),
                ("cache (t.py:7)", 0, 8),
                ("train (t.py:5) › linear (functional.py:10)", 100, 100)
            ]
        );
        assert_eq!(r.new_sites.len(), 1);
        assert_eq!((r.new_sites[0].frame.as_str(), r.new_sites[0].allocations), ("cache (t.py:7)", 1));
        assert!(r.vanished_sites.is_empty());
        assert_eq!(site_key(&a.snap, 0), site_key(&b.snap, 1), "callers above the best frame do not count");
        assert_ne!(site_key(&a.snap, 0), site_key(&a.snap, 1));
    }

    #[test]
    fn native_frames_under_python_do_not_count() {
        let py: &[(&str, &str, i64)] = &[("linear", "/site-packages/torch/nn/functional.py", 10), ("train", "t.py", 5)];
        let all: &[(&str, &str, i64)] = &[
            ("c10::cuda::CUDACachingAllocator::malloc", "CUDACachingAllocator.cpp", 0),
            ("at::native::empty_cuda", "Empty.cpp", 0),
            ("linear", "/site-packages/torch/nn/functional.py", 10),
            ("train", "t.py", 5),
        ];
        let native: &[(&str, &str, i64)] = &[("worker", "??", 0), ("c10::cuda::malloc", "x.cpp", 0)];
        let t = tiny(&[("alloc", 1, 8, 0), ("alloc", 2, 8, 1), ("alloc", 3, 8, 2)], &[py, all, native], &[]);
        assert_eq!(site_key(&t.snap, 0), site_key(&t.snap, 1));
        // Without Python, the native frames are all there is.
        assert_ne!(site_key(&t.snap, 2), site_key(&t.snap, u32::MAX));
    }
}
