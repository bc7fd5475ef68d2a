//! The bytes a browser's web worker sends back — an archive's categories
//! (`DeviceCategories::decode`), the facts under the top bar (`TopFacts::decode`), the OOM
//! markers (`OomMarks::decode`), the private pools (`pools::decode`), the annotation lane's spans
//! (`SpanMarks::decode`) and a search's matches (`search::read_answer`) — on arbitrary bytes: read
//! or refused, never a panic; what reads writes back the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memviz::viewer::categories::DeviceCategories;
use memviz::viewer::ooms::OomMarks;
use memviz::viewer::pools;
use memviz::viewer::search;
use memviz::viewer::span_marks::SpanMarks;
use memviz::viewer::timeline::TopFacts;

fuzz_target!(|data: &[u8]| {
    if let Some(c) = DeviceCategories::decode(data) {
        assert_eq!(c.encode(), data);
    }
    if let Some(f) = TopFacts::decode(data) {
        assert_eq!(f.encode(), data);
    }
    if let Some(o) = OomMarks::decode(data) {
        assert_eq!(o.encode(), data);
    }
    if let Some(p) = pools::decode(data) {
        assert_eq!(pools::encode(p.as_ref()), data);
    }
    if let Some(s) = SpanMarks::decode(data) {
        assert_eq!(s.encode(), data);
    }
    if let Some(m) = search::read_answer(data) {
        assert_eq!(m.iter().flat_map(|id| id.0.to_le_bytes()).collect::<Vec<u8>>(), data);
    }
});
