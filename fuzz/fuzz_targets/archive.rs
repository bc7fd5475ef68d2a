//! An archive body from a colleague: the harness seals it with a valid header (so the checksum
//! always passes) and then does what the commands do with an archive — verify, lay out every
//! device, rebuild live sets from the checkpoints, answer `at` and `range`, restore the whole
//! model. Inconsistent ids must be an error, never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use memviz::analysis::groups::GroupBy;
use memviz::analysis::{live, range};
use memviz::archive::{Archive, DeviceData, Session, restore};

fuzz_target!(|body: &[u8]| {
    let header = memviz_format::Header::new(body, memviz_format::SourceStamp::default());
    let mut file = header.to_bytes().to_vec();
    file.extend_from_slice(body);
    let Ok(archive) = Archive::from_memory(&file, Path::new("fuzz.memviz")) else { return };
    if archive.verify().is_err() {
        return;
    }
    let session = Session::from_archive(archive);
    for d in session.device_indices() {
        let data = DeviceData::new(&session, d);
        let t = data.timeline();
        let n = i64::from(t.actions());
        for k in [-1, 0, n / 2, n - 1] {
            if k < n {
                let _ = live::at(&t, session.root(), k, GroupBy::Stack);
            }
        }
        let _ = range::range(&t, session.root(), 0, t.actions());
    }
    let _ = restore::snapshot(session.root());
});
