//! The native reader against the independent reference: extract_snapshot.py (CPython's own
//! unpickler) turns each pickle into JSON; memviz must answer identically from both.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use crate::support::*;

fn extract(pickle: &Path, json: &Path) {
    let status = Command::new("python3")
        .arg(repo().join("extract_snapshot.py"))
        .arg(pickle)
        .arg("-o")
        .arg(json)
        .status()
        .expect("python3 is installed");
    assert!(status.success(), "extract_snapshot.py failed on {}", pickle.display());
}

#[test]
fn pickle_and_reference_json_give_identical_answers() {
    let dir = tempdir();
    for (name, pickle, _) in fixtures().into_iter().filter(|f| f.1.extension().is_some_and(|e| e == "pickle")) {
        let json = dir.path().join(format!("{name}.json"));
        extract(&pickle, &json);
        let (stats_p, layout_p) = answers(&pickle);
        let (stats_j, layout_j) = answers(&json);
        assert!(stats_p == stats_j, "{name}: stats --json differs between pickle and JSON");
        assert!(layout_p == layout_j, "{name}: export layout differs between pickle and JSON");
    }
}

/// Compression is found from magic bytes: names here say nothing.
#[test]
fn gzip_and_zstd_are_detected_by_magic() {
    let dir = tempdir();
    let pickle = data("gpt2_small.pickle");
    let raw = std::fs::read(&pickle).unwrap();
    let gz_path = dir.path().join("snapshot.bin");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    std::fs::write(&gz_path, gz.finish().unwrap()).unwrap();
    let zst_path = dir.path().join("snapshot.data");
    std::fs::write(&zst_path, zstd::encode_all(&raw[..], 3).unwrap()).unwrap();

    let expected = answers(&pickle);
    assert!(answers(&gz_path) == expected, "gzip input answers differently");
    assert!(answers(&zst_path) == expected, "zstd input answers differently");

    let text = String::from_utf8(memviz_ok(["stats".as_ref(), gz_path.as_os_str()])).unwrap();
    assert!(text.contains("pickle protocol 4, gzip"), "{text}");
}

/// The library reader and the model agree with the JSON reader on interned data, too.
#[test]
fn interning_is_the_same_from_pickle_and_json() {
    let dir = tempdir();
    let pickle = data("oom_streams.pickle");
    let json = dir.path().join("oom.json");
    extract(&pickle, &json);
    let (a, _) = memviz::ingest::read_path(&pickle).unwrap();
    let (b, _) = memviz::ingest::read_path(&json).unwrap();
    assert_eq!(a.frames.len(), b.frames.len());
    assert_eq!(a.stacks.len(), b.stacks.len());
    assert_eq!(a.event_count(), b.event_count());
    let described = |s: &memviz::model::Snapshot| -> Vec<(u64, u64, String, Vec<String>)> {
        s.segments
            .iter()
            .map(|g| {
                let frames = s.stack_frames(g.stack).map(|f| format!("{}:{}", s.str(f.name), f.line)).collect();
                (g.address, g.total_size, s.str(g.segment_type).to_owned(), frames)
            })
            .collect()
    };
    assert_eq!(described(&a), described(&b));
    // Frame dicts are shared in the pickle: far fewer distinct frames than frame references.
    assert!(
        a.frames.len() * 10 < a.stacks.frames.len(),
        "{} frames for {} references",
        a.frames.len(),
        a.stacks.frames.len()
    );
}
