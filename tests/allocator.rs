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
        assert!(
            ours == json_file(&data(&format!("allocator/{name}.segments.json"))),
            "{name}: export segments differs"
        );
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
