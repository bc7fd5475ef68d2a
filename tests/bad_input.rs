//! Bad input (SPEC §5): one line, exit 1, never a panic, a hang or a partial output file.

use std::io::Cursor;

use crate::support::*;

const BAD: [&str; 9] = [
    "empty.pickle",
    "not_json.json",
    "not_snapshot.pickle",
    "random.bin",
    "reduce.pickle",
    "stack_global.pickle",
    "truncated.pickle.gz",
    "wrong_types.json",
    "wrong_types2.json",
];

#[test]
fn every_bad_file_fails_with_one_line() {
    for name in BAD {
        let path = data(&format!("bad/{name}"));
        for args in [vec!["stats"], vec!["stats", "--json"], vec!["export", "layout"]] {
            let mut args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
            args.push(path.clone().into());
            assert_bad_input(&memviz(&args), &path);
        }
    }
}

#[test]
fn messages_say_what_and_where() {
    let expect = [
        ("empty.pickle", "empty"),
        ("not_snapshot.pickle", "not a memory snapshot"),
        ("random.bin", "byte 0"),
        ("reduce.pickle", "byte 39: refusing pickle opcode GLOBAL"),
        ("stack_global.pickle", "byte 31: refusing pickle opcode STACK_GLOBAL"),
        ("truncated.pickle.gz", "gzip"),
        ("wrong_types.json", "device_traces[0][0]: key `size`"),
        ("wrong_types2.json", "device_traces"),
        ("not_json.json", "line 1 column"),
    ];
    for (name, needle) in expect {
        let path = data(&format!("bad/{name}"));
        let err = assert_bad_input(&memviz(["stats".as_ref(), path.as_os_str()]), &path);
        assert!(err.contains(needle), "{name}: expected {needle:?} in {err}");
    }
}

#[test]
fn failed_export_leaves_no_output_file() {
    let dir = tempdir();
    let out = dir.path().join("out.json");
    let bad = data("bad/truncated.pickle.gz");
    let run = memviz(["export".as_ref(), "layout".as_ref(), bad.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    assert_bad_input(&run, &bad);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no output, no temp file");
}

fn read(bytes: &[u8]) -> Result<memviz::model::Snapshot, memviz::ingest::IngestError> {
    memviz::ingest::read(Cursor::new(bytes), bytes.len() as u64).map(|(s, _)| s)
}

/// Every prefix of a pickle is an error (the STOP opcode is the last byte), never a panic.
#[test]
fn truncated_at_every_byte() {
    for name in ["synth/protocol2.pickle", "synth/protocol5.pickle", "synth/truncated_ring.pickle"] {
        let bytes = std::fs::read(data(name)).unwrap();
        assert!(read(&bytes).is_ok(), "{name} itself reads");
        for n in 0..bytes.len() {
            let err = read(&bytes[..n]).err().unwrap_or_else(|| panic!("{name} cut at {n} was accepted"));
            let msg = err.to_string();
            assert!(!msg.contains('\n'), "one line: {msg}");
        }
    }
    // The real fixture cut every 997 bytes.
    let bytes = std::fs::read(data("gpt2_small.pickle")).unwrap();
    for n in (0..bytes.len()).step_by(997) {
        assert!(read(&bytes[..n]).is_err(), "gpt2_small cut at {n} was accepted");
    }
}

/// Byte flips of a real snapshot: any result but a panic is fine.
#[test]
fn corrupted_bytes_never_panic() {
    let orig = std::fs::read(data("synth/protocol5.pickle")).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut bytes = orig.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % bytes.len() as u64) as usize;
            bytes[i] = next() as u8;
        }
        let _ = read(&bytes);
    }
}

/// Hand-made hostile pickles: absurd lengths and memo indices stay bounded and fail fast.
#[test]
fn hostile_lengths_and_memo_indices() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // BINUNICODE8 claiming 2^60 bytes.
        ("huge string", [&[0x80, 4, 0x8d][..], &(1u64 << 60).to_le_bytes(), b"abc"].concat()),
        // LONG4 claiming 2 GiB.
        ("huge long", [&[0x80, 4, 0x8b][..], &0x7fff_ffffi32.to_le_bytes(), b"\x01\x02"].concat()),
        // LONG_BINPUT at index 4e9, then LONG_BINGET of an unset slot.
        ("far memo", [&[0x80, 4, b'N', b'r'][..], &4_000_000_000u32.to_le_bytes(), b"j\x05\x00\x00\x00."].concat()),
        // A memo read before any write.
        ("unset memo", vec![0x80, 4, b'h', 3, b'.']),
        // APPENDS with no list below the mark.
        ("appends on nothing", vec![0x80, 4, b'(', b'N', b'e', b'.']),
        // SETITEMS on a list.
        ("setitems on list", vec![0x80, 4, b']', b'(', b'N', b'N', b'u', b'.']),
        // STOP with an empty stack.
        ("empty stop", vec![0x80, 4, b'.']),
        // Protocol 9.
        ("future protocol", vec![0x80, 9, b'N', b'.']),
        // A dict whose keys are not strings and that lacks the snapshot keys.
        ("odd dict", vec![0x80, 4, b'}', b'(', b'K', 1, b'K', 2, b'u', b'.']),
    ];
    for (what, bytes) in cases {
        let t = std::time::Instant::now();
        let err = read(&bytes).err().unwrap_or_else(|| panic!("{what}: accepted"));
        assert!(t.elapsed().as_secs() < 2, "{what}: slow");
        assert!(!err.to_string().is_empty(), "{what}");
    }
}

/// Deeply nested settings are refused instead of overflowing the stack.
#[test]
fn deep_nesting_is_refused() {
    let mut p = vec![0x80, 4, b'}', b'(', 0x8c, 8];
    p.extend_from_slice(b"segments");
    p.push(b']');
    p.push(0x8c);
    p.push(18);
    p.extend_from_slice(b"allocator_settings");
    p.extend(std::iter::repeat_n(b']', 100_000));
    p.extend(std::iter::repeat_n(b'a', 99_999));
    p.extend_from_slice(b"u.");
    let err = read(&p).unwrap_err().to_string();
    assert!(err.contains("nested too deeply"), "{err}");
}
