//! The `.memviz` archive: determinism, atomicity, corruption, stale caches, equality with the
//! snapshot, tiles, and the golden archive of each format version.

use std::path::Path;
use std::process::Command;

use memviz::archive::{Archive, restore};

use crate::support::*;

fn index(input: &Path, out: &Path) {
    memviz_ok(["index".as_ref(), input.as_os_str(), "-o".as_ref(), out.as_os_str()]);
}

#[test]
fn archive_answers_exactly_like_the_snapshot() {
    let dir = tempdir();
    for (name, snapshot, _) in fixtures() {
        let archive = dir.path().join(format!("{name}.memviz"));
        index(&snapshot, &archive);
        assert!(answers(&archive) == answers(&snapshot), "{name}: archive and snapshot answer differently");
    }
}

#[test]
fn index_is_deterministic() {
    let dir = tempdir();
    let snap = copy_into(dir.path(), "oom_streams.pickle");
    let (a, b) = (dir.path().join("a.memviz"), dir.path().join("b.memviz"));
    index(&snap, &a);
    index(&snap, &b);
    assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(), "same input, different archives");
}

#[test]
fn index_prints_one_summary_line_and_defaults_beside_the_input() {
    let dir = tempdir();
    let snap = copy_into(dir.path(), "gpt2_small.pickle");
    let out = memviz(["index".as_ref(), snap.as_os_str()]);
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("indexed gpt2_small.pickle: 1 device, 5,056 events, 1,655 allocations"), "{stderr}");
    assert!(dir.path().join("gpt2_small.memviz").exists());
    // Indexing an archive is a clear error.
    let again = memviz(["index".as_ref(), dir.path().join("gpt2_small.memviz").as_os_str()]);
    assert_eq!(again.status.code(), Some(1));
}

#[test]
fn corrupted_truncated_and_foreign_archives_say_to_reindex() {
    let dir = tempdir();
    let good = dir.path().join("good.memviz");
    index(&data("gpt2_small.pickle"), &good);
    let bytes = std::fs::read(&good).unwrap();

    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated header", bytes[..40].to_vec()),
        ("truncated body", bytes[..bytes.len() / 2].to_vec()),
        ("cut by one byte", bytes[..bytes.len() - 1].to_vec()),
    ];
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    cases.push(("flipped byte", flipped));
    let mut root_flipped = bytes.clone();
    let n = root_flipped.len();
    root_flipped[n - 3] ^= 0xff;
    cases.push(("corrupted root", root_flipped));
    // A format version older than any this build reads: patch the version and re-seal the
    // header hash.
    let with_version = |v: u32| {
        let mut other = bytes.clone();
        other[8..12].copy_from_slice(&v.to_le_bytes());
        let h = memviz_format::hash::xxh64(&other[..56], 0);
        other[56..64].copy_from_slice(&h.to_le_bytes());
        other
    };
    cases.push(("other version", with_version(0)));

    for (what, content) in cases {
        let path = dir.path().join("bad.memviz");
        std::fs::write(&path, &content).unwrap();
        for cmd in [["stats", "--json"], ["export", "layout"], ["at", "--peak"], ["range", "--json"]] {
            let mut args = vec![cmd[0].as_ref(), cmd[1].as_ref(), path.as_os_str()];
            if cmd[0] == "range" {
                args.push("0..".as_ref());
            }
            let out = memviz(args);
            let err = assert_bad_input(&out, &path);
            assert!(err.contains("re-run `memviz index`"), "{what}: {err}");
            if what == "other version" {
                assert!(err.contains("version 0"), "{err}");
            }
        }
    }
    // A newer memviz's archive is not broken: it says to upgrade, not to re-index.
    let path = dir.path().join("newer.memviz");
    std::fs::write(&path, with_version(999)).unwrap();
    let err = assert_bad_input(&memviz(["stats".as_ref(), path.as_os_str()]), &path);
    assert!(err.contains("made by a newer memviz (format 999") && err.contains("upgrade memviz"), "{err}");
    assert!(!err.contains("re-run"), "{err}");
}

#[test]
fn cache_is_written_reused_and_rebuilt_when_stale() {
    let dir = tempdir();
    let cache = dir.path().join("user-cache");
    let snap = copy_into(dir.path(), "oom_streams.pickle");
    let beside = dir.path().join("oom_streams.memviz");
    let run = || memviz_cached(&cache, ["stats".as_ref(), "--json".as_ref(), snap.as_os_str()]);

    let first = run();
    assert!(first.status.success());
    assert!(beside.exists(), "stats on a snapshot caches its archive beside it");
    let stamp = std::fs::metadata(&beside).unwrap().modified().unwrap();

    let second = run();
    assert_eq!(first.stdout, second.stdout);
    assert_eq!(std::fs::metadata(&beside).unwrap().modified().unwrap(), stamp, "a matching cache is reused");

    // Replace the snapshot with another one: the cache is stale and must be rebuilt.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::copy(data("gpt2_small.pickle"), &snap).unwrap();
    let third = run();
    assert!(third.status.success());
    let direct = memviz(["stats".as_ref(), "--json".as_ref(), snap.as_os_str()]);
    assert_eq!(third.stdout, direct.stdout, "answers come from the new snapshot");
    let a = memviz::file::open(&beside).unwrap();
    assert_eq!(a.root().source.name.as_str(), "oom_streams.pickle");
    assert_eq!(a.header().source.size, std::fs::metadata(&snap).unwrap().len(), "the cache was rebuilt");

    // A cache that is corrupt is rebuilt, never misread.
    std::fs::write(&beside, b"\x89MVZ\r\n\x1a\ngarbage").unwrap();
    let fourth = run();
    assert_eq!(fourth.stdout, direct.stdout);
    assert!(memviz::file::open_verified(&beside).is_ok());
}

/// A cached archive of an older format version still opens, but a snapshot's cache is rebuilt
/// in the current one (the old one lacks what this build shows).
#[test]
fn an_older_version_cache_is_rebuilt() {
    let dir = tempdir();
    let snap = copy_into(dir.path(), "gpt2_small.pickle");
    let v1 = data("golden/gpt2_small.v1.memviz");
    let old = memviz::file::open(&v1).unwrap();
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(old.header().source.mtime_ns as u64);
    std::fs::File::options().write(true).open(&snap).unwrap().set_modified(mtime).unwrap();
    let beside = dir.path().join("gpt2_small.memviz");
    std::fs::copy(&v1, &beside).unwrap();
    assert_eq!(memviz::file::open(&beside).unwrap().header().source, memviz::file::write::stamp(&snap).unwrap());
    let out = memviz_cached(&dir.path().join("c"), ["stats".as_ref(), snap.as_os_str()]);
    assert!(out.status.success());
    assert_eq!(memviz::file::open(&beside).unwrap().format_version(), memviz_format::FORMAT_VERSION);
}

#[test]
fn export_from_cached_archive_equals_golden() {
    let dir = tempdir();
    let snap = copy_into(dir.path(), "synth/truncated_ring.pickle");
    let cache = dir.path().join("c");
    for _ in 0..2 {
        let out = memviz_cached(&cache, ["export".as_ref(), "layout".as_ref(), snap.as_os_str()]);
        assert!(out.status.success());
        let ours: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(ours == json_file(&data("synth/truncated_ring.layout.json")));
    }
    assert!(dir.path().join("truncated_ring.memviz").exists());
}

/// Killed at any moment, `memviz index` leaves no archive or a complete one.
#[test]
fn index_is_atomic_when_killed() {
    let dir = tempdir();
    let big = dir.path().join("big.pickle");
    // A 60k-allocation snapshot, so that indexing takes long enough to be interrupted.
    let script = r#"
import pickle, sys
frames = [{"name": "f%d" % i, "filename": "model.py", "line": i} for i in range(40)]
stacks = [frames[i:i + 20] for i in range(20)]
ev = []
for i in range(60000):
    ev.append({"action": "alloc", "addr": 4096 * (i % 5000) + (i // 5000) * 2**30, "size": 512 * (1 + i % 9),
               "stream": 0, "time_us": 10 * i, "frames": stacks[i % 20]})
    if i % 3:
        ev.append({"action": "free_completed", "addr": ev[-1]["addr"], "size": ev[-1]["size"], "stream": 0,
                   "time_us": 10 * i + 5, "frames": stacks[i % 20]})
pickle.dump({"segments": [], "device_traces": [ev]}, open(sys.argv[1], "wb"), protocol=4)
"#;
    let ok = Command::new("python3").args(["-c", script]).arg(&big).status().unwrap();
    assert!(ok.success());
    let out = dir.path().join("big.memviz");
    for delay_ms in [1u64, 5, 15, 30, 60, 120] {
        let _ = std::fs::remove_file(&out);
        let mut child = Command::new(env!("CARGO_BIN_EXE_memviz"))
            .args(["index".as_ref(), big.as_os_str(), "-o".as_ref(), out.as_os_str()])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        if out.exists() {
            assert!(memviz::file::open_verified(&out).is_ok(), "killed after {delay_ms} ms: a partial archive");
        }
    }
    // And uninterrupted, it completes.
    index(&big, &out);
    assert!(memviz::file::open_verified(&out).is_ok());
}

/// Tiles hold, at each texel, the element covering the row's middle byte at the column's sample
/// action — checked against the golden layout, independently of the rasteriser.
#[test]
fn tiles_follow_the_texel_rule() {
    let dir = tempdir();
    let archive = dir.path().join("g.memviz");
    index(&data("gpt2_small.pickle"), &archive);
    let golden = json_file(&data("gpt2_small.layout.json"));
    let g = &golden["devices"][0];
    let elements = g["elements"].as_array().unwrap();
    let a = memviz::file::open_verified(&archive).unwrap();
    let dev = &a.root().devices[0];
    let peak = dev.peak_bytes.to_native();
    assert!(!dev.tiles.is_empty());
    for level in dev.tiles.iter() {
        let samples: Vec<u32> = level.sample.iter().map(|s| s.to_native()).collect();
        let totals: Vec<u64> = g["totals"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect();
        let per = 1usize << level.level.to_native();
        for (c, &s) in samples.iter().enumerate() {
            let range = &totals[c * per..((c + 1) * per).min(totals.len())];
            let max = *range.iter().max().unwrap();
            assert_eq!(s as usize, c * per + range.iter().position(|&t| t == max).unwrap(), "sample of column {c}");
        }
        for (t, tile) in level.texel_chunks().iter().enumerate() {
            let texels: Vec<u32> = memviz::archive::chunks::decode(tile).unwrap();
            assert_eq!(texels.len(), (memviz_format::TILE_W * memviz_format::TILE_H) as usize);
            for c in (0..memviz_format::TILE_W as usize).step_by(17) {
                let col = t * memviz_format::TILE_W as usize + c;
                for r in (0..memviz_format::TILE_H as usize).step_by(29) {
                    let got = texels[r * memviz_format::TILE_W as usize + c];
                    let expect = match samples.get(col) {
                        None => memviz_format::TEXEL_EMPTY,
                        Some(&k) => {
                            let byte =
                                ((2 * r as u128 + 1) * peak as u128 / (2 * memviz_format::TILE_H as u128)) as u64;
                            golden_covering(elements, k as i64, byte)
                        }
                    };
                    assert_eq!(got, expect, "level {} column {col} row {r}", level.level);
                }
            }
        }
    }
}

/// Checkpoints rebuild the live stack at any action: spot-check against a full replay.
#[test]
fn checkpoints_rebuild_any_action() {
    let dir = tempdir();
    let archive = dir.path().join("e.memviz");
    index(&data("expandable.pickle"), &archive);
    let a = memviz::file::open_verified(&archive).unwrap();
    let dev = &a.root().devices[0];
    let (layout, cps) = (restore::layout_ref(dev), restore::checkpoints_ref(dev));
    let mut replay = layout.replay();
    for k in -1..layout.actions.len() as i64 {
        if k >= 0 {
            replay.step();
        }
        if k % 37 == 0 || k == layout.actions.len() as i64 - 1 {
            assert_eq!(cps.stack_after(layout, k).ids, replay.ids, "action {k}");
        }
    }
}

/// `dir/long.pickle`: a run `copies` times as long as gpt2_small's recording (the generator
/// repeating its steady steps).
fn long_run(dir: &Path, copies: u64) -> std::path::PathBuf {
    let (snap, _) = memviz::ingest::read_path(&data("gpt2_small.pickle")).unwrap();
    let mut pickle = Vec::new();
    crate::generator::gen_snapshot::write(&snap, copies * snap.event_count() as u64, &mut pickle).unwrap();
    let path = dir.join("long.pickle");
    std::fs::write(&path, pickle).unwrap();
    path
}

/// `memviz index` compresses the event table while it reads (a worker takes each 64K rows the
/// decoder completes) and frees the raw columns before the allocator's pass, which reads the
/// chunks back; the cache path compresses after reading. Both write the same bytes, on every
/// fixture and on a generated run long enough to stream many chunks.
#[test]
fn streamed_and_in_memory_indexing_write_the_same_bytes() {
    let dir = tempdir();
    let long = long_run(dir.path(), 60);
    let copy = |path: &Path| {
        let to = dir.path().join(path.file_name().unwrap());
        std::fs::copy(path, &to).unwrap();
        to
    };
    let mut inputs: Vec<std::path::PathBuf> = fixtures().iter().map(|(_, path, _)| copy(path)).collect();
    inputs.push(long);
    for snapshot in inputs {
        let streamed = dir.path().join("streamed.memviz");
        index(&snapshot, &streamed);
        // A command on the snapshot writes its cache beside it, compressed after reading.
        let cache = dir.path().join("no-user-cache");
        memviz_cached(&cache, ["stats".as_ref(), snapshot.as_os_str()]);
        let beside = memviz::index::default_path(&snapshot);
        let (a, b) = (std::fs::read(&streamed).unwrap(), std::fs::read(&beside).unwrap());
        assert!(a.len() > 1000 && a == b, "{}: the two paths differ", snapshot.display());
    }
}

/// Past its memory budget, indexing spills what grows with the input to a temp file beside the
/// output and drops those pages from the process as it goes (`spill.rs`); the archive is the same.
/// A budget of 1 MiB makes every large allocation spill, on every fixture and on a long run.
/// Each archive then passes the full check an untrusted file gets (`Archive::verify`).
#[test]
fn an_index_under_a_tiny_memory_budget_writes_the_same_bytes() {
    let dir = tempdir();
    let mut inputs: Vec<std::path::PathBuf> = fixtures().iter().map(|(_, path, _)| path.clone()).collect();
    inputs.push(long_run(dir.path(), 60));
    for snapshot in inputs {
        let (normal, small) = (dir.path().join("normal.memviz"), dir.path().join("small.memviz"));
        index(&snapshot, &normal);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"))
            .args(["index".as_ref(), snapshot.as_os_str(), "-o".as_ref(), small.as_os_str()])
            .env("MEMVIZ_MEMORY_BUDGET", "1M")
            .env("MEMVIZ_TIMINGS", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let (a, b) = (std::fs::read(&normal).unwrap(), std::fs::read(&small).unwrap());
        assert!(a.len() > 1000 && a == b, "{}: the budget changed the archive", snapshot.display());
        // What memviz writes passes its own full check (ids, totals as running sums, checksums).
        let written = Archive::from_memory(&a, &normal).unwrap();
        written.verify().unwrap_or_else(|e| panic!("{}: {e}", snapshot.display()));
        if snapshot.ends_with("long.pickle") {
            // "… spilled 12.3 MB, pages dropped 40 times)" on the last stage's line.
            let last = stderr.lines().rfind(|l| l.starts_with("timing: write")).unwrap();
            let figure = |after: &str| -> f64 {
                let rest = &last[last.find(after).unwrap() + after.len()..];
                rest.split_whitespace().next().unwrap().parse().unwrap()
            };
            assert!(figure("spilled ") > 1.0 && figure("dropped ") >= 1.0, "nothing spilled: {last}");
        }
        // Nothing is left beside the output.
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert!(!left.iter().any(|n| n.to_string_lossy().contains("spill")), "{left:?}");
    }
}

/// The archive's bytes do not depend on the threads (`MEMVIZ_THREADS`, `--jobs`): on every
/// fixture, and on a run long enough (over 2^20 events) that its allocator pass is cut — in two
/// parts settled while they run on two threads, in a span for each thread but one from three
/// (fewer on many threads: the spans share a quarter of the memory budget).
#[test]
fn an_index_writes_the_same_bytes_at_any_thread_count() {
    let dir = tempdir();
    let mut inputs: Vec<std::path::PathBuf> = fixtures().iter().map(|(_, path, _)| path.clone()).collect();
    inputs.push(long_run(dir.path(), 220));
    for snapshot in inputs {
        let long = snapshot.ends_with("long.pickle");
        let mut first: Option<Vec<u8>> = None;
        // Batches of events read in ranges on the pool (by default from two threads;
        // `MEMVIZ_DECODE_RANGE` sets their bytes, 0 never): small ranges make a small snapshot
        // many, so that fetches across them are common.
        let runs = [
            (1, false, None),
            (2, true, None),
            (2, false, Some(0)),
            (2, false, Some(1 << 20)),
            (3, false, Some(4096)),
            (8, true, Some(600)),
            (8, false, None),
            (8, false, Some(0)),
            // 32 of them run under the default budget (`threads::THREAD_HEAP`).
            (64, true, None),
        ];
        for (threads, by_flag, range) in runs {
            let out = dir.path().join(format!("t{threads}.memviz"));
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"));
            cmd.args(["index".as_ref(), snapshot.as_os_str(), "-o".as_ref(), out.as_os_str()]);
            cmd.env("MEMVIZ_TIMINGS", "1");
            if let Some(bytes) = range {
                cmd.env("MEMVIZ_DECODE_RANGE", format!("{bytes}"));
            }
            if by_flag {
                cmd.args(["--jobs", &threads.to_string()]);
            } else {
                cmd.env("MEMVIZ_THREADS", threads.to_string());
            }
            let run = cmd.output().unwrap();
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert!(run.status.success(), "{stderr}");
            if long {
                let spans = stderr.matches("allocator pass, a span").count();
                // A span for each thread but one, as many as fit a quarter of the memory budget
                // (~8 MB a span: 30 of the default 1 GiB; at least 2, and 2 under 1M).
                let small = memviz::spill::budget() < 256 << 20;
                match threads {
                    0..=2 => assert_eq!(spans, 0, "{stderr}"),
                    _ if small => assert!((2..threads).contains(&spans), "{threads} threads, a small budget: {stderr}"),
                    3..=16 => assert_eq!(spans, threads - 1, "{threads} threads: {stderr}"),
                    _ => assert!((16..threads - 1).contains(&spans), "{spans} spans on {threads} threads: {stderr}"),
                }
                assert_eq!(stderr.contains("allocator pass, late part"), threads <= 2, "{stderr}");
                // The generator's events are all of torch's usual shape: most are read in ranges.
                let ranged = stderr.split("decode: ").nth(1).and_then(|l| l.split(" events").next());
                let events = ranged.and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok());
                let in_ranges = threads >= 2 && range.is_none_or(|bytes| bytes > 0);
                assert_eq!(events.is_some(), in_ranges, "{threads} threads, {range:?}: {stderr}");
                assert!(!in_ranges || events > Some(100_000), "{threads} threads: {stderr}");
            }
            let bytes = std::fs::read(&out).unwrap();
            match &first {
                None => first = Some(bytes),
                Some(one) => assert!(*one == bytes, "{}: {threads} threads changed the archive", snapshot.display()),
            }
        }
    }
}

/// More threads than the memory budget leaves room for (one per 32 MiB of its heap limit): the
/// index runs the most it may and says so; within the room it says nothing.
#[test]
fn threads_past_the_budgets_room_are_lowered_with_a_warning() {
    let dir = tempdir();
    let out = dir.path().join("x.memviz");
    let run = |jobs: &str| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"));
        cmd.args(["index".as_ref(), data("gpt2_small.pickle").as_os_str(), "-o".as_ref(), out.as_os_str()]);
        let run = cmd.args(["--jobs", jobs]).env("MEMVIZ_MEMORY_BUDGET", "1G").output().unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        assert!(run.status.success(), "{stderr}");
        stderr
    };
    let lowered = run("1000");
    assert!(lowered.contains("warning: 1000 threads asked, 32 used"), "{lowered}");
    assert!(!run("32").contains("threads asked"));
}

/// A folder's ranks built side by side share the memory budget: each plans the allocator pass's
/// spans within its share of the quarter the spans get (~8 MB a span). Under a 240 MiB budget a
/// build alone on eight threads runs 7 spans (60 MiB of room); two ranks built at once on eight
/// threads each, 3 each (30 MiB). (The spans never change the bytes: the thread-count test.)
#[test]
fn ranks_built_side_by_side_share_the_spans_room() {
    let dir = tempdir();
    let long = long_run(dir.path(), 220);
    let job = dir.path().join("job");
    std::fs::create_dir_all(&job).unwrap();
    for r in 0..2 {
        std::fs::hard_link(&long, job.join(format!("rank{r}.pickle"))).unwrap();
    }
    let run = |input: &Path, out: &Path, jobs: &str| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"));
        cmd.args([
            "index".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--jobs".as_ref(),
            jobs.as_ref(),
        ]);
        let run = cmd.env("MEMVIZ_TIMINGS", "1").env("MEMVIZ_MEMORY_BUDGET", "240M").output().unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        assert!(run.status.success(), "{stderr}");
        stderr.matches("allocator pass, a span").count()
    };
    let alone = dir.path().join("alone.memviz");
    assert_eq!(run(&long, &alone, "8"), 7, "one build on eight threads");
    let out = dir.path().join("out");
    assert_eq!(run(&job, &out, "16"), 2 * 3, "two builds on eight threads each");
}

/// A long run's archive (100 MB-class structure in a few MB: the generator repeating gpt2_small's
/// steps): `at --peak` reads, and checks, a few of its blocks; a corrupted block it does not read
/// leaves its answer as it was, one it reads makes it the one-line error.
#[test]
fn answers_check_the_blocks_they_read_and_only_those() {
    use memviz::analysis::{groups::GroupBy, live};
    let dir = tempdir();
    let (snapshot, path) = (long_run(dir.path(), 200), dir.path().join("long.memviz"));
    index(&snapshot, &path);
    let good = memviz_ok(["at".as_ref(), "--peak".as_ref(), path.as_os_str()]);

    // What the answer reads, in this process: the blocks checked after it.
    let session = memviz::archive::Session::from_archive(memviz::file::open(&path).unwrap());
    let d = memviz::model::DeviceIdx(0);
    let data = memviz::archive::DeviceData::new(&session, d);
    let t = data.timeline();
    let report = live::at(&t, session.root(), t.layout.peak_k(), GroupBy::Stack);
    let mut text = String::new();
    live::render_text(&mut text, &report, 20);
    session.archive.verify_read().unwrap();
    let checked = session.archive.checked_blocks();
    let read = checked.iter().filter(|&&c| c).count();
    assert!(read > 0 && read * 4 < checked.len(), "{read} of {} blocks read", checked.len());

    let corrupt = |block: usize| {
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[memviz_format::HEADER_LEN + block * memviz_format::BLOCK_LEN + 1000] ^= 0x20;
        let bad = dir.path().join(format!("bad{block}.memviz"));
        std::fs::write(&bad, bytes).unwrap();
        bad
    };
    // The block farthest from any read: the kernel maps pages around each one read (up to a
    // large folio of a file just written, 2 MiB), and another process maps its own.
    let distance = |b: usize| (0..checked.len()).filter(|&c| checked[c]).map(|c| c.abs_diff(b)).min().unwrap();
    let unread = (0..checked.len()).max_by_key(|&b| distance(b)).unwrap();
    assert!(distance(unread) >= 40, "block {unread} is {} blocks from a read one", distance(unread));
    let out = memviz(["at".as_ref(), "--peak".as_ref(), corrupt(unread).as_os_str()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().skip(1).collect::<Vec<_>>(), {
        String::from_utf8(good).unwrap().lines().skip(1).map(str::to_owned).collect::<Vec<_>>()
    });
    let bad = corrupt(checked.iter().position(|&c| c).unwrap());
    let err = assert_bad_input(&memviz(["at".as_ref(), "--peak".as_ref(), bad.as_os_str()]), &bad);
    assert!(err.contains("checksum mismatch in bytes") && err.contains("re-run `memviz index`"), "{err}");
    // Reading everything finds it wherever it is.
    let err = assert_bad_input(&memviz(["stats".as_ref(), corrupt(unread).as_os_str()]), &corrupt(unread));
    assert!(err.contains("checksum mismatch"), "{err}");
}

/// A file memviz did not write: valid rkyv, valid checksums, but every checkpoint names an element
/// that does not exist. Answers read it in place without checking every id first; one that trips
/// over it (`at --peak` replays from a checkpoint) is the one-line error, never a panic
/// (`commands::reading`).
#[test]
fn an_archive_with_ids_out_of_range_is_one_line_for_every_answer() {
    use memviz_format::rkyv;
    let bytes = std::fs::read(data(&format!("golden/gpt2_small.v{}.memviz", memviz_format::FORMAT_VERSION))).unwrap();
    let a = Archive::from_memory(&bytes, Path::new("g.memviz")).unwrap();
    let mut root: memviz_format::schema::Root = rkyv::deserialize::<_, rkyv::rancor::Error>(a.root()).unwrap();
    let n = root.devices[0].elements.addr.len() as u32;
    root.devices[0].checkpoints.ids.iter_mut().for_each(|id| *id = n + 7);
    let body = rkyv::to_bytes::<rkyv::rancor::Error>(&root).unwrap();
    let dir = tempdir();
    let bad = dir.path().join("hostile.memviz");
    std::fs::write(&bad, memviz_format::seal(&body, a.header().source)).unwrap();
    let file = bad.to_str().unwrap();
    for args in [
        &["at", "--peak", file][..],
        &["at", "--action", "100", "--json", file],
        &["range", file, "0..200"],
        &["diff", file, file],
    ] {
        let argv: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        let out = memviz(&argv);
        // An answer that never reads a checkpoint is right: what it read is what memviz wrote.
        if args[..2] == ["at", "--peak"] || !out.status.success() {
            let err = assert_bad_input(&out, &bad);
            assert!(err.contains("checkpoint elements") && err.contains("out of range"), "{args:?}: {err}");
        }
    }
}

/// One archive per FORMAT_VERSION is committed; every later build must still open each of them
/// (older ones upgraded in memory) and answer exactly as the snapshot does.
#[test]
fn golden_archive_still_opens_and_answers_the_same() {
    for version in memviz_format::OLDEST_READABLE_VERSION..=memviz_format::FORMAT_VERSION {
        let golden = data(&format!("golden/gpt2_small.v{version}.memviz"));
        assert!(golden.exists(), "commit {} when bumping FORMAT_VERSION", golden.display());
        let a = memviz::file::open_verified(&golden).unwrap();
        assert_eq!(a.format_version(), version);
        assert_eq!(a.root().source.name.as_str(), "gpt2_small.pickle");
        assert!(answers(&golden) == answers(&data("gpt2_small.pickle")), "v{version} answers differently");
    }
}

/// What `cargo fuzz run archive` found: an archive body (valid rkyv, sealed with a valid
/// checksum) whose totals column is not the running sum of its elements' sizes — totals near
/// 2^63, so that a step's net (`total_end - total_start`) overflowed. Its ids are all in range;
/// the totals are what the check refuses, before any answer subtracts them.
#[test]
fn totals_that_are_not_the_elements_running_sum_are_refused() {
    let body = std::fs::read(data("bad/totals_overflow.archive-body")).unwrap();
    let file = memviz_format::seal(&body, memviz_format::SourceStamp::default());
    let a = Archive::from_memory(&file, Path::new("fuzz.memviz")).unwrap();
    a.verify_checksum().unwrap();
    let err = a.verify().unwrap_err().to_string();
    assert!(err.contains("is not the running sum of the elements' sizes"), "{err}");
    // On the command line it is the one-line error of a damaged archive.
    let dir = tempdir();
    let bad = dir.path().join("totals.memviz");
    std::fs::write(&bad, &file).unwrap();
    let err =
        assert_bad_input(&memviz(["steps".as_ref(), bad.as_os_str(), "--annotation".as_ref(), "*".as_ref()]), &bad);
    assert!(err.contains("running sum"), "{err}");
}

/// Format 7 stores the colour keys of the coarse tile levels' texels after their texel chunks
/// (`TileLevel.tiles`, FORMAT.md §5): each key is the stack id of the texel's element — what the
/// viewer makes from the sites otherwise — and exactly the element timeline's levels of at most
/// 16 tiles have them (the levels every whole-trace view draws from), on every fixture and on a
/// long run whose finer levels have more tiles.
#[test]
fn coarse_tiles_carry_their_texels_site_keys() {
    use memviz::archive::chunks;
    let dir = tempdir();
    let mut inputs: Vec<std::path::PathBuf> = fixtures().iter().map(|(_, path, _)| path.clone()).collect();
    inputs.push(long_run(dir.path(), 400));
    let (mut keyed, mut unkeyed) = (0, 0);
    for snapshot in inputs {
        let out = dir.path().join("keys.memviz");
        index(&snapshot, &out);
        let a = memviz::file::open_verified(&out).unwrap();
        for d in a.root().devices.iter() {
            let stack = memviz_format::view::u32s(&d.elements.stack);
            for level in d.tiles.iter() {
                let (tiles, keys) = (level.texel_chunks(), level.key_chunks());
                let what = format!("{}: level {}", snapshot.display(), level.level);
                assert_eq!(keys.is_some(), tiles.len() <= 16, "{what}");
                let Some(keys) = keys else {
                    unkeyed += 1;
                    continue;
                };
                keyed += 1;
                for (tile, stored) in tiles.iter().zip(keys) {
                    let texels = chunks::decode::<u32>(tile).unwrap();
                    let want: Vec<u32> = texels
                        .iter()
                        .map(|&id| stack.get(id as usize).copied().unwrap_or(memviz_format::TEXEL_NO_KEY))
                        .collect();
                    assert!(chunks::decode::<u32>(stored).unwrap() == want, "{what}");
                }
            }
            // The segment timeline's keys are the viewer's (streams and pools): none stored.
            assert!(d.segment_timeline.tiles.iter().all(|l| l.key_chunks().is_none()));
        }
    }
    assert!(keyed > 0 && unkeyed > 0, "keyed and unkeyed levels: {keyed}, {unkeyed}");
}
