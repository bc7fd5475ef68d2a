//! The bytes a browser's web worker sends back for an archive's categories
//! (`DeviceCategories::decode`) on arbitrary bytes: read or refused, never a panic; what reads
//! writes back the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memviz::viewer::categories::DeviceCategories;

fuzz_target!(|data: &[u8]| {
    if let Some(c) = DeviceCategories::decode(data) {
        assert_eq!(c.encode(), data);
    }
});
