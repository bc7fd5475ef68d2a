//! Archive benchmarks on the 195 MB scale_2m7 snapshot (rebuilt when its archive is of an older
//! format; or an archive given as argument):
//! open (validate) time, coarsest-tile decode, live-stack rebuild from checkpoints at random
//! actions, the tile crossover (rasterising one tile on the fly vs decompressing it), and the
//! allocator's state at random events from the archive's saved states.
//!
//!     cargo bench --bench archive [-- ARCHIVE.memviz]

use std::path::PathBuf;
use std::time::Instant;

use memviz::archive::{chunks, restore};
use memviz::lod::raster::{RasterSpec, rasterize, sample_actions};
use memviz_format::rkyv;

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn archive_path() -> PathBuf {
    if let Some(p) = std::env::args().nth(1).filter(|a| !a.starts_with('-')) {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let data = root.join("target/bench-data");
    let archive = data.join("scale_2m7.memviz");
    let current = memviz::file::open(&archive).is_ok_and(|a| a.format_version() == memviz_format::FORMAT_VERSION);
    if !current {
        let pickle = data.join("scale_2m7.pickle");
        if !pickle.exists() {
            std::fs::create_dir_all(&data).unwrap();
            let xz = root.join("../shared/fixtures/snapshots/scale_2m7.pickle.xz");
            let out = std::fs::File::create(&pickle).unwrap();
            let ok = std::process::Command::new("xz").arg("-dc").arg(&xz).stdout(out).status().unwrap();
            assert!(ok.success(), "decompressing {}", xz.display());
        }
        memviz::commands::index(&pickle, Some(&archive), None, false).unwrap();
    }
    archive
}

fn main() {
    let path = archive_path();
    let size = std::fs::metadata(&path).unwrap().len();
    println!("archive {} ({:.1} MB)", path.display(), size as f64 / 1e6);

    let mut opens = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        let a = memviz::file::open(&path).unwrap();
        let dev = &a.root().devices[0];
        let top = dev.tiles.last().unwrap();
        let texels: Vec<u32> = chunks::decode(&top.tiles[0]).unwrap();
        std::hint::black_box(texels);
        opens.push(ms(t));
    }
    println!(
        "open + validate + coarsest tile ready: median {:.2} ms, max {:.2} ms",
        pct(opens.clone(), 0.5),
        pct(opens, 1.0)
    );

    let a = memviz::file::open(&path).unwrap();
    let t = Instant::now();
    a.verify().unwrap();
    println!("full verify, checksum + id consistency (archives given as input): {:.1} ms", ms(t));
    let t = Instant::now();
    memviz::archive::consistency::check(a.root()).unwrap();
    println!("  of which the id consistency check: {:.1} ms", ms(t));
    let dev = &a.root().devices[0];
    let (layout, cps) = (restore::layout_ref(dev), restore::checkpoints_ref(dev));
    let n = layout.actions.len();
    println!("actions {n}, checkpoint every {} actions, {} stored ids", cps.every, cps.ids.len());

    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rand = |m: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % m as u64) as usize
    };
    let mut rebuild = Vec::new();
    for _ in 0..2000 {
        let k = rand(n);
        let t = Instant::now();
        let s = cps.stack_after(layout, k as i64);
        let sum: u64 = s.with_offsets().map(|(_, off)| off).sum();
        std::hint::black_box(sum);
        rebuild.push(ms(t));
    }
    println!(
        "live stack with offsets at a random action: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        pct(rebuild.clone(), 0.5),
        pct(rebuild.clone(), 0.99),
        pct(rebuild, 1.0)
    );

    let mut decomp = Vec::new();
    for level in dev.tiles.iter() {
        for tile in level.texel_chunks().iter().take(20) {
            let t = Instant::now();
            std::hint::black_box(chunks::decode::<u32>(tile).unwrap());
            decomp.push(ms(t));
        }
    }
    println!("tile decompress: p50 {:.3} ms, max {:.3} ms", pct(decomp.clone(), 0.5), pct(decomp, 1.0));

    println!("crossover: rasterising one 256×512 tile on the fly from checkpoints, by level");
    let mut samples: Vec<u32> = (0..n as u32).collect();
    let peak = layout.peak_bytes;
    for level in 0..=13u32 {
        if level > 0 {
            samples = sample_actions(layout.totals, Some(&samples), level);
        }
        let tiles = samples.len().div_ceil(256);
        let mut times = Vec::new();
        for _ in 0..5.min(tiles) {
            let t0 = rand(tiles);
            let cols = &samples[t0 * 256..((t0 + 1) * 256).min(samples.len())];
            let t = Instant::now();
            std::hint::black_box(rasterize(
                layout,
                cps,
                RasterSpec { samples: cols, rows: 512, byte_lo: 0, byte_hi: peak, keep: None },
            ));
            times.push(ms(t));
        }
        let stored = dev.tiles.iter().any(|l| l.level.to_native() == level);
        println!(
            "  level {level:>2} ({:>6} actions/column): median {:>8.2} ms{}",
            1u64 << level,
            pct(times, 0.5),
            if stored { "  (stored in the archive)" } else { "" }
        );
    }

    allocator_state(&path);
}

/// The allocator's state at random raw events, rebuilt from the archive's saved states (one
/// chunk decoded, fewer than K events undone through the archive's event chunks).
fn allocator_state(path: &std::path::Path) {
    let session = memviz::archive::Session::from_archive(memviz::file::open(path).unwrap());
    for d in session.device_indices() {
        let a = &session.device(d).allocator;
        let (n, every) = (u64::from(a.events.to_native()), a.every.to_native());
        // Sizes as stored: each section re-serialized on its own.
        let bytes_of = |section: &dyn Fn() -> rkyv::util::AlignedVec| section().len() as f64 / 1e6;
        let allocator = bytes_of(&|| {
            let s: memviz_format::schema::AllocatorSection = rkyv::deserialize::<_, rkyv::rancor::Error>(a).unwrap();
            rkyv::to_bytes::<rkyv::rancor::Error>(&s).unwrap()
        });
        let timeline = bytes_of(&|| {
            let t = &session.device(d).segment_timeline;
            let s: memviz_format::schema::SegmentTimeline = rkyv::deserialize::<_, rkyv::rancor::Error>(t).unwrap();
            rkyv::to_bytes::<rkyv::rancor::Error>(&s).unwrap()
        });
        let file = std::fs::metadata(path).unwrap().len() as f64 / 1e6;
        println!(
            "allocator, device {d}: {n} events; a state saved every {every} events ({} states); \
             allocator section {allocator:.1} MB, segment timeline {timeline:.2} MB, of a {file:.1} MB archive \
             (+{:.1} % over the archive without them)",
            a.states.len(),
            100.0 * (allocator + timeline) / (file - allocator - timeline)
        );
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut times = Vec::new();
        for _ in 0..1000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let i = (seed % n.max(1)) as i64;
            let t = Instant::now();
            let st = session.allocator_state(d, i).expect("a format-3 archive");
            std::hint::black_box(st.blocks.len());
            times.push(ms(t));
        }
        println!(
            "  state at a random event, from the archive: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            pct(times.clone(), 0.5),
            pct(times.clone(), 0.99),
            pct(times, 1.0)
        );
    }
}
