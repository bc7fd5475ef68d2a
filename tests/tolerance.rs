//! The reading policy (ARCHITECTURE.md): descriptive fields degrade, layout fields are strict.
//! Every real fixture under every mutation of tests/data/mutate.py lays out exactly as the
//! unmutated file, and `stats` counts what it tolerated.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::*;

/// Each mutation and what `stats --json` must count for it (`tolerated` key, or `unknown_keys`).
const MUTATIONS: [(&str, Option<&str>); 12] = [
    ("line_max", Some("frame_line_out_of_range")),
    ("line_neg", Some("frame_line_negative")),
    ("line_none", Some("frame_line_none")),
    ("filename_none", Some("frame_filename_not_str")),
    ("name_none", Some("frame_name_not_str")),
    ("frames_tuple", Some("tuple_as_list")),
    ("time_float", Some("float_time_us")),
    ("metadata_dict", Some("metadata_as_json")),
    ("merged_free", Some("merged_free")),
    ("unknown_keys", None),
    ("blocks_no_address", Some("block_without_address")),
    ("no_frames", None),
];

fn mutate(input: &Path, out: &Path) {
    let status = Command::new("python3")
        .arg(data("mutate.py"))
        .arg(input)
        .arg(out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("python3 is installed");
    assert!(status.success(), "mutate.py failed on {}", input.display());
}

fn json_of(args: &[&std::ffi::OsStr]) -> Value {
    serde_json::from_slice(&memviz_ok(args)).expect("valid JSON")
}

#[test]
fn mutation_corpus_lays_out_like_the_original_and_is_counted() {
    let dir = tempdir();
    let list = String::from_utf8(
        Command::new("python3").arg(data("mutate.py")).arg("--list").output().expect("python3").stdout,
    )
    .unwrap();
    let listed: Vec<&str> = list.lines().collect();
    assert_eq!(listed, MUTATIONS.map(|m| m.0), "every mutation of mutate.py has its expectation here");
    for name in REAL {
        let input = data(&format!("{name}.pickle"));
        mutate(&input, dir.path());
        let golden = json_file(&data(&format!("{name}.layout.json")));
        for (mutation, counted) in MUTATIONS {
            let m = dir.path().join(format!("{name}.{mutation}.pickle"));
            let layout = json_of(&["export".as_ref(), "layout".as_ref(), m.as_os_str()]);
            assert!(layout == golden, "{name}.{mutation}: export layout differs from the unmutated file");
            let stats = json_of(&["stats".as_ref(), "--json".as_ref(), m.as_os_str()]);
            match counted {
                Some(key) => {
                    let n = stats["tolerated"][key].as_u64().unwrap_or(0);
                    assert!(n > 0, "{name}.{mutation}: stats does not count {key}: {}", stats["tolerated"]);
                    let summary = stats["tolerated_summary"].as_str().unwrap_or("");
                    assert!(!summary.is_empty(), "{name}.{mutation}: no tolerated summary");
                }
                None if mutation == "unknown_keys" => {
                    let keys = &stats["unknown_keys"];
                    for ctx in ["snapshot", "event", "frame", "segment", "block"] {
                        let key = format!("{ctx}.zz_future_key");
                        assert!(keys[&key].as_u64().unwrap_or(0) > 0, "{name}: {key} not counted: {keys}");
                    }
                }
                None => {}
            }
        }
        std::fs::read_dir(dir.path()).unwrap().for_each(|e| std::fs::remove_file(e.unwrap().path()).unwrap());
    }
}

/// The line `stats` prints, on a real torch.compile recording (inductor frames say 2⁶⁴−1).
#[test]
fn inductor_lines_are_tolerated_and_shown_as_unknown() {
    let path = data("compiled.pickle");
    let text = String::from_utf8(memviz_ok(["stats".as_ref(), path.as_os_str()])).unwrap();
    assert!(text.contains("tolerated: 1 frame line out of range"), "{text}");
    let s = json_of(&["stats".as_ref(), "--json".as_ref(), path.as_os_str()]);
    assert_eq!(s["tolerated"]["frame_line_out_of_range"], 1, "one distinct inductor frame: {}", s["tolerated"]);
    // A file without oddities says nothing.
    let clean = data("gpt2_small.pickle");
    let text = String::from_utf8(memviz_ok(["stats".as_ref(), clean.as_os_str()])).unwrap();
    assert!(!text.contains("tolerated"), "{text}");
}

/// Structure errors stay errors: a wrong type where the layout needs the value.
#[test]
fn layout_fields_stay_strict() {
    let dir = tempdir();
    let cases = [
        ("size", r#"{"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": "abc"}]]}"#),
        ("addr", r#"{"segments": [], "device_traces": [[{"action": "alloc", "addr": -5, "size": 1}]]}"#),
        ("action", r#"{"segments": [], "device_traces": [[{"action": 3, "addr": 1, "size": 1}]]}"#),
        ("address", r#"{"segments": [{"address": "x", "total_size": 1, "blocks": []}], "device_traces": []}"#),
        ("total_size", r#"{"segments": [{"address": 0, "total_size": 1.5, "blocks": []}], "device_traces": []}"#),
        (
            "state",
            r#"{"segments": [{"address": 0, "total_size": 4, "blocks": [{"size": 4, "state": 7}]}], "device_traces": []}"#,
        ),
        (
            "size",
            r#"{"segments": [{"address": 0, "total_size": 4, "blocks": [{"size": null, "state": "inactive"}]}], "device_traces": []}"#,
        ),
    ];
    for (key, text) in cases {
        let path = dir.path().join("bad.json");
        std::fs::write(&path, text).unwrap();
        let err = assert_bad_input(&memviz(["stats".as_ref(), path.as_os_str()]), &path);
        assert!(err.contains(&format!("`{key}`")), "{key}: {err}");
    }
    // …while the same file with descriptive oddities reads.
    let path = dir.path().join("odd.json");
    std::fs::write(
        &path,
        r#"{"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 8, "stream": "s",
            "time_us": 1.5, "user_metadata": {"k": [1, 2]}, "pool_id": "p",
            "frames": [{"name": null, "filename": 3, "line": -1}, "not a frame line", 7]}]]}"#,
    )
    .unwrap();
    let s = json_of(&["stats".as_ref(), "--json".as_ref(), path.as_os_str()]);
    let t = &s["tolerated"];
    assert_eq!(t["float_time_us"], 1, "{t}");
    assert_eq!(t["metadata_as_json"], 1, "{t}");
    assert_eq!(t["wrong_type_ignored"], 2, "stream and pool_id: {t}");
    assert_eq!(t["frame_name_not_str"], 1, "{t}");
    assert_eq!(t["frame_filename_not_str"], 1, "{t}");
    assert_eq!(t["frame_line_negative"], 1, "{t}");
    assert_eq!(t["not_a_frame"], 1, "{t}");
}
