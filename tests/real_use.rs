//! What a first week of real use found (issue 10): one test per finding, numbered as there.

use std::io::Write as _;
use std::process::Stdio;

use serde_json::Value;

use crate::support::*;

fn json(out: &[u8]) -> Value {
    serde_json::from_slice(out).expect("valid JSON")
}

fn text(out: &[u8]) -> String {
    String::from_utf8(out.to_vec()).unwrap()
}

fn usage_error(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "expected a usage error: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

/// 1. An output path that is an input (directly, or through a link) is refused: exit 2, and
///    the user's file is untouched.
#[test]
fn outputs_never_overwrite_inputs() {
    let dir = tempdir();
    let snap = copy_into(dir.path(), "gpt2_small.pickle");
    let before = std::fs::read(&snap).unwrap();
    let link = dir.path().join("link.pickle");
    std::os::unix::fs::symlink(&snap, &link).unwrap();
    for args in [
        vec!["index".as_ref(), snap.as_os_str(), "-o".as_ref(), snap.as_os_str()],
        vec!["index".as_ref(), snap.as_os_str(), "-o".as_ref(), link.as_os_str()],
        vec!["index".as_ref(), link.as_os_str(), "-o".as_ref(), snap.as_os_str()],
        vec!["export".as_ref(), "layout".as_ref(), snap.as_os_str(), "-o".as_ref(), snap.as_os_str()],
        vec![
            "export".as_ref(),
            "sampled".as_ref(),
            snap.as_os_str(),
            "--every".as_ref(),
            "10".as_ref(),
            "-o".as_ref(),
            link.as_os_str(),
        ],
    ] {
        let err = usage_error(&memviz(&args));
        assert!(err.contains("refusing to overwrite it"), "{err}");
        assert!(std::fs::read(&snap).unwrap() == before, "the snapshot was changed by {args:?}");
    }
}

/// 2. `diff` compares every device both sides have and lists the others; `--device` /
///    `--device-b` pick the pair.
#[test]
fn diff_lists_devices_it_did_not_compare() {
    let (a, b) = (data("synth/two_devices.pickle"), data("gpt2_small.pickle"));
    let out = json(&memviz_ok(["diff".as_ref(), a.as_os_str(), b.as_os_str(), "--json".as_ref()]));
    assert_eq!(out["devices"].as_array().unwrap().len(), 1);
    assert_eq!(out["unmatched_a"], serde_json::json!([1]));
    assert_eq!(out["unmatched_b"], serde_json::json!([]));
    let t = text(&memviz_ok(["diff".as_ref(), a.as_os_str(), b.as_os_str()]));
    assert!(t.contains("A's device 1: not compared (B has no device 1"), "{t}");
    let pair = json(&memviz_ok([
        "diff".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--json".as_ref(),
        "--device".as_ref(),
        "1".as_ref(),
        "--device-b".as_ref(),
        "0".as_ref(),
    ]));
    assert_eq!(
        (pair["devices"][0]["a"]["device"].clone(), pair["devices"][0]["b"]["device"].clone()),
        (1.into(), 0.into())
    );
    assert_eq!(pair["unmatched_a"], serde_json::json!([0]));
    // The text does not claim B lacks a device it was not asked to compare.
    let picked = text(&memviz_ok([
        "diff".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--device".as_ref(),
        "1".as_ref(),
        "--device-b".as_ref(),
        "0".as_ref(),
    ]));
    assert!(!picked.contains("not compared"), "{picked}");
}

/// 3. A screenshot or bench of an archive whose checksum fails is the one-line error, exit 1:
///    the checksum's, or the id check's where the flipped byte lands in a column it reads first
///    (both say to re-index).
#[test]
fn screenshot_of_a_corrupt_archive_fails() {
    let dir = tempdir();
    let archive = dir.path().join("broken.memviz");
    memviz_ok(["index".as_ref(), data("gpt2_small.pickle").as_os_str(), "-o".as_ref(), archive.as_os_str()]);
    let mut bytes = std::fs::read(&archive).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&archive, bytes).unwrap();
    let png = dir.path().join("f.png");
    for extra in [["--screenshot".as_ref(), png.as_os_str()].as_slice(), ["--bench".as_ref()].as_slice()] {
        let mut args = vec!["open".as_ref(), archive.as_os_str()];
        args.extend_from_slice(extra);
        let out = memviz(&args);
        let err = assert_bad_input(&out, &archive);
        let named = err.contains("checksum") || err.contains("the archive is corrupted");
        assert!(named && err.contains("re-run `memviz index`") && out.stdout.is_empty(), "{err}");
    }
    assert!(!png.exists(), "no picture of the error");
}

/// 4. Steps are one span family each: `step` matches `## step N ##` and the nested
///    `Optimizer.step#AdamW.step`, judged apart; `#` no longer changes a step's retained bytes.
#[test]
fn steps_are_judged_per_family() {
    let snap = data("gpt2_small.pickle");
    let steps = |pattern: &str| {
        json(&memviz_ok([
            "steps".as_ref(),
            snap.as_os_str(),
            "--annotation".as_ref(),
            pattern.as_ref(),
            "--json".as_ref(),
        ]))
    };
    let v = steps("step");
    let families: Vec<&str> = v["devices"].as_array().unwrap().iter().map(|r| r["family"].as_str().unwrap()).collect();
    assert_eq!(families, ["## step # ##", "Optimizer.step#AdamW.step"]);
    let main = &v["devices"][0];
    assert_eq!(main["steps"].as_array().unwrap().len(), 4);
    assert_eq!(main["steps"][0]["retained_bytes"], 110_735_360, "step 0 keeps the optimizer state (+106 MiB)");
    assert_eq!(main["verdict"]["steady_growth"], false);
    assert_eq!(
        steps("## step*")["devices"][0]["steps"],
        main["steps"],
        "the same pattern rules as --annotation-filter"
    );
    let hash = steps("#");
    let same = hash["devices"].as_array().unwrap().iter().find(|r| r["family"] == "## step # ##").unwrap();
    assert_eq!(same["steps"], main["steps"]);
    let t = text(&memviz_ok(["steps".as_ref(), snap.as_os_str(), "--annotation".as_ref(), "step".as_ref()]));
    assert!(t.contains("the pattern matches 2 span families"), "{t}");
}

/// A JSON snapshot whose trace starts at 2,000 µs: two spans ended before it, four inside.
fn truncated_with_early_spans() -> String {
    let mut events = Vec::new();
    let mut annotations = Vec::new();
    for step in 0..6u64 {
        let (t0, t1) = (step * 1000, step * 1000 + 900);
        let name = format!("## step {step} ##");
        for (stage, t) in [("START", t0), ("END", t1)] {
            annotations.push(serde_json::json!({"name": name, "stage": stage, "device": 0, "time_us": t}));
        }
        if step >= 2 {
            let addr = 4096 * (step + 1);
            for (action, t) in [("alloc", t0 + 10), ("free_completed", t0 + 20)] {
                events
                    .push(serde_json::json!({"action": action, "addr": addr, "size": 512, "stream": 0, "time_us": t}));
            }
        }
    }
    serde_json::json!({"segments": [], "device_traces": [events], "external_annotations": annotations}).to_string()
}

/// 5. Spans that ended before the trace's first event are "before the trace", not judged.
#[test]
fn spans_before_a_truncated_trace_are_marked() {
    let dir = tempdir();
    let path = dir.path().join("late.json");
    std::fs::write(&path, truncated_with_early_spans()).unwrap();
    let v = json(&memviz_ok([
        "steps".as_ref(),
        path.as_os_str(),
        "--annotation".as_ref(),
        "step".as_ref(),
        "--json".as_ref(),
    ]));
    let steps = v["devices"][0]["steps"].as_array().unwrap();
    let before: Vec<bool> = steps.iter().map(|s| s["before_trace"].as_bool().unwrap()).collect();
    assert_eq!(before, [true, true, false, false, false, false]);
    assert!(steps[0]["retained_bytes"].is_null() && steps[1]["retained_bytes"].is_null());
    assert!(
        v["devices"][0]["verdict"]["text"].as_str().unwrap().contains("each step starts"),
        "{}",
        v["devices"][0]["verdict"]
    );
    let t = text(&memviz_ok(["steps".as_ref(), path.as_os_str(), "--annotation".as_ref(), "step".as_ref()]));
    assert_eq!(t.matches("before the trace").count(), 2, "{t}");
}

/// 6. Standard input (`-`), a FIFO and `/dev/stdin` are read by streaming, and no cache is
///    written beside them.
#[test]
fn pipes_and_standard_input_are_read() {
    let dir = tempdir();
    let pickle = data("oom_streams.pickle");
    let expected = text(&memviz_ok(["stats".as_ref(), "--json".as_ref(), pickle.as_os_str()]));
    let strip = |s: &str| {
        let mut v: Value = serde_json::from_str(s).unwrap();
        v.as_object_mut().unwrap().remove("input");
        v.as_object_mut().unwrap().remove("format");
        v
    };
    let out = memviz_stdin(Stdio::from(std::fs::File::open(&pickle).unwrap()), ["stats", "--json", "-"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(strip(&text(&out.stdout)), strip(&expected), "stats - reads standard input");
    // `/dev/stdin` redirected from a file, with the cache on: read, and no `/dev/stdin.memviz`.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"))
        .env("MEMVIZ_CACHE_DIR", dir.path().join("cache"))
        .args(["stats", "--json", "/dev/stdin"])
        .stdin(Stdio::from(std::fs::File::open(&pickle).unwrap()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(strip(&text(&out.stdout)), strip(&expected));
    assert!(!std::path::Path::new("/dev/stdin.memviz").exists(), "a cache was written into /dev");
    // A FIFO with a writer on the other end, read with the cache on: nothing is written beside it.
    let fifo = dir.path().join("snap.fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let writer = {
        let (fifo, pickle) = (fifo.clone(), pickle.clone());
        std::thread::Builder::new()
            .name("fifo-writer".into())
            .spawn(move || {
                let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
                w.write_all(&std::fs::read(&pickle).unwrap()).unwrap();
            })
            .unwrap()
    };
    let out = memviz_cached(&dir.path().join("cache"), ["stats".as_ref(), "--json".as_ref(), fifo.as_os_str()]);
    writer.join().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(strip(&text(&out.stdout)), strip(&expected));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "no cache beside a FIFO or in the user cache: {left:?}");
    // `index -` needs -o, and writes a working archive with it.
    let err = usage_error(&memviz_stdin(Stdio::from(std::fs::File::open(&pickle).unwrap()), ["index", "-"]));
    assert!(err.contains("-o"), "{err}");
    let archive = dir.path().join("piped.memviz");
    let out = memviz_stdin(
        Stdio::from(std::fs::File::open(&pickle).unwrap()),
        ["index".as_ref(), "-".as_ref(), "-o".as_ref(), archive.as_os_str()],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(strip(&text(&memviz_ok(["stats".as_ref(), "--json".as_ref(), archive.as_os_str()]))), strip(&expected));
}

/// 7. xz, bzip2 and lz4 are read by magic bytes; other compressors are named.
#[test]
fn xz_bzip2_and_lz4_are_read() {
    let dir = tempdir();
    let pickle = data("oom_streams.pickle");
    let raw = std::fs::read(&pickle).unwrap();
    let expected = answers(&pickle);
    let xz = dir.path().join("snap.bin");
    let status = std::process::Command::new("xz")
        .args(["-c", "-T2"])
        .arg(&pickle)
        .stdout(std::fs::File::create(&xz).unwrap())
        .status()
        .expect("xz is installed");
    assert!(status.success());
    let bz = dir.path().join("snap.data");
    let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    enc.write_all(&raw).unwrap();
    std::fs::write(&bz, enc.finish().unwrap()).unwrap();
    let lz = dir.path().join("snap.lz");
    let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
    enc.write_all(&raw).unwrap();
    std::fs::write(&lz, enc.finish().unwrap()).unwrap();
    for (path, kind) in [(&xz, "xz"), (&bz, "bzip2"), (&lz, "lz4")] {
        assert!(answers(path) == expected, "{kind} answers differently");
        let t = text(&memviz_ok(["stats".as_ref(), path.as_os_str()]));
        assert!(t.contains(&format!("pickle protocol 4, {kind}")), "{t}");
    }
    let seven = dir.path().join("snap.7z");
    std::fs::write(&seven, [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c, 0, 4, 1, 2, 3]).unwrap();
    let err = assert_bad_input(&memviz(["stats".as_ref(), seven.as_os_str()]), &seven);
    assert!(err.contains("compressed with 7-Zip (a 7z archive), which memviz does not read"), "{err}");
}

/// 8. A `--model` that looks like a path is a local file: missing, it is a one-line error and
///    nothing goes to the network.
#[test]
fn model_paths_never_go_to_the_network() {
    let snap = data("gpt2_small.pickle");
    for spec in ["missing.json", "some/dir/config.json"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"))
            .env("HF_ENDPOINT", "http://127.0.0.1:9")
            .args(["--no-cache", "stats"])
            .arg(&snap)
            .args(["--model", spec])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(spec) && err.contains("cannot read it") && !err.contains("fetch"), "{err}");
    }
}

/// 9. Without a display the viewer says so in one line.
#[test]
fn no_display_is_said_plainly() {
    let snap = data("gpt2_small.pickle");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"))
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET")
        .arg("--no-cache")
        .arg(&snap)
        .output()
        .unwrap();
    let err = assert_bad_input(&out, &snap);
    assert!(
        err.contains("no display found: use --screenshot, or open the .memviz on a machine with a display"),
        "{err}"
    );
    assert!(!err.contains(".cargo"), "{err}");
}

/// 10. One time base: every `*_us` counts from the snapshot's earliest event over all devices,
///     `*_epoch_us` keep the recorded times, `--time` is one instant on every device, and times
///     paste back as printed.
#[test]
fn one_time_base_for_every_device() {
    let snap = data("synth/two_devices.pickle");
    let s = json(&memviz_ok(["stats".as_ref(), "--json".as_ref(), snap.as_os_str()]));
    let base = s["start_epoch_us"].as_i64().unwrap();
    let firsts: Vec<i64> =
        s["devices"].as_array().unwrap().iter().map(|d| d["first_time_us"].as_i64().unwrap()).collect();
    assert_eq!(firsts.iter().min(), Some(&0), "the earliest event of any device is time 0: {firsts:?}");
    assert!(firsts[1] > 0, "device 1 starts later: {firsts:?}");
    for d in s["devices"].as_array().unwrap() {
        assert_eq!(d["peak"]["time_epoch_us"].as_i64().unwrap() - base, d["peak"]["time_us"].as_i64().unwrap());
    }
    let at =
        json(&memviz_ok(["at".as_ref(), snap.as_os_str(), "--json".as_ref(), "--time".as_ref(), "700us".as_ref()]));
    for d in at["devices"].as_array().unwrap() {
        let t = d["time_us"].as_i64().unwrap();
        assert!(t <= 700, "device {}: action at {t} µs for --time 700us", d["device"]);
    }
    // As printed, pasted back: the action printed at a time is selected by that time, in any
    // unit; a number without a unit is an error that names the units.
    let gpt = data("gpt2_small.pickle");
    let line = text(&memviz_ok(["at".as_ref(), gpt.as_os_str(), "--peak".as_ref()]));
    assert!(line.contains("after action 1,077 (the peak), 686.213 ms into the trace"), "{line}");
    for pasted in ["686.213 ms", "686.213ms", "686213us", "686,213 µs", "0.686213s"] {
        let back =
            json(&memviz_ok(["at".as_ref(), gpt.as_os_str(), "--json".as_ref(), "--time".as_ref(), pasted.as_ref()]));
        assert_eq!(back["devices"][0]["action"], 1077, "--time {pasted}");
    }
    // Every action whose time is unique to the µs comes back from its printed time.
    let trace =
        json(&memviz_ok(["at".as_ref(), gpt.as_os_str(), "--json".as_ref(), "--action".as_ref(), "2,000".as_ref()]));
    let t = trace["devices"][0]["time_us"].as_i64().unwrap();
    let printed = text(&memviz_ok(["at".as_ref(), gpt.as_os_str(), "--action".as_ref(), "2,000".as_ref()]));
    // "device 0 — after action 2,000, 1.234567 s into the trace"
    let head = printed.lines().find(|l| l.contains(" into the trace")).unwrap();
    let shown = head.split(", ").last().unwrap().trim_end_matches(" into the trace").to_owned();
    let back = json(&memviz_ok(["at".as_ref(), gpt.as_os_str(), "--json".as_ref(), "--time".as_ref(), shown.as_ref()]));
    assert_eq!(back["devices"][0]["time_us"], t, "{shown}");
    let out = memviz(["at".as_ref(), gpt.as_os_str(), "--time".as_ref(), "686213".as_ref()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no unit: give us, ms, s or min"));
}

/// 11. Numbers paste back as printed; out of range is said the same way everywhere; an action
///     of another device names that device.
#[test]
fn numbers_paste_back_and_ranges_are_explained() {
    let gpt = data("gpt2_small.pickle");
    let at = |k: &str| {
        json(&memviz_ok(["at".as_ref(), gpt.as_os_str(), "--json".as_ref(), "--action".as_ref(), k.as_ref()]))
    };
    assert_eq!(at("1,077")["devices"][0]["action"], 1077);
    assert_eq!(at("last")["devices"][0]["action"], 3306);
    let r = json(&memviz_ok(["range".as_ref(), gpt.as_os_str(), "1,000..2,000".as_ref(), "--json".as_ref()]));
    assert_eq!((r["devices"][0]["start"].clone(), r["devices"][0]["end"].clone()), (1000.into(), 2000.into()));
    for args in [["at", "--action", "99999999999999"], ["range", "0..99999999999", ""]] {
        let mut a: Vec<&std::ffi::OsStr> = vec![args[0].as_ref(), gpt.as_os_str()];
        a.extend(args[1..].iter().filter(|x| !x.is_empty()).map(std::ffi::OsStr::new));
        let err = assert_bad_input(&memviz(&a), &gpt);
        assert!(err.contains("out of range") && !err.contains("not an action index"), "{err}");
    }
    let two = data("synth/two_devices.pickle");
    let actions = json(&memviz_ok(["stats".as_ref(), "--json".as_ref(), two.as_os_str()]))["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["actions"].as_u64().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(actions, [6, 6]);
    let err = assert_bad_input(
        &memviz(["at".as_ref(), two.as_os_str(), "--device".as_ref(), "0".as_ref(), "--action".as_ref(), "9".as_ref()]),
        &two,
    );
    assert!(err.contains("out of range on device 0 (-1..6"), "{err}");
}

/// 12. `--top` bounds every table; `--group-by site` works.
#[test]
fn top_bounds_every_table() {
    let gpt = data("gpt2_small.pickle");
    let steps = text(&memviz_ok([
        "steps".as_ref(),
        gpt.as_os_str(),
        "--annotation".as_ref(),
        "## step".as_ref(),
        "--top".as_ref(),
        "2".as_ref(),
    ]));
    assert_eq!(steps.matches("## step ").count(), 2 + 1, "two rows and the title: {steps}");
    assert!(steps.contains("… 2 more spans"), "{steps}");
    let range = text(&memviz_ok(["range".as_ref(), gpt.as_os_str(), "..".as_ref(), "--top".as_ref(), "3".as_ref()]));
    let sizes = range.split("allocation sizes:").nth(1).unwrap();
    assert_eq!(sizes.lines().filter(|l| l.contains(" – ")).count(), 3, "{sizes}");
    assert!(sizes.contains("more sizes"), "{sizes}");
    let site =
        text(&memviz_ok(["at".as_ref(), gpt.as_os_str(), "--peak".as_ref(), "--group-by".as_ref(), "site".as_ref()]));
    assert!(site.contains("by site:"), "{site}");
}

/// 13. A segments-only snapshot has no trace to call complete, and its ghosts are neither
///     allocated in a range nor leak candidates.
#[test]
fn segments_only_snapshots_say_what_they_are() {
    let snap = data("synth/segments_only.pickle");
    let s = text(&memviz_ok(["stats".as_ref(), snap.as_os_str()]));
    assert!(!s.contains("complete: every free has its alloc"), "{s}");
    assert!(s.contains("none recorded: segments only"), "{s}");
    let r = json(&memviz_ok([
        "range".as_ref(),
        snap.as_os_str(),
        "..".as_ref(),
        "--json".as_ref(),
        "--device".as_ref(),
        "0".as_ref(),
    ]));
    let d = &r["devices"][0];
    assert_eq!(d["allocated"]["count"], 0);
    assert_eq!(d["still_live_by_site"].as_array().unwrap().len(), 0);
    assert_eq!(d["revealed"]["count"], 1);
}

/// 14. Small things users notice.
#[test]
fn small_things() {
    let dir = tempdir();
    // Singular where it is one; no "(0 B)" after 0 B.
    let s = text(&memviz_ok(["stats".as_ref(), data("synth/segments_only.pickle").as_os_str()]));
    assert!(s.contains("in 1 segment)"), "{s}");
    let t = text(&memviz_ok(["stats".as_ref(), data("synth/two_devices.pickle").as_os_str()]));
    assert!(t.contains("truncated: 1 free without its alloc"), "{t}");
    let at =
        text(&memviz_ok(["at".as_ref(), data("gpt2_small.pickle").as_os_str(), "--action".as_ref(), "-1".as_ref()]));
    assert!(at.contains("live      0 B in 0 allocations"), "{at}");
    // An error is said once, and names the file asked for, not a temporary one.
    let cut = dir.path().join("cut.memviz");
    let golden = std::fs::read(data("golden/gpt2_small.v2.memviz")).unwrap();
    std::fs::write(&cut, &golden[..golden.len() / 2]).unwrap();
    let err = assert_bad_input(&memviz(["stats".as_ref(), cut.as_os_str()]), &cut);
    assert_eq!(err.matches("the archive is truncated").count(), 1, "{err}");
    let nowhere = dir.path().join("no/such/dir/out.json");
    let err = assert_bad_input(
        &memviz([
            "export".as_ref(),
            "layout".as_ref(),
            data("gpt2_small.pickle").as_os_str(),
            "-o".as_ref(),
            nowhere.as_os_str(),
        ]),
        &nowhere,
    );
    assert!(!err.contains(".tmp-"), "{err}");
    // Piped into a reader that stops early: quiet, exit 0.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"))
        .args(["--no-cache", "export", "layout"])
        .arg(data("gpt2_small.pickle"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    // Protocol 1 is protocol 1.
    let p1 = dir.path().join("p1.pickle");
    let status = std::process::Command::new("python3")
        .args([
            "-c",
            "import pickle,sys; pickle.dump(pickle.load(open(sys.argv[1],'rb')), open(sys.argv[2],'wb'), protocol=1)",
        ])
        .arg(data("synth/two_devices.pickle"))
        .arg(&p1)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(text(&memviz_ok(["stats".as_ref(), p1.as_os_str()])).contains("pickle protocol 1,"));
    // Once cached, the header still describes the snapshot, and --json says which input.
    let snap = copy_into(dir.path(), "oom_streams.pickle");
    let first = memviz_cached(&dir.path().join("c"), ["stats".as_ref(), snap.as_os_str()]);
    let second = memviz_cached(&dir.path().join("c"), ["stats".as_ref(), snap.as_os_str()]);
    assert!(dir.path().join("oom_streams.memviz").exists());
    assert_eq!(text(&first.stdout).lines().next(), text(&second.stdout).lines().next());
    assert!(text(&second.stdout).starts_with(&format!("{} — pickle protocol 4, 398,277 bytes", snap.display())));
    let j = json(&memviz_ok(["stats".as_ref(), "--json".as_ref(), snap.as_os_str()]));
    assert_eq!(j["input"], snap.display().to_string());
    // Model options that cannot be used are refused; a bad config value is named.
    let gpt = data("gpt2_small.pickle");
    usage_error(&memviz(["stats".as_ref(), gpt.as_os_str(), "--vocab-size".as_ref(), "100".as_ref()]));
    usage_error(&memviz(["open".as_ref(), gpt.as_os_str(), "--gpu".as_ref(), "foo".as_ref()]));
    for (value, shown) in [("0", "0"), ("\"abc\"", "\"abc\"")] {
        let cfg = dir.path().join("config.json");
        std::fs::write(&cfg, format!(r#"{{"hidden_size": {value}, "vocab_size": 100}}"#)).unwrap();
        let out = memviz(["stats".as_ref(), gpt.as_os_str(), "--model".as_ref(), cfg.as_os_str()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("`hidden_size` is {shown}, expected a positive integer")), "{err}");
    }
    // No transformer shapes for a convnet.
    let resnet = text(&memviz_ok(["stats".as_ref(), data("resnet.pickle").as_os_str()]));
    assert!(!resnet.contains("shape candidates"), "{resnet}");
    assert!(text(&memviz_ok(["stats".as_ref(), gpt.as_os_str()])).contains("shape candidates"));
}
