//! Memory categories against ground truth: `categories.pickle` (GPT-2 + AdamW, dumped in the
//! middle of the fourth step's backward) and `categories.truth.json` — for every storage that was
//! a parameter, a gradient, an optimizer state tensor or a tensor saved for backward at the dump,
//! its address → [category, bytes, name].

use std::collections::BTreeMap;

use memviz::analysis::categories;
use memviz::archive::{DeviceData, Session};

use crate::support::*;

/// (category, bytes right, bytes known) per truth category, from the archive's classification.
fn accuracy(archive: &std::path::Path, truth: &std::path::Path) -> BTreeMap<String, (u64, u64)> {
    let s = Session::from_archive(memviz::file::open_verified(archive).unwrap());
    let d = memviz::model::DeviceIdx(0);
    let device = DeviceData::new(&s, d);
    let t = device.timeline();
    let cls = categories::classify(&t, s.root(), &s.element_pools(d), &());
    let of = &cls.of;
    let truth = json_file(truth);
    let e = t.layout.elements;
    // The elements live at the dump, by address.
    let live: std::collections::HashMap<u64, usize> =
        (0..e.len()).filter(|&i| e.end[i] == memviz::layout::NEVER).map(|i| (e.addr[i], i)).collect();
    // categories.pickle's truth recorded the tensors saved for backward by address in the
    // forward; some were freed in the backward before the dump and their address reused by a
    // backward allocation: those live allocations are not the saved tensor. (record_truth.py
    // keeps only the saved tensors still alive at the dump.)
    let backward_start = t
        .spans
        .iter()
        .filter(|sp| sp.name == "## backward ##")
        .map(|sp| t.span_actions(sp).0)
        .max()
        .unwrap_or(u32::MAX);
    let mut by: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (addr, v) in truth.as_object().unwrap() {
        let want = v[0].as_str().unwrap();
        let Some(&id) = live.get(&u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap()) else {
            continue; // saved for backward, already freed by the dump
        };
        if want == "activation" && e.start[id] >= backward_start {
            continue;
        }
        let cell = by.entry(want.to_owned()).or_default();
        cell.1 += e.size[id];
        if of[id].name() == want {
            cell.0 += e.size[id];
        } else if std::env::var_os("MEMVIZ_DEBUG_CATEGORIES").is_some() {
            let start = e.start[id];
            let phase = (start != memviz::layout::BEFORE_TRACE).then(|| format!("{:?}", cls.phases[start as usize]));
            eprintln!(
                "{want} → {:?}: {} B, born {start} ({phase:?}), site {}",
                of[id],
                e.size[id],
                t.site(memviz::model::ElementId::at(id))
            );
        }
    }
    by
}

/// The ground-truth recordings: `categories` (GPT-2 + AdamW, annotated, Python stacks) from
/// ../shared/fixtures, and three from `record_truth.py` with no annotations at all: ResNet-18 +
/// SGD with momentum, GPT-2 + Adam with C++ frames, a torch.compile'd GPT-2 + AdamW.
const TRUTHS: [&str; 8] = [
    "categories",
    "resnet_sgd",
    "gpt2_cpp_adam",
    "compiled_adamw",
    "fsdp_adamw",
    "gpt2_plain_adamw",
    "ddp_buckets",
    "lora_llama",
];

#[test]
fn categories_are_right_for_98_percent_of_the_known_bytes() {
    let dir = tempdir();
    let mut all = Vec::new();
    for name in TRUTHS {
        let archive = dir.path().join(format!("{name}.memviz"));
        let snapshot = data(&format!("categories/{name}.pickle"));
        memviz_ok(["index".as_ref(), snapshot.as_os_str(), "-o".as_ref(), archive.as_os_str()]);
        let by = accuracy(&archive, &data(&format!("categories/{name}.truth.json")));
        let (right, known): (u64, u64) = by.values().fold((0, 0), |a, v| (a.0 + v.0, a.1 + v.1));
        let report: Vec<String> =
            by.iter().map(|(c, (r, k))| format!("{c}: {:.1}% of {k} B", 100.0 * *r as f64 / *k as f64)).collect();
        eprintln!("{name}: {:.2}% of {known} B right: {report:?}", 100.0 * right as f64 / known as f64);
        assert!(by.len() >= 3, "{name}: {report:?}");
        assert!(known > 10 << 20, "{name}: the truth covers {known} bytes");
        all.push((name, right, known, report));
    }
    for (name, right, known, report) in &all {
        assert!(
            *right as f64 >= 0.98 * *known as f64,
            "{name}: {:.2}% right: {report:?}",
            100.0 * *right as f64 / *known as f64
        );
    }
}

/// `at --end --list --json` lists what is live at the dump with its category; `--group-by
/// category` sums it; `stats` breaks the peak down; a rules file runs first.
#[test]
fn categories_show_up_in_at_and_stats_and_rules_come_first() {
    let snap = data("categories/categories.pickle");
    let v: serde_json::Value = serde_json::from_slice(&memviz_ok([
        "at".as_ref(),
        snap.as_os_str(),
        "--end".as_ref(),
        "--list".as_ref(),
        "--json".as_ref(),
    ]))
    .unwrap();
    let d = &v["devices"][0];
    let list = d["allocations"].as_array().unwrap();
    assert_eq!(list.len() as u64, d["count"].as_u64().unwrap());
    for key in ["addr", "size", "site", "category"] {
        assert!(list.iter().all(|a| !a[key].is_null()), "{key}");
    }
    let truth = json_file(&data("categories/categories.truth.json"));
    let wte = list.iter().find(|a| format!("{:#x}", a["addr"].as_u64().unwrap()) == "0x7fb4d4800000").unwrap();
    assert_eq!(truth["0x7fb4d4800000"][2], "transformer.wte.weight");
    assert_eq!(wte["category"], "parameter");
    let by: u64 = d["by_category"].as_array().unwrap().iter().map(|c| c["bytes"].as_u64().unwrap()).sum();
    assert_eq!(by, d["total_bytes"].as_u64().unwrap());

    let grouped = String::from_utf8(memviz_ok([
        "at".as_ref(),
        snap.as_os_str(),
        "--end".as_ref(),
        "--group-by".as_ref(),
        "category".as_ref(),
    ]))
    .unwrap();
    for c in ["optimizer_state", "parameter", "gradient", "activation"] {
        assert!(grouped.contains(c), "{grouped}");
    }

    let stats: serde_json::Value = serde_json::from_slice(&memviz_ok([
        "stats".as_ref(),
        data("gpt2_small.pickle").as_os_str(),
        "--json".as_ref(),
    ]))
    .unwrap();
    let peak = stats["devices"][0]["peak_by_category"].as_array().unwrap();
    let sum: u64 = peak.iter().map(|c| c["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, stats["devices"][0]["peak"]["bytes"].as_u64().unwrap());
    assert!(peak.iter().any(|c| c["category"] == "optimizer_state"));

    // A rule of the user's decides before the built-in ones.
    let dir = tempdir();
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, "[[rule]]\ncategory = \"communication\"\nframe = \"_init_group\"\n").unwrap();
    let v: serde_json::Value = serde_json::from_slice(&memviz_ok([
        "at".as_ref(),
        snap.as_os_str(),
        "--end".as_ref(),
        "--group-by".as_ref(),
        "category".as_ref(),
        "--categories".as_ref(),
        rules.as_os_str(),
        "--json".as_ref(),
    ]))
    .unwrap();
    let rows = v["devices"][0]["groups"].as_array().unwrap();
    assert!(rows.iter().any(|g| g["label"] == "communication"), "{rows:?}");
    assert!(!rows.iter().any(|g| g["label"] == "optimizer_state"), "{rows:?}");
    std::fs::write(&rules, "[[rule]]\ncategory = \"weights\"\nframe = \"x\"\n").unwrap();
    let bad = memviz(["at".as_ref(), snap.as_os_str(), "--end".as_ref(), "--categories".as_ref(), rules.as_os_str()]);
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.lines().count() == 1 && err.contains("rule 1: unknown category \"weights\""), "{err}");
}

/// Tensors user code makes with no training loop around them (frag_oom: 3–4 MiB tensors in a
/// loop, every other one freed) have no evidence of a kind: unknown, never a guessed input or
/// temporary.
#[test]
fn memory_with_no_loop_around_it_is_unknown() {
    let v: serde_json::Value = serde_json::from_slice(&memviz_ok([
        "at".as_ref(),
        data("frag_oom.pickle").as_os_str(),
        "--end".as_ref(),
        "--group-by".as_ref(),
        "category".as_ref(),
        "--json".as_ref(),
    ]))
    .unwrap();
    let by = v["devices"][0]["groups"].as_array().unwrap();
    assert_eq!(by.len(), 1, "{by:?}");
    assert_eq!(by[0]["label"], "unknown");
}
