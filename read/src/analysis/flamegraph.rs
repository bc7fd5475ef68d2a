//! `memviz export flamegraph`: the bytes live at one instant as folded stacks
//! (`frame;frame;frame bytes`, outermost frame first) — the format Brendan Gregg's
//! `flamegraph.pl`, inferno, speedscope and Perfetto read, and what `torch.cuda._memory_viz`
//! writes (the command line draws them as an SVG with the inferno crate).
//!
//! A line per allocation site: the frames MemoryViz shows (`frames::is_shown`), outermost
//! first, repeats included, each as `name (file:line)`; a site without a recorded stack is one frame,
//! `(no stack recorded)`. With several devices each line starts with a `device N` frame. A `;`
//! inside a frame (C++ templates) would split it, so it is written as `:`.

use std::collections::BTreeMap;
use std::io::Write;

use super::frames::{self, FrameSource};
use crate::derive::timeline::TimelineRef;
use crate::model::NONE;

/// Folded stacks of what is live right after action `k` (−1: before the first), with `root`
/// as the outermost frame when given; sorted by stack text.
pub fn folded<F: FrameSource>(t: &TimelineRef<'_>, src: &F, k: i64, root: Option<&str>) -> Vec<(String, u64)> {
    let live = t.checkpoints.stack_after(t.layout, k);
    let mut by_site: BTreeMap<u32, u64> = BTreeMap::new();
    for id in live.elements() {
        *by_site.entry(t.site(id)).or_default() += t.layout.elements.size[id.index()];
    }
    let mut by_text: BTreeMap<String, u64> = BTreeMap::new();
    for (site, bytes) in by_site {
        let mut path: Vec<String> = root.map(str::to_owned).into_iter().collect();
        // Every shown frame, repeats included (a flame graph draws recursion as it is).
        let stack = if site == NONE { &[][..] } else { src.stack(site) };
        let shown: Vec<String> = stack
            .iter()
            .rev()
            .filter(|&&f| frames::is_shown(src, f))
            .map(|&f| frames::describe(src, f, true).replace(';', ":"))
            .collect();
        if shown.is_empty() {
            path.push(super::groups::NO_STACK.to_owned());
        }
        path.extend(shown);
        *by_text.entry(path.join(";")).or_default() += bytes;
    }
    by_text.into_iter().filter(|&(_, b)| b > 0).collect()
}

/// The folded lines as text, one `stack bytes` per line.
pub fn write_folded(lines: &[(String, u64)], w: &mut dyn Write) -> std::io::Result<()> {
    for (stack, bytes) in lines {
        writeln!(w, "{stack} {bytes}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_lines_add_up_to_the_live_total_outermost_first() {
        let s = crate::analysis::live::tests::sample();
        let t = s.timeline();
        let lines = folded(&t, &s.snap, 2, Some("device 0"));
        let total: u64 = lines.iter().map(|l| l.1).sum();
        assert_eq!(total, t.layout.total_after(2));
        assert!(lines.iter().all(|(stack, _)| stack.starts_with("device 0;")), "{lines:?}");
        let linear = lines.iter().find(|l| l.0.contains("linear")).unwrap();
        assert!(linear.0.ends_with("linear (functional.py:10)"), "innermost last: {}", linear.0);
    }
}
