//! The pickle decoder alone (issue 17: ≥ 600 MB/s): the snapshot read into memory once, then
//! decoded into the model several times — no file reads, no layout, no row sink.
//!
//!     cargo bench --bench decode [-- SNAPSHOT.pickle [RUNS]]   (default: scale_2m7, 8 runs)

use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    let path = args.next().map_or_else(|| root.join("target/bench-data/scale_2m7.pickle"), PathBuf::from);
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(8);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (see benches/ingest.sh)", path.display()));
    let mb = bytes.len() as f64 / 1e6;
    let mut secs = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let (snap, _) = memviz::ingest::pickle::decode(&bytes[..]).expect("a snapshot");
        secs.push(t.elapsed().as_secs_f64());
        std::hint::black_box(snap.event_count());
    }
    secs.sort_by(f64::total_cmp);
    let (best, median) = (secs[0], secs[secs.len() / 2]);
    println!(
        "{}: {mb:.0} MB decoded in {:.3} s median, {:.3} s best: {:.0} MB/s median, {:.0} MB/s best ({runs} runs)",
        path.display(),
        median,
        best,
        mb / median,
        mb / best
    );
}
