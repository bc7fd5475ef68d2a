//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn data(rel: &str) -> PathBuf {
    repo().join("tests/data").join(rel)
}

/// Real snapshots recorded on an H200: three copied from ../shared/fixtures, and three recorded
/// for the 2026 schema (tests/data/synth/README.md, "Real recordings"): a torch.compile run whose
/// inductor frames have `line` = 2⁶⁴−1, a compiled MLP with `user_metadata`, and a ResNet.
pub const REAL: [&str; 6] = ["gpt2_small", "expandable", "oom_streams", "compiled", "fx_meta", "resnet"];

/// The synthetic edge cases written by tests/data/synth/make_synth.py.
pub const SYNTH: [&str; 13] = [
    "truncated_ring",
    "pending_free_stream",
    "two_devices",
    "segments_only",
    "protocol2",
    "protocol3",
    "protocol5",
    "long1_9byte",
    "legacy_list",
    "no_frames_time",
    "oom_noaddr",
    "annotate_meta",
    "host_memory",
];

/// Synthetic snapshots stored as JSON (MemoryViz-style re-exports).
pub const SYNTH_JSON: [&str; 1] = ["memoryviz_export"];

/// Every fixture snapshot with its golden layout.
pub fn fixtures() -> Vec<(String, PathBuf, PathBuf)> {
    let real = REAL.iter().map(|n| (n.to_string(), data(&format!("{n}.pickle")), data(&format!("{n}.layout.json"))));
    let synth = SYNTH
        .iter()
        .map(|n| (n.to_string(), data(&format!("synth/{n}.pickle")), data(&format!("synth/{n}.layout.json"))));
    let json = SYNTH_JSON
        .iter()
        .map(|n| (n.to_string(), data(&format!("synth/{n}.json")), data(&format!("synth/{n}.layout.json"))));
    real.chain(synth).chain(json).collect()
}

/// The golden layout of a fixture: its `NAME.layout.json`, followed by the host device of
/// `NAME.host.layout.json` where there is one (the oracle lays out CUDA devices only).
pub fn golden_layout(golden: &Path) -> serde_json::Value {
    let mut g = json_file(golden);
    let host =
        golden.with_file_name(golden.file_name().unwrap().to_string_lossy().replace(".layout.", ".host.layout."));
    if host.exists() {
        let h = json_file(&host);
        let devices = g["devices"].as_array_mut().unwrap();
        devices.extend(h["devices"].as_array().unwrap().iter().cloned());
    }
    g
}

/// Runs memviz without its archive cache, so answers come from the input itself.
pub fn memviz<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_memviz")).arg("--no-cache").args(args).output().expect("run memviz")
}

/// Runs memviz as a user would (cache on), with the user cache pointed into `cache_dir`.
pub fn memviz_cached<I, S>(cache_dir: &Path, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_memviz"))
        .env("MEMVIZ_CACHE_DIR", cache_dir)
        .args(args)
        .output()
        .expect("run memviz")
}

/// Runs memviz and returns stdout, failing the test with stderr when it fails.
pub fn memviz_ok<I, S>(args: I) -> Vec<u8>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = memviz(args);
    assert!(out.status.success(), "memviz failed: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

pub fn json_file(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Asserts a failed run: exit code 1, exactly one stderr line `error: <file>...`, no panic.
pub fn assert_bad_input(out: &Output, file: &Path) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{}: expected exit 1, stderr: {stderr}", file.display());
    assert!(!stderr.contains("panicked"), "{}: panicked: {stderr}", file.display());
    assert_eq!(stderr.lines().count(), 1, "{}: expected one line, got: {stderr}", file.display());
    assert!(stderr.starts_with("error: "), "{stderr}");
    let name = file.file_name().unwrap().to_string_lossy();
    assert!(stderr.contains(name.as_ref()), "the error names the file: {stderr}");
    stderr
}

/// A temporary directory for one test.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// The element whose `[offset, offset + size)` holds `byte` right after action `k`, read from a
/// golden layout's elements (`u32::MAX` where none does): the layout's answer for a pixel.
pub fn golden_covering(elements: &[serde_json::Value], k: i64, byte: u64) -> u32 {
    for e in elements {
        let live = e["start"].as_i64().unwrap() <= k && e["end"].as_i64().is_none_or(|end| end > k);
        if !live {
            continue;
        }
        let mut off = 0;
        for o in e["offsets"].as_array().unwrap() {
            if o[0].as_i64().unwrap() <= k {
                off = o[1].as_u64().unwrap();
            }
        }
        if off <= byte && byte < off + e["size"].as_u64().unwrap() {
            return e["id"].as_u64().unwrap() as u32;
        }
    }
    u32::MAX
}

/// What a snapshot and its archive (or its JSON, or a compressed copy) must answer alike:
/// `stats --json` without the keys that name the input itself (`input`, `format`), and
/// `export layout`.
pub fn answers(input: &Path) -> (serde_json::Value, Vec<u8>) {
    let mut stats: serde_json::Value =
        serde_json::from_slice(&memviz_ok(["stats".as_ref(), "--json".as_ref(), input.as_os_str()])).unwrap();
    let obj = stats.as_object_mut().unwrap();
    assert!(obj.remove("input").is_some() && obj.remove("format").is_some(), "stats --json names its input");
    (stats, memviz_ok(["export".as_ref(), "layout".as_ref(), input.as_os_str()]))
}

/// Copies fixture `rel` into `dir` (same file name) and returns the copy's path.
pub fn copy_into(dir: &Path, rel: &str) -> PathBuf {
    let src = data(rel);
    let dst = dir.join(src.file_name().unwrap());
    std::fs::copy(&src, &dst).unwrap();
    dst
}

/// Runs memviz (no cache) with `stdin` as its standard input.
pub fn memviz_stdin<I, S>(stdin: std::process::Stdio, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_memviz")).arg("--no-cache").args(args).stdin(stdin).output().expect("run memviz")
}

/// The viewer's default options on this machine's platform (files mapped, snapshots indexed).
pub fn native_options() -> memviz::viewer::ViewerOptions {
    memviz::viewer::ViewerOptions { platform: memviz::native::platform(), ..Default::default() }
}

/// Whether what a test `needs` from outside the tree (a browser, a Python package, the page
/// web/build.sh makes) is here (`have`): CI must provide it; elsewhere the test says what is
/// missing and passes.
pub fn ready(have: bool, needs: &str) -> bool {
    if !have {
        assert!(std::env::var_os("CI").is_none(), "CI must provide {needs}");
        eprintln!("skipped: {needs} missing");
    }
    have
}
