//! Multi-rank jobs on the rank fixtures (four data-parallel GPT-2 ranks: rank 3 gets longer
//! sequences, rank 1 keeps a 6 MiB tensor per step).

use crate::support::*;

fn rank_folder(dir: &std::path::Path) -> std::path::PathBuf {
    let job = dir.join("job");
    std::fs::create_dir_all(&job).unwrap();
    for r in 0..4 {
        let name = format!("rank{r}.pickle");
        std::fs::copy(data("ranks").join(&name), job.join(&name)).unwrap();
    }
    job
}

#[test]
fn a_folder_is_indexed_once_in_slices_that_cover_it() {
    let dir = tempdir();
    let job = rank_folder(dir.path());
    let first = memviz(["index".as_ref(), job.as_os_str()]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let said = String::from_utf8_lossy(&first.stderr);
    assert!(said.contains("4 snapshots (4 built, 0 already current), ranks 0–3"), "{said}");
    for r in 0..4 {
        assert!(job.join(format!("rank{r}.memviz")).exists());
    }
    let again = memviz(["index".as_ref(), job.as_os_str()]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("(0 built, 4 already current)"));

    // Two machines, two slices: disjoint, and together the folder.
    let mut seen = Vec::new();
    for i in 0..2 {
        let out = dir.path().join(format!("out{i}"));
        let shard = format!("{i}/2");
        memviz_ok([
            "index".as_ref(),
            job.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--shard".as_ref(),
            shard.as_ref(),
        ]);
        let mut names: Vec<String> =
            std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names.len(), 2, "slice {i}: {names:?}");
        seen.extend(names);
    }
    seen.sort();
    assert_eq!(seen, ["rank0.memviz", "rank1.memviz", "rank2.memviz", "rank3.memviz"]);
    let bad = memviz(["index".as_ref(), job.as_os_str(), "--shard".as_ref(), "2/2".as_ref()]);
    assert_eq!(bad.status.code(), Some(2), "a slice past the count is a usage error");
}

#[test]
fn ranks_names_the_outlier_and_the_leak() {
    let dir = tempdir();
    let job = rank_folder(dir.path());
    let out = memviz_ok(["ranks".as_ref(), job.as_os_str(), "--json".as_ref()]);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let ranks = v["ranks"].as_array().unwrap();
    assert_eq!(ranks.iter().map(|r| r["rank"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert!(ranks[3]["file"].as_str().unwrap().ends_with("rank3.pickle"));
    let mib = |r: &serde_json::Value, k: &str| r[k].as_i64().unwrap() as f64 / (1 << 20) as f64;
    assert!((mib(&ranks[3], "peak_bytes") - 631.0).abs() < 1.0, "{}", ranks[3]["peak_bytes"]);
    assert!((mib(&ranks[0], "peak_bytes") - 378.0).abs() < 1.0);
    // Rank 1, and only rank 1, grows steadily: 6 MiB per step.
    let steady: Vec<bool> = ranks.iter().map(|r| r["steady_growth"].as_bool().unwrap()).collect();
    assert_eq!(steady, [false, true, false, false]);
    assert!((mib(&ranks[1], "retained_per_step_bytes") - 6.0).abs() < 0.01);
    assert_eq!(ranks[0]["retained_per_step_bytes"], 0);
    // Rank 3 is the outlier; what differs most is the activations of its longer sequences.
    let outliers = v["outliers"].as_array().unwrap();
    assert_eq!(outliers.iter().map(|o| o["rank"].as_u64().unwrap()).collect::<Vec<_>>(), [3]);
    let sites = outliers[0]["sites"].as_array().unwrap();
    assert!(sites[0]["delta_bytes"].as_i64().unwrap() >= 32 << 20);
    let frames: Vec<&str> = sites.iter().take(5).map(|s| s["frame"].as_str().unwrap()).collect();
    assert!(frames.iter().any(|f| f.contains("activations.py")), "{frames:?}");
    assert!(frames.iter().any(|f| f.contains("modeling_gpt2.py")), "{frames:?}");

    // For CI: exit 3 when an outlier is past the threshold.
    let over = memviz(["ranks".as_ref(), job.as_os_str(), "--threshold".as_ref(), "50".as_ref()]);
    assert_eq!(over.status.code(), Some(3), "{}", String::from_utf8_lossy(&over.stderr));
    assert!(String::from_utf8_lossy(&over.stderr).contains("rank 3's peak is 61."));
    assert!(memviz(["ranks".as_ref(), job.as_os_str(), "--threshold".as_ref(), "70".as_ref()]).status.success());
}

/// `steps` without a pattern takes the numbered span family; the verdict sets the warm-up apart
/// and names the site that keeps memory step after step.
#[test]
fn steps_find_the_steps_the_warm_up_and_the_culprit() {
    let leak = data("ranks/rank1.pickle");
    let v: serde_json::Value =
        serde_json::from_slice(&memviz_ok(["steps".as_ref(), leak.as_os_str(), "--json".as_ref()])).unwrap();
    let d = &v["devices"][0];
    assert_eq!(d["family"], "## step # ##");
    assert_eq!(d["pattern"], serde_json::Value::Null);
    assert_eq!(d["steps"].as_array().unwrap().len(), 5);
    let mib = |x: &serde_json::Value| x.as_i64().unwrap() as f64 / (1 << 20) as f64;
    assert!((mib(&d["warmup_bytes"]) - 111.6).abs() < 1.0, "{}", d["warmup_bytes"]);
    assert!((mib(&d["retained_per_step_bytes"]) - 6.0).abs() < 0.01);
    assert_eq!(d["verdict"]["steady_growth"], true);
    let culprit = &d["retaining"][0];
    assert!((mib(&culprit["bytes_per_step"]) - 6.0).abs() < 0.01, "{culprit}");
    assert!(culprit["frame"].as_str().unwrap().contains("record_snapshots.py"), "{culprit}");
    let text = String::from_utf8(memviz_ok(["steps".as_ref(), leak.as_os_str()])).unwrap();
    assert!(text.contains("steady growth after the warm-up") && text.contains("6.00 MiB per step"), "{text}");

    let steady = data("ranks/rank0.pickle");
    let v: serde_json::Value =
        serde_json::from_slice(&memviz_ok(["steps".as_ref(), steady.as_os_str(), "--json".as_ref()])).unwrap();
    assert_eq!(v["devices"][0]["verdict"]["steady_growth"], false);
    assert_eq!(v["devices"][0]["retained_per_step_bytes"], 0);
}

/// A rank's row comes from its archive's summary: no compressed chunk is read (so a thousand
/// ranks cost a thousand small reads), and it says what the rank's full data says.
#[test]
fn a_rank_row_decompresses_nothing() {
    use memviz::analysis::ranks::RankFacts;
    use memviz::archive::{DeviceData, Session, chunks};
    let dir = tempdir();
    let job = rank_folder(dir.path());
    memviz_ok(["index".as_ref(), job.as_os_str()]);
    for r in 0..4 {
        let path = job.join(format!("rank{r}.memviz"));
        let s = Session::from_archive(memviz::file::open_verified(&path).unwrap());
        let before = chunks::decompressed_on_this_thread();
        let d = s.main_device();
        let facts = RankFacts::new(Some(r), &path, format!("rank {r}"), s.reserved_peak(d), s.oom_events(d).len());
        let row = memviz::analysis::ranks::row(&DeviceData::new(&s, d).timeline(), s.root(), facts, None);
        assert_eq!(chunks::decompressed_on_this_thread(), before, "rank {r}: its row decompressed chunks");
        assert_eq!(row.steady_growth, r == 1, "rank {r}");
        assert_eq!(row.peak_step.as_deref(), Some(if r == 1 { "## step 4 ##" } else { "## step 1 ##" }), "rank {r}");
        if r == 1 {
            assert!(row.retaining[0].frame.contains("record_snapshots.py"), "{:?}", row.retaining);
        }
    }
}

/// On every fixture, the summary's facts (span actions, the default steps, OOM events, the first
/// event's time, the reserved peak) equal what the events and action times say.
#[test]
fn the_summary_says_what_the_events_say() {
    use memviz::analysis::steps;
    use memviz::archive::{DeviceData, Session};
    use memviz::derive::timeline::TimelineRef;
    let dir = tempdir();
    let mut inputs: Vec<(String, std::path::PathBuf)> = fixtures().into_iter().map(|(n, p, _)| (n, p)).collect();
    inputs.extend((0..4).map(|r| (format!("rank{r}"), data(&format!("ranks/rank{r}.pickle")))));
    let mut with_steps = 0;
    for (name, input) in inputs {
        let out = dir.path().join(format!("{name}.memviz"));
        memviz_ok(["index".as_ref(), input.as_os_str(), "-o".as_ref(), out.as_os_str()]);
        let s = Session::from_archive(memviz::file::open_verified(&out).unwrap());
        for d in s.device_indices() {
            let summary = s.device(d).summary.as_ref().expect("format 5 has a summary");
            let data = DeviceData::new(&s, d);
            let stored = data.timeline();
            let mut spans = data.spans.clone();
            spans.iter_mut().for_each(|sp| sp.actions = None);
            let derived = TimelineRef { spans: &spans, steps: None, ..stored };
            for (a, b) in data.spans.iter().zip(&spans) {
                assert_eq!(stored.span_actions(a), derived.span_actions(b), "{name}: span {}", a.name);
            }
            let json = |t: &TimelineRef<'_>| serde_json::to_value(steps::steps(t, s.root(), None)).unwrap();
            assert_eq!(json(&stored), json(&derived), "{name}: stored default steps differ");
            with_steps += usize::from(summary.steps.is_some());
            let trace = s.trace(d);
            let events = memviz::archive::events::ArchiveEvents::new(s.root());
            use memviz::allocator::EventColumns as _;
            let ooms: Vec<i64> = trace
                .clone()
                .filter(|&e| events.action(e) == memviz::model::Action::Oom)
                .map(|e| (e - trace.start) as i64)
                .collect();
            assert_eq!(s.oom_events(d), ooms, "{name}");
            let (initial, _, reserved) = s.reserved(d);
            assert_eq!(s.reserved_peak(d), reserved.iter().copied().chain([initial]).max().unwrap(), "{name}");
            let first = trace.clone().find_map(|e| events.time_us(e));
            if let Some(t) = first {
                assert_eq!(s.trace_start_us(d), Some(t), "{name}");
            }
        }
    }
    assert!(with_steps >= 5, "only {with_steps} devices had default steps");
}

/// A job's folder as people leave it: `rank5.pickle` where the fourth rank is 5, a
/// `baseline.pickle` without a number, and `rank1.retry.pickle`, a second file of rank 1.
fn renumbering_folder(dir: &std::path::Path) -> std::path::PathBuf {
    let job = dir.join("job");
    std::fs::create_dir_all(&job).unwrap();
    for (from, to) in [
        ("rank0", "rank0"),
        ("rank1", "rank1"),
        ("rank2", "rank2"),
        ("rank3", "rank5"),
        ("rank0", "baseline"),
        ("rank2", "rank1.retry"),
    ] {
        std::fs::copy(data(&format!("ranks/{from}.pickle")), job.join(format!("{to}.pickle"))).unwrap();
    }
    job
}

/// Issue 40, 1: a file keeps the number in its name; one without a number, or with a number an
/// earlier file has, is listed apart with one warning line, and no other rank moves.
#[test]
fn ranks_keep_the_numbers_in_their_names() {
    let dir = tempdir();
    let job = renumbering_folder(dir.path());
    let out = memviz(["ranks".as_ref(), job.as_os_str(), "--json".as_ref()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ranks = v["ranks"].as_array().unwrap();
    let seen: Vec<(serde_json::Value, String)> = ranks
        .iter()
        .map(|r| (r["rank"].clone(), r["file"].as_str().unwrap().rsplit('/').next().unwrap().to_owned()))
        .collect();
    let want = [
        (0.into(), "rank0.pickle"),
        (1.into(), "rank1.pickle"),
        (2.into(), "rank2.pickle"),
        (5.into(), "rank5.pickle"),
        (serde_json::Value::Null, "baseline.pickle"),
        (serde_json::Value::Null, "rank1.retry.pickle"),
    ];
    assert_eq!(seen, want.map(|(r, f)| (r, f.to_owned())));
    // The growth verdict and the outlier name the ranks of the files they are about.
    let steady: Vec<bool> = ranks.iter().map(|r| r["steady_growth"].as_bool().unwrap()).collect();
    assert_eq!(steady, [false, true, false, false, false, false]);
    let outliers = v["outliers"].as_array().unwrap();
    assert_eq!(outliers.len(), 1, "rank 1, 6 % over the others, is reported by its growth: {outliers:?}");
    assert_eq!(outliers[0]["rank"], 5);
    assert!(outliers[0]["file"].as_str().unwrap().ends_with("rank5.pickle"), "{}", outliers[0]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "one line per file listed apart: {stderr}");
    assert!(lines[0].starts_with("warning: baseline.pickle: no rank number in its name"), "{stderr}");
    assert!(lines[1].starts_with("warning: rank1.retry.pickle: rank 1 again (also in rank1.pickle)"), "{stderr}");

    let text = String::from_utf8(memviz_ok(["ranks".as_ref(), job.as_os_str()])).unwrap();
    assert!(text.contains("\nrank 1 grows step after step"), "{text}");
    assert!(text.contains("\noutlier: rank 5 — peak"), "{text}");
    let apart = text.find("listed apart").expect("the files listed apart have a line of their own");
    let row = |name: &str| text.lines().find(|l| l.ends_with(name)).unwrap_or_else(|| panic!("{name}: {text}"));
    assert!(row("baseline.pickle").trim_start().starts_with('—') && text.find("baseline.pickle").unwrap() > apart);
    assert!(row("/rank5.pickle").trim_start().starts_with("5 "), "{text}");

    // `index` says the same, and indexes all six.
    let out = memviz(["index".as_ref(), job.as_os_str()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("6 snapshots (6 built, 0 already current), ranks 0–5, 2 listed apart"), "{said}");
    assert_eq!(said.lines().filter(|l| l.starts_with("warning: ")).count(), 2, "{said}");
}

/// The rank fixtures with what else a job's folder holds: a model's `config.json`, torch weights
/// (a zip, as torch.save writes them), a pickle that is not a snapshot, and a log.
fn cluttered_folder(dir: &std::path::Path) -> std::path::PathBuf {
    let job = rank_folder(dir);
    let config = r#"{"architectures": ["GPT2LMHeadModel"], "n_embd": 768, "n_layer": 12, "vocab_size": 50257}"#;
    std::fs::write(job.join("config.json"), config).unwrap();
    let weights: Vec<u8> = b"PK\x03\x04".iter().copied().chain((0..200u32).map(|i| (i * 37 % 251) as u8)).collect();
    std::fs::write(job.join("weights.pt"), weights).unwrap();
    std::fs::copy(data("bad/not_snapshot.pickle"), job.join("optimizer.pt")).unwrap();
    std::fs::write(job.join("train.log"), "[rank0] step 1 loss 3.2\n[rank1] step 1 loss 3.3\n").unwrap();
    job
}

/// The warning lines of a run's stderr.
fn warnings(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.starts_with("warning: ")).map(str::to_owned).collect()
}

/// Issue 40, 2: what is not a snapshot (told by its bytes, not its name) is skipped with one
/// warning line each, and `ranks` and `index` exit 0 when every snapshot was read.
#[test]
fn a_folder_as_people_have_it() {
    let dir = tempdir();
    let job = cluttered_folder(dir.path());
    let skipped = ["config.json", "optimizer.pt", "train.log", "weights.pt"]
        .map(|n| format!("warning: skipping {n}: not a memory snapshot"));
    for args in [&["--json"][..], &[]] {
        let out = memviz(["ranks".as_ref(), job.as_os_str()].into_iter().chain(args.iter().map(|a| a.as_ref())));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(warnings(&out), skipped, "{stderr}");
        assert_eq!(stderr.lines().count(), 4, "{stderr}");
        if args.is_empty() {
            assert!(String::from_utf8_lossy(&out.stdout).starts_with("4 ranks\n"));
        } else {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let ranks: Vec<u64> = v["ranks"].as_array().unwrap().iter().map(|r| r["rank"].as_u64().unwrap()).collect();
            assert_eq!(ranks, [0, 1, 2, 3]);
        }
    }
    // `index` gives no other file a rank or an archive; then `ranks` reads the archives beside.
    let out = memviz(["index".as_ref(), job.as_os_str()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert_eq!(warnings(&out), skipped, "{said}");
    assert!(said.contains("4 snapshots (4 built, 0 already current), ranks 0–3 in"), "{said}");
    let mut archives: Vec<String> = std::fs::read_dir(&job)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".memviz"))
        .collect();
    archives.sort();
    assert_eq!(archives, ["rank0.memviz", "rank1.memviz", "rank2.memviz", "rank3.memviz"]);
    let out = memviz(["ranks".as_ref(), job.as_os_str(), "--json".as_ref()]);
    assert!(out.status.success() && warnings(&out) == skipped, "{}", String::from_utf8_lossy(&out.stderr));

    // A snapshot that fails to read is still an error.
    std::fs::copy(data("bad/truncated.pickle.gz"), job.join("rank4.pickle.gz")).unwrap();
    let out = memviz(["ranks".as_ref(), job.as_os_str()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty() && stderr.lines().last().unwrap().contains("rank4.pickle.gz"), "{stderr}");
    let out = memviz(["index".as_ref(), job.as_os_str()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("memviz: not indexed (rank 4): ") && said.contains("1 of 5 snapshots were not indexed"),
        "{said}"
    );

    // Nothing but other files: one line says so.
    let empty = dir.path().join("logs");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("train.log"), "step 1\n").unwrap();
    let out = memviz(["ranks".as_ref(), empty.as_os_str()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no memory snapshots or archives in the folder (1 other file, not a memory snapshot)"),
        "{stderr}"
    );
}

/// Every snapshot fixture, in every format, sniffs as a snapshot; what is not one does not.
#[test]
fn snapshots_are_told_by_their_first_bytes() {
    use memviz::ingest::{Sniffed, sniff};
    for (name, path, _) in fixtures() {
        assert_eq!(sniff(&path).unwrap(), Sniffed::Snapshot, "{name}");
    }
    let dir = tempdir();
    let job = cluttered_folder(dir.path());
    for other in ["config.json", "weights.pt", "optimizer.pt", "train.log"] {
        assert_eq!(sniff(&job.join(other)).unwrap(), Sniffed::Other, "{other}");
    }
    std::fs::write(job.join("empty.pickle"), b"").unwrap();
    assert_eq!(sniff(&job.join("empty.pickle")).unwrap(), Sniffed::Other);
    // Compressed: told by what it decompresses to; a head that does not decompress is read (and
    // fails there, saying why).
    assert_eq!(sniff(&data("bad/truncated.pickle.gz")).unwrap(), Sniffed::Snapshot);
    let gz = |bytes: &[u8], name: &str| {
        use std::io::Write as _;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        let p = job.join(name);
        std::fs::write(&p, e.finish().unwrap()).unwrap();
        sniff(&p).unwrap()
    };
    assert_eq!(gz(&std::fs::read(data("ranks/rank0.pickle")).unwrap(), "rank0.pickle.gz"), Sniffed::Snapshot);
    assert_eq!(gz(b"step 1 loss 3.2\n", "train.log.gz"), Sniffed::Other);
    memviz_ok(["index".as_ref(), job.join("rank0.pickle").as_os_str()]);
    assert_eq!(sniff(&job.join("rank0.memviz")).unwrap(), Sniffed::Archive);
}

/// A folder of `rank{i}.pickle` copies of the given fixture ranks.
fn copies_folder(dir: &std::path::Path, of: [u64; 4]) -> std::path::PathBuf {
    let job = dir.join("job");
    std::fs::create_dir_all(&job).unwrap();
    for (i, r) in of.iter().enumerate() {
        std::fs::copy(data(&format!("ranks/rank{r}.pickle")), job.join(format!("rank{i}.pickle"))).unwrap();
    }
    job
}

fn ranks_json(job: &std::path::Path, more: &[&str]) -> (Option<i32>, serde_json::Value) {
    let mut args = vec!["ranks".as_ref(), job.as_os_str(), "--json".as_ref()];
    args.extend(more.iter().map(std::ffi::OsStr::new));
    let out = memviz(args);
    assert!(out.stdout.starts_with(b"{"), "{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code(), serde_json::from_slice(&out.stdout).unwrap())
}

/// Issue 40, 3: identical ranks make the deviation 0; floored at 1 % of the median, they have
/// no outlier. A rank 6 % over identical peers because it leaks is reported by its growth
/// verdict; the sites that differ most never list one whose difference is 0.
#[test]
fn identical_ranks_have_no_outlier_and_a_growing_one_is_told_by_its_growth() {
    let dir = tempdir();
    let same = copies_folder(&dir.path().join("same"), [0, 0, 0, 0]);
    let (code, v) = ranks_json(&same, &[]);
    assert_eq!(code, Some(0));
    assert_eq!(v["outliers"], serde_json::json!([]));
    assert_eq!(v["spread"], 1.0);
    let text = String::from_utf8(memviz_ok(["ranks".as_ref(), same.as_os_str()])).unwrap();
    assert!(text.contains("\nno outlier rank\n"), "{text}");

    let leak = copies_folder(&dir.path().join("leak"), [0, 0, 0, 1]);
    let (code, v) = ranks_json(&leak, &[]);
    assert_eq!(code, Some(0));
    assert_eq!(v["outliers"], serde_json::json!([]), "rank 3 is +6.3 %, by its growth");
    assert_eq!(v["ranks"][3]["steady_growth"], true);
    let text = String::from_utf8(memviz_ok(["ranks".as_ref(), leak.as_os_str()])).unwrap();
    assert!(text.contains("\nrank 3 grows step after step: ") && text.contains("\nno outlier rank\n"), "{text}");
    // Past --threshold it is an outlier all the same (exit 3), and only sites that differ are listed.
    let (code, v) = ranks_json(&leak, &["--threshold", "5", "--top", "50"]);
    assert_eq!(code, Some(3));
    let outliers = v["outliers"].as_array().unwrap();
    assert_eq!(outliers.len(), 1);
    assert_eq!(outliers[0]["rank"], 3);
    let sites = outliers[0]["sites"].as_array().unwrap();
    assert!(!sites.is_empty() && sites.iter().all(|s| s["delta_bytes"] != 0), "{sites:?}");
    assert!(sites[0]["frame"].as_str().unwrap().contains("record_snapshots.py"), "{}", sites[0]);
    let out = memviz(["ranks".as_ref(), leak.as_os_str(), "--threshold".as_ref(), "5".as_ref()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains(" 0 B  "), "a site with no difference: {text}");

    // The job's real outlier: every site listed differs (there are fewer than 50 that do).
    let job = rank_folder(&dir.path().join("job4"));
    let (_, v) = ranks_json(&job, &["--top", "50"]);
    let sites = v["outliers"][0]["sites"].as_array().unwrap();
    assert!(sites.len() < 50 && sites.iter().all(|s| s["delta_bytes"] != 0), "{sites:?}");
}
