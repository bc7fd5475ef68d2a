//! The read crate's unit tests read real traces as archives (`read/tests/data/NAME.memviz`, see
//! `read/src/fixtures.rs`): each must be what `memviz index` makes of `tests/data/NAME.pickle`
//! today, byte for byte past the header (which stamps the source file's time). A change to what
//! the index writes shows up here; `UPDATE_EXPECTED=1 cargo test --release fixture_archives`
//! writes them afresh.

use memviz_format::Header;

use crate::support::*;

const NAMES: [&str; 6] = ["gpt2_small", "oom_streams", "cudagraph", "expandable", "frag_oom", "resnet"];

/// An archive's body and block table: everything but the header.
fn past_header(bytes: &[u8]) -> &[u8] {
    let header = Header::parse(bytes).unwrap();
    let body = header.archive(bytes);
    &bytes[body.as_ptr() as usize - bytes.as_ptr() as usize..]
}

#[test]
fn the_read_crates_fixture_archives_are_what_index_makes() {
    let dir = tempdir();
    let update = std::env::var_os("UPDATE_EXPECTED").is_some();
    let mut differ = Vec::new();
    for name in NAMES {
        let made = dir.path().join(format!("{name}.memviz"));
        memviz_ok(["index".as_ref(), data(&format!("{name}.pickle")).as_os_str(), "-o".as_ref(), made.as_os_str()]);
        let made = std::fs::read(&made).unwrap();
        let committed = repo().join(format!("read/tests/data/{name}.memviz"));
        if update {
            std::fs::create_dir_all(committed.parent().unwrap()).unwrap();
            std::fs::write(&committed, &made).unwrap();
            continue;
        }
        let kept = std::fs::read(&committed).unwrap_or_default();
        if kept.is_empty() || past_header(&kept) != past_header(&made) {
            differ.push(name);
        }
    }
    assert!(differ.is_empty(), "{differ:?} differ from read/tests/data: UPDATE_EXPECTED=1 rewrites them");
}
