//! Stack-trace presentation: PyTorch's internal-frame filter, repeat elision, "the" frame.

use crate::model::{Frame, Snapshot, StackId};

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
const LIBRARY_PATHS: [&str; 3] = ["/torch/", "/site-packages/torch", "\\torch\\"];

/// C++ namespaces of PyTorch's dispatcher and allocator (with `stacks="all"`).
const NATIVE_PREFIXES: [&str; 6] = ["c10::", "at::", "torch::", "std::", "void at::", "bool at::"];

/// PyTorch's own filter: false for frames MemoryViz hides.
pub fn is_shown(snap: &Snapshot, f: &Frame) -> bool {
    let name = snap.str(f.name);
    let file = snap.str(f.filename);
    !OMIT_FUNCTIONS.iter().any(|o| name.contains(o)) && !OMIT_FILENAMES.iter().any(|o| file.contains(o))
}

/// How much a frame says about *who* allocated: user Python code beats torch's Python, which
/// beats native code; interpreter and dispatcher frames say nothing.
fn rank(snap: &Snapshot, f: &Frame) -> u8 {
    let name = snap.str(f.name);
    let file = snap.str(f.filename);
    let python = file.ends_with(".py");
    let library = LIBRARY_PATHS.iter().any(|p| file.contains(p));
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
pub fn top_frame<'a>(snap: &'a Snapshot, stack: StackId) -> Option<&'a Frame> {
    let mut best: Option<(&Frame, u8)> = None;
    for f in snap.stack_frames(stack).filter(|f| is_shown(snap, f)) {
        let r = rank(snap, f);
        if best.is_none_or(|(_, b)| r > b) {
            best = Some((f, r));
            if r == 3 {
                break;
            }
        }
    }
    best.map(|(f, _)| f).or_else(|| snap.stack_frames(stack).next())
}

/// `name (file:line)`, with the file shortened to its name when `short`.
pub fn describe(snap: &Snapshot, f: &Frame, short: bool) -> String {
    let file = snap.str(f.filename);
    let file = if short { file.rsplit(['/', '\\']).next().unwrap_or(file) } else { file };
    format!("{} ({file}:{})", snap.str(f.name), f.line)
}

/// The frames MemoryViz shows for a stack, innermost first, with runs of the same frame elided
/// (`f, f, <repeats N times>` for runs of three or more).
pub fn shown_lines(snap: &Snapshot, stack: StackId, short: bool) -> Vec<String> {
    let frames: Vec<&Frame> = snap.stack_frames(stack).filter(|f| is_shown(snap, f)).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        let mut j = i + 1;
        while j < frames.len() && frames[j] == frames[i] {
            j += 1;
        }
        let line = describe(snap, frames[i], short);
        match j - i {
            1 => out.push(line),
            2 => out.extend([line.clone(), line]),
            n => out.extend([line, format!("<repeats {} times>", n - 1)]),
        }
        i = j;
    }
    out
}
