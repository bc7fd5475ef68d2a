//! Stack-trace presentation: PyTorch's internal-frame filter, repeat elision, "the" frame.

use crate::model::{FrameId, FxInfo, NO_LINE, NONE, StackId};

/// Function-name fragments PyTorch's MemoryViz hides (allocator and interpreter plumbing).
const OMIT_FUNCTIONS: [&str; 8] = [
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "_start",
    "__libc_start_main",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
];

/// File-name fragments PyTorch's MemoryViz hides.
const OMIT_FILENAMES: [&str; 10] = [
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "Objects/methodobject.c",
    "pycore_ceval.h",
    "ceval.c",
    "cpython/abstract.h",
];

/// Frames inside these library paths are machinery, not the model code a user wants to see
/// first (`module.py:_call_impl`, `_tensor.py`, the autograd engine, ...).
const INSTALLED_TORCH: [&str; 4] =
    ["site-packages/torch/", "dist-packages/torch/", "site-packages\\torch\\", "dist-packages\\torch\\"];

/// True for a file of the torch package: installed (`…/site-packages/torch/…`), or a source
/// checkout (`…/torch/nn/…` outside any site-packages). A virtualenv that merely lives under a
/// folder called `torch` (`/opt/torch/.venv/…/site-packages/transformers/…`) is not torch.
fn is_torch_file(file: &str) -> bool {
    if INSTALLED_TORCH.iter().any(|p| file.contains(p)) {
        return true;
    }
    let installed = file.contains("site-packages") || file.contains("dist-packages");
    !installed && (file.contains("/torch/") || file.contains("\\torch\\"))
}

/// C++ namespaces of PyTorch's dispatcher and allocator (with `stacks="all"`).
const NATIVE_PREFIXES: [&str; 6] = ["c10::", "at::", "torch::", "std::", "void at::", "bool at::"];

use std::fmt::Write as _;

pub use crate::derive::frames::FrameSource;

/// PyTorch's own filter: false for frames MemoryViz hides.
pub fn is_shown(src: &impl FrameSource, f: FrameId) -> bool {
    let (name, file) = (src.name(f), src.file(f));
    !OMIT_FUNCTIONS.iter().any(|o| name.contains(o)) && !OMIT_FILENAMES.iter().any(|o| file.contains(o))
}

/// How much a frame says about *who* allocated: user Python code beats torch's Python, which
/// beats native code; interpreter and dispatcher frames say nothing.
fn rank(src: &impl FrameSource, f: FrameId) -> u8 {
    let (name, file) = (src.name(f), src.file(f));
    let python = file.ends_with(".py");
    let library = is_torch_file(file);
    match (python, library) {
        (true, false) => 3,
        (true, true) => 2,
        _ if NATIVE_PREFIXES.iter().any(|p| name.starts_with(p))
            || name.starts_with("_Py")
            || name.starts_with("Py") =>
        {
            0
        }
        _ => 1,
    }
}

/// The frame that best names an allocation: the innermost shown frame of the best rank (user
/// Python code, else torch's Python, else native code), else the innermost frame.
pub fn top_frame(src: &impl FrameSource, stack: StackId) -> Option<FrameId> {
    let mut best: Option<(FrameId, u8)> = None;
    for &f in src.stack(stack).iter().filter(|&&f| is_shown(src, f)) {
        let r = rank(src, f);
        if best.is_none_or(|(_, b)| r > b) {
            best = Some((f, r));
            if r == 3 {
                break;
            }
        }
    }
    best.map(|(f, _)| f).or_else(|| src.stack(stack).first().copied())
}

/// The innermost shown Python frame: where, inside the code that allocated, the memory was asked
/// for (`dropout (functional.py:1443)`), past the allocator's own native frames.
pub fn innermost_python(src: &impl FrameSource, stack: StackId) -> Option<FrameId> {
    src.stack(stack).iter().copied().find(|&f| src.file(f).ends_with(".py") && is_shown(src, f))
}

/// `name (file:line)`, with the file shortened to its name when `short`; a name or file the
/// snapshot did not give shows as `??`, a line as `?`; a compiled frame's FX node follows in
/// brackets (`[fx addmm_1: call_function aten.addmm.default]`).
pub fn describe(src: &impl FrameSource, f: FrameId, short: bool) -> String {
    let or_unknown = |s: &str| if s.is_empty() { "??".to_owned() } else { s.to_owned() };
    let file = src.file(f);
    let file = if short { file.rsplit(['/', '\\']).next().unwrap_or(file) } else { file };
    let line = match src.line(f) {
        NO_LINE => "?".to_owned(),
        l => l.to_string(),
    };
    // A frame known only by its text (a traceback line that did not parse) is that text.
    let mut out = if file.is_empty() && line == "?" {
        or_unknown(src.name(f))
    } else {
        format!("{} ({}:{line})", or_unknown(src.name(f)), or_unknown(file))
    };
    if let Some(fx) = fx_summary(src, f) {
        out.push_str(&format!(" [{fx}]"));
    }
    out
}

/// `fx addmm_1: call_function aten.addmm.default` for a frame with FX keys.
pub fn fx_summary(src: &impl FrameSource, f: FrameId) -> Option<String> {
    let fx = src.fx(f);
    if fx.is_none() {
        return None;
    }
    let words: Vec<&str> =
        [fx.node_op, fx.node_target].into_iter().filter(|&s| s != NONE).map(|s| src.text(s)).collect();
    let mut out = String::from("fx");
    if fx.node_name != NONE {
        out.push(' ');
        out.push_str(src.text(fx.node_name));
        if !words.is_empty() {
            out.push(':');
        }
    }
    for w in words {
        out.push(' ');
        out.push_str(w);
    }
    Some(out)
}

/// Every FX key of a frame with its text (`fx_original_trace` is multi-line), for detail panels.
pub fn fx_details(src: &impl FrameSource, f: FrameId) -> Vec<(&'static str, &str)> {
    let fx = src.fx(f);
    FxInfo::KEYS.into_iter().zip(fx.to_array()).filter(|&(_, s)| s != NONE).map(|(k, s)| (k, src.text(s))).collect()
}

/// The whole stack of `stack` as `--stacks` prints it: the frames MemoryViz shows, innermost
/// first, with their full file paths (empty: no stack recorded).
pub fn full_stack(src: &impl FrameSource, stack: Option<u32>) -> Vec<String> {
    stack.filter(|&s| s != crate::model::NONE).map_or_else(Vec::new, |s| shown_lines(src, s, false))
}

/// The frames of a row, one per line under it, indented to `indent` spaces.
pub fn render_stack(out: &mut String, frames: &[String], indent: usize) {
    for f in frames {
        let _ = writeln!(out, "{:indent$}at {f}", "");
    }
}

/// The frames MemoryViz shows for a stack, innermost first, with runs of the same frame elided
/// (`f, f, <repeats N times>` for runs of three or more).
pub fn shown_lines(src: &impl FrameSource, stack: StackId, short: bool) -> Vec<String> {
    let frames: Vec<FrameId> = src.stack(stack).iter().copied().filter(|&f| is_shown(src, f)).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        let mut j = i + 1;
        while j < frames.len() && frames[j] == frames[i] {
            j += 1;
        }
        let line = describe(src, frames[i], short);
        match j - i {
            1 => out.push(line),
            2 => out.extend([line.clone(), line]),
            n => out.extend([line, format!("<repeats {} times>", n - 1)]),
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::is_torch_file;

    #[test]
    fn torch_files() {
        assert!(is_torch_file("/usr/lib/python3.12/site-packages/torch/nn/modules/module.py"));
        assert!(is_torch_file("/home/me/pytorch/torch/autograd/graph.py"));
        assert!(!is_torch_file(
            "/opt/torch/.venv/lib/python3.12/site-packages/transformers/models/gpt2/modeling_gpt2.py"
        ));
        assert!(!is_torch_file("/work/train.py"));
    }
}
