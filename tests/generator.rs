//! The benchmark generator (`benches/gen_snapshot.rs`): its output is a real long run's, so the
//! figures measured on it mean something.

use crate::support::*;

#[allow(dead_code)]
#[path = "../benches/gen_snapshot.rs"]
pub mod gen_snapshot;

use memviz::model::{DeviceId, Snapshot};

fn generate(snap: &Snapshot, events: u64) -> Snapshot {
    let mut bytes = Vec::new();
    gen_snapshot::write(snap, events, &mut bytes).unwrap();
    let len = bytes.len() as u64;
    memviz::ingest::read(bytes.as_slice(), len).unwrap().0
}

/// gpt2_small repeated to about `events` events, indexed into `dir`: an archive of many chunks
/// (action times, event columns, saved states) and thousands of annotation spans.
pub fn repeated_archive(dir: &std::path::Path, events: u64) -> std::path::PathBuf {
    let (snap, _) = memviz::ingest::read_path(&data("gpt2_small.pickle")).unwrap();
    let pickle = dir.join("repeated.pickle");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&pickle).unwrap());
    gen_snapshot::write(&snap, events, &mut out).unwrap();
    std::io::Write::flush(&mut out).unwrap();
    drop(out);
    let archive = dir.join("repeated.memviz");
    let stamp = memviz::file::write::stamp(&pickle).unwrap();
    memviz::index::pipeline::build_archive(&pickle, stamp, &archive, &|_| {}, &|_| {}).unwrap();
    archive
}

#[test]
fn one_copy_is_the_recording_and_more_copies_stay_consistent() {
    let (snap, _) = memviz::ingest::read_path(&data("gpt2_small.pickle")).unwrap();
    let d = DeviceId(0);
    let n = snap.trace(d).len();
    let layout = |s: &Snapshot| {
        let l = memviz::layout::Layout::build(s, d);
        serde_json::to_value(memviz::analysis::export::device_layout(l.view())).unwrap()
    };

    // As many events as the recording: the window is written once, and the layout is the same.
    let same = generate(&snap, n as u64);
    assert_eq!(same.trace(d).len(), n);
    assert!(layout(&same) == layout(&snap), "one copy lays out like the recording");

    // Five times as many: every copy leaves the allocator as it found it, so the trace stays
    // complete (every free has its alloc), the dump still describes its end, and the state before
    // the first event is the recording's.
    let big = generate(&snap, 5 * n as u64);
    let m = big.trace(d).len();
    assert!(m.abs_diff(5 * n) < n / 2, "{m} events for {} asked", 5 * n);
    let l = memviz::layout::Layout::build(&big, d);
    let origins = |l: &memviz::layout::Layout, o: u8| l.elements.origin.iter().filter(|&&x| x == o).count();
    let original = memviz::layout::Layout::build(&snap, d);
    assert_eq!((origins(&l, 1), origins(&l, 2)), (origins(&original, 1), origins(&original, 2)), "free_only, ghosts");
    assert_eq!(l.peak_bytes, original.peak_bytes, "steady steps repeat the same peak");
    let (states, _) = memviz::allocator::states(&big, d, &[-1].into_iter().collect());
    let (before, _) = memviz::allocator::states(&snap, d, &[-1].into_iter().collect());
    assert!(states[0] == before[0], "the state before the first event is the recording's");
    let times: Vec<i64> = big.trace(d).map(|e| big.events.time_us[e]).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "times never go back");
}
