//! Real traces for the unit tests, read the way this crate reads: archives of the pickles in
//! the repository's `tests/data/`, committed under `read/tests/data/` (the main crate's
//! `tests/fixture_archives.rs` checks that each is what `memviz index` makes of its pickle today,
//! byte for byte past the header, and rewrites them with `UPDATE_EXPECTED=1`), and the model
//! restored from them — exactly as the reader produced it ([`restore::snapshot`]).

use std::path::PathBuf;

use crate::archive::{Archive, Session, restore};
use crate::model::Snapshot;

pub fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/{name}.memviz"))
}

pub fn archive(name: &str) -> Archive {
    let path = path(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Archive::from_memory(&bytes, &path).unwrap()
}

pub fn session(name: &str) -> Session {
    Session::from_archive(archive(name))
}

pub fn snapshot(name: &str) -> Snapshot {
    restore::snapshot(archive(name).root()).unwrap()
}

/// The golden archive of format `version` (gpt2_small; `tests/data/golden/` at the repository's
/// root, one per version).
pub fn golden(version: u32) -> Vec<u8> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/data/golden/gpt2_small.v{version}.memviz"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
