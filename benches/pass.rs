//! The allocator's pass alone (issue 17: the derive stage's largest part): a snapshot read and
//! laid out once, its event table compressed as `index` compresses it, then each device's pass
//! run as `index` runs it — the early and late parts of a long trace one after the other on one
//! thread, reading the compressed chunks and building the series and saved states — several
//! times. End-to-end index times on the project's 2-core VM move by ±20 % from one run to the
//! next; a part measured alone, with nothing beside it, moves by a few per cent.
//!
//!     cargo bench --bench pass -- SNAPSHOT.pickle [RUNS]   (default 5 runs)

use std::path::PathBuf;
use std::time::Instant;

use memviz::archive::chunks;
use memviz::index::columns::{Columns, CompressedEvents};
use memviz::index::{reading, series};

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: cargo bench --bench pass -- SNAPSHOT.pickle [RUNS]");
        std::process::exit(2)
    };
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(5);
    let (snap, _) = memviz::ingest::read_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let layouts = reading::lay_out(&snap);
    let c = Columns::compress(&snap.events);
    let table = memviz_format::schema::EventTable {
        len: snap.events.len() as u32,
        chunk_rows: chunks::CHUNK_ROWS as u32,
        action: c.action,
        addr: c.addr,
        size: c.size,
        ..Default::default()
    };
    for layout in &layouts {
        let l = layout.view();
        // Two threads' plan: the pass in two parts, timed one after the other.
        let plan = series::Plan::new(&snap, &l, 2, u64::MAX);
        let (mut early, mut late) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
        for _ in 0..runs {
            let t = Instant::now();
            let e = series::early_part(&snap, &CompressedEvents::new(&table, &snap.events), &l, &plan);
            early.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let la = series::late_part(&snap, &CompressedEvents::new(&table, &snap.events), &l, &plan);
            late.push(t.elapsed().as_secs_f64());
            std::hint::black_box(series::section(&snap, &l, &plan, la.into_iter().chain(e).collect()));
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], v[0])
        };
        let ((em, eb), (lm, lb)) = (median(early), median(late));
        println!(
            "{} device {}: {} events; early part (or the whole pass) {em:.3} s median, {eb:.3} best; late part {lm:.3} s median, {lb:.3} best ({runs} runs)",
            path.display(),
            l.device.0,
            snap.trace(l.device).len(),
        );
    }
}
