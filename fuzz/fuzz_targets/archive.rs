//! An archive body from a colleague: the harness seals it with a valid header (so the checksum
//! always passes) and then does what the commands and the viewer do with an archive — verify,
//! lay out every device, rebuild live sets from the checkpoints (of the elements and of the
//! segments), answer `at`, `range` and `steps` (from the summary, and for a pattern), classify every
//! element's category, rebuild the allocator's state at a few events and before
//! each OOM, read its series, work out the private pools, decode tiles with their colour keys,
//! restore the whole model and compute `memviz stats` on it.
//! Inconsistent ids must be an error, never a panic. The bytes are also read as a whole file (its
//! own header and block table).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use memviz::analysis::groups::GroupBy;
use memviz::analysis::{categories, live, range, stats, steps};
use memviz::archive::{Archive, DeviceData, Plane, Session, restore};

fuzz_target!(|body: &[u8]| {
    // The bytes as a whole file too: the header, the block table and each block's check.
    if let Ok(whole) = Archive::from_memory(body, Path::new("whole.memviz")) {
        let _ = whole.verify_read();
        let _ = whole.verify_checksum();
    }
    let file = memviz_format::seal(body, memviz_format::SourceStamp::default());
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
        // The steps from the summary, and with a pattern from the span actions.
        let _ = steps::steps(&t, session.root(), None);
        let _ = steps::steps(&t, session.root(), Some("*"));
        let _ = t.open_at_action(t.actions() / 2);
        // Every element's category (phases, lifetimes, pools, repetition).
        let _ = categories::classify(&t, session.root(), &session.element_pools(d), &());
        let events = session.trace(d).len() as i64;
        for e in [-1, events / 2, events - 1] {
            if let Some(state) = session.allocator_state(d, e) {
                let _ = state.summary(e);
            }
        }
        let _ = session.oom_states(d);
        let _ = session.allocator_series(d, |a| &a.largest_free);
        if let Some(s) = session.stacked(d, Plane::Segments) {
            let n = s.layout.actions.len() as i64;
            for k in [-1, n / 2, n - 1] {
                let _ = s.checkpoints.stack_after(s.layout, k).with_offsets().count();
            }
        }
        let _ = memviz::viewer::pools::compute(&session, d);
        // The viewer's tiles: texels and (coarse levels) their stored colour keys.
        let elements = session.elements(d);
        for (li, level) in elements.tiles.iter().enumerate() {
            for i in 0..level.texel_chunks().len().min(4) {
                let _ = elements.tile(li, i);
            }
        }
    }
    // The whole model restored, and `memviz stats` on it (the peak's and each OOM's allocator
    // state from the saved states, a trace per device).
    if let Ok(snap) = restore::snapshot(session.root()) {
        let layouts: Vec<_> = session.device_indices().map(|d| session.layout(d)).collect();
        let options = stats::StatsOptions { annotations: Default::default(), model: None, categories: Vec::new() };
        let _ = stats::compute(&snap, &layouts, &options, &session);
    }
});
