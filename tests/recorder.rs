//! A snapshot the recorder wrote on a real GPU (`import memviz`: `python/examples/oom_demo.py`):
//! named so memviz reads it as rank 0's OOM, its steps marked by `memviz.step()`, and its OOM
//! explained with torch's own figures.

use crate::support::*;

#[test]
fn the_recorders_oom_snapshot_is_explained_with_torchs_figures_and_its_steps_found() {
    let snapshot = data("recorded/rank0.oom.pickle");
    let torch = std::fs::read_to_string(data("recorded/rank0.torch_oom.txt")).unwrap();
    assert!(torch.contains("Tried to allocate 64.00 MiB") && torch.contains("958.37 MiB is allocated by PyTorch"));
    let oom = String::from_utf8(memviz_ok(["oom".as_ref(), snapshot.as_os_str()])).unwrap();
    for said in [
        "tried to allocate 64.0 MiB",
        "asked by        keep_one (oom_demo.py:45)",
        "during          ## step 10 ##",
        "allocated 958 MiB",
        "reserved but unallocated 1.63 MiB",
        "verdict         a cap",
    ] {
        assert!(oom.contains(said), "`{said}` not in:\n{oom}");
    }
    let steps = String::from_utf8(memviz_ok(["steps".as_ref(), snapshot.as_os_str()])).unwrap();
    assert!(steps.contains("11 steps: the numbered spans \"## step # ##\""), "{steps}");
    assert!(steps.contains("keep_one (oom_demo.py:45)"), "what each step kept: {steps}");
    // The name says the rank, as a job's folder is read.
    let job = memviz::index::folder::job(&[data("recorded")]).unwrap();
    assert_eq!(job.files.iter().map(|f| f.rank).collect::<Vec<_>>(), [Some(0)]);
}
