//! The pickle VM on arbitrary bytes, read serially and with its batches of trace events read in
//! ranges on the pool (as `memviz index` does on more than one thread), through a read window and
//! over the bytes as a mapped file's (`ingest::mapped`): the same snapshot or the same error,
//! offset and all. The first byte picks the ranges' size.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&size, pickle)) = data.split_first() else { return };
    let every = 1 + usize::from(size) * 64;
    let text = |r: Result<(memviz::model::Snapshot, _), memviz::ingest::pickle::PickleError>| match r {
        Ok((snap, _)) => format!("{snap:?}"),
        Err(e) => format!("error: {e}"),
    };
    let serial = text(memviz::ingest::pickle::decode(pickle));
    let ranged = text(memviz::ingest::pickle::decode_in_ranges(pickle, every));
    assert!(serial == ranged, "read in ranges of {every} bytes, the snapshot differs");
    for ranges in [None, Some(every)] {
        let src = memviz::ingest::pickle::Mapped { bytes: pickle, behind: &|_| {} };
        let mapped = text(memviz::ingest::pickle::decode_mapped_with(src, None, ranges));
        assert!(serial == mapped, "mapped, in ranges {ranges:?}, the snapshot differs");
    }
});
