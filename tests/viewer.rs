//! The GPU viewer, rendered offscreen on whatever adapter wgpu finds (Mesa lavapipe in CI):
//! the id buffer must show the layout's answer, hover must agree with it, and a real window
//! must open under Xvfb, draw and close.

use std::path::Path;

use eframe::egui;
use memviz::viewer::offscreen::Offscreen;
use memviz::viewer::{ViewerApp, ViewerOptions};

use crate::support::*;
use memviz::archive::Plane;
use memviz::model::{DeviceIdx, ElementId};
use memviz::viewer::tabs::Tab;

fn open(archive: &Path, w: u32, h: u32) -> (Offscreen, ViewerApp) {
    open_with(archive, ViewerOptions::default(), w, h)
}

fn golden_archive() -> std::path::PathBuf {
    data(&format!("golden/gpt2_small.v{}.memviz", memviz_format::FORMAT_VERSION))
}

/// The golden archive changed by `mutate` and sealed again with valid checksums (a colleague's
/// file memviz did not write), as `dir/bad.memviz`.
fn resealed(dir: &Path, mutate: impl FnOnce(&mut memviz_format::schema::Root)) -> std::path::PathBuf {
    use memviz_format::rkyv;
    let bytes = std::fs::read(golden_archive()).unwrap();
    let a = memviz::archive::Archive::from_memory(&bytes, Path::new("g.memviz")).unwrap();
    let mut root: memviz_format::schema::Root = rkyv::deserialize::<_, rkyv::rancor::Error>(a.root()).unwrap();
    mutate(&mut root);
    let body = rkyv::to_bytes::<rkyv::rancor::Error>(&root).unwrap();
    let bad = dir.join("bad.memviz");
    std::fs::write(&bad, memviz_format::seal(&body, a.header().source)).unwrap();
    bad
}

/// A colleague's archive with a valid checksum but an id out of range: the viewer shows one
/// error line, never a panic.
#[test]
fn an_archive_with_ids_out_of_range_is_one_line_never_a_panic() {
    let dir = tempdir();
    let bad = resealed(dir.path(), |root| {
        let n = root.devices[0].elements.addr.len() as u32;
        root.devices[0].checkpoints.ids[3] = n + 7;
    });
    let mut app = ViewerApp::new(ViewerOptions::default());
    app.open_archive(&bad, &egui::Context::default());
    // Opening is O(1): the ids are checked in the background, and what the check finds replaces
    // the timeline with its one line.
    let session = std::sync::Arc::clone(&app.timeline().unwrap().session);
    assert!(session.ids.wait().is_err());
    app.refresh_status();
    assert!(app.timeline().is_none());
    let failure = app.failure().unwrap();
    assert!(failure.contains("checkpoint elements") && failure.contains("out of range"), "{failure}");

    // Drawn and used before the check is done: whatever reads a bad id (hovering, pinning and
    // zooming in make the viewer replay from the checkpoints) ends in the same line.
    let (mut gpu, mut app) = open(&bad, 1000, 600);
    let whole = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(1000.0, 600.0));
    let rect = app.timeline().map_or(whole, |t| t.plot_rect);
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
        assert!(t.session.ids.wait().is_err());
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
    let options = ViewerOptions { tab: Tab::Segments, ..ViewerOptions::default() };
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(options);
    app.open_archive(&data("golden/gpt2_small.v3.memviz"), &ctx);
    let mut gpu = Offscreen::new(800, 500, ctx).expect("a wgpu adapter");
    assert!(gpu.settle(&mut app, 100), "settles within 100 frames");
    assert!(app.failure().is_none() && !app.draws_timeline());
}

#[test]
fn screenshot_ids_equal_the_layout_and_hover_agrees() {
    let (mut gpu, app) = open(&golden_archive(), 1200, 700);
    let golden = json_file(&data("gpt2_small.layout.json"));
    let non_empty = assert_ids_equal_golden(&mut gpu, &app, &golden["devices"][0]);
    assert!(non_empty >= 12, "most sampled points hit elements ({non_empty}/20)");
}

/// At 20 points spread over the plot, the drawn id (and the hovered one) is the golden layout's
/// element there; returns how many points hit an element.
fn assert_ids_equal_golden(gpu: &mut Offscreen, app: &ViewerApp, g: &serde_json::Value) -> usize {
    let (rect, ids) = gpu.read_ids(app).expect("an open timeline");
    let t = app.timeline().unwrap();
    let elements = g["elements"].as_array().unwrap();
    let totals: Vec<u64> = g["totals"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let (x0, x1, y0, y1) = (t.view.x0, t.view.x1, t.view.y0, t.view.y1);
    let (cols, rows) = (rect.width().round() as usize, rect.height().round() as usize);

    let mut non_empty = 0;
    for i in 0..20 {
        // Spread over the plot: columns across the whole trace, rows low to high.
        let c = (cols * (2 * i + 1)) / 40;
        let r_from_bottom = (rows * ((i * 7) % 20 + 1)) / 40;
        let px = rect.left() as usize + c;
        let py = rect.bottom() as usize - 1 - r_from_bottom;
        let got = ids[py * gpu.width as usize + px];
        // The raster's texel rule, computed from the golden: the column shows the action with the
        // highest total among those it covers; the row stands for its middle byte.
        let w = (x1 - x0) / cols as f64;
        let (a, b) = (
            (x0 + w * c as f64).floor().max(0.0) as usize,
            ((x0 + w * (c + 1) as f64).ceil() as usize).min(totals.len()),
        );
        let k = (a..b).fold(a, |best, j| if totals[j] > totals[best] { j } else { best });
        let row = rows - 1 - (py - rect.top() as usize);
        let byte = (y0 + (2.0 * row as f64 + 1.0) * (y1 - y0) / (2.0 * rows as f64)).round() as u64;
        let expect = golden_covering(elements, k as i64, byte);
        assert_eq!(got, expect, "pixel ({px}, {py}) = action {k}, byte {byte}");
        let hover = t.pick(egui::pos2(px as f32 + 0.5, py as f32 + 0.5)).map_or(u32::MAX, |h| h.element.0);
        assert_eq!(hover, got, "hover at ({px}, {py}) disagrees with the drawn id");
        non_empty += usize::from(got != u32::MAX);
    }
    non_empty
}

/// frag_oom indexed into a temporary archive (the allocator views need format 4 sections).
fn frag_oom_archive(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("frag_oom.memviz");
    memviz_ok(["index".as_ref(), data("frag_oom.pickle").as_os_str(), "-o".as_ref(), out.as_os_str()]);
    out
}

fn open_with(archive: &Path, options: ViewerOptions, w: u32, h: u32) -> (Offscreen, ViewerApp) {
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(options);
    app.open_archive(archive, &ctx);
    let mut gpu = Offscreen::new(w, h, ctx).expect("a wgpu adapter (lavapipe: apt-get install mesa-vulkan-drivers)");
    gpu.settle(&mut app, 3000);
    (gpu, app)
}

/// The Active Cached Segment Timeline draws `allocator_oracle.py`'s segment layout.
#[test]
fn the_segment_timeline_ids_equal_the_oracle() {
    let dir = tempdir();
    let options = ViewerOptions { tab: Tab::Segments, ..ViewerOptions::default() };
    let (mut gpu, app) = open_with(&frag_oom_archive(dir.path()), options, 1200, 700);
    assert_eq!(app.timeline().unwrap().plane, Plane::Segments);
    let golden = json_file(&data("allocator/frag_oom.segments.json"));
    let non_empty = assert_ids_equal_golden(&mut gpu, &app, &golden["devices"][0]);
    assert!(non_empty >= 8, "sampled points hit segments ({non_empty}/20)");
}

/// The memory map at frag_oom's last OOM: the oracle's segments and blocks, each drawn where the
/// map says, in its site's colour, the holes dark; ←/→ and Home/End step the event.
#[test]
fn the_memory_map_at_the_oom_has_the_oracles_blocks() {
    use memviz::viewer::memory_map::FREE;
    use memviz::viewer::tabs::OpenAt;
    let dir = tempdir();
    let options = ViewerOptions { tab: Tab::State, at: Some(OpenAt::Oom(0)), ..ViewerOptions::default() };
    let (mut gpu, mut app) = open_with(&frag_oom_archive(dir.path()), options, 1400, 900);
    let golden = json_file(&data("allocator/frag_oom.state.json"));
    let state = golden["devices"][0]["states"].as_array().unwrap().iter().find(|s| s["event"] == 2353).unwrap();
    let segments = state["segments"].as_array().unwrap();
    let shown = app.map.shown.as_ref().expect("the map shows a state");
    assert_eq!(shown.event, 2353, "just before the last OOM (event 2,354)");
    let ours = &shown.summary.segments;
    assert_eq!(ours.len(), segments.len());
    let rgba = gpu.read_rgba();
    let px = |p: egui::Pos2| {
        let i = (p.y as usize * gpu.width as usize + p.x as usize) * 4;
        egui::Color32::from_rgb(rgba[i], rgba[i + 1], rgba[i + 2])
    };
    let g = app.map.geometry.clone().expect("drawn");
    let t = app.timeline().unwrap();
    let sites = t.session.elements(t.device).sites;
    let mut checked = 0;
    for (i, (m, want)) in ours.iter().zip(segments).enumerate().step_by(13) {
        assert_eq!(m.segment.addr, want["addr"].as_u64().unwrap());
        assert_eq!(m.segment.size, want["size"].as_u64().unwrap());
        let blocks = want["blocks"].as_array().unwrap();
        assert_eq!(m.blocks.len(), blocks.len(), "segment {i}");
        for (b, w) in m.blocks.iter().zip(blocks) {
            assert_eq!((b.addr, b.size), (w[0].as_u64().unwrap(), w[1].as_u64().unwrap()));
            let rect = g.bytes(ours, i, b.addr, b.size)[0];
            if rect.width() >= 4.0 && g.rect.contains(rect.center()) {
                assert_eq!(px(rect.center()), shown.colour(sites, b), "block {:#x}", b.addr);
                checked += 1;
            }
        }
        for (addr, size) in m.holes() {
            let rect = g.bytes(ours, i, addr, size)[0];
            if rect.width() >= 6.0 && g.rect.contains(rect.center()) && Some((i, addr, size)) != shown.largest {
                assert_eq!(px(rect.center()), FREE, "hole {addr:#x}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "checked {checked} blocks and holes");

    let key = |k: egui::Key| memviz::viewer::bench::key(k, false);
    let event = |app: &ViewerApp| app.timeline().unwrap().selection.event;
    gpu.frame(&mut app, vec![key(egui::Key::ArrowLeft)]);
    assert_eq!(event(&app), Some(2352));
    gpu.frame(&mut app, vec![key(egui::Key::ArrowRight), key(egui::Key::ArrowRight)]);
    assert_eq!(event(&app), Some(2354));
    gpu.frame(&mut app, vec![key(egui::Key::Home)]);
    assert_eq!(event(&app), Some(-1));
    gpu.frame(&mut app, vec![key(egui::Key::End)]);
    assert_eq!(event(&app), Some(2354));
    // The state is made on the worker: the map follows once it is in.
    gpu.settle(&mut app, 500);
    assert_eq!(app.map.shown.as_ref().unwrap().event, 2354, "the map follows");
}

/// The Allocator State view of a long trace (gpt2_small repeated to 2.5 M events: dozens of
/// chunks and saved states), stepped with → and ←: each state is made on the worker from at most
/// one saved state and fewer than K undone events (a step back: one undo), the UI thread
/// decompresses nothing, and every map shown is the archive's state at its event.
#[test]
fn stepping_a_long_trace_makes_each_state_off_the_ui_thread_with_bounded_work() {
    use memviz::archive::chunks::decompressed_on_this_thread;
    use memviz::viewer::tabs::OpenAt;
    let dir = tempdir();
    let archive = crate::generator::repeated_archive(dir.path(), 2_500_000);
    let session = memviz::archive::Session::open(&archive).unwrap();
    let d = DeviceIdx(0);
    let every = i64::from(session.device(d).allocator.every.to_native());
    let n = session.trace(d).len() as i64;
    assert!(n > 20 * every && n > 30 * 65_536, "{n} events, K = {every}");
    // Two events past a saved state, so that stepping back crosses it.
    let start = n - 1 - every * (n / every / 2) + 2;
    let options = ViewerOptions { tab: Tab::State, at: Some(OpenAt::Event(start)), ..ViewerOptions::default() };
    let (mut gpu, mut app) = open_with(&archive, options, 1000, 700);
    let shown_event = |app: &ViewerApp| app.map.shown.as_ref().map(|s| s.event);
    assert_eq!(shown_event(&app), Some(start));
    // The first settled frame, once the background check has summed up the action times (the
    // annotation lane and the time axis appear then).
    for _ in 0..3000 {
        if app.timeline().unwrap().session.time_axis(d).is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(app.timeline().unwrap().session.time_axis(d).is_some(), "the background check ended");
    gpu.settle(&mut app, 500);
    let on_ui_thread = decompressed_on_this_thread();
    let key = |k: egui::Key| memviz::viewer::bench::key(k, false);
    let (right, left) = (egui::Key::ArrowRight, egui::Key::ArrowLeft);
    let mut seen = Vec::new();
    for (step, k) in [right, left, left, left, left, right, left, right].into_iter().enumerate() {
        let before = app.map.work().unwrap();
        gpu.frame(&mut app, vec![key(k)]);
        gpu.settle(&mut app, 2000);
        let after = app.map.work().unwrap();
        let shown = app.map.shown.as_ref().unwrap();
        assert_eq!(Some(shown.event), app.timeline().unwrap().selection.event, "step {step}: the map follows");
        let (decoded, undone) =
            (after.saved_states_decoded - before.saved_states_decoded, after.events_undone - before.events_undone);
        assert_eq!(after.states - before.states, 1, "step {step}: one state made");
        assert!(decoded <= 1 && (undone as i64) < every, "step {step}: {decoded} states decoded, {undone} undone");
        if k == left {
            assert_eq!((decoded, undone), (0, 1), "step {step}: a step back is one more undo");
        }
        seen.push((shown.event, shown.summary.clone()));
    }
    let work = app.map.work().unwrap();
    assert!(work.most_decoded <= 1 && (work.most_undone as i64) < every, "{work:?}");
    assert!(work.chunks > 0, "the worker decompressed what the states and rows read: {work:?}");
    assert_eq!(decompressed_on_this_thread(), on_ui_thread, "the UI thread decompressed nothing while stepping");
    let events: Vec<i64> = seen.iter().map(|s| s.0).collect();
    assert_eq!(events, [start + 1, start, start - 1, start - 2, start - 3, start - 2, start - 3, start - 2]);
    for (event, summary) in seen {
        assert!(summary == session.allocator_state(d, event).unwrap().summary(event), "event {event}");
    }
}

/// *Allocated Memory (incl. Private Pools)* on cudagraph (a CUDA graph's pool and a MemPool):
/// each pool is one band of max(live, reserved) at the bottom, its tensors not drawn one by one.
#[test]
fn the_pools_view_draws_each_private_pool_as_one_band() {
    let dir = tempdir();
    let archive = dir.path().join("cudagraph.memviz");
    memviz_ok(["index".as_ref(), data("cudagraph.pickle").as_os_str(), "-o".as_ref(), archive.as_os_str()]);
    let options = ViewerOptions { tab: Tab::Pools, ..ViewerOptions::default() };
    let (mut gpu, mut app) = open_with(&archive, options, 1200, 700);
    for _ in 0..400 {
        if app.timeline_mut().unwrap().pools().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    gpu.settle(&mut app, 3000);
    let t = app.timeline_mut().unwrap();
    let pools = std::sync::Arc::clone(t.pools().expect("cudagraph has private pools"));
    assert_eq!(pools.ids.len(), 2, "the graph's pool and the MemPool: {:?}", pools.ids);
    let n = pools.bands[0].len();
    for p in 0..2 {
        assert!((0..n).all(|k| pools.bands[p][k] >= pools.active[p][k]), "a band holds at least the pool's tensors");
    }
    // At the last action both pools hold memory; the lower band's middle is its colour on
    // screen, and the id buffer there is the band, not an element.
    let k = n - 1;
    assert!(pools.bands[0][k] > 0 && pools.bands[1][k] > 0);
    let rect = t.plot_rect;
    let x = t.view.screen_from_action(rect, k as f64 + 0.5).round().min(rect.right() - 2.0);
    let y = t.view.screen_from_bytes(rect, pools.bands[0][k] as f64 / 2.0).round();
    let rgba = gpu.read_rgba();
    let i = (y as usize * gpu.width as usize + x as usize) * 4;
    let want = memviz::viewer::pools::pool_colour(0);
    assert_eq!(&rgba[i..i + 3], &[want.r(), want.g(), want.b()], "pool 0's band at ({x}, {y})");
    let (_, ids) = gpu.read_ids(&app).unwrap();
    assert_eq!(ids[y as usize * gpu.width as usize + x as usize], memviz::lod::raster::AGGREGATED);
    let hit = pools.at(k, pools.bands[0][k] as f64 + 1.0).unwrap();
    assert_eq!(hit.0, 1, "just above the first band is the second pool's");
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

/// The OOM events are red markers at their action on the element timeline, over the reserved
/// line.
#[test]
fn oom_markers_are_drawn_at_their_actions() {
    let dir = tempdir();
    let (mut gpu, mut app) = open_with(&frag_oom_archive(dir.path()), ViewerOptions::default(), 1200, 700);
    // The markers arrive from a background thread.
    for _ in 0..200 {
        if app.timeline_mut().unwrap().ooms().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    gpu.frame(&mut app, Vec::new());
    gpu.frame(&mut app, Vec::new());
    let rgba = gpu.read_rgba();
    let t = app.timeline_mut().unwrap();
    let marks = t.ooms().unwrap().to_vec();
    assert_eq!(marks.len(), 2);
    assert!(marks[1].verdict.contains("fragmentation"), "{}", marks[1].verdict);
    let rect = t.plot_rect;
    let x = t.view.screen_from_action(rect, marks[0].action as f64 + 1.0).round() as usize;
    let y = rect.center().y as usize;
    let i = (y * gpu.width as usize + x) * 4;
    let red = memviz::viewer::reserved::OOM;
    assert_eq!(&rgba[i..i + 3], &[red.r(), red.g(), red.b()], "the first OOM's marker at x = {x}");
}

#[test]
fn colour_frame_shows_the_data_and_the_pinned_outline() {
    let (mut gpu, mut app) = open(&golden_archive(), 1000, 600);
    let rgba = gpu.read_rgba();
    let rect = app.timeline().unwrap().plot_rect;
    // Inside the plot, low rows are covered by elements: not the background colour.
    let bg = memviz::viewer::theme::BACKGROUND;
    let px = |x: usize, y: usize| &rgba[(y * gpu.width as usize + x) * 4..][..3];
    let y = rect.bottom() as usize - 4;
    let covered = (0..20).filter(|i| {
        let x = rect.left() as usize + (i + 1) * rect.width() as usize / 22;
        px(x, y) != [bg.r(), bg.g(), bg.b()]
    });
    assert!(covered.count() >= 18, "the bottom of the plot is drawn");

    // Pin the element under the plot's centre bottom: a red outline appears.
    let p = egui::pos2(rect.center().x, rect.bottom() - 4.0);
    let hit = app.timeline().unwrap().pick(p).expect("an element at the bottom");
    app.timeline_mut().unwrap().selection.pinned = Some(hit);
    gpu.frame(&mut app, Vec::new());
    let rgba = gpu.read_rgba();
    let red = rgba.chunks_exact(4).filter(|c| c[0] > 220 && c[1] < 60 && c[2] < 60).count();
    assert!(red > 50, "a red outline of the pinned element ({red} red pixels)");
}

#[test]
fn screenshot_command_writes_a_png_and_reports_timings() {
    let dir = tempdir();
    let out = dir.path().join("shot.png");
    let run = memviz([
        "open".as_ref(),
        golden_archive().as_os_str(),
        "--screenshot".as_ref(),
        out.as_os_str(),
        "--size".as_ref(),
        "640x400".as_ref(),
    ]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert!(report["open_ms"].as_f64().unwrap() > 0.0);
    assert!(report["first_frame_ms"].as_f64().unwrap() >= report["open_ms"].as_f64().unwrap());
    let png = std::fs::read(&out).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 640);
}

/// A real window under Xvfb: opens, draws frames, closes with exit code 0.
#[test]
fn window_opens_draws_and_closes_under_xvfb() {
    if std::process::Command::new("xvfb-run").arg("--help").output().is_err() {
        eprintln!("skipped: xvfb-run is not installed (CI installs it)");
        return;
    }
    let xdg = tempdir();
    let out = std::process::Command::new("xvfb-run")
        .env("XDG_RUNTIME_DIR", xdg.path())
        .args(["-a", "-s", "-screen 0 1280x800x24"])
        .arg(env!("CARGO_BIN_EXE_memviz"))
        .arg(golden_archive())
        .args(["--exit-after-frames", "30", "--size", "1000x700"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "window run failed: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `--max-entries`: the bottom of the plot is the summarized band, drawn as its own id.
#[test]
fn max_entries_draws_the_summarized_band() {
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(ViewerOptions { max_entries: Some(20), ..ViewerOptions::default() });
    app.open_archive(&golden_archive(), &ctx);
    let mut gpu = Offscreen::new(900, 600, ctx).unwrap();
    gpu.settle(&mut app, 3000);
    let (rect, ids) = gpu.read_ids(&app).unwrap();
    let row = rect.bottom() as usize - 2;
    let bottom: Vec<u32> = (1..10)
        .map(|i| ids[row * gpu.width as usize + rect.left() as usize + i * rect.width() as usize / 10])
        .collect();
    let band = bottom.iter().filter(|&&id| id == memviz::lod::raster::AGGREGATED).count();
    assert!(band >= 7, "the bottom row is mostly the summarized band: {bottom:?}");
    let distinct: std::collections::HashSet<u32> =
        ids.iter().copied().filter(|&id| id < memviz::lod::raster::AGGREGATED).collect();
    assert!(distinct.len() <= 20, "at most 20 elements drawn individually, got {}", distinct.len());
}

/// "Go to peak" pins the largest allocation live at the peak, and the answers panel (live at
/// cursor, icicle) draws for it.
#[test]
fn go_to_peak_pins_the_largest_live_allocation() {
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(ViewerOptions::default());
    app.open_archive(&golden_archive(), &ctx);
    app.answers.open = true;
    let mut gpu = Offscreen::new(1200, 700, ctx).unwrap();
    gpu.settle(&mut app, 3000);
    app.timeline_mut().unwrap().go_to_peak();
    gpu.settle(&mut app, 3000);
    if let Some(out) = std::env::var_os("MEMVIZ_TEST_SHOT") {
        gpu.save_png(std::path::Path::new(&out)).unwrap();
    }
    let pinned = app.timeline().unwrap().selection.pinned.expect("pinned at the peak");
    let golden = json_file(&data("gpt2_small.layout.json"));
    let g = &golden["devices"][0];
    let peak = g["totals"].as_array().unwrap().iter().position(|t| *t == g["peak_bytes"]).unwrap() as i64;
    let live: Vec<&serde_json::Value> = g["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["start"].as_i64().unwrap() <= peak && e["end"].as_i64().is_none_or(|end| end > peak))
        .collect();
    let max = live.iter().map(|e| e["size"].as_u64().unwrap()).max().unwrap();
    let el = &g["elements"][pinned.element.index()];
    assert!(live.iter().any(|e| e["id"] == el["id"]), "the pinned element is live at the peak");
    assert_eq!(el["size"].as_u64().unwrap(), max, "and it is the largest one");
}

/// The wall-time axis: rasters are laid out by each action's time, and still show the data.
#[test]
fn wall_time_axis_draws_the_trace() {
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(ViewerOptions::default());
    app.open_archive(&golden_archive(), &ctx);
    let mut gpu = Offscreen::new(900, 600, ctx).unwrap();
    gpu.settle(&mut app, 3000);
    // Action times are decompressed on a background thread after the first frame.
    for _ in 0..2000 {
        if app.timeline().unwrap().session.time_axis(DeviceIdx(0)).is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    app.timeline_mut().unwrap().set_time_axis(true);
    assert!(app.timeline().unwrap().time_axis);
    gpu.settle(&mut app, 3000);
    let (rect, ids) = gpu.read_ids(&app).unwrap();
    let row = rect.bottom() as usize - 2;
    let drawn = (1..20)
        .filter(|i| ids[row * gpu.width as usize + rect.left() as usize + i * rect.width() as usize / 20] != u32::MAX)
        .count();
    assert!(drawn >= 15, "the bottom of the plot is drawn on the time axis ({drawn}/19)");
    // Hover agrees with the drawn ids there too.
    let p = egui::pos2(rect.center().x, rect.bottom() - 2.5);
    let id = ids[(p.y as usize) * gpu.width as usize + p.x as usize];
    assert_eq!(app.timeline().unwrap().pick(p).map_or(u32::MAX, |h| h.element.0), id);
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

/// The tooltip and bottom bar show what the 2026 schema records about an allocation: the
/// annotate label, metadata, pool, compile context, the forward frames and fx nodes.
#[test]
fn details_show_metadata_forward_frames_and_fx() {
    use memviz::analysis::frames;
    use memviz::viewer::details::ElementInfo;
    let dir = tempdir();
    let archive = dir.path().join("annotate_meta.memviz");
    memviz_ok(["index".as_ref(), data("synth/annotate_meta.pickle").as_os_str(), "-o".as_ref(), archive.as_os_str()]);
    let session = memviz::archive::Session::open(&archive).unwrap();
    let l = session.layout(DeviceIdx(0));
    let find = |addr: u64| (0..l.elements.len() as u32).find(|&i| l.elements.addr[i as usize] == addr).unwrap();
    let info = |addr: u64| {
        ElementInfo::gather(&session, DeviceIdx(0), Plane::Elements, ElementId(find(addr)), None, &Default::default())
            .unwrap()
            .lines(None)
    };
    let has = |lines: &[(String, String)], k: &str, v: &str| lines.iter().any(|(a, b)| a == k && b == v);
    let kv = info(0x7f3a_4040_0000);
    assert!(has(&kv, "annotated", "kv cache layer 3 (seq 0..127)"), "{kv:?}");
    let backward_id = find(0x7f3a_4080_0000);
    let backward =
        ElementInfo::gather(&session, DeviceIdx(0), Plane::Elements, ElementId(backward_id), None, &Default::default())
            .unwrap();
    let lines = backward.lines(None);
    assert!(has(&lines, "metadata", "step=1"), "{lines:?}");
    assert!(has(&lines, "internal", "autograd: AddmmBackward0"), "{lines:?}");
    assert!(!lines.iter().any(|(k, _)| k == "pool"), "the default pool (0, 0) is not shown: {lines:?}");
    let forward = frames::shown_lines(session.root(), backward.forward_stack, true);
    assert_eq!(
        forward,
        ["train (train.py:59)", "forward (model.py:41)"],
        "forward_frames, parsed from traceback lines"
    );
    let compiled = info(0x7f3a_a000_0000);
    assert!(has(&compiled, "compile context", "inductor kernel triton_poi_fused_0"), "{compiled:?}");
    assert!(has(&compiled, "pool", "private pool (1, 3)"), "{compiled:?}");
    let frame = compiled.iter().find(|(k, _)| k == "frame").unwrap();
    assert!(frame.1.ends_with("[fx addmm_1: call_function aten.addmm.default]"), "{frame:?}");
}

/// The viewer counts time from the snapshot's start like the command line, and its top bar
/// wraps in a narrow window instead of clipping its controls.
#[test]
fn viewer_time_base_and_narrow_top_bar() {
    let archive = golden_archive();
    let session = memviz::archive::Session::open(&archive).unwrap();
    let l = session.layout(DeviceIdx(0));
    let peak = l.peak_action.unwrap();
    let id = l.action_element(peak);
    let info = memviz::viewer::details::ElementInfo::gather(
        &session,
        DeviceIdx(0),
        Plane::Elements,
        id,
        None,
        &Default::default(),
    )
    .unwrap();
    let lines = info.lines(session.time_base_us());
    let allocated = &lines.iter().find(|(k, _)| k == "allocated").unwrap().1;
    assert_eq!(allocated, "action 1,077, +686.213 ms", "the same time `memviz at --action 1,077` prints");

    let (_, wide) = open(&archive, 1600, 600);
    let (_, narrow) = open(&archive, 800, 600);
    let (w, n) = (wide.timeline().unwrap().plot_rect, narrow.timeline().unwrap().plot_rect);
    assert!(n.top() > w.top(), "the top bar takes a second row at 800 px ({} vs {})", n.top(), w.top());
    assert!(n.right() <= 800.0);
}

/// The WGSL shader parses and validates with wgpu's own compiler (naga), whatever the GPU.
#[test]
fn the_shader_validates() {
    let source = std::fs::read_to_string(repo().join("src/viewer/gpu/timeline.wgsl")).unwrap();
    let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| panic!("{}", e.emit_to_string(&source)));
    let mut validator =
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::default());
    validator.validate(&module).unwrap_or_else(|e| panic!("{}", e.emit_to_string(&source)));
    let entry_points: Vec<&str> = module.entry_points.iter().map(|e| e.name.as_str()).collect();
    assert!(entry_points.len() >= 2, "a vertex and a fragment stage: {entry_points:?}");
    // The shader's texel sentinels are the ones the rasteriser writes.
    let constant = |name: &str| {
        let line = source.lines().find(|l| l.starts_with(&format!("const {name}: u32 = "))).unwrap();
        let hex = line.split("0x").nth(1).unwrap().trim_end_matches(['u', ';']);
        u32::from_str_radix(hex, 16).unwrap()
    };
    assert_eq!(constant("EMPTY"), memviz::lod::raster::EMPTY);
    assert_eq!(constant("AGGREGATED"), memviz::lod::raster::AGGREGATED);
}

/// Input through the offscreen path, as a user gives it: scroll zooms at the cursor, Shift+scroll
/// zooms bytes, drag pans, Ctrl+drag selects and zooms to a range, double-click fits bytes, a
/// click pins and a click on nothing unpins.
#[test]
fn input_drives_the_view_and_the_selection() {
    use egui::{Event, Modifiers, PointerButton, pos2, vec2};
    let (mut gpu, mut app) = open(&golden_archive(), 1000, 600);
    let rect = app.timeline().unwrap().plot_rect;
    let view = |app: &ViewerApp| app.timeline().unwrap().view;
    let at = |fx: f32, fy: f32| pos2(rect.left() + rect.width() * fx, rect.top() + rect.height() * fy);
    let wheel = |p: egui::Pos2, dy: f32, m: Modifiers| memviz::viewer::bench::wheel(p, dy, m.shift);
    let button = |p: egui::Pos2, pressed: bool, modifiers: Modifiers| Event::PointerButton {
        pos: p,
        button: PointerButton::Primary,
        pressed,
        modifiers,
    };
    let settle = |gpu: &mut Offscreen, app: &mut ViewerApp| {
        for _ in 0..8 {
            gpu.frame(app, Vec::new());
        }
    };

    // Scroll up at a quarter of the width: zoom in, and the action under the cursor stays put.
    let before = view(&app);
    let p = at(0.25, 0.5);
    let under = before.data_from_screen(rect, p).0;
    gpu.frame(&mut app, wheel(p, 120.0, Modifiers::NONE));
    settle(&mut gpu, &mut app);
    let zoomed = view(&app);
    assert!(zoomed.x1 - zoomed.x0 < before.x1 - before.x0, "scroll zooms in: {before:?} → {zoomed:?}");
    assert!((zoomed.data_from_screen(rect, p).0 - under).abs() < 1.0, "the action under the cursor stays");
    assert_eq!((zoomed.y0, zoomed.y1), (before.y0, before.y1), "plain scroll leaves bytes alone");

    // Shift+scroll zooms bytes instead.
    gpu.frame(&mut app, wheel(p, 120.0, Modifiers::SHIFT));
    settle(&mut gpu, &mut app);
    let bytes = view(&app);
    assert!(bytes.y1 - bytes.y0 < zoomed.y1 - zoomed.y0, "shift+scroll zooms bytes");
    // A double-click fits bytes to what is visible again.
    let q = at(0.5, 0.3);
    gpu.frame(&mut app, vec![Event::PointerMoved(q)]);
    for _ in 0..2 {
        gpu.frame(&mut app, vec![button(q, true, Modifiers::NONE)]);
        gpu.frame(&mut app, vec![button(q, false, Modifiers::NONE)]);
    }
    settle(&mut gpu, &mut app);
    assert!(view(&app).y1 - view(&app).y0 > bytes.y1 - bytes.y0, "double-click fits bytes");

    // Drag right by 100 px: the view moves left in actions by 100 px worth.
    let start = view(&app);
    let per_px = (start.x1 - start.x0) / f64::from(rect.width());
    let (a, b) = (at(0.5, 0.5), at(0.5, 0.5) + vec2(100.0, 0.0));
    gpu.frame(&mut app, vec![Event::PointerMoved(a), button(a, true, Modifiers::NONE)]);
    for i in 1..=10 {
        gpu.frame(&mut app, vec![Event::PointerMoved(a + vec2(10.0 * i as f32, 0.0))]);
    }
    gpu.frame(&mut app, vec![button(b, false, Modifiers::NONE)]);
    settle(&mut gpu, &mut app);
    let panned = view(&app);
    assert!((start.x0 - panned.x0 - 100.0 * per_px).abs() < 4.0 * per_px, "drag pans: {start:?} → {panned:?}");

    // Ctrl+drag over the middle fifth: the view becomes that range and the selection holds it.
    let (c0, c1) = (at(0.4, 0.5), at(0.6, 0.5));
    let ctrl = Modifiers::COMMAND;
    let (x0, x1) = (panned.data_from_screen(rect, c0).0, panned.data_from_screen(rect, c1).0);
    gpu.frame(&mut app, vec![Event::PointerMoved(c0), button(c0, true, ctrl)]);
    for i in 1..=10 {
        gpu.frame(&mut app, vec![Event::PointerMoved(c0 + (c1 - c0) * (i as f32 / 10.0))]);
    }
    gpu.frame(&mut app, vec![button(c1, false, ctrl)]);
    settle(&mut gpu, &mut app);
    let ranged = view(&app);
    assert!((ranged.x0 - x0).abs() < 2.0 && (ranged.x1 - x1).abs() < 2.0, "{ranged:?} vs {x0}..{x1}");
    let (first, last) = app.timeline().unwrap().selection.range.expect("the selected range");
    assert!(first as f64 <= x0 + 1.0 && last as f64 >= x1 - 1.0, "{first}..{last} vs {x0}..{x1}");

    // Click an element low in the plot: pinned; click above the data: unpinned.
    let low = pos2(rect.center().x, rect.bottom() - 3.0);
    gpu.frame(&mut app, vec![Event::PointerMoved(low)]);
    gpu.frame(&mut app, vec![button(low, true, Modifiers::NONE)]);
    gpu.frame(&mut app, vec![button(low, false, Modifiers::NONE)]);
    let picked = app.timeline().unwrap().selection;
    assert!(picked.pinned.is_some() && picked.pinned == picked.hovered, "{picked:?}");
    let high = pos2(rect.center().x, rect.top() + 2.0);
    app.timeline_mut().unwrap().fit();
    settle(&mut gpu, &mut app);
    gpu.frame(&mut app, vec![Event::PointerMoved(high)]);
    gpu.frame(&mut app, vec![button(high, true, Modifiers::NONE)]);
    gpu.frame(&mut app, vec![button(high, false, Modifiers::NONE)]);
    assert_eq!(app.timeline().unwrap().selection.pinned, None, "a click on nothing unpins");
}

/// The elements drawn at 12 points of a timeline's plot equal what its own archive has there
/// (the live stack at the column's highest action, the element covering the row's middle byte):
/// how many points hit an element.
fn assert_ids_are_its_own(gpu: &mut Offscreen, t: &memviz::viewer::timeline::Timeline) -> usize {
    let (rect, ids) = gpu.read_ids_of(t);
    let s = t.session.elements(t.device);
    let (l, view) = (s.layout, t.view);
    let (cols, rows) = (rect.width().round() as usize, rect.height().round() as usize);
    let mut hits = 0;
    for i in 0..12 {
        let c = (cols * (2 * i + 1)) / 24;
        let r_from_bottom = (rows * ((i * 5) % 12 + 1)) / 28;
        let (px, py) = (rect.left() as usize + c, rect.bottom() as usize - 1 - r_from_bottom);
        let got = ids[py * gpu.width as usize + px];
        let w = (view.x1 - view.x0) / cols as f64;
        let a = (view.x0 + w * c as f64).floor().max(0.0) as usize;
        let b = ((view.x0 + w * (c + 1) as f64).ceil() as usize).min(l.totals.len()).max(a + 1);
        let k = (a..b).fold(a, |best, j| if l.totals[j] > l.totals[best] { j } else { best });
        let row = rows - 1 - (py - rect.top() as usize);
        let byte = (view.y0 + (2.0 * row as f64 + 1.0) * (view.y1 - view.y0) / (2.0 * rows as f64)).round() as u64;
        let stack = s.checkpoints.stack_after(l, k as i64);
        let expect = stack
            .with_offsets()
            .find(|&(id, off)| off <= byte && byte < off + l.elements.size[id.index()])
            .map_or(u32::MAX, |(id, _)| id.0);
        assert_eq!(got, expect, "{}: pixel ({px}, {py}) = action {k}, byte {byte}", t.session.archive.path.display());
        hits += usize::from(got != u32::MAX);
    }
    hits
}

/// `memviz open DIR`: the rank strip frames the outlier and names the leak; a click opens a
/// rank; Shift+click on two opens them one above the other, each drawing its own archive, with
/// their x axes linked by step.
#[test]
fn the_rank_strip_marks_the_outlier_opens_a_rank_and_compares_two() {
    use egui::{Event, Modifiers, PointerButton, pos2};
    let dir = tempdir();
    let job = dir.path().join("job");
    std::fs::create_dir_all(&job).unwrap();
    for r in 0..4 {
        std::fs::copy(data(&format!("ranks/rank{r}.pickle")), job.join(format!("rank{r}.pickle"))).unwrap();
    }
    memviz_ok(["index".as_ref(), job.as_os_str()]);
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(ViewerOptions::default());
    app.open_paths(std::slice::from_ref(&job), &ctx);
    let mut gpu = Offscreen::new(1100, 700, ctx).expect("a wgpu adapter");
    gpu.settle(&mut app, 3000);
    let strip = app.ranks.as_ref().unwrap();
    assert!(strip.done() && strip.loaded() == 4, "{:?}", strip.failed);
    let rank_of = |i: usize| strip.curves[i].as_ref().unwrap().row.rank;
    assert_eq!(strip.outliers.iter().map(|o| rank_of(o.0)).collect::<Vec<_>>(), [Some(3)]);
    let cell = |app: &ViewerApp, rank: u64| {
        let s = app.ranks.as_ref().unwrap();
        s.cells.iter().find(|(i, _)| s.files[*i].rank == Some(rank)).expect("every rank's cell is on screen").1
    };
    // The outlier's frame is red; the others have none.
    let rgba = gpu.read_rgba();
    let px = |p: egui::Pos2| {
        let i = (p.y as usize * gpu.width as usize + p.x as usize) * 4;
        [rgba[i], rgba[i + 1], rgba[i + 2]]
    };
    let red = memviz::viewer::theme::CAPACITY;
    let edge = |c: egui::Rect| pos2(c.left() + 1.5, c.center().y);
    assert_eq!(px(edge(cell(&app, 3))), [red.r(), red.g(), red.b()], "rank 3 is framed");
    assert_ne!(px(edge(cell(&app, 0))), [red.r(), red.g(), red.b()], "rank 0 is not");
    // Every curve is drawn on one y scale: the outlier's reaches higher than rank 0's.
    let fill = memviz::viewer::theme::MINIMAP_FILL;
    let top_of_fill = |c: egui::Rect| {
        let plot = memviz::viewer::ranks::RankStrip::plot_rect(c);
        (plot.top() as usize..plot.bottom() as usize)
            .find(|&y| {
                (plot.left() as usize..plot.right() as usize)
                    .any(|x| px(pos2(x as f32, y as f32)) == [fill.r(), fill.g(), fill.b()])
            })
            .expect("a filled curve")
    };
    assert!(top_of_fill(cell(&app, 3)) + 15 < top_of_fill(cell(&app, 0)), "631 MiB reaches higher than 378 MiB");

    let click = |gpu: &mut Offscreen, app: &mut ViewerApp, p: egui::Pos2, modifiers: Modifiers| {
        let button = |pressed| Event::PointerButton { pos: p, button: PointerButton::Primary, pressed, modifiers };
        gpu.frame(app, vec![Event::PointerMoved(p)]);
        gpu.frame(app, vec![button(true)]);
        gpu.frame(app, vec![button(false)]);
        gpu.settle(app, 3000);
    };
    // A click opens rank 1 in the main view.
    let c1 = cell(&app, 1).center();
    click(&mut gpu, &mut app, c1, Modifiers::NONE);
    let t = app.timeline().expect("rank 1 opened");
    assert!(t.session.archive.path.ends_with("rank1.memviz"), "{}", t.session.archive.path.display());
    assert!(assert_ids_are_its_own(&mut gpu, app.timeline().unwrap()) >= 6);

    // Back to the strip; Shift+click rank 0, then rank 3: the two, compared.
    app.content = memviz::viewer::app::Content::Ranks;
    gpu.settle(&mut app, 100);
    let (c0, c3) = (cell(&app, 0).center(), cell(&app, 3).center());
    click(&mut gpu, &mut app, c0, Modifiers::SHIFT);
    assert_eq!(app.ranks.as_ref().unwrap().marked.map(rank_of_in(&app)), Some(Some(0)));
    click(&mut gpu, &mut app, c3, Modifiers::SHIFT);
    let cmp = app.compare().expect("two ranks compared");
    assert!(
        cmp.a.session.archive.path.ends_with("rank0.memviz") && cmp.b.session.archive.path.ends_with("rank3.memviz")
    );
    assert!(cmp.a.plot_rect.bottom() <= cmp.b.plot_rect.top(), "rank 0 above rank 3");
    // Each half draws its own archive's elements (two views in one frame, each its own GPU state).
    let Some(memviz::viewer::app::Content::Compare(cmp)) = Some(&app.content) else { unreachable!() };
    let (a, b) = (&cmp.a, &cmp.b);
    assert!(assert_ids_are_its_own(&mut gpu, a) >= 6);
    assert!(assert_ids_are_its_own(&mut gpu, b) >= 6);

    // Zoom the top one to its third step: the bottom one shows its own third step.
    let memviz::viewer::app::Content::Compare(cmp) = &mut app.content else { unreachable!() };
    let (s0, s1) = (cmp.axes[0].starts[2], cmp.axes[0].starts[3]);
    cmp.a.view.x0 = f64::from(s0);
    cmp.a.view.x1 = f64::from(s1);
    gpu.settle(&mut app, 3000);
    let cmp = app.compare().unwrap();
    let (b0, b1) = (f64::from(cmp.axes[1].starts[2]), f64::from(cmp.axes[1].starts[3]));
    assert!((cmp.b.view.x0 - b0).abs() < 0.5 && (cmp.b.view.x1 - b1).abs() < 0.5, "{:?} vs {b0}..{b1}", cmp.b.view);
    assert!(assert_ids_are_its_own(&mut gpu, &app.compare().unwrap().b) >= 4);
}

fn rank_of_in(app: &ViewerApp) -> impl Fn(usize) -> Option<u64> + '_ {
    move |i| app.ranks.as_ref().unwrap().curves[i].as_ref().unwrap().row.rank
}

#[test]
fn open_a_folder_of_ranks_writes_the_strip_and_refuses_single_file_options() {
    let dir = tempdir();
    let job = dir.path().join("job");
    std::fs::create_dir_all(&job).unwrap();
    for r in 0..4 {
        std::fs::copy(data(&format!("ranks/rank{r}.pickle")), job.join(format!("rank{r}.pickle"))).unwrap();
    }
    let png = dir.path().join("strip.png");
    let out = memviz_cached(dir.path(), ["open".as_ref(), job.as_os_str(), "--screenshot".as_ref(), png.as_os_str()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::metadata(&png).unwrap().len() > 1000);
    let bad = memviz(["open".as_ref(), job.as_os_str(), "--action".as_ref(), "3".as_ref()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("open one file, not a job's ranks"));
}

/// "Colour by category": every drawn element has its category's colour, and a category hidden
/// in the legend is drawn dim (at pixels inside an element; the overlays — the reserved line,
/// the peak — may cross a few).
#[test]
fn colour_by_category_paints_each_element_in_its_category_colour() {
    use memviz::viewer::categories::{HIDDEN, colour};
    let dir = tempdir();
    let archive = dir.path().join("categories.memviz");
    memviz_ok(["index".as_ref(), data("categories/categories.pickle").as_os_str(), "-o".as_ref(), archive.as_os_str()]);
    let (mut gpu, mut app) = open(&archive, 1000, 600);
    app.timeline_mut().unwrap().colour_by_category = true;
    gpu.settle(&mut app, 3000);
    let check = |gpu: &mut Offscreen, app: &ViewerApp, hidden: Option<memviz::model::Category>| {
        let t = app.timeline().unwrap();
        assert!(t.by_category(), "the categories are in");
        let (rect, ids) = gpu.read_ids_of(t);
        let rgba = gpu.read_rgba();
        let mut seen = std::collections::BTreeSet::new();
        let (mut checked, mut off, step) = (0, Vec::new(), 7);
        for y in (rect.top() as usize + 2..rect.bottom() as usize - 2).step_by(step) {
            for x in (rect.left() as usize + 2..rect.right() as usize - 2).step_by(step) {
                let id = ids[y * gpu.width as usize + x];
                // Inside an element, away from its edges (no outline, no neighbour).
                let same = |dx: i64, dy: i64| {
                    ids[(y as i64 + dy) as usize * gpu.width as usize + (x as i64 + dx) as usize] == id
                };
                if id == u32::MAX || id == u32::MAX - 1 || !(same(-2, 0) && same(2, 0) && same(0, -2) && same(0, 2)) {
                    continue;
                }
                let c = t.category_of(memviz::model::ElementId(id)).unwrap();
                let want = if Some(c) == hidden { HIDDEN } else { colour(c) };
                let got = &rgba[(y * gpu.width as usize + x) * 4..][..3];
                if got == [want.r(), want.g(), want.b()] {
                    seen.insert(c);
                    checked += 1;
                } else {
                    off.push(((x, y), id, c, got.to_vec()));
                }
            }
        }
        assert!(checked > 100 && seen.len() >= 4, "{checked} pixels of {seen:?}");
        assert!(off.len() * 50 <= checked, "{} pixels off: {:?}", off.len(), &off[..off.len().min(5)]);
    };
    gpu.frame(&mut app, Vec::new());
    check(&mut gpu, &app, None);
    let activation = memviz::model::Category::Activation;
    let k = memviz::model::Category::ALL.iter().position(|&c| c == activation).unwrap();
    app.timeline_mut().unwrap().hidden_categories = 1 << k;
    gpu.settle(&mut app, 100);
    gpu.frame(&mut app, Vec::new());
    check(&mut gpu, &app, Some(activation));
}

/// Ctrl+F, frame text, Enter: the matches are the allocations `find` lists (a scan of the
/// layout), they keep their colour while everything else is dimmed, and Enter pins the first.
#[test]
fn search_highlights_the_matches_and_enter_pins_them() {
    use egui::{Event, Key, Modifiers};
    let (mut gpu, mut app) = open(&golden_archive(), 1000, 600);
    let key = |k: Key, modifiers: Modifiers| Event::Key {
        key: k,
        physical_key: None,
        pressed: true,
        repeat: false,
        modifiers,
    };
    gpu.frame(&mut app, vec![key(Key::F, Modifiers::COMMAND)]);
    gpu.frame(&mut app, vec![Event::Text("_init_group".into())]);
    gpu.settle(&mut app, 200);
    let t = app.timeline().unwrap();
    assert!(t.search.open && t.search.active(), "the field took the text: {:?}", t.search.text);
    // The same allocations as `memviz find`.
    let golden = golden_archive();
    let v: serde_json::Value = serde_json::from_slice(&memviz_ok([
        "find".as_ref(),
        golden.as_os_str(),
        "--frame".as_ref(),
        "_init_group".as_ref(),
        "--json".as_ref(),
    ]))
    .unwrap();
    let mut want: Vec<u32> =
        v["devices"][0]["hits"].as_array().unwrap().iter().map(|h| h["element"].as_u64().unwrap() as u32).collect();
    let mut got: Vec<u32> = t.search.matches.iter().map(|e| e.0).collect();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want);

    // Matches keep their site's colour (tinted), the rest is dimmed: at pixels inside an
    // element (away from its edges and outlines), in a frame drawn after the view settled.
    gpu.frame(&mut app, Vec::new());
    let (rect, ids) = gpu.read_ids_of(app.timeline().unwrap());
    let rgba = gpu.read_rgba();
    let t = app.timeline().unwrap();
    let sites = t.session.elements(t.device).sites;
    let (mut bright, mut dim, mut off) = (0, 0, Vec::new());
    let w = gpu.width as usize;
    for y in (rect.top() as usize + 3..rect.bottom() as usize - 3).step_by(5) {
        for x in (rect.left() as usize + 3..rect.right() as usize - 3).step_by(5) {
            let id = ids[y * w + x];
            let same = |dx: i64, dy: i64| ids[(y as i64 + dy) as usize * w + (x as i64 + dx) as usize] == id;
            if id >= u32::MAX - 1 || !(same(-2, 0) && same(2, 0) && same(0, -2) && same(0, 2)) {
                continue;
            }
            let site = sites[id as usize];
            let p = memviz::viewer::theme::palette(site);
            let base = [p & 0xff, (p >> 8) & 0xff, (p >> 16) & 0xff].map(|c| c as f32);
            let got = &rgba[(y * w + x) * 4..][..3];
            let matched = t.search.marks[id as usize / 32] >> (id % 32) & 1 == 1;
            let want: [f32; 3] = if matched {
                [0, 1, 2].map(|i| base[i] + ([255.0, 234.6, 63.75][i] - base[i]) * 0.35)
            } else {
                base.map(|c| c * 0.22)
            };
            if (0..3).all(|i| (f32::from(got[i]) - want[i]).abs() <= 3.0) {
                if matched { bright += 1 } else { dim += 1 }
            } else {
                off.push(((x, y), id, got.to_vec()));
            }
        }
    }
    assert!(off.len() * 20 <= bright + dim, "{} pixels off: {:?}", off.len(), &off[..off.len().min(5)]);
    assert!(bright > 20 && dim > 200, "{bright} bright, {dim} dimmed");

    // Enter: the first match (in allocation order) is pinned and shown.
    gpu.frame(&mut app, vec![key(Key::Enter, Modifiers::NONE)]);
    gpu.settle(&mut app, 200);
    let t = app.timeline().unwrap();
    let first = t.search.matches[0];
    assert_eq!(t.selection.pinned.map(|h| h.element), Some(first));
    assert_eq!(t.search.current, Some(0));
    let start = f64::from(t.session.elements(t.device).layout.element(first).start_opt().unwrap().0);
    assert!(t.view.x0 <= start && start < t.view.x1, "{:?} shows action {start}", t.view);
    gpu.frame(&mut app, vec![key(Key::Enter, Modifiers::SHIFT)]);
    let t = app.timeline().unwrap();
    assert_eq!(t.search.current, Some(t.search.matches.len() - 1), "Shift+Enter goes back, wrapping");
    gpu.frame(&mut app, vec![key(Key::Enter, Modifiers::NONE)]);
    assert_eq!(app.timeline().unwrap().search.current, Some(0), "and Enter on");
}

/// "copy link" writes the command line that reopens the view; opened again it draws the same id
/// buffer and pins the same element. `--pin ADDR` with `--action` pins what covers the address.
#[test]
fn a_copied_link_reopens_the_same_view() {
    let golden = golden_archive();
    let (mut gpu, mut app) = open(&golden, 1000, 600);
    let rect = app.timeline().unwrap().plot_rect;
    {
        let t = app.timeline_mut().unwrap();
        t.view.x0 = 812.5;
        t.view.x1 = 1290.0;
        t.invalidate_raster();
    }
    gpu.settle(&mut app, 3000);
    let hit = app.timeline().unwrap().pick(egui::pos2(rect.center().x, rect.bottom() - 30.0)).expect("an element");
    app.timeline_mut().unwrap().selection.pinned = Some(hit);
    gpu.settle(&mut app, 100);
    let (_, before) = gpu.read_ids(&app).unwrap();
    let link = memviz::viewer::app::link(&golden, app.timeline().unwrap(), Tab::Timeline);
    assert!(link.contains("--x 812.5..1290.0") && link.contains(&format!("--element {}", hit.element.0)), "{link}");

    let args = memviz::cli::with_open_default(link.split_whitespace().map(std::ffi::OsString::from));
    let cli = <memviz::cli::Cli as clap::Parser>::try_parse_from(args).unwrap();
    let memviz::cli::Command::Open(open_args) = cli.command else { panic!("{link}: not open") };
    let options = memviz::commands::viewer_options(&open_args).unwrap();
    let (mut gpu2, app2) = open_with(&golden, options, 1000, 600);
    let (_, after) = gpu2.read_ids(&app2).unwrap();
    assert_eq!(app2.timeline().unwrap().view.x0, 812.5);
    assert_eq!(app2.timeline().unwrap().selection.pinned.map(|h| h.element), Some(hit.element));
    assert!(before == after, "the reopened view draws other ids");
    let _ = &mut gpu2;

    // --action K --pin ADDR: the allocation covering the address right after action K.
    let t = app.timeline().unwrap();
    let el = t.session.elements(t.device).layout.element(hit.element);
    let k = el.start_opt().unwrap().0 as i64;
    let options = ViewerOptions {
        at: Some(memviz::viewer::tabs::OpenAt::Action(k)),
        pin: Some(memviz::viewer::tabs::Pin::Addr(el.addr + el.size / 2)),
        ..ViewerOptions::default()
    };
    let (_, app3) = open_with(&golden, options, 800, 500);
    assert_eq!(app3.timeline().unwrap().selection.pinned.map(|h| h.element), Some(hit.element));
}

/// The minimap draws each pixel column's envelope over the whole trace: its highest total at the
/// top of the fill, its lowest at the top of the floor below it (the golden layout's totals say
/// where; the minimap's levels may widen a column's range by a bucket, so a row either way).
#[test]
fn the_minimap_draws_each_columns_peak_and_floor() {
    let (mut gpu, mut app) = open(&golden_archive(), 900, 500);
    // Zoomed in at the right, so the view's brush (shading what it covers) leaves the rest as drawn.
    let plot = app.timeline().unwrap().plot_rect;
    for _ in 0..6 {
        gpu.frame(&mut app, memviz::viewer::bench::wheel(egui::pos2(plot.right() - 2.0, plot.center().y), 60.0, false));
    }
    gpu.settle(&mut app, 3000);
    let rgba = gpu.read_rgba();
    let t = app.timeline().unwrap();
    let rect = t.minimap_rect;
    let brush_left = rect.left() + (t.view.x0 / t.stacked().layout.actions.len() as f64) as f32 * rect.width();
    let golden = json_file(&data("gpt2_small.layout.json"));
    let totals: Vec<u64> =
        golden["devices"][0]["totals"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let peak = *totals.iter().max().unwrap() as f32;
    let (n, width) = (totals.len(), rect.width() as usize);
    let per = n as f64 / width as f64;
    let px = |x: usize, y: usize| {
        let i = (y * gpu.width as usize + x) * 4;
        [rgba[i], rgba[i + 1], rgba[i + 2]]
    };
    let rgb = |c: egui::Color32| [c.r(), c.g(), c.b()];
    let (fill, floor) = (rgb(memviz::viewer::theme::MINIMAP_FILL), rgb(memviz::viewer::theme::MINIMAP_FLOOR));
    let (mut hits, mut misses) = (0, Vec::new());
    for i in 0..40 {
        let c = (brush_left as usize - rect.left() as usize - 2) * (2 * i + 1) / 80;
        let (a, b) = ((c as f64 * per) as usize, (((c + 1) as f64 * per).ceil() as usize).min(n));
        let (max, min) = (*totals[a..b].iter().max().unwrap(), *totals[a..b].iter().min().unwrap());
        let row = |bytes: u64| (rect.bottom() - bytes as f32 / peak * rect.height() - 0.5).ceil() as usize;
        let x = rect.left() as usize + c;
        // Scanning down the column: background, then fill from the peak's row, then floor from
        // the floor's row to the bottom.
        let first = |colour| (rect.top() as usize..rect.bottom() as usize).find(|&y| px(x, y) == colour);
        let near = |got: Option<usize>, want: usize| got.is_some_and(|g| g.abs_diff(want) <= 1);
        let top_ok = near(first(fill), row(max)) || (row(max) == row(min) && near(first(floor), row(min)));
        if top_ok && near(first(floor), row(min)) && px(x, rect.bottom() as usize - 1) == floor {
            hits += 1;
        } else {
            misses.push((c, max, min, row(max), row(min), first(fill), first(floor)));
        }
    }
    assert!(hits >= 36, "{hits} columns as the totals say; off: {misses:?}");
}

/// At coarse zoom each pixel column also shows its floor — the lowest total among the actions it
/// covers — as a mark at that height (the golden layout's totals say where).
#[test]
fn coarse_columns_show_their_floor() {
    let (mut gpu, mut app) = open(&golden_archive(), 900, 500);
    gpu.frame(&mut app, Vec::new());
    let rgba = gpu.read_rgba();
    let t = app.timeline().unwrap();
    let (rect, view) = (t.plot_rect, t.view);
    let golden = json_file(&data("gpt2_small.layout.json"));
    let totals: Vec<u64> =
        golden["devices"][0]["totals"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let columns = rect.width().floor() as usize;
    let per = (view.x1 - view.x0) / columns as f64;
    assert!(per >= 2.0, "the whole trace is a coarse view ({per} actions per column)");
    let floor = memviz::viewer::theme::FLOOR;
    let (mut hits, mut misses) = (0, Vec::new());
    for i in 0..40 {
        let c = columns * (2 * i + 1) / 80;
        let a = (view.x0 + per * c as f64).floor().max(0.0) as usize;
        let b = ((view.x0 + per * (c + 1) as f64).ceil() as usize).min(totals.len());
        let min = *totals[a..b].iter().min().unwrap();
        let y = view.screen_from_bytes(rect, min as f64);
        if !(rect.top() + 2.0..rect.bottom() - 2.0).contains(&y) {
            continue;
        }
        let (x, row) = ((rect.left() as usize) + c, y.floor() as usize);
        let px = &rgba[(row * gpu.width as usize + x) * 4..][..3];
        if px == [floor.r(), floor.g(), floor.b()] {
            hits += 1;
        } else {
            misses.push((c, a, b, min, y, px.to_vec()));
        }
    }
    // Every floor mark is where the totals say (a marker or a label may cover one or two).
    assert!(hits >= 30 && misses.len() <= 2, "{hits} at the floor; off: {misses:?}");
}

/// The coarse tiles of a format-7 archive bring their texels' colour keys (`TileKeys`), uploaded
/// as they are; an archive without them (format 6, upgraded in memory) makes the keys from the
/// sites. Both draw the same pixels.
#[test]
fn stored_tile_keys_draw_what_keys_from_the_sites_draw() {
    use memviz::viewer::timeline::tile_key;
    let frame = |archive: &Path| {
        let (gpu, app) = open(archive, 1000, 600);
        let t = app.timeline().unwrap();
        let coarsest = t.session.elements(DeviceIdx(0)).tiles.len() - 1;
        let tile = t.textures.texels(&tile_key(DeviceIdx(0), Plane::Elements, coarsest, 0)).expect("the coarsest tile");
        let stored = tile.site_keys.is_some();
        let rect = t.plot_rect;
        let rgba = gpu.read_rgba();
        let row = |y: usize| &rgba[(y * gpu.width as usize + rect.left() as usize) * 4..][..rect.width() as usize * 4];
        let plot: Vec<u8> = (rect.top() as usize..rect.bottom() as usize).flat_map(row).copied().collect();
        (stored, plot)
    };
    let (stored, with_keys) = frame(&golden_archive());
    let (made, from_sites) = frame(&data("golden/gpt2_small.v6.memviz"));
    assert!(stored && !made, "format 7 stores the coarsest tile's keys, format 6 does not");
    let bg = memviz::viewer::theme::BACKGROUND;
    let drawn = with_keys.chunks_exact(4).filter(|c| c[..3] != [bg.r(), bg.g(), bg.b()]).count();
    assert!(drawn > with_keys.len() / 4 / 4, "the plot is drawn ({drawn} pixels)");
    assert!(with_keys == from_sites, "stored keys colour the plot as the sites do");
}

/// The viewer says what it shows: the y fit reaches the reserved line and the `--gpu`
/// capacity line (neither runs off the plot); "save PNG" picks a name no earlier save has.
#[test]
fn lines_stay_on_the_plot_and_saves_never_overwrite() {
    let archive = golden_archive();
    let session = memviz::archive::Session::open(&archive).unwrap();
    let reserved = session.reserved_peak(DeviceIdx(0));
    let peak = session.layout(DeviceIdx(0)).peak_bytes;
    assert!(reserved > peak, "gpt2_small reserves more than it allocates: {reserved} vs {peak}");
    let (_, app) = open(&archive, 800, 500);
    let v = app.timeline().unwrap().view;
    assert!(v.y1 >= reserved as f64, "the reserved line's top {reserved} is inside 0..{}", v.y1);
    let h100 = 80u64 << 30;
    let options = ViewerOptions { gpu: Some(("H100", h100)), ..ViewerOptions::default() };
    let (_, app) = open_with(&archive, options, 800, 500);
    assert!(app.timeline().unwrap().view.y1 >= h100 as f64, "the capacity line is on the plot");

    let dir = tempdir();
    let first = memviz::viewer::app::unused_png_name(&dir.path().join("view-0-10").to_string_lossy());
    assert_eq!(first.file_name().unwrap(), "view-0-10.png");
    std::fs::write(&first, b"earlier").unwrap();
    let second = memviz::viewer::app::unused_png_name(&dir.path().join("view-0-10").to_string_lossy());
    assert_eq!(second.file_name().unwrap(), "view-0-10-2.png");
}

/// A legend under the timeline names its lines and shades: its OOM swatch is the only red of
/// that exact colour in a trace without an OOM, drawn below the plot.
#[test]
fn the_timeline_legend_is_drawn_under_the_plot() {
    let (gpu, app) = open(&golden_archive(), 1000, 600);
    let rgba = gpu.read_rgba();
    let rect = app.timeline().unwrap().plot_rect;
    let oom = memviz::viewer::reserved::OOM;
    let (mut below, mut inside) = (0, 0);
    for (i, c) in rgba.chunks_exact(4).enumerate() {
        if c[..3] == [oom.r(), oom.g(), oom.b()] {
            let y = (i / gpu.width as usize) as f32;
            if y > rect.bottom() { below += 1 } else { inside += 1 }
        }
    }
    assert!(below >= 80, "the OOM swatch below the plot ({below} pixels)");
    assert_eq!(inside, 0, "no OOM marker in gpt2_small");
}
