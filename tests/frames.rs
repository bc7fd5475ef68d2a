//! A steady frame's cost does not grow with the trace: after the first frame, the bench's
//! zoom / pan / hover script decompresses no chunk on the UI thread in any view (timeline, pools,
//! segments, allocator state, the rank strip, the two-rank comparison), on an archive of many
//! chunks (the generator's: thousands of annotation spans, millions of actions), on the action
//! axis and the wall-time axis.

use std::path::Path;

use crate::support::*;
use eframe::egui;
use memviz::viewer::offscreen::Offscreen;
use memviz::viewer::tabs::Tab;
use memviz::viewer::{ViewerApp, ViewerOptions};

fn bench_in(archive: &Path, tab: Tab, answers: bool, wall_time: bool) -> memviz::viewer::bench::BenchResult {
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(ViewerOptions { tab, ..native_options() });
    app.answers.open = answers;
    app.open_archive(archive, &ctx);
    let mut gpu =
        Offscreen::new(640, 400, ctx).expect("a wgpu adapter (lavapipe: apt-get install mesa-vulkan-drivers)");
    gpu.settle(&mut app, 3000);
    // The annotation lane's spans are placed once the time axis is in (the checks' thread).
    let t = app.timeline().unwrap();
    t.doc.session.time_axis_now(t.doc.device);
    if wall_time {
        app.timeline_mut().unwrap().set_time_axis(true);
    }
    gpu.settle(&mut app, 3000);
    memviz::viewer::bench::run(&mut gpu, &mut app)
}

#[test]
fn zooming_panning_and_hovering_decompress_nothing_on_the_ui_thread() {
    let dir = tempdir();
    let archive = crate::generator::repeated_archive(dir.path(), 4_000_000);
    let session = memviz::file::open_session(&archive).unwrap();
    let d = memviz::model::DeviceIdx(0);
    let chunks = session.device(d).action_time_us.len();
    let spans = session.named_spans(d).len();
    assert!(chunks > memviz::archive::session::TIME_CHUNKS_KEPT, "{chunks} chunks of action times");
    assert!(spans > 10_000, "{spans} annotation spans");
    let views = [
        (Tab::Timeline, true, false),
        (Tab::Timeline, false, true),
        (Tab::Pools, false, false),
        (Tab::Segments, false, false),
        (Tab::State, false, false),
    ];
    for (tab, answers, wall_time) in views {
        let b = bench_in(&archive, tab, answers, wall_time);
        let view = format!("{tab:?}{}", if wall_time { " on the wall-time axis" } else { "" });
        assert!(b.frames > 200, "{view}: the script ran ({} frames)", b.frames);
        assert_eq!(b.ui_thread_chunks, 0, "{view}: chunks decompressed on the UI thread after the first frame");
    }
}

/// The same in the rank strip and the two-rank comparison: two ranks of a job, each the
/// many-chunk archive (hard links), on the strip and then compared one above the other.
#[test]
fn the_rank_strip_and_the_comparison_decompress_nothing_on_the_ui_thread() {
    let dir = tempdir();
    let archive = crate::generator::repeated_archive(dir.path(), 4_000_000);
    let job = dir.path().join("job");
    std::fs::create_dir_all(&job).unwrap();
    for r in 0..2 {
        std::fs::hard_link(&archive, job.join(format!("rank{r}.memviz"))).unwrap();
    }
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(native_options());
    app.open_paths(std::slice::from_ref(&job), &ctx);
    let mut gpu = Offscreen::new(640, 400, ctx.clone()).expect("a wgpu adapter");
    gpu.settle(&mut app, 3000);
    assert_eq!(app.ranks.as_ref().unwrap().loaded(), 2);
    let b = memviz::viewer::bench::run(&mut gpu, &mut app);
    assert!(b.frames > 200, "the strip: the script ran ({} frames)", b.frames);
    assert_eq!(b.ui_thread_chunks, 0, "the strip: chunks decompressed on the UI thread after the first frame");

    let strip = app.ranks.as_ref().unwrap();
    let (a, c) = (strip.curves[0].as_ref().unwrap(), strip.curves[1].as_ref().unwrap());
    let compare = memviz::viewer::compare::Compare::new(a, c, &app.options, &ctx);
    app.content = memviz::viewer::app::Content::Compare(Box::new(compare));
    gpu.settle(&mut app, 3000);
    for half in [&app.compare().unwrap().a, &app.compare().unwrap().b] {
        half.doc.session.time_axis_now(half.doc.device);
    }
    gpu.settle(&mut app, 3000);
    let b = memviz::viewer::bench::run(&mut gpu, &mut app);
    assert!(app.compare().is_some() && b.frames > 200, "the comparison: the script ran ({} frames)", b.frames);
    assert_eq!(b.ui_thread_chunks, 0, "the comparison: chunks decompressed on the UI thread after the first frame");
}
