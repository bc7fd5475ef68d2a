//! The pickle VM on arbitrary bytes: any error is fine, a panic, hang or runaway allocation is not.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((snap, _)) = memviz::ingest::pickle::decode(data) {
        // Whatever decodes must also lay out.
        for d in snap.device_ids() {
            let _ = memviz::layout::Layout::build(&snap, d);
        }
    }
});
