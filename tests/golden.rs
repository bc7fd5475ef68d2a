//! Layout parity with the goldens of ../shared/tools/timeline_oracle.py.

use std::path::PathBuf;

use crate::support::*;

#[test]
fn export_layout_equals_every_golden() {
    for (name, snapshot, golden) in fixtures() {
        let out = memviz_ok([std::ffi::OsStr::new("export"), "layout".as_ref(), snapshot.as_os_str()]);
        let ours: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        assert!(ours == golden_layout(&golden), "{name}: export layout differs from {}", golden.display());
    }
}

#[test]
fn export_to_file_and_single_device() {
    let dir = tempdir();
    let out = dir.path().join("two.json");
    let snap = data("synth/two_devices.pickle");
    memviz_ok([
        "export".as_ref(),
        "layout".as_ref(),
        snap.as_os_str(),
        "--device".as_ref(),
        "1".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    let ours = json_file(&out);
    let golden = json_file(&data("synth/two_devices.layout.json"));
    assert_eq!(ours["devices"].as_array().unwrap().len(), 1);
    assert_eq!(ours["devices"][0], golden["devices"][1]);
    // Nothing else is left beside the output (the temp file was renamed).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn unknown_device_is_an_error() {
    let snap = data("gpt2_small.pickle");
    let out = memviz(["export".as_ref(), "layout".as_ref(), snap.as_os_str(), "--device".as_ref(), "7".as_ref()]);
    let err = assert_bad_input(&out, &snap);
    assert!(err.contains("device 7"), "{err}");
}

#[test]
fn every_zero_is_a_usage_error() {
    let out = memviz(["export", "sampled", "x.pickle", "--every", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

/// Sampled export agrees with the oracle's own sampled output on the small fixtures.
#[test]
fn export_sampled_matches_layout_golden() {
    let snap = data("gpt2_small.pickle");
    let out = memviz_ok(["export".as_ref(), "sampled".as_ref(), snap.as_os_str(), "--every".as_ref(), "100".as_ref()]);
    let sampled: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let golden = json_file(&data("gpt2_small.layout.json"));
    let (s, g) = (&sampled["devices"][0], &golden["devices"][0]);
    assert_eq!(s["peak_bytes"], g["peak_bytes"]);
    let elements = g["elements"].as_array().unwrap();
    let offset_at = |el: &serde_json::Value, k: i64| {
        let mut off = None;
        for o in el["offsets"].as_array().unwrap() {
            if o[0].as_i64().unwrap() <= k {
                off = o[1].as_u64();
            }
        }
        off
    };
    let samples = s["samples"].as_array().unwrap();
    assert_eq!(samples.len(), g["actions"].as_u64().unwrap() as usize / 100);
    for sample in samples {
        let k = sample["action"].as_i64().unwrap();
        assert_eq!(sample["total"], g["totals"][k as usize]);
        for pair in sample["stack"].as_array().unwrap() {
            let el = &elements[pair[0].as_u64().unwrap() as usize];
            assert_eq!(offset_at(el, k), pair[1].as_u64(), "element {} at action {k}", pair[0]);
        }
    }
}

/// The 195 MB benchmark snapshot against its sampled golden (every 20,000 actions).
#[test]
fn scale_sampled_equals_golden() {
    let shared = repo().join("../shared/fixtures");
    let xz = shared.join("snapshots/scale_2m7.pickle.xz");
    if !xz.exists() {
        eprintln!("skipped: {} is not here", xz.display());
        return;
    }
    let pickle = scale_pickle(&xz);
    let out =
        memviz_ok(["export".as_ref(), "sampled".as_ref(), pickle.as_os_str(), "--every".as_ref(), "20000".as_ref()]);
    let ours: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert!(ours == json_file(&shared.join("golden/scale_2m7.sampled.json")), "scale_2m7 sampled export differs");
}

/// Decompresses the benchmark once into target/bench-data (shared with the benches).
pub fn scale_pickle(xz: &std::path::Path) -> PathBuf {
    let dir = repo().join("target/bench-data");
    let out = dir.join("scale_2m7.pickle");
    if !out.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let tmp = dir.join(format!("scale_2m7.pickle.tmp-{}", std::process::id()));
        let status = std::process::Command::new("xz")
            .arg("-dc")
            .arg(xz)
            .stdout(std::fs::File::create(&tmp).unwrap())
            .status()
            .expect("xz is installed");
        assert!(status.success());
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}
