//! `memviz find` against a brute-force scan of the oracle's layout, and `--csv`.

use crate::support::*;

fn json(args: &[&std::ffi::OsStr]) -> serde_json::Value {
    serde_json::from_slice(&memviz_ok(args)).unwrap()
}

/// Every allocation that ever covered an address: the golden layout's elements whose
/// `[addr, addr + size)` holds it, at 30 addresses (inside, at the start, one past the end).
#[test]
fn address_search_equals_a_scan_of_the_layout() {
    let snap = data("gpt2_small.pickle");
    let golden = json_file(&data("gpt2_small.layout.json"));
    let elements = golden["devices"][0]["elements"].as_array().unwrap();
    let covering = |a: u64| -> Vec<u64> {
        let mut v: Vec<u64> = elements
            .iter()
            .filter(|e| {
                let (addr, size) = (e["addr"].as_u64().unwrap(), e["size"].as_u64().unwrap());
                addr <= a && a < addr + size
            })
            .map(|e| e["id"].as_u64().unwrap())
            .collect();
        v.sort_unstable();
        v
    };
    let mut nonempty = 0;
    for (i, e) in elements.iter().step_by(elements.len() / 10).enumerate() {
        let (addr, size) = (e["addr"].as_u64().unwrap(), e["size"].as_u64().unwrap());
        for a in [addr, addr + size / 2, addr + size] {
            let hex = format!("{a:#x}");
            let v = json(&["find".as_ref(), snap.as_os_str(), "--addr".as_ref(), hex.as_ref(), "--json".as_ref()]);
            let mut got: Vec<u64> =
                v["devices"][0]["hits"].as_array().unwrap().iter().map(|h| h["element"].as_u64().unwrap()).collect();
            got.sort_unstable();
            assert_eq!(got, covering(a), "address {hex} (sample {i})");
            nonempty += usize::from(!got.is_empty());
        }
    }
    assert!(nonempty >= 20, "{nonempty}");
}

/// Frame search: a substring (any case) and a /regex/ find exactly the allocations whose stack
/// has a matching frame — here AdamW's state, allocated in `_init_group`.
#[test]
fn frame_search_finds_the_sites_and_csv_has_the_rows() {
    let snap = data("gpt2_small.pickle");
    let text =
        json(&["find".as_ref(), snap.as_os_str(), "--frame".as_ref(), "_INIT_GROUP".as_ref(), "--json".as_ref()]);
    let re = json(&[
        "find".as_ref(),
        snap.as_os_str(),
        "--frame".as_ref(),
        "/_init_group .*adam\\.py:1[0-9]{2}$/".as_ref(),
        "--json".as_ref(),
    ]);
    let count = |v: &serde_json::Value| v["devices"][0]["count"].as_u64().unwrap();
    assert_eq!(count(&text), 104, "2 state tensors for each of 52 parameters");
    assert_eq!(count(&text), count(&re));
    // The same allocations as the optimizer-state category.
    let at = json(&["at".as_ref(), snap.as_os_str(), "--peak".as_ref(), "--list".as_ref(), "--json".as_ref()]);
    let state: Vec<u64> = at["devices"][0]["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["category"] == "optimizer_state")
        .map(|a| a["element"].as_u64().unwrap())
        .collect();
    let found: Vec<u64> =
        text["devices"][0]["hits"].as_array().unwrap().iter().map(|h| h["element"].as_u64().unwrap()).collect();
    assert!(state.iter().all(|e| found.contains(e)), "{state:?}");

    let csv = String::from_utf8(memviz_ok([
        "find".as_ref(),
        snap.as_os_str(),
        "--frame".as_ref(),
        "_init_group".as_ref(),
        "--csv".as_ref(),
    ]))
    .unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "device,element,addr,size,alloc_action,free_action,alloc_time_us,free_time_us,site");
    assert_eq!(lines.len(), 105);
    for cmd in [&["at", "--peak"][..], &["range", "0..100"], &["steps"]] {
        let mut args: Vec<&std::ffi::OsStr> = vec![cmd[0].as_ref(), snap.as_os_str()];
        args.extend(cmd[1..].iter().map(|a| std::ffi::OsStr::new(*a)));
        args.push("--csv".as_ref());
        let out = String::from_utf8(memviz_ok(args)).unwrap();
        assert!(out.lines().count() >= 2 && out.starts_with("device,"), "{cmd:?}: {out}");
    }
    let bad = memviz(["find".as_ref(), snap.as_os_str(), "--frame".as_ref(), "/(/".as_ref()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unclosed group"));
}
