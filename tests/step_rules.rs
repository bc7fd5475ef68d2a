//! Steps where nobody wrote `## step N ##`: real recordings (`tests/data/steps/record_steps.py`)
//! whose `NAME.steps.json` holds the trace index at which each training step really began.

use memviz::archive::Session;
use memviz::model::{ActionIdx, DeviceIdx};

use crate::support::*;

/// (fixture, the rule `steps` must say it used, the family)
const JOBS: [(&str, &str, &str); 5] = [
    ("fsdp2_steps", "numbered", "## step # ##"),
    ("lightning_fit", "repeated", "Optimizer.step#Adam.step"),
    ("lightning_plain", "repeated", "Optimizer.step#Adam.step"),
    ("plain_loop", "optimizer_marks", "Optimizer.step#AdamW.step"),
    // plain_loop with its spans taken out (the same recording, `external_annotations` deleted).
    ("plain_loop_nospans", "trace", "(the trace's loop)"),
];

#[test]
fn steps_are_found_where_each_training_step_began() {
    let dir = tempdir();
    for (name, rule, family) in JOBS {
        let snapshot = data(&format!("steps/{name}.pickle"));
        let archive = dir.path().join(format!("{name}.memviz"));
        memviz_ok(["index".as_ref(), snapshot.as_os_str(), "-o".as_ref(), archive.as_os_str()]);
        let v: serde_json::Value =
            serde_json::from_slice(&memviz_ok(["steps".as_ref(), archive.as_os_str(), "--json".as_ref()])).unwrap();
        let report = &v["devices"][0];
        assert_eq!(report["rule"], rule, "{name}");
        assert_eq!(report["family"], family, "{name}");
        assert!(report["found_by"].as_str().unwrap().contains(if rule == "trace" { "no span" } else { family }));
        let truth: Vec<i64> = json_file(&data(&format!("steps/{name}.steps.json")))["step_starts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect();
        let s = Session::from_archive(memviz::file::open_verified(&archive).unwrap());
        let found: Vec<i64> = report["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|st| s.event_of_action(DeviceIdx(0), ActionIdx(st["start_action"].as_u64().unwrap() as u32)))
            .collect();
        assert_eq!(found.len(), truth.len(), "{name}: {found:?} for {truth:?}");
        // Within 2 % of a step's length of where it began; the first step of the optimizer's
        // marks starts with the trace (nothing marks where it began).
        let step = (truth[truth.len() - 1] - truth[0]) / (truth.len() as i64 - 1);
        for (i, (&f, &t)) in found.iter().zip(&truth).enumerate() {
            let off = if i == 0 && rule == "optimizer_marks" { (t - f).max(0) - t } else { f - t };
            assert!(off.abs() * 50 <= step, "{name}: step {i} starts at event {f}, began at {t}");
        }
    }
}

/// A layer index that restarts in every step is no step number, and a family inside another is
/// not the loop: FSDP2's per-layer spans lose to the `## step N ##` spans around them (checked
/// above); a loop that only builds a model or allocates a tensor per iteration is no training
/// loop; every device of a snapshot gets a report.
#[test]
fn what_is_not_a_loop_is_not_taken_for_one_and_every_device_is_reported() {
    for rel in ["frag_oom.pickle", "oom_streams.pickle"] {
        let out = memviz(["steps".as_ref(), data(rel).as_os_str(), "--no-cache".as_ref()]);
        assert_eq!(out.status.code(), Some(1), "{rel}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("no steps found") && err.lines().count() == 1, "{err}");
    }
    // Each device gets its report, steps found or not (the command lists them all, and fails
    // only when no device has any).
    let dir = tempdir();
    let archive = dir.path().join("two.memviz");
    let snapshot = data("synth/two_devices.pickle");
    memviz_ok(["index".as_ref(), snapshot.as_os_str(), "-o".as_ref(), archive.as_os_str()]);
    let s = Session::from_archive(memviz::file::open_verified(&archive).unwrap());
    for d in [DeviceIdx(0), DeviceIdx(1)] {
        let data = memviz::archive::DeviceData::new(&s, d);
        let reports = memviz::analysis::steps::steps(&data.timeline(), s.root(), None);
        assert_eq!(reports.len(), 1);
        assert!(reports[0].steps.is_empty() && reports[0].found_by.contains("no span family tiles"));
    }
}
