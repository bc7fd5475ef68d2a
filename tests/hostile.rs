//! Hostile files, shared folders, interrupted runs (issue 41): inputs made here as
//! `../shared/fixtures/hostile/make_hostile.py` makes them (its `--big` ones run in
//! `benches/hostile.sh`). Bounds are read from the process (its peak RSS from `wait4`), never
//! from a clock.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::*;

/// Runs memviz; its exit code, its standard error (less the timing lines) and its peak resident
/// size in MiB, as the program reads it (`VmHWM`, printed with `MEMVIZ_TIMINGS`). The child's
/// `ru_maxrss` would not do: it counts the test process's own peak, recorded at `exec`.
fn measured(args: &[&std::ffi::OsStr], env: &[(&str, &std::ffi::OsStr)]) -> (Option<i32>, String, u64) {
    let out = Command::new(env!("CARGO_BIN_EXE_memviz"))
        .arg("--no-cache")
        .args(args)
        .envs(env.iter().copied())
        .env("MEMVIZ_TIMINGS", "1")
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (timings, rest): (Vec<&str>, Vec<&str>) = stderr.lines().partition(|l| l.starts_with("timing: "));
    let last = timings.iter().find(|l| l.starts_with("timing: command ")).unwrap_or_else(|| panic!("{stderr}"));
    let kb: u64 =
        last.split("peak ").nth(1).and_then(|p| p.split_whitespace().next()).and_then(|k| k.parse().ok()).unwrap();
    (out.status.code(), rest.iter().map(|l| format!("{l}\n")).collect(), kb / 1024)
}

/// `dir/big.pickle`: gpt2_small's run repeated to `events` events (the benchmark generator).
fn big_pickle(dir: &Path, events: u64) -> std::path::PathBuf {
    let (snap, _) = memviz::ingest::read_path(&data("gpt2_small.pickle")).unwrap();
    let pickle = dir.join("big.pickle");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&pickle).unwrap());
    crate::generator::gen_snapshot::write(&snap, events, &mut w).unwrap();
    w.flush().unwrap();
    pickle
}

fn one_error_line(code: Option<i32>, stderr: &str) {
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
}

/// 1–2. A 100 KB memo ladder, a string of 10⁹ bytes, 2·10⁷ NONEs and a zstd bomb: one error line
///      each, in bounded memory (they took 5 GB and more).
#[test]
fn hostile_pickles_end_in_one_line_in_bounded_memory() {
    let dir = tempdir();
    let put = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    // Each LONG_BINPUT 65,536 slots past the memo's end.
    let mut ladder = b"\x80\x04N".to_vec();
    let mut n = 0u32;
    for _ in 0..20_000 {
        let i = n + 65_536;
        ladder.push(b'r');
        ladder.extend_from_slice(&i.to_le_bytes());
        n = i + 1;
    }
    ladder.push(b'.');
    let ladder = put("memo_ladder.pickle", &ladder);
    // BINUNICODE8 of 10⁹ bytes, the data not even there.
    let mut long = b"\x80\x04\x8d".to_vec();
    long.extend_from_slice(&1_000_000_000u64.to_le_bytes());
    let long = put("long_string.pickle", &long);
    // MARK, then 2·10⁷ NONE.
    let mut nones = b"\x80\x04(".to_vec();
    nones.resize(nones.len() + 20_000_000, b'N');
    nones.push(b'.');
    let nones = put("nones.pickle", &nones);
    // 1.1 GiB of zeros in a BINBYTES8, zstd: about a megabyte.
    let bomb = dir.path().join("bomb.pickle.zst");
    {
        let mut z = zstd::stream::Encoder::new(std::fs::File::create(&bomb).unwrap(), 1).unwrap();
        let n: u64 = 1_100 << 20;
        z.write_all(b"\x80\x04\x8e").unwrap();
        z.write_all(&n.to_le_bytes()).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..(n >> 20) {
            z.write_all(&zeros).unwrap();
        }
        z.write_all(b"0N.").unwrap();
        z.finish().unwrap();
    }
    for (input, says, mib) in [
        (&ladder, "not a memory snapshot", 64),
        (&long, "1000000000 bytes in one string", 64),
        (&nones, "items on the pickle stack", 600),
        (&bomb, "a decompression bomb", 64),
    ] {
        let (code, err, rss) = measured(&["stats".as_ref(), input.as_os_str()], &[]);
        one_error_line(code, &err);
        assert!(err.contains(says), "{err}");
        assert!(rss < mib, "{}: {rss} MiB resident", input.display());
    }
}

/// 2. A tiny budget makes a command spill, never stop, when the input fits (the hard limit on
///    the heap is at least 256 MiB); `benches/hostile.sh` runs the 10 GiB bombs against it.
#[test]
fn a_tiny_budget_spills_and_answers() {
    let gpt = data("gpt2_small.pickle");
    let (code, err, rss) = measured(&["stats".as_ref(), gpt.as_os_str()], &[("MEMVIZ_MEMORY_BUDGET", "1M".as_ref())]);
    assert_eq!(code, Some(0), "{err}");
    assert!(rss < 300, "{rss} MiB");
}

/// 11. Two lz4 frames one after the other read as one stream (`lz4 -dc` reads them whole).
#[test]
fn concatenated_lz4_frames_read_whole() {
    let dir = tempdir();
    let real = std::fs::read(data("gpt2_small.pickle")).unwrap();
    let mut both = Vec::new();
    for part in [&real[..200_000], &real[200_000..]] {
        let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
        enc.write_all(part).unwrap();
        both.extend(enc.finish().unwrap());
    }
    let concat = dir.path().join("concat.pickle.lz4");
    std::fs::write(&concat, both).unwrap();
    let json = |p: &Path| -> serde_json::Value {
        serde_json::from_slice(&memviz_ok(["stats".as_ref(), p.as_os_str(), "--json".as_ref()])).unwrap()
    };
    assert_eq!(json(&concat)["devices"], json(&data("gpt2_small.pickle"))["devices"]);
}

/// 5, 7. Outputs go through a temp file at an unguessable name; a SIGTERM in the middle of
///       `index` removes it (exit 143); a dead process's leftovers are swept by the next write.
#[test]
fn interrupted_runs_leave_nothing() {
    let dir = tempdir();
    let leftovers = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect()
    };
    // A kill -9 left this one (no such process).
    let stale = dir.path().join(".old.memviz.tmp-999999999-x1y2z3");
    std::fs::write(&stale, b"half an archive").unwrap();
    let out = dir.path().join("small.memviz");
    memviz_ok(["index".as_ref(), data("gpt2_small.pickle").as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));

    // A snapshot big enough that its archive is written for a while.
    let pickle = big_pickle(dir.path(), 3_000_000);
    let target = dir.path().join("big.memviz");
    let mut child = Command::new(env!("CARGO_BIN_EXE_memviz"))
        .args(["index".as_ref(), pickle.as_os_str(), "-o".as_ref(), target.as_os_str()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while leftovers(dir.path()).is_empty() && std::time::Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let caught = !leftovers(dir.path()).is_empty();
    // SAFETY: signals our own child.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM)
    };
    let status = child.wait().unwrap();
    if caught {
        assert_eq!(status.code(), Some(143), "{status:?}");
        assert!(!target.exists());
    }
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
}

/// 8. `-o` a FIFO or a character device is written into (no temp file, no rename: the special
///    file stays); a failed write is one line, exit 1; a folder is refused, exit 2.
#[test]
fn special_outputs_are_written_into_or_refused() {
    let dir = tempdir();
    let gpt = data("gpt2_small.pickle");
    let fifo = dir.path().join("pipe");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    #[allow(unsafe_code)]
    let made = unsafe { libc::mkfifo(path.as_ptr(), 0o600) };
    assert_eq!(made, 0);
    let reading = {
        let fifo = fifo.clone();
        std::thread::Builder::new().name("fifo".into()).spawn(move || std::fs::read(fifo).unwrap()).unwrap()
    };
    memviz_ok(["export".as_ref(), "layout".as_ref(), gpt.as_os_str(), "-o".as_ref(), fifo.as_os_str()]);
    let got: serde_json::Value = serde_json::from_slice(&reading.join().unwrap()).unwrap();
    assert!(got["devices"][0]["elements"].as_array().is_some_and(|e| !e.is_empty()));
    use std::os::unix::fs::FileTypeExt as _;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "still a FIFO");

    let full = memviz(["export".as_ref(), "layout".as_ref(), gpt.as_os_str(), "-o".as_ref(), "/dev/full".as_ref()]);
    let err = String::from_utf8_lossy(&full.stderr);
    one_error_line(full.status.code(), &err);
    assert!(std::fs::metadata("/dev/full").unwrap().file_type().is_char_device());

    let folder = memviz(["export".as_ref(), "layout".as_ref(), gpt.as_os_str(), "-o".as_ref(), dir.path().as_os_str()]);
    assert_eq!(folder.status.code(), Some(2), "{}", String::from_utf8_lossy(&folder.stderr));
}

/// 6, 9. A folder others can write in (or a read-only one) gets no archive of ours: `index` writes
///       to the user's cache and says where, and an archive planted there is not answered from.
#[test]
fn shared_folders_get_no_archive_and_theirs_is_not_trusted() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempdir();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let snap = shared.join("run.pickle");
    std::fs::copy(data("gpt2_small.pickle"), &snap).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let cache = dir.path().join("cache");
    let out = Command::new(env!("CARGO_BIN_EXE_memviz"))
        .args(["index".as_ref(), snap.as_os_str()])
        .env("MEMVIZ_CACHE_DIR", &cache)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("the archive goes to") && said.contains(cache.to_str().unwrap()), "{said}");
    assert!(!shared.join("run.memviz").exists());
    // Another user's archive of another snapshot, with this one's stamp, planted beside it.
    let stamp = memviz::file::write::stamp(&snap).unwrap();
    let planted = shared.join("run.memviz");
    memviz::index::pipeline::build_archive(&data("frag_oom.pickle"), stamp, &planted, &|_| {}, &|_| {}).unwrap();
    let stats = Command::new(env!("CARGO_BIN_EXE_memviz"))
        .args(["stats".as_ref(), snap.as_os_str(), "--json".as_ref()])
        .env("MEMVIZ_CACHE_DIR", dir.path().join("cache2"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(v["devices"][0]["events"], 5056, "gpt2_small's answer, not the planted archive's");
}

/// An archive memviz writes is readable as a plain create makes it and writable by its owner
/// only; a cached archive others can write (changed since, say by a shared group's umask) is not
/// answered from: rebuilt in the user's own cache, said once.
#[test]
fn archives_are_written_for_others_to_read_and_one_others_can_write_is_not_trusted() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempdir();
    let own = dir.path().join("own");
    std::fs::create_dir(&own).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).unwrap();
    let snap = own.join("run.pickle");
    std::fs::copy(data("gpt2_small.pickle"), &snap).unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_memviz"))
            .args(args)
            .env("MEMVIZ_CACHE_DIR", dir.path().join("cache"))
            .output()
            .unwrap()
    };
    let out = run(&["index".as_ref(), snap.as_os_str()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let archive = own.join("run.memviz");
    let mode = std::fs::metadata(&archive).unwrap().permissions().mode() & 0o777;
    // memviz inherits this process's umask.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let umask =
        status.lines().find_map(|l| l.strip_prefix("Umask:")).map(|v| u32::from_str_radix(v.trim(), 8).unwrap());
    assert_eq!(mode, 0o644 & !umask.unwrap(), "{mode:o}");
    std::fs::set_permissions(&archive, std::fs::Permissions::from_mode(0o666)).unwrap();
    let stats = run(&["stats".as_ref(), snap.as_os_str(), "--json".as_ref()]);
    let said = String::from_utf8_lossy(&stats.stderr);
    assert!(said.contains("not using") && said.contains("run.memviz"), "{said}");
    let v: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(v["devices"][0]["events"], 5056);
}

/// 10. A plain pickle is read through a mapping of its file: truncated while it is read, the
///     index ends in one error line and exit code 1 (the `SIGBUS` of a page past the new end
///     turned into one line, or the zeros after the end in its last page read as bad opcodes),
///     its temp files removed.
#[test]
fn a_snapshot_truncated_while_it_is_read_is_one_error_line() {
    let dir = tempdir();
    let pickle = big_pickle(dir.path(), 2_000_000);
    let len = std::fs::metadata(&pickle).unwrap().len();
    let target = dir.path().join("big.memviz");
    let child = Command::new(env!("CARGO_BIN_EXE_memviz"))
        .args(["--no-cache".as_ref(), "index".as_ref(), pickle.as_os_str(), "-o".as_ref(), target.as_os_str()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the file is mapped (the decoder is then a few MB in, at most), most of it goes.
    let maps = format!("/proc/{}/maps", child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&maps).is_ok_and(|m| m.contains("big.pickle")) {
        assert!(std::time::Instant::now() < deadline, "the pickle was never mapped");
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    std::fs::OpenOptions::new().write(true).open(&pickle).unwrap().set_len(len / 8).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    one_error_line(out.status.code(), &stderr);
    // A page past the new end read (the waves' workers read ahead): SIGBUS. The decoder itself
    // reaching the end first reads the rest of the last page as zeros: a malformed pickle there.
    let past_the_end = stderr.split("byte ").nth(1).and_then(|b| b.split(':').next()?.parse::<u64>().ok());
    assert!(stderr.contains("SIGBUS") || past_the_end.is_some_and(|b| b >= len / 8), "{stderr}");
    assert!(!target.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left.len(), 1, "only the pickle is left: {left:?}");
}
