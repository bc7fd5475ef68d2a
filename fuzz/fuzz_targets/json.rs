//! The snapshot JSON reader on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(snap) = memviz::ingest::json::decode(data) {
        for d in snap.device_ids() {
            let _ = memviz::layout::Layout::build(&snap, d);
        }
    }
});
