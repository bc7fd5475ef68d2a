//! `record_function` annotations paired into spans.
//!
//! START/END markers nest per device and per name: an END closes the most recent open START of
//! the same name on the same device. A START never closed stays open to the end of the trace; an
//! END without START is a point annotation.

use crate::model::{NO_TIME, Snapshot, Stage, StrId};

/// One annotation span (or point, when `start_us == end_us`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub name: StrId,
    pub device: i64,
    pub start_us: i64,
    /// `None` when the span never ended.
    pub end_us: Option<i64>,
    /// Nesting depth among the spans open on its device when it started.
    pub depth: u32,
}

/// Pairs the snapshot's annotations into spans, sorted by start time (stable).
pub fn spans(snap: &Snapshot) -> Vec<Span> {
    spans_filtered(snap, &AnnotationFilter { all: true, pattern: None })
}

/// [`spans`] of the annotations `filter` keeps (depths count kept spans only).
pub fn spans_filtered(snap: &Snapshot, filter: &AnnotationFilter) -> Vec<Span> {
    let mut order: Vec<usize> = (0..snap.annotations.len())
        .filter(|&i| snap.annotations[i].time_us != NO_TIME && filter.keeps(snap.str(snap.annotations[i].name)))
        .collect();
    order.sort_by_key(|&i| snap.annotations[i].time_us);
    let mut out: Vec<Span> = Vec::new();
    // Open spans: (device, index into `out`), innermost last.
    let mut open: Vec<(i64, usize)> = Vec::new();
    for i in order {
        let a = &snap.annotations[i];
        match a.stage {
            Stage::Start => {
                let depth = open.iter().filter(|(d, _)| *d == a.device).count() as u32;
                open.push((a.device, out.len()));
                out.push(Span { name: a.name, device: a.device, start_us: a.time_us, end_us: None, depth });
            }
            Stage::End => {
                let found = open.iter().rposition(|&(d, s)| d == a.device && out[s].name == a.name);
                match found {
                    Some(j) => {
                        let (_, s) = open.remove(j);
                        out[s].end_us = Some(a.time_us);
                    }
                    None => out.push(Span {
                        name: a.name,
                        device: a.device,
                        start_us: a.time_us,
                        end_us: Some(a.time_us),
                        depth: 0,
                    }),
                }
            }
            Stage::Other(_) => out.push(Span {
                name: a.name,
                device: a.device,
                start_us: a.time_us,
                end_us: Some(a.time_us),
                depth: 0,
            }),
        }
    }
    out.sort_by_key(|s| s.start_us);
    out
}

/// Names of the spans open on `device` at `time_us`, outermost first (none on the host: torch
/// records annotations per CUDA device).
pub fn in_effect(spans: &[Span], device: crate::model::DeviceId, time_us: i64) -> Vec<StrId> {
    let mut open: Vec<&Span> = spans
        .iter()
        .filter(|s| !device.is_host() && s.device == i64::from(device.0) && s.start_us <= time_us)
        .filter(|s| s.end_us.is_none_or(|e| e > time_us) && s.end_us != Some(s.start_us))
        .collect();
    open.sort_by_key(|s| (s.depth, s.start_us));
    open.into_iter().map(|s| s.name).collect()
}

/// Name fragments of annotations PyTorch records for itself (dynamo, inductor, AOT autograd,
/// CUDA graphs): hidden unless asked for, since a compiled model emits thousands of them.
const INTERNAL: [&str; 14] = [
    "CompiledFxGraph",
    "CompiledFunction",
    "Torch-Compiled Region",
    "TorchDynamo",
    "dynamo_timed",
    "pad_mm_benchmark",
    "inductor",
    "Inductor",
    "aot_autograd",
    "AOTDispatcher",
    "compile_fx",
    "async_compile",
    "cudagraph",
    "CUDAGraph",
];

/// Which annotations to show: by default all but PyTorch's internal ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnnotationFilter {
    /// `--all-annotations`: internal ones too.
    pub all: bool,
    /// `--annotation-filter PATTERN`: only names matching (`*` matches anything; otherwise a
    /// substring match).
    pub pattern: Option<String>,
}

pub fn is_internal(name: &str) -> bool {
    INTERNAL.iter().any(|f| name.contains(f))
}

impl AnnotationFilter {
    pub fn keeps(&self, name: &str) -> bool {
        match &self.pattern {
            Some(p) => glob_match(p, name),
            None => self.all || !is_internal(name),
        }
    }
}

/// `*` wildcards; a pattern without any is a substring. Every command that takes an annotation
/// pattern (`--annotation-filter`, `steps --annotation`) matches with this.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return name.contains(pattern);
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = name;
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() {
            continue;
        }
        match rest.find(part) {
            Some(at) if i > 0 || at == 0 => rest = &rest[at + part.len()..],
            _ => return false,
        }
    }
    parts.last().is_none_or(|l| l.is_empty() || name.ends_with(l))
}

/// The family of a span name: the name with every run of digits replaced by `#`
/// (`## step 12 ##` → `## step # ##`), so the spans of one loop share it.
pub fn family(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_digits = false;
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_take_the_numbers_out() {
        assert_eq!(family("## step 12 ##"), "## step # ##");
        assert_eq!(family("ProfilerStep#3"), "ProfilerStep##");
        assert_eq!(family("Optimizer.step#AdamW.step"), "Optimizer.step#AdamW.step");
        assert!(glob_match("## step*", "## step 0 ##"));
        assert!(!glob_match("## step*", "x ## step 0 ##"));
    }

    #[test]
    fn default_hides_internal_names() {
        let f = AnnotationFilter::default();
        assert!(f.keeps("## step 3 ##"));
        assert!(!f.keeps("## Call CompiledFxGraph fabc123 ##"));
        assert!(!f.keeps("pad_mm_benchmark"));
        assert!(!f.keeps("compile_fx_inner (dynamo_timed)"));
        assert!(AnnotationFilter { all: true, pattern: None }.keeps("pad_mm_benchmark"));
        let only = AnnotationFilter { all: false, pattern: Some("## step*##".into()) };
        assert!(only.keeps("## step 12 ##"));
        assert!(!only.keeps("## forward ##"));
        assert!(AnnotationFilter { all: false, pattern: Some("forward".into()) }.keeps("## forward ##"));
    }
}
