//! `memviz at`, `range`, `steps` and `diff`: every number cross-checked against the layout goldens.

use std::ffi::OsStr;
use std::path::Path;

use serde_json::Value;

use crate::support::*;

fn json_of<I, S>(args: I) -> Value
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    serde_json::from_slice(&memviz_ok(args)).expect("valid JSON")
}

/// What the golden says about one device: totals after each action, with the initial total.
struct Golden {
    /// The device as JSON writes it: an ordinal, or `"host"`.
    device: Value,
    initial: u64,
    totals: Vec<u64>,
    peak: u64,
    elements: Vec<Value>,
}

impl Golden {
    fn all(path: &Path) -> Vec<Golden> {
        golden_layout(path)["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let elements = d["elements"].as_array().unwrap().clone();
                let initial = elements.iter().filter(|e| e["start"] == -1).map(|e| e["size"].as_u64().unwrap()).sum();
                Golden {
                    device: d["device"].clone(),
                    initial,
                    totals: d["totals"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect(),
                    peak: d["peak_bytes"].as_u64().unwrap(),
                    elements,
                }
            })
            .collect()
    }

    /// Total after action `k` (−1: the initial state).
    fn total(&self, k: i64) -> u64 {
        if k < 0 { self.initial } else { self.totals[k as usize] }
    }

    fn live_count(&self, k: i64) -> u64 {
        let live = |e: &&Value| e["start"].as_i64().unwrap() <= k && e["end"].as_i64().is_none_or(|end| end > k);
        self.elements.iter().filter(live).count() as u64
    }

    /// The first action at the peak, −1 when the initial state is the peak.
    fn peak_action(&self) -> i64 {
        if self.peak == self.initial {
            return -1;
        }
        self.totals.iter().position(|&t| t == self.peak).unwrap() as i64
    }
}

fn check_groups(what: &str, d: &Value) {
    let groups = d["groups"].as_array().unwrap();
    let bytes: u64 = groups.iter().map(|g| g["bytes"].as_u64().unwrap()).sum();
    let count: u64 = groups.iter().map(|g| g["count"].as_u64().unwrap()).sum();
    assert_eq!(bytes, d["total_bytes"].as_u64().unwrap(), "{what}: groups add up to the total");
    assert_eq!(count, d["count"].as_u64().unwrap(), "{what}");
    if !groups.is_empty() && bytes > 0 {
        let share: f64 = groups.iter().map(|g| g["share_pct"].as_f64().unwrap()).sum();
        assert!((share - 100.0).abs() < 1e-6, "{what}: shares sum to {share}");
    }
}

#[test]
fn live_set_totals_equal_the_golden_at_every_sampled_action() {
    for (name, snapshot, golden) in fixtures() {
        for g in Golden::all(&golden) {
            let n = g.totals.len() as i64;
            let dev = g.device.to_string().trim_matches('"').to_owned();
            let mut ks = vec![-1, 0, n / 3, n / 2, n - 1];
            ks.retain(|&k| k < n);
            ks.dedup();
            for k in ks {
                let v = json_of([
                    "at".as_ref(),
                    snapshot.as_os_str(),
                    "--json".as_ref(),
                    "--device".as_ref(),
                    dev.as_ref(),
                    "--action".as_ref(),
                    k.to_string().as_ref(),
                ]);
                let d = &v["devices"][0];
                let what = format!("{name} device {dev} action {k}");
                assert_eq!(d["action"], k, "{what}");
                assert_eq!(d["total_bytes"].as_u64().unwrap(), g.total(k), "{what}");
                assert_eq!(d["count"].as_u64().unwrap(), g.live_count(k), "{what}");
                assert_eq!(d["actions"].as_i64().unwrap(), n, "{what}");
                check_groups(&what, d);
            }
        }
    }
}

#[test]
fn at_peak_is_each_devices_golden_peak() {
    for (name, snapshot, golden) in fixtures() {
        let v = json_of(["at".as_ref(), snapshot.as_os_str(), "--json".as_ref(), "--peak".as_ref()]);
        let goldens = Golden::all(&golden);
        let devices = v["devices"].as_array().unwrap();
        assert_eq!(devices.len(), goldens.len(), "{name}");
        for (d, g) in devices.iter().zip(&goldens) {
            assert_eq!(d["device"], g.device, "{name}");
            assert_eq!(d["total_bytes"].as_u64().unwrap(), g.peak, "{name}");
            assert_eq!(d["peak_bytes"].as_u64().unwrap(), g.peak, "{name}");
            assert_eq!(d["action"].as_i64().unwrap(), g.peak_action(), "{name}");
            assert_eq!(d["is_peak"], true, "{name}");
            check_groups(&name, d);
        }
    }
}

#[test]
fn every_grouping_adds_up() {
    let snap = data("gpt2_small.pickle");
    let mut labels = Vec::new();
    for by in ["stack", "frame", "annotation", "size"] {
        let v = json_of([
            "at".as_ref(),
            snap.as_os_str(),
            "--json".as_ref(),
            "--peak".as_ref(),
            "--group-by".as_ref(),
            by.as_ref(),
        ]);
        let d = &v["devices"][0];
        assert_eq!(d["group_by"], if by == "stack" { "site" } else { by }, "--csv's name, the one --group-by takes");
        check_groups(by, d);
        labels.push(
            d["groups"].as_array().unwrap().iter().map(|g| g["label"].as_str().unwrap().to_owned()).collect::<Vec<_>>(),
        );
    }
    // Annotations: the spans open when the peak's allocations were made.
    assert!(labels[2].iter().any(|l| l == "## forward ##"), "{:?}", labels[2]);
    assert!(labels[2].iter().all(|l| !l.starts_with("## step")), "innermost spans only: {:?}", labels[2]);
    // Sizes: power-of-two buckets, largest first.
    assert_eq!(labels[3][0], "32 MiB – 64 MiB");
    // Frames merge sites: fewer rows than sites.
    assert!(labels[1].len() < labels[0].len());
}

#[test]
fn at_time_maps_to_the_last_action_at_or_before_it() {
    let snap = data("gpt2_small.pickle");
    let at = |args: &[&str]| {
        let mut all = vec!["at", snap.to_str().unwrap(), "--json"];
        all.extend_from_slice(args);
        json_of(all)["devices"][0].clone()
    };
    let by_action = at(&["--action", "2000"]);
    let t = by_action["time_us"].as_i64().unwrap();
    let by_time = at(&["--time", &format!("{t}us")]);
    assert!(by_time["action"].as_i64().unwrap() >= 2000);
    assert_eq!(by_time["time_us"].as_i64().unwrap(), t);
    let ms = at(&["--time", &format!("{}ms", t as f64 / 1000.0)]);
    assert_eq!(ms["action"], by_time["action"]);
    // Before the first action: the initial state; past the end: said, not clamped.
    assert_eq!(at(&["--time", "0us"])["action"], -1);
    let err = assert_bad_input(&memviz(["at".as_ref(), snap.as_os_str(), "--time".as_ref(), "60min".as_ref()]), &snap);
    assert!(err.contains("60 min 0 s is past the end of device 0's trace (its last action is at"), "{err}");
}

#[test]
fn at_rejects_actions_out_of_range_and_needs_an_instant() {
    let snap = data("gpt2_small.pickle");
    let out = memviz(["at".as_ref(), snap.as_os_str(), "--action".as_ref(), "3307".as_ref()]);
    let err = assert_bad_input(&out, &snap);
    assert!(err.contains("action 3,307 is out of range on device 0 (-1..3,307"), "says the valid range: {err}");
    assert_eq!(memviz(["at".as_ref(), snap.as_os_str()]).status.code(), Some(2));
    assert_eq!(
        memviz(["at".as_ref(), snap.as_os_str(), "--peak".as_ref(), "--action".as_ref(), "1".as_ref()]).status.code(),
        Some(2)
    );
    assert_eq!(
        memviz(["at".as_ref(), snap.as_os_str(), "--time".as_ref(), "5 parsecs".as_ref()]).status.code(),
        Some(2)
    );
    let bad = data("bad/truncated.pickle.gz");
    assert_bad_input(&memviz(["at".as_ref(), bad.as_os_str(), "--peak".as_ref()]), &bad);
}

#[test]
fn at_text_reads_well() {
    let snap = data("gpt2_small.pickle");
    let text = String::from_utf8(memviz_ok([
        "at".as_ref(),
        snap.as_os_str(),
        "--peak".as_ref(),
        "--top".as_ref(),
        "3".as_ref(),
    ]))
    .unwrap();
    assert!(text.contains("device 0 — after action 1,077 (the peak), 686.213 ms into the trace"), "{text}");
    assert!(text.contains("live      378 MiB (396,741,640 B) in 252 allocations"), "{text}");
    assert!(text.contains("during    ## step 1 ## › ## backward ##"), "{text}");
    assert!(text.contains("forward (activations.py:66)  [stack 21]"), "{text}");
    assert!(text.contains("more rows"), "{text}");
}

#[test]
fn range_net_growth_equals_the_difference_of_golden_totals() {
    for (name, snapshot, golden) in fixtures() {
        for g in Golden::all(&golden) {
            let n = g.totals.len() as i64;
            let dev = g.device.to_string().trim_matches('"').to_owned();
            for (a, b) in [(0, n), (0, n / 2), (n / 3, 2 * n / 3), (n / 2, n / 2), (n - 1, n), (1, n)] {
                if !(0 <= a && a <= b && b <= n) {
                    continue;
                }
                let v = json_of([
                    "range".as_ref(),
                    snapshot.as_os_str(),
                    format!("{a}..{b}").as_ref(),
                    "--json".as_ref(),
                    "--device".as_ref(),
                    dev.as_ref(),
                ]);
                let d = &v["devices"][0];
                let what = format!("{name} device {dev} {a}..{b}");
                let (alloc, freed) = (d["allocated"]["bytes"].as_i64().unwrap(), d["freed"]["bytes"].as_i64().unwrap());
                let revealed = d["revealed"]["bytes"].as_i64().unwrap();
                let (before, after) = (g.total(a - 1) as i64, g.total(b - 1) as i64);
                assert_eq!(alloc + revealed - freed, after - before, "{what}");
                assert_eq!(d["net_bytes"].as_i64().unwrap(), after - before, "{what}");
                assert_eq!(d["total_before"].as_i64().unwrap(), before, "{what}");
                assert_eq!(d["total_after"].as_i64().unwrap(), after, "{what}");
                // Allocations in the range, from the golden's elements.
                // A ghost drawn as a snapshot's one action was not allocated there.
                let made: Vec<&Value> = g
                    .elements
                    .iter()
                    .filter(|e| e["origin"] == "alloc" && (a..b).contains(&e["start"].as_i64().unwrap()))
                    .collect();
                let made_bytes: i64 = made.iter().map(|e| e["size"].as_i64().unwrap()).sum();
                assert_eq!(alloc, made_bytes, "{what}");
                assert_eq!(d["allocated"]["count"].as_u64().unwrap(), made.len() as u64, "{what}");
                let kept: i64 = made
                    .iter()
                    .filter(|e| e["end"].as_i64().is_none_or(|end| end >= b))
                    .map(|e| e["size"].as_i64().unwrap())
                    .sum();
                assert_eq!(d["still_live"]["bytes"].as_i64().unwrap(), kept, "{what}");
                let by_site: i64 =
                    d["still_live_by_site"].as_array().unwrap().iter().map(|s| s["bytes"].as_i64().unwrap()).sum();
                assert_eq!(by_site, kept, "{what}");
                assert_eq!(
                    d["transient"]["count"].as_u64().unwrap() + d["still_live"]["count"].as_u64().unwrap(),
                    made.len() as u64
                );
                let hist: i64 = d["histogram"].as_array().unwrap().iter().map(|h| h["bytes"].as_i64().unwrap()).sum();
                assert_eq!(hist, alloc, "{what}");
                assert_eq!(d["churn"]["bytes"].as_i64().unwrap(), alloc + freed);
                if a < b {
                    let peak = g.totals[a as usize..b as usize].iter().max().copied().unwrap();
                    assert_eq!(d["peak_bytes"].as_u64().unwrap(), peak, "{what}");
                }
            }
        }
    }
}

#[test]
fn range_open_ends_and_errors() {
    let snap = data("gpt2_small.pickle");
    let range =
        |r: &str| json_of(["range".as_ref(), snap.as_os_str(), r.as_ref(), "--json".as_ref()])["devices"][0].clone();
    let all = range("..");
    assert_eq!((all["start"].as_u64(), all["end"].as_u64()), (Some(0), Some(3307)));
    assert_eq!(range("0..3307")["net_bytes"], all["net_bytes"]);
    assert_eq!(range("..100")["start"], 0);
    assert_eq!(range("100..")["end"], 3307);
    let out = memviz(["range".as_ref(), snap.as_os_str(), "10..4000".as_ref()]);
    let err = assert_bad_input(&out, &snap);
    assert!(err.contains("out of range (0..3,307 on device 0"), "says the valid range: {err}");
    assert_bad_input(&memviz(["range".as_ref(), snap.as_os_str(), "20..10".as_ref()]), &snap);
    assert_eq!(memviz(["range".as_ref(), snap.as_os_str(), "10-20".as_ref()]).status.code(), Some(2));
}

#[test]
fn steps_on_gpt2_small_finds_four_steps_with_golden_peaks() {
    let snap = data("gpt2_small.pickle");
    let g = &Golden::all(&data("gpt2_small.layout.json"))[0];
    let v =
        json_of(["steps".as_ref(), snap.as_os_str(), "--annotation".as_ref(), "## step".as_ref(), "--json".as_ref()]);
    let d = &v["devices"][0];
    let steps = d["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4);
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(s["name"], format!("## step {i} ##"));
        let (a, b) = (s["start_action"].as_u64().unwrap() as usize, s["end_action"].as_u64().unwrap() as usize);
        assert!(a < b && b <= g.totals.len());
        assert_eq!(s["peak_bytes"].as_u64().unwrap(), *g.totals[a..b].iter().max().unwrap(), "step {i}");
        let net = g.total(b as i64 - 1) as i64 - g.total(a as i64 - 1) as i64;
        assert_eq!(s["net_bytes"].as_i64().unwrap(), net, "step {i}");
    }
    // The steps' peaks include the device's peak, and no step starts before the previous ended.
    assert_eq!(steps.iter().map(|s| s["peak_bytes"].as_u64().unwrap()).max().unwrap(), g.peak);
    assert!(steps.windows(2).all(|w| w[0]["end_action"].as_u64() <= w[1]["start_action"].as_u64()));
    // Warm-up in step 0, then every step starts where the one before did.
    assert_eq!(d["verdict"]["steady_growth"], false);
    assert_eq!(steps[1]["retained_bytes"], 0);
    assert_eq!(steps[3]["retained_bytes"], Value::Null);

    let text =
        String::from_utf8(memviz_ok(["steps".as_ref(), snap.as_os_str(), "--annotation".as_ref(), "## step".as_ref()]))
            .unwrap();
    let verdicts: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("verdict: ")).collect();
    assert_eq!(verdicts.len(), 1, "{text}");
    assert!(verdicts[0].contains("no steady growth"), "{text}");
}

#[test]
fn steps_without_a_match_lists_the_spans() {
    let snap = data("gpt2_small.pickle");
    let out = memviz(["steps".as_ref(), snap.as_os_str(), "--annotation".as_ref(), "## epoch".as_ref()]);
    let err = assert_bad_input(&out, &snap);
    assert!(err.contains("\"## step 0 ##\""), "{err}");
}

#[test]
fn diff_of_a_fixture_with_itself_changes_nothing() {
    let snap = data("gpt2_small.pickle");
    let out = memviz([
        "diff".as_ref(),
        snap.as_os_str(),
        snap.as_os_str(),
        "--json".as_ref(),
        "--threshold".as_ref(),
        "0".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v["devices"][0];
    assert_eq!(d["peak_delta_bytes"], 0);
    assert_eq!(d["peak_delta_pct"], 0.0);
    assert_eq!(v["regressed"], false);
    let sites = d["sites"].as_array().unwrap();
    assert!(!sites.is_empty());
    assert!(sites.iter().all(|s| s["delta_bytes"] == 0 && s["a_bytes"] == s["b_bytes"]));
    assert!(d["new_sites"].as_array().unwrap().is_empty() && d["vanished_sites"].as_array().unwrap().is_empty());
    let a_sum: u64 = sites.iter().map(|s| s["a_bytes"].as_u64().unwrap()).sum();
    assert_eq!(a_sum, d["a"]["peak_bytes"].as_u64().unwrap(), "the sites at the peak add up to it");
}

#[test]
fn diff_reports_the_golden_peak_delta_and_exits_3_over_the_threshold() {
    let (a, b) = (data("oom_streams.pickle"), data("gpt2_small.pickle"));
    let (ga, gb) = (Golden::all(&data("oom_streams.layout.json")), Golden::all(&data("gpt2_small.layout.json")));
    let delta = gb[0].peak as i64 - ga[0].peak as i64;
    assert!(delta > 0);

    let plain = memviz(["diff".as_ref(), a.as_os_str(), b.as_os_str(), "--json".as_ref()]);
    assert_eq!(plain.status.code(), Some(0), "no threshold: never 3");
    let v: Value = serde_json::from_slice(&plain.stdout).unwrap();
    let d = &v["devices"][0];
    assert_eq!(d["peak_delta_bytes"].as_i64().unwrap(), delta);
    let pct = d["peak_delta_pct"].as_f64().unwrap();
    assert!((pct - delta as f64 * 100.0 / ga[0].peak as f64).abs() < 1e-9);
    for (side, g) in [("a", &ga[0]), ("b", &gb[0])] {
        let at_peak: u64 =
            d["sites"].as_array().unwrap().iter().map(|s| s[format!("{side}_bytes")].as_u64().unwrap()).sum();
        assert_eq!(at_peak, g.peak, "{side}: the sites at its peak add up to it");
    }

    // oom_streams records C++ frames too; its Python sites still match gpt2_small's.
    let new: Vec<&str> = d["new_sites"].as_array().unwrap().iter().map(|s| s["frame"].as_str().unwrap()).collect();
    assert_eq!(new, ["(no stack recorded)"]);

    let over = memviz(["diff".as_ref(), a.as_os_str(), b.as_os_str(), "--threshold".as_ref(), "1".as_ref()]);
    assert_eq!(over.status.code(), Some(3));
    let stderr = String::from_utf8(over.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("regression: B's peak grew 26.5% over A's"), "{stderr}");
    assert!(String::from_utf8(over.stdout).unwrap().contains("peak delta  +79.2 MiB (+26.5%)"));
    // Under the threshold, or shrinking: exit 0.
    let under = memviz(["diff".as_ref(), a.as_os_str(), b.as_os_str(), "--threshold".as_ref(), "30".as_ref()]);
    assert_eq!(under.status.code(), Some(0));
    let shrank = memviz(["diff".as_ref(), b.as_os_str(), a.as_os_str(), "--threshold".as_ref(), "1".as_ref()]);
    assert_eq!(shrank.status.code(), Some(0));
}

#[test]
fn diff_matches_sites_across_runs_by_their_frames() {
    // The same training loop, launched from two lines of one script: every site matches.
    let (a, b) = (data("gpt2_small.pickle"), data("expandable.pickle"));
    let v = json_of(["diff".as_ref(), a.as_os_str(), b.as_os_str(), "--json".as_ref()]);
    let d = &v["devices"][0];
    assert!(d["new_sites"].as_array().unwrap().is_empty(), "{}", d["new_sites"]);
    assert!(d["vanished_sites"].as_array().unwrap().is_empty());
    assert_eq!(d["a"]["sites"], d["b"]["sites"]);
}

#[test]
fn answers_agree_from_snapshot_archive_and_cache() {
    let dir = tempdir();
    let snap = dir.path().join("gpt2_small.pickle");
    std::fs::copy(data("gpt2_small.pickle"), &snap).unwrap();
    let args = |input: &Path| -> Vec<std::ffi::OsString> {
        vec!["at".into(), input.into(), "--peak".into(), "--json".into(), "--group-by".into(), "annotation".into()]
    };
    // --no-cache builds the archive in the temp folder and leaves nothing there.
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let direct = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"))
        .env("TMPDIR", &tmp)
        .arg("--no-cache")
        .args(args(&snap))
        .output()
        .unwrap();
    assert!(direct.status.success());
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "the temp archive is removed");
    let direct = direct.stdout;
    let cached = memviz_cached(&dir.path().join("cache"), args(&snap));
    assert!(cached.status.success());
    let archive = dir.path().join("gpt2_small.memviz");
    assert!(archive.exists(), "answering from a snapshot caches its archive beside it");
    let from_archive = memviz_ok(args(&archive));
    let strip = |b: &[u8]| {
        let mut v: Value = serde_json::from_slice(b).unwrap();
        v["input"] = Value::Null;
        v
    };
    assert_eq!(strip(&direct), strip(&cached.stdout));
    assert_eq!(strip(&direct), strip(&from_archive));
    let mut names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["gpt2_small.memviz", "gpt2_small.pickle", "tmp"]);
}

/// `--group-by stream | pool | compile_context | metadata` read what the 2026 schema records;
/// the host (pinned memory) is a device like any other.
#[test]
fn group_by_the_recorded_attributes_and_the_host_device() {
    let snap = data("synth/annotate_meta.pickle");
    let groups = |by: &str| -> Vec<(String, u64)> {
        let v = json_of([
            "at".as_ref(),
            snap.as_os_str(),
            "--json".as_ref(),
            "--action".as_ref(),
            "13".as_ref(),
            "--group-by".as_ref(),
            by.as_ref(),
        ]);
        let d = &v["devices"][0];
        check_groups(by, d);
        d["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| (g["label"].as_str().unwrap().to_owned(), g["bytes"].as_u64().unwrap()))
            .collect()
    };
    const MIB: u64 = 1 << 20;
    let meta = groups("metadata");
    assert!(meta.contains(&("kv cache layer 3 (seq 0..127)".into(), 2 * MIB)), "the last annotate label: {meta:?}");
    assert!(meta.contains(&("weights loaded before recording".into(), 2_000_000)), "a ghost's label: {meta:?}");
    assert!(meta.contains(&("step=2".into(), MIB)), "user_metadata: {meta:?}");
    assert!(!meta.iter().any(|(l, _)| l == "scratch for layer 3" || l == "stale pointer"), "{meta:?}");
    let streams = groups("stream");
    assert_eq!(streams.len(), 2, "{streams:?}");
    assert!(streams.iter().any(|(l, _)| l == "stream 0 (default)"), "{streams:?}");
    let pools = groups("pool");
    assert!(pools.contains(&("pool (1, 3)".into(), MIB)), "{pools:?}");
    let cc = groups("compile_context");
    assert!(cc.contains(&("inductor kernel triton_poi_fused_0".into(), MIB)), "{cc:?}");
    assert_eq!(groups("site"), groups("stack"), "site is the same grouping as stack");

    let host = data("synth/host_memory.pickle");
    let v = json_of([
        "at".as_ref(),
        host.as_os_str(),
        "--json".as_ref(),
        "--peak".as_ref(),
        "--device".as_ref(),
        "host".as_ref(),
    ]);
    let golden = json_file(&data("synth/host_memory.host.layout.json"));
    assert_eq!(v["devices"][0]["device"], "host");
    assert_eq!(v["devices"][0]["total_bytes"], golden["devices"][0]["peak_bytes"]);
}

/// `at --group-by pool` puts each live allocation in the pool of the segment holding it, as the
/// segment map and the pools view do (torch 2.11 records no pool on trace events): on cudagraph
/// at its peak, every pool's count equals the live blocks of that pool's segments.
#[test]
fn group_by_pool_follows_the_segments_pools() {
    let snap = data("cudagraph.pickle");
    let at = json_of([
        "at".as_ref(),
        snap.as_os_str(),
        "--peak".as_ref(),
        "--group-by".as_ref(),
        "pool".as_ref(),
        "--json".as_ref(),
    ]);
    let dev = &at["devices"][0];
    let k = dev["action"].as_i64().unwrap().to_string();
    let map = json_of(["segments".as_ref(), snap.as_os_str(), "--action".as_ref(), k.as_ref(), "--json".as_ref()]);
    let mut blocks: std::collections::BTreeMap<String, u64> = Default::default();
    for s in map["devices"][0]["segments"].as_array().unwrap() {
        let label = match s["pool"].as_array() {
            Some(p) if p != &[Value::from(0), Value::from(0)] => format!("pool ({}, {})", p[0], p[1]),
            _ => "(no private pool)".to_owned(),
        };
        // [addr, size, requested, pending free]: the pending ones are freed already.
        let live = s["blocks"].as_array().unwrap().iter().filter(|b| b[3] == false).count();
        *blocks.entry(label).or_default() += live as u64;
    }
    blocks.retain(|_, n| *n > 0);
    let groups: std::collections::BTreeMap<String, u64> = dev["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["label"].as_str().unwrap().to_owned(), g["count"].as_u64().unwrap()))
        .collect();
    assert!(groups.len() > 1, "{groups:?}");
    assert_eq!(groups, blocks, "live allocations per pool: at --group-by pool, then the segment map");
}

/// `--json` and `--csv` name a grouping alike, the way `--group-by` takes it.
#[test]
fn json_and_csv_name_groupings_alike() {
    let snap = data("cudagraph.pickle");
    for by in ["site", "stack", "pool", "category", "compile-context", "size"] {
        let args = |fmt: &str| ["at", snap.to_str().unwrap(), "--peak", "--group-by", by, fmt].map(String::from);
        let json: serde_json::Value = serde_json::from_slice(&memviz_ok(args("--json"))).unwrap();
        let csv = String::from_utf8(memviz_ok(args("--csv"))).unwrap();
        let row = csv.lines().nth(1).unwrap_or_else(|| panic!("{by}: {csv}"));
        let named = row.split(',').nth(2).unwrap();
        assert_eq!(json["devices"][0]["group_by"], named, "--group-by {by}");
        let want = match by {
            "stack" => "site",
            "compile-context" => "compile_context",
            other => other,
        };
        assert_eq!(named, want);
    }
}

/// `--stacks` resolves the `[stack N]` a row names: `at`, `find`, `diff` and `oom` print each
/// site's whole (filtered) stack under it, innermost first, and `--json` carries it as `frames`.
#[test]
fn stacks_print_the_whole_stack_of_each_site() {
    let gpt = data("gpt2_small.pickle");
    let at = json_of(["at".as_ref(), gpt.as_os_str(), "--peak".as_ref(), "--stacks".as_ref(), "--json".as_ref()]);
    let rows = at["devices"][0]["groups"].as_array().unwrap();
    // A site's stack can be all frames MemoryViz hides: then no `frames`.
    let with: Vec<&serde_json::Value> = rows.iter().filter(|g| g.get("frames").is_some()).collect();
    assert!(with.len() * 2 > rows.len(), "most rows have a stack: {rows:?}");
    for g in &with {
        let frames: Vec<&str> = g["frames"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        assert!(frames.len() >= 2, "{g}");
        assert!(frames.last().unwrap().starts_with("<module> ("), "outermost last: {frames:?}");
        let short = g["top_frame"].as_str().unwrap().split(" › ").next().unwrap();
        let name = short.split(" (").next().unwrap();
        assert!(frames.iter().any(|f| f.starts_with(&format!("{name} ("))), "{short} in {frames:?}");
    }
    assert!(rows.iter().filter(|g| g["stack"].is_null()).all(|g| g.get("frames").is_none()));
    let plain = json_of(["at".as_ref(), gpt.as_os_str(), "--peak".as_ref(), "--json".as_ref()]);
    assert!(plain["devices"][0]["groups"][0].get("frames").is_none(), "only with --stacks");
    let text =
        String::from_utf8(memviz_ok(["at".as_ref(), gpt.as_os_str(), "--peak".as_ref(), "--stacks".as_ref()])).unwrap();
    assert!(text.lines().any(|l| l.trim_start().starts_with("at <module> (")), "{text}");

    let frag = data("frag_oom.pickle");
    let oom = json_of(["oom".as_ref(), frag.as_os_str(), "--stacks".as_ref(), "--json".as_ref()]);
    let first = &oom["devices"][0];
    assert!(first["frames"].as_array().is_some_and(|f| f.len() >= 2), "{first}");
    assert!(first["filled_by"][0]["frames"].as_array().is_some_and(|f| !f.is_empty()), "{first}");

    let find = json_of([
        "find".as_ref(),
        gpt.as_os_str(),
        "--frame".as_ref(),
        "_init_group".as_ref(),
        "--stacks".as_ref(),
        "--json".as_ref(),
    ]);
    let hit = &find["devices"][0]["hits"][0];
    assert!(
        hit["frames"].as_array().unwrap().iter().any(|f| f.as_str().unwrap().starts_with("_init_group (")),
        "{hit}"
    );

    let diff = json_of([
        "diff".as_ref(),
        gpt.as_os_str(),
        data("expandable.pickle").as_os_str(),
        "--stacks".as_ref(),
        "--json".as_ref(),
    ]);
    let site = &diff["devices"][0]["sites"][0];
    assert!(
        site["frames"].as_array().is_some_and(|f| !f.is_empty()) || site["frame"] == "(no stack recorded)",
        "{site}"
    );
}

/// `export flamegraph`: folded stacks (`frame;frame bytes`, outermost first) that add up to what
/// `at` and `oom` say is live, and an SVG inferno draws.
#[test]
fn flamegraph_folds_the_live_bytes() {
    let gpt = data("gpt2_small.pickle");
    let folded = String::from_utf8(memviz_ok(["export", "flamegraph", gpt.to_str().unwrap(), "--peak"])).unwrap();
    let mut total = 0u64;
    for line in folded.lines() {
        let (stack, bytes) = line.rsplit_once(' ').unwrap();
        total += bytes.parse::<u64>().unwrap();
        assert!(stack == "(no stack recorded)" || stack.starts_with("<module> ("), "outermost first: {line}");
    }
    let at = json_of(["at".as_ref(), gpt.as_os_str(), "--peak".as_ref(), "--json".as_ref()]);
    assert_eq!(total, at["devices"][0]["total_bytes"].as_u64().unwrap());

    let frag = data("frag_oom.pickle");
    let oom = json_of(["oom".as_ref(), frag.as_os_str(), "--json".as_ref()]);
    for (n, report) in oom["devices"].as_array().unwrap().iter().enumerate() {
        let nth = (n + 1).to_string();
        let lines =
            String::from_utf8(memviz_ok(["export", "flamegraph", frag.to_str().unwrap(), "--oom", &nth])).unwrap();
        let sum: u64 = lines.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
        assert_eq!(sum, report["allocated_bytes"].as_u64().unwrap(), "OOM {nth}");
    }
    let out = memviz(["export", "flamegraph", frag.to_str().unwrap(), "--oom", "9"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has 2 OOM events (asked for OOM 9)"));

    let dir = tempdir();
    let svg = dir.path().join("peak.svg");
    memviz_ok(["export", "flamegraph", gpt.to_str().unwrap(), "--peak", "--svg", "-o", svg.to_str().unwrap()]);
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<?xml") && drawn.contains("<svg") && drawn.contains("live bytes: gpt2_small.pickle"));
    assert!(drawn.contains("train (gen_snapshots.py:"), "the frames are drawn");
}
