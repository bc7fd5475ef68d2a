//! The command line's manners (issue 40, 13): a mistyped command is said to be one, every table
//! command takes `--csv`, and the help lists every value an option takes.

use crate::support::*;

/// A mistyped command: exit 2 and one line naming the command meant; a path that exists, or a
/// word shaped like a file, is still a file to open.
#[test]
fn a_mistyped_command_is_not_a_missing_file() {
    let out = memviz(["stat", "x.pickle"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err, "error: unknown command 'stat' — did you mean 'stats'?\n");
    let out = memviz(["segmets", "x.pickle", "--end"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean 'segments'?"));
    // A file that is not there, named like one: the file is missing (exit 1), as before.
    let out = memviz(["stat.pickle"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("stat.pickle: cannot read the file"), "{err}");
    // A folder named `stat` that exists is opened (here: a job with no snapshots, exit 1).
    let dir = tempdir();
    std::fs::create_dir(dir.path().join("stat")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"))
        .current_dir(dir.path())
        .args(["--no-cache", "stat"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("stat: no memory snapshots or archives in the folder"), "{err}");
}

/// `oom --csv`: one row per OOM event; `segments --csv`: one row per segment, as the JSON has.
#[test]
fn oom_and_segments_write_csv() {
    let snap = data("frag_oom.pickle");
    let csv = String::from_utf8(memviz_ok(["oom".as_ref(), snap.as_os_str(), "--csv".as_ref()])).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("device,event,action,requested_bytes,"), "{csv}");
    assert_eq!(lines.len(), 3, "two OOM events: {csv}");
    assert!(lines[1].starts_with("0,1284,") && lines[1].contains(",3145728,3145728,"), "{csv}");
    assert!(lines[1].contains(",fragmentation,"), "{csv}");

    let at = ["segments".as_ref(), snap.as_os_str(), "--oom".as_ref(), "1".as_ref()];
    let json: serde_json::Value = serde_json::from_slice(&memviz_ok(at.iter().chain([&"--json".as_ref()]))).unwrap();
    let csv = String::from_utf8(memviz_ok(at.iter().chain([&"--csv".as_ref()]))).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "device,event,addr,size,stream,pool,used_bytes,free_bytes,largest_hole_bytes,blocks,holes");
    let segments = json["devices"][0]["segments"].as_array().unwrap();
    assert_eq!(lines.len(), 1 + segments.len(), "{csv}");
    let first: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(first[3], segments[0]["size"].to_string());
    assert_eq!(first[2], format!("{:#x}", segments[0]["addr"].as_u64().unwrap()));
    assert_eq!(memviz(["oom".as_ref(), snap.as_os_str(), "--csv".as_ref(), "--json".as_ref()]).status.code(), Some(2));
}

/// The help lists every value: `at --group-by`'s (aliases too), `--gpu`'s, and the compressors
/// of every command that reads a snapshot.
#[test]
fn help_lists_every_value() {
    let help = |args: &[&str]| String::from_utf8(memviz_ok(args.iter().chain(&["--help"]))).unwrap();
    let at = help(&["at"]);
    for v in [
        "stack",
        "site",
        "frame",
        "annotation",
        "size",
        "stream",
        "pool",
        "compile_context",
        "compile-context",
        "metadata",
        "category",
    ] {
        assert!(at.contains(v), "at --group-by: {v} missing");
    }
    let open = help(&["open"]);
    for gpu in
        ["h100", "a100", "a100-80", "a100-40", "h200", "a10g", "l40s", "v100", "v100-32", "v100-16", "4090", "rtx4090"]
    {
        assert!(memviz::viewer::axis::gpu_capacity(gpu).is_some(), "{gpu}");
        assert!(open.contains(gpu), "open --gpu: {gpu} missing");
    }
    for command in [
        &["open"][..],
        &["index"],
        &["stats"],
        &["at"],
        &["range"],
        &["steps"],
        &["diff"],
        &["segments"],
        &["oom"],
        &["find"],
        &["export", "layout"],
        &["export", "sampled"],
        &["export", "state"],
        &["export", "segments"],
    ] {
        assert!(help(command).contains("gzip / zstd / xz / bzip2 / lz4"), "{command:?}: the compressors");
    }
}

/// Labels say what they measure: `range` breaks down by category what it allocated (right under
/// "allocated", not under "peak"); `index -` states no ratio to a snapshot whose size it never
/// knew.
#[test]
fn labels_say_what_they_measure() {
    let gpt = data("gpt2_small.pickle");
    let r = String::from_utf8(memviz_ok(["range".as_ref(), gpt.as_os_str(), "1000..2000".as_ref()])).unwrap();
    let lines: Vec<&str> = r.lines().collect();
    let at = lines.iter().position(|l| l.trim_start().starts_with("allocated")).unwrap();
    assert!(lines[at + 1].trim_start().starts_with("by category"), "{r}");
    let peak = lines.iter().position(|l| l.trim_start().starts_with("peak")).unwrap();
    assert!(!lines[peak + 1].contains("by category"), "{r}");

    let dir = tempdir();
    let out = dir.path().join("piped.memviz");
    let piped = memviz_stdin(
        std::fs::File::open(&gpt).unwrap().into(),
        ["index".as_ref(), "-".as_ref(), "-o".as_ref(), out.as_os_str()],
    );
    let said = String::from_utf8_lossy(&piped.stderr);
    assert!(piped.status.success() && said.contains("indexed -:"), "{said}");
    assert!(!said.contains("× the snapshot"), "{said}");
}
