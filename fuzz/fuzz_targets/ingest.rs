//! The whole input path: magic-byte sniffing, gzip / zstd, then pickle or JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = memviz::ingest::read(data, data.len() as u64);
});
