//! What users read, pinned: the text and the JSON of every answering command on the bundled real
//! fixtures, compared byte for byte with `tests/expected/NAME.txt` / `NAME.json`. A change to an
//! answer shows up as a diff of those files in review. `UPDATE_EXPECTED=1 cargo test --release
//! expected` writes them afresh (then read the diff before committing it).

use std::path::Path;

use crate::support::*;

/// Name, then the command line run from the repository's root (relative paths, so the files do
/// not depend on where the clone lives).
const CASES: [(&str, &[&str]); 11] = [
    ("stats", &["stats", "tests/data/gpt2_small.pickle"]),
    ("stats_oom", &["stats", "tests/data/frag_oom.pickle"]),
    ("at", &["at", "tests/data/gpt2_small.pickle", "--action", "1000"]),
    ("range", &["range", "tests/data/gpt2_small.pickle", "100..900"]),
    ("steps", &["steps", "tests/data/gpt2_small.pickle"]),
    ("diff", &["diff", "tests/data/ranks/rank0.pickle", "tests/data/ranks/rank1.pickle"]),
    ("find_frame", &["find", "tests/data/gpt2_small.pickle", "--frame", "adam"]),
    ("segments", &["segments", "tests/data/frag_oom.pickle", "--oom", "1"]),
    ("oom", &["oom", "tests/data/frag_oom.pickle"]),
    (
        "ranks",
        &[
            "ranks",
            "tests/data/ranks/rank0.pickle",
            "tests/data/ranks/rank1.pickle",
            "tests/data/ranks/rank2.pickle",
            "tests/data/ranks/rank3.pickle",
        ],
    ),
    ("flamegraph", &["export", "flamegraph", "tests/data/gpt2_small.pickle", "--peak"]),
];

/// Runs `args` (and with `--json`) from the repository's root with a cache of its own; the
/// outputs that differ from the expected files, or `UPDATE_EXPECTED` writes them.
#[test]
fn every_command_prints_what_the_expected_files_say() {
    let cache = tempdir();
    let update = std::env::var_os("UPDATE_EXPECTED").is_some();
    let dir = repo().join("tests/expected");
    let mut differ = Vec::new();
    for (name, args) in CASES {
        for json in [false, true] {
            // Folded stacks have no JSON form; the others both.
            if json && name == "flamegraph" {
                continue;
            }
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"));
            cmd.current_dir(repo()).args(args).env("MEMVIZ_CACHE_DIR", cache.path());
            if json {
                cmd.arg("--json");
            }
            let out = cmd.output().unwrap();
            // Exit 3 is an answer too (`ranks` past its threshold).
            assert!(matches!(out.status.code(), Some(0 | 3)), "{name}: {}", String::from_utf8_lossy(&out.stderr));
            let text = String::from_utf8(out.stdout).unwrap();
            let file = dir.join(format!("{name}.{}", if json { "json" } else { "txt" }));
            if update {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&file, &text).unwrap();
            } else if std::fs::read_to_string(&file).ok().as_deref() != Some(text.as_str()) {
                differ.push(relative(&file));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "these outputs differ from the expected files (UPDATE_EXPECTED=1 writes them; review the diff): {differ:?}"
    );
}

fn relative(p: &Path) -> String {
    p.strip_prefix(repo()).unwrap_or(p).display().to_string()
}
