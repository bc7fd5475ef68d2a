//! The allocator's state over time against `allocator_oracle.py`'s goldens (its figures are
//! PyTorch's own), the segment timeline, and the OOM explainer.

use crate::support::*;

/// The fixtures with allocator goldens (`tests/data/allocator/NAME.{state,segments}.json`, made
/// with `allocator_oracle.py state --every 500` and `segments`): training, expandable segments,
/// a side stream with an OOM, a fragmentation OOM under a cap, CUDA graphs with a MemPool.
const FIXTURES: [&str; 5] = ["gpt2_small", "expandable", "oom_streams", "frag_oom", "cudagraph"];

#[test]
fn export_state_and_segments_equal_the_oracle() {
    for name in FIXTURES {
        let snap = data(&format!("{name}.pickle"));
        let state =
            memviz_ok(["export".as_ref(), "state".as_ref(), snap.as_os_str(), "--every".as_ref(), "500".as_ref()]);
        let ours: serde_json::Value = serde_json::from_slice(&state).unwrap();
        assert!(ours == json_file(&data(&format!("allocator/{name}.state.json"))), "{name}: export state differs");
        let segs = memviz_ok(["export".as_ref(), "segments".as_ref(), snap.as_os_str()]);
        let ours: serde_json::Value = serde_json::from_slice(&segs).unwrap();
        let golden = json_file(&data(&format!("allocator/{name}.segments.json")));
        assert!(ours == golden, "{name}: export segments differs");

        // The archive stores the segment timeline: exported from it, it is the same.
        let dir = tempdir();
        let archive = dir.path().join(format!("{name}.memviz"));
        memviz_ok(["index".as_ref(), snap.as_os_str(), "-o".as_ref(), archive.as_os_str()]);
        let stored = memviz_ok(["export".as_ref(), "segments".as_ref(), archive.as_os_str()]);
        let stored: serde_json::Value = serde_json::from_slice(&stored).unwrap();
        assert!(stored == golden, "{name}: the archive's segment timeline differs");
    }
}

/// Every per-action series of the archive equals the allocator's state right after that
/// action's event, and its min/max levels bound the values.
#[test]
fn the_archive_series_follow_the_state() {
    use memviz::archive::Session;
    use memviz::model::{ActionIdx, DeviceId, DeviceIdx};
    for name in FIXTURES {
        let snap_path = data(&format!("{name}.pickle"));
        let dir = tempdir();
        let archive = dir.path().join("a.memviz");
        memviz_ok(["index".as_ref(), snap_path.as_os_str(), "-o".as_ref(), archive.as_os_str()]);
        let s = Session::from_archive(memviz::file::open(&archive).unwrap());
        let (snap, _) = memviz::ingest::read_path(&snap_path).unwrap();
        let d = DeviceIdx(0);
        let n = snap.trace(DeviceId(0)).len() as i64;
        let (all, _) = memviz::allocator::states(&snap, DeviceId(0), &(-1..n).collect());
        let l = s.layout(d);
        let series = [
            ("reserved", s.allocator_series(d, |a| &a.reserved)),
            ("allocated", s.allocator_series(d, |a| &a.allocated)),
            ("requested", s.allocator_series(d, |a| &a.requested)),
            ("pending free", s.allocator_series(d, |a| &a.pending_free)),
            ("unallocated", s.allocator_series(d, |a| &a.unallocated)),
            ("largest free", s.allocator_series(d, |a| &a.largest_free)),
            ("segments", s.allocator_series(d, |a| &a.segments)),
        ];
        let pools = &s.device(d).allocator.pools;
        for k in 0..l.actions.len() {
            let st = match l.action_event(ActionIdx::at(k)).get() {
                Some(e) => &all[(e.index() - snap.trace(DeviceId(0)).start) + 1],
                None => all.last().unwrap(),
            };
            let want = [
                st.reserved,
                st.allocated,
                st.requested,
                st.pending_free,
                st.free(),
                st.largest_free,
                st.segments.len() as u64,
            ];
            for ((what, got), want) in series.iter().zip(want) {
                assert_eq!(got[k], want, "{name}: {what} after action {k}");
            }
            for p in pools.iter() {
                let pool = (p.pool.0.to_native(), p.pool.1.to_native());
                let j = p.actions.iter().rposition(|a| a.to_native() as usize <= k).unwrap();
                let want: u64 =
                    st.segments.iter().filter(|m| m.segment.pool == Some(pool)).map(|m| m.segment.size).sum();
                assert_eq!(p.reserved[j].to_native(), want, "{name}: pool {pool:?} after action {k}");
            }
        }
        if name == "cudagraph" {
            assert!(!pools.is_empty(), "cudagraph has private pools");
        }
        // The segment timeline knows each segment's pool by the same rule as the allocator's
        // pools: every pool with reserved bytes has segments, and no segment has another pool.
        let seg_pools: std::collections::BTreeSet<(i64, i64)> = s.segment_pools(d).into_iter().flatten().collect();
        let series_pools: std::collections::BTreeSet<(i64, i64)> = pools
            .iter()
            .filter(|p| p.reserved.iter().any(|r| r.to_native() > 0))
            .map(|p| (p.pool.0.to_native(), p.pool.1.to_native()))
            .collect();
        assert_eq!(seg_pools, series_pools, "{name}: the segments' pools");
        for (what, level) in
            [("reserved", &s.device(d).allocator.reserved), ("largest", &s.device(d).allocator.largest_free)]
        {
            let values = if what == "reserved" { &series[0].1 } else { &series[5].1 };
            let finest = &level.levels[0];
            for (b, chunk) in values.chunks(finest.actions_per_bucket.to_native() as usize).enumerate() {
                assert_eq!(finest.min[b].to_native(), *chunk.iter().min().unwrap(), "{name}: {what} bucket {b}");
                assert_eq!(finest.max[b].to_native(), *chunk.iter().max().unwrap(), "{name}: {what} bucket {b}");
            }
            let top = level.levels.last().unwrap();
            assert_eq!(top.max[0].to_native(), *values.iter().max().unwrap());
        }
    }
}

/// frag_oom's last OOM: torch said 1.83 GiB allocated and 2.35 GiB reserved but unallocated.
#[test]
fn the_state_before_an_oom_is_torchs_own() {
    let snap = data("frag_oom.pickle");
    let out = memviz_ok(["export".as_ref(), "state".as_ref(), snap.as_os_str(), "--events".as_ref(), "0".as_ref()]);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let ooms = v["devices"][0]["ooms"].as_array().unwrap();
    assert_eq!(ooms.len(), 2);
    let last = &ooms[1];
    let gib = |k: &str| last[k].as_f64().unwrap() / (1u64 << 30) as f64;
    assert_eq!(format!("{:.2}", gib("allocated")), "1.83");
    assert_eq!(format!("{:.2}", gib("reserved_unallocated")), "2.35");
    let torch = std::fs::read_to_string(data("frag_oom.torch_oom.txt")).unwrap();
    assert!(torch.contains("1.83 GiB is allocated by PyTorch, and 2.35 GiB is reserved by PyTorch but unallocated"));
}

/// `memviz oom`: torch's own figures (within 1 %), a verdict that follows from them, what
/// filled the memory, and advice; `stats` gives the verdict in one line.
#[test]
fn oom_explains_with_torchs_numbers() {
    let snap = data("frag_oom.pickle");
    let v: serde_json::Value =
        serde_json::from_slice(&memviz_ok(["oom".as_ref(), snap.as_os_str(), "--json".as_ref()])).unwrap();
    let ooms = v["devices"].as_array().unwrap();
    assert_eq!(ooms.len(), 2);
    let last = &ooms[1];
    let gib = |k: &str| last[k].as_f64().unwrap() / (1u64 << 30) as f64;
    // torch: "1.83 GiB is allocated by PyTorch, and 2.35 GiB is reserved by PyTorch but unallocated"
    assert!((gib("allocated_bytes") / 1.83 - 1.0).abs() < 0.01, "{}", gib("allocated_bytes"));
    assert!((gib("reserved_unallocated_bytes") / 2.35 - 1.0).abs() < 0.01, "{}", gib("reserved_unallocated_bytes"));
    assert_eq!(last["kind"], "fragmentation");
    assert_eq!(last["requested_bytes"], 64u64 << 20);
    assert!(last["largest_free_bytes"].as_u64().unwrap() < 64 << 20);
    assert!(last["annotation"][0] == "## big request ##", "{}", last["annotation"]);
    assert!(last["filled_by"][0]["bytes"].as_u64().unwrap() > 1 << 30);
    let advice: Vec<&str> = last["advice"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(advice.iter().any(|a| a.contains("expandable_segments:True")), "{advice:?}");
    // None of the 214 segments is entirely free: empty_cache() returns nothing, and the advice
    // says where the holes are instead.
    assert!(advice.iter().any(|a| a.contains("empty_cache() would not help: none of the 214 segments")), "{advice:?}");
    assert!(
        advice.iter().any(|a| a.starts_with("where the holes are: 2.35 GiB") && a.contains("214 segments")),
        "{advice:?}"
    );
    // Every setting suggested is one PyTorch accepts: max_split_size_mb must be > 20.
    for oom in ooms {
        for a in oom["advice"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()) {
            if let Some(mb) = a.split("max_split_size_mb:").nth(1) {
                let mb: u64 = mb.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap();
                assert!(mb > 20, "{a}");
            }
        }
    }
    assert!(!ooms[0]["advice"].to_string().contains("max_split_size"), "a 3 MiB request: no max_split_size_mb");
    assert!(advice.iter().any(|a| a.contains("max_split_size_mb:64")), "{advice:?}");

    let streams = data("oom_streams.pickle");
    let v: serde_json::Value =
        serde_json::from_slice(&memviz_ok(["oom".as_ref(), streams.as_os_str(), "--json".as_ref()])).unwrap();
    assert_eq!(v["devices"][0]["kind"], "too_large", "a 400 GiB request on a 140 GiB device");

    let stats = String::from_utf8(memviz_ok(["stats".as_ref(), snap.as_os_str()])).unwrap();
    assert!(stats.contains("— fragmentation: 2.35 GiB are free inside segments, but the largest hole is"), "{stats}");
    assert!(stats.contains("at the peak     4.18 GiB reserved for 3.66 GiB allocated"), "{stats}");
    let none = String::from_utf8(memviz_ok(["oom".as_ref(), data("gpt2_small.pickle").as_os_str()])).unwrap();
    assert!(none.contains("device 0 — no OOM event"), "{none}");
}

/// `memviz segments`: the memory map at an instant, its totals equal to the oracle's state.
#[test]
fn segments_show_the_memory_map() {
    let snap = data("frag_oom.pickle");
    let json = |args: &[&str]| -> serde_json::Value {
        let mut a: Vec<&std::ffi::OsStr> = vec!["segments".as_ref(), snap.as_os_str(), "--json".as_ref()];
        a.extend(args.iter().map(std::ffi::OsStr::new));
        serde_json::from_slice(&memviz_ok(a)).unwrap()
    };
    let at_oom = &json(&["--oom"])["devices"][0];
    let golden = json_file(&data("allocator/frag_oom.state.json"));
    let before = golden["devices"][0]["states"].as_array().unwrap().iter().find(|s| s["event"] == 2353).unwrap();
    assert_eq!(at_oom["event"], 2353, "just before the last OOM (event 2,354)");
    for (ours, theirs) in
        [("reserved_bytes", "reserved"), ("allocated_bytes", "allocated"), ("largest_free_bytes", "largest_free")]
    {
        assert_eq!(at_oom[ours], before[theirs], "{ours}");
    }
    assert_eq!(at_oom["segments"].as_array().unwrap().len(), before["segments"].as_array().unwrap().len());
    let frag = at_oom["fragmentation"].as_f64().unwrap();
    assert!(frag > 0.99, "2.35 GiB free in holes of at most 6.5 MiB: {frag}");
    assert_eq!(json(&["--oom", "1"])["devices"][0]["event"], 1283);
    assert_eq!(json(&["--end"])["devices"][0]["event"], 2354);
    let text = String::from_utf8(memviz_ok([
        "segments".as_ref(),
        snap.as_os_str(),
        "--oom".as_ref(),
        "--top".as_ref(),
        "3".as_ref(),
    ]))
    .unwrap();
    assert!(text.contains("214 segments") && text.contains("… 211 more segments"), "{text}");
    assert!(text.contains("█") && text.contains("·"), "a bar of blocks and holes: {text}");
    let err = assert_bad_input(
        &memviz(["segments".as_ref(), data("gpt2_small.pickle").as_os_str(), "--oom".as_ref()]),
        &data("gpt2_small.pickle"),
    );
    assert!(err.contains("0 OOM events"), "{err}");
}

/// An archive from before format 3 opens and answers, and says to re-index for what it lacks.
#[test]
fn an_older_archive_says_to_reindex_for_the_allocator() {
    let old = data("golden/gpt2_small.v2.memviz");
    let err = assert_bad_input(&memviz(["segments".as_ref(), old.as_os_str(), "--end".as_ref()]), &old);
    assert!(err.contains("re-index to see this"), "{err}");
    assert!(memviz(["at".as_ref(), old.as_os_str(), "--peak".as_ref()]).status.success());
}
