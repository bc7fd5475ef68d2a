//! `memviz stats`: the numbers agree with the layout goldens and the text reads well.

use crate::support::*;

fn stats_json(rel: &str) -> serde_json::Value {
    let path = data(rel);
    serde_json::from_slice(&memviz_ok(["stats".as_ref(), "--json".as_ref(), path.as_os_str()])).unwrap()
}

#[test]
fn peak_and_top_allocations_agree_with_the_golden() {
    for name in REAL {
        let s = stats_json(&format!("{name}.pickle"));
        let g = json_file(&data(&format!("{name}.layout.json")));
        let (d, gd) = (&s["devices"][0], &g["devices"][0]);
        assert_eq!(d["peak"]["bytes"], gd["peak_bytes"], "{name}");
        assert_eq!(d["actions"], gd["actions"], "{name}");
        let k = d["peak"]["action"].as_i64().unwrap();
        assert_eq!(gd["totals"][k as usize], gd["peak_bytes"], "{name}: the peak action has the peak total");
        // The largest live allocations at the peak, from the golden: sizes must match.
        let elements = gd["elements"].as_array().unwrap();
        let mut live: Vec<u64> = elements
            .iter()
            .filter(|e| e["start"].as_i64().unwrap() <= k && e["end"].as_i64().is_none_or(|end| end > k))
            .map(|e| e["size"].as_u64().unwrap())
            .collect();
        live.sort_unstable_by(|a, b| b.cmp(a));
        let ours: Vec<u64> = d["top_at_peak"].as_array().unwrap().iter().map(|a| a["size"].as_u64().unwrap()).collect();
        assert_eq!(ours, live[..ours.len()], "{name}");
        assert_eq!(ours.len(), live.len().min(10));
        let by_origin = &d["elements"];
        assert_eq!(by_origin["alloc"].as_u64().unwrap() as usize, elements.len(), "{name}: all alloc");
    }
}

#[test]
fn oom_and_annotations_and_truncation_are_reported() {
    let s = stats_json("oom_streams.pickle");
    let d = &s["devices"][0];
    let oom = &d["ooms"][0];
    assert_eq!(oom["requested_bytes"], 429_496_729_600u64);
    assert_eq!(oom["device_free_bytes"], 149_112_881_152u64);
    assert_eq!(d["events_by_action"]["oom"], 1);
    assert_eq!(d["trace_truncated"], false);
    let during: Vec<&str> = d["peak"]["annotation"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(during[0].starts_with("## step "), "{during:?}");

    let t = stats_json("synth/truncated_ring.pickle");
    assert_eq!(t["devices"][0]["trace_truncated"], true);
    assert_eq!(t["devices"][0]["elements"]["free_only"], 4);
    assert_eq!(t["devices"][0]["elements"]["ghost"], 3);

    let u = stats_json("synth/no_frames_time.pickle");
    assert_eq!(u["devices"][0]["events_by_action"]["mystery_action"], 1);
    assert!(u["unknown_keys"]["event.future_key"].as_u64().unwrap() >= 1, "{}", u["unknown_keys"]);
}

#[test]
fn reserved_memory_follows_segment_events() {
    // expandable segments grow by segment_map; the reserved peak is at least what the dump holds.
    for name in REAL {
        let s = stats_json(&format!("{name}.pickle"));
        let r = &s["devices"][0]["reserved"];
        assert!(r["peak_bytes"].as_u64() >= r["final_bytes"].as_u64(), "{name}: {r}");
        assert!(r["peak_bytes"].as_u64() >= s["devices"][0]["peak"]["bytes"].as_u64(), "{name}: reserved ≥ allocated");
    }
}

#[test]
fn text_report_is_aligned_and_complete() {
    let path = data("gpt2_small.pickle");
    let text = String::from_utf8(memviz_ok(["stats".as_ref(), path.as_os_str()])).unwrap();
    for label in ["events", "elements", "peak", "reserved peak", "trace", "largest live allocations at the peak"] {
        assert!(text.contains(&format!("  {label}")), "missing {label}:\n{text}");
    }
    // Values start in the same column (two spaces of indent, a label padded to 18).
    for line in text.lines().filter(|l| l.starts_with("  ") && !l.starts_with("    ") && !l.ends_with(':')) {
        let b = line.as_bytes();
        assert!(b.len() > 20 && b[19] == b' ' && b[20] != b' ', "unaligned row: {line:?}");
    }
}
