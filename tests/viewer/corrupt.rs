//! Bad archives and bad requests: one line, never a panic or a wait.

#[allow(unused_imports)]
use super::*;

/// A colleague's archive with a valid checksum but an id out of range: the viewer shows one
/// error line, never a panic.
#[test]
fn an_archive_with_ids_out_of_range_is_one_line_never_a_panic() {
    let dir = tempdir();
    let bad = resealed(dir.path(), |root| {
        let n = root.devices[0].elements.addr.len() as u32;
        root.devices[0].checkpoints.ids[3] = n + 7;
    });
    let mut app = ViewerApp::new(native_options());
    app.open_archive(&bad, &egui::Context::default());
    // Opening is O(1): the ids are checked in the background, and what the check finds replaces
    // the timeline with its one line.
    let session = std::sync::Arc::clone(&app.timeline().unwrap().doc.session);
    assert!(session.ids.wait().is_err());
    app.refresh_status();
    assert!(app.timeline().is_none());
    let failure = app.failure().unwrap();
    assert!(failure.contains("checkpoint elements") && failure.contains("out of range"), "{failure}");

    // Drawn and used before the check is done: whatever reads a bad id (hovering, pinning and
    // zooming in make the viewer replay from the checkpoints) ends in the same line.
    let (mut gpu, mut app) = open(&bad, 1000, 600);
    let whole = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(1000.0, 600.0));
    let rect = app.timeline().map_or(whole, |t| t.plot.plot_rect);
    for i in 0..40 {
        let p = egui::pos2(rect.left() + rect.width() * (i as f32 + 0.5) / 40.0, rect.center().y);
        let click = |pressed| egui::Event::PointerButton {
            pos: p,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::NONE,
        };
        let mut events = vec![egui::Event::PointerMoved(p), click(true), click(false)];
        events.extend(memviz::viewer::bench::wheel(p, 120.0, false));
        gpu.frame(&mut app, events);
        if app.failure().is_some() {
            break;
        }
    }
    if let Some(t) = app.timeline() {
        assert!(t.doc.session.ids.wait().is_err());
    }
    gpu.frame(&mut app, Vec::new());
    let failure = app.failure().unwrap();
    assert!(failure.contains("checkpoint elements") && failure.contains("out of range"), "{failure}");
}

/// A tile whose chunk does not decompress (checksums valid: nothing but decompressing finds it),
/// the coarsest one decoded on open or a finer one a worker decodes: the view settles and shows
/// the one line. It kept the viewer busy forever (issue 41, item 4).
#[test]
fn a_tile_that_does_not_decompress_is_one_line_and_the_view_settles() {
    for coarsest in [true, false] {
        let dir = tempdir();
        let bad = resealed(dir.path(), |root| {
            let levels = &mut root.devices[0].tiles;
            let level = if coarsest { levels.len() - 1 } else { 0 };
            levels[level].tiles[0].data = vec![0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff, 0xff, 0xff];
        });
        let (mut gpu, mut app) = open(&bad, 1200, 700);
        assert!(gpu.settle(&mut app, 3000), "coarsest: {coarsest}: the view settles");
        let failure = app.failure().unwrap_or_else(|| panic!("coarsest: {coarsest}: no error shown"));
        assert!(failure.contains("bad.memviz: a compressed chunk is corrupted"), "{failure}");
    }
}

/// The segment timeline's view of an archive made before format 4 (it has none) says so and
/// settles: the element timeline's tiles, queued but never drawn there, kept it busy for 86 s.
#[test]
fn the_segment_view_of_an_archive_without_one_settles() {
    let options = ViewerOptions { tab: Tab::Segments, ..native_options() };
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(options);
    app.open_archive(&data("golden/gpt2_small.v3.memviz"), &ctx);
    let mut gpu = Offscreen::new(800, 500, ctx).expect("a wgpu adapter");
    assert!(gpu.settle(&mut app, 100), "settles within 100 frames");
    assert!(app.failure().is_none() && !app.draws_timeline());
}

/// `--oom N`, `--event K`, `--action K` that do not exist are one line, exit code 1.
#[test]
fn opening_at_what_does_not_exist_is_one_line() {
    let dir = tempdir();
    let archive = frag_oom_archive(dir.path());
    let shot = dir.path().join("x.png");
    for (flag, value, says) in [
        ("--oom", "5", "has 2 OOM events (asked for OOM 5)"),
        ("--event", "99999", "event 99999 is out of range on device 0"),
        ("--action", "99999", "action 99999 is out of range on device 0"),
    ] {
        let out = memviz([
            "open".as_ref(),
            archive.as_os_str(),
            flag.as_ref(),
            value.as_ref(),
            "--screenshot".as_ref(),
            shot.as_os_str(),
        ]);
        let err = assert_bad_input(&out, &archive);
        assert!(err.contains(says), "{flag} {value}: {err}");
    }
}

/// `memviz FILE` with a missing file or a broken archive fails in one line before any window.
#[test]
fn open_reports_bad_files_before_any_window() {
    let dir = tempdir();
    let missing = dir.path().join("missing.pickle");
    assert_bad_input(&memviz([missing.as_os_str()]), &missing);
    let truncated = dir.path().join("cut.memviz");
    std::fs::write(&truncated, &std::fs::read(golden_archive()).unwrap()[..100]).unwrap();
    let err = assert_bad_input(&memviz(["open".as_ref(), truncated.as_os_str()]), &truncated);
    assert!(err.contains("re-run `memviz index`"), "{err}");
}
