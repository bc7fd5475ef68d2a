//! `record_function` annotations as the answers use them: which to show (internal ones hidden,
//! `--annotation-filter`), which are open at an instant, name patterns and span families. The
//! pairing into spans is `derive::spans`.

use crate::model::{Snapshot, StrId};

pub use crate::derive::spans::{Span, spans};

/// The spans of the annotations `filter` keeps (depths count kept spans only).
pub fn spans_filtered(snap: &Snapshot, filter: &AnnotationFilter) -> Vec<Span> {
    crate::derive::spans::spans_where(snap, |name| filter.keeps(name))
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

pub use crate::derive::steps::family;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
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
