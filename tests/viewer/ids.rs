//! The id buffer against the layout's answer (golden layouts, the oracle's segments and blocks).

#[allow(unused_imports)]
use super::*;

#[test]
fn screenshot_ids_equal_the_layout_and_hover_agrees() {
    let (mut gpu, app) = open(&golden_archive(), 1200, 700);
    let golden = json_file(&data("gpt2_small.layout.json"));
    let non_empty = assert_ids_equal_golden(&mut gpu, &app, &golden["devices"][0]);
    assert!(non_empty >= 12, "most sampled points hit elements ({non_empty}/20)");
}

/// The Active Cached Segment Timeline draws `allocator_oracle.py`'s segment layout.
#[test]
fn the_segment_timeline_ids_equal_the_oracle() {
    let dir = tempdir();
    let options = ViewerOptions { tab: Tab::Segments, ..native_options() };
    let (mut gpu, app) = open_with(&frag_oom_archive(dir.path()), options, 1200, 700);
    assert_eq!(app.timeline().unwrap().doc.plane, Plane::Segments);
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
    let options = ViewerOptions { tab: Tab::State, at: Some(OpenAt::Oom(0)), ..native_options() };
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
    let sites = t.doc.session.elements(t.doc.device).sites;
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
    let event = |app: &ViewerApp| app.timeline().unwrap().doc.selection.event;
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
    let session = memviz::file::open_session(&archive).unwrap();
    let d = DeviceIdx(0);
    let every = i64::from(session.device(d).allocator.every.to_native());
    let n = session.trace(d).len() as i64;
    assert!(n > 20 * every && n > 30 * 65_536, "{n} events, K = {every}");
    // Two events past a saved state, so that stepping back crosses it.
    let start = n - 1 - every * (n / every / 2) + 2;
    let options = ViewerOptions { tab: Tab::State, at: Some(OpenAt::Event(start)), ..native_options() };
    let (mut gpu, mut app) = open_with(&archive, options, 1000, 700);
    let shown_event = |app: &ViewerApp| app.map.shown.as_ref().map(|s| s.event);
    assert_eq!(shown_event(&app), Some(start));
    // The first settled frame, once the background check has summed up the action times (the
    // annotation lane and the time axis appear then).
    for _ in 0..3000 {
        if app.timeline().unwrap().doc.session.time_axis(d).is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(app.timeline().unwrap().doc.session.time_axis(d).is_some(), "the background check ended");
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
        assert_eq!(Some(shown.event), app.timeline().unwrap().doc.selection.event, "step {step}: the map follows");
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
    let options = ViewerOptions { tab: Tab::Pools, ..native_options() };
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
    let rect = t.plot.plot_rect;
    let x = t.doc.view.screen_from_action(rect, k as f64 + 0.5).round().min(rect.right() - 2.0);
    let y = t.doc.view.screen_from_bytes(rect, pools.bands[0][k] as f64 / 2.0).round();
    let rgba = gpu.read_rgba();
    let i = (y as usize * gpu.width as usize + x as usize) * 4;
    let want = memviz::viewer::pools::pool_colour(0);
    assert_eq!(&rgba[i..i + 3], &[want.r(), want.g(), want.b()], "pool 0's band at ({x}, {y})");
    let (_, ids) = gpu.read_ids(&app).unwrap();
    assert_eq!(ids[y as usize * gpu.width as usize + x as usize], memviz::lod::raster::AGGREGATED);
    let hit = pools.at(k, pools.bands[0][k] as f64 + 1.0).unwrap();
    assert_eq!(hit.0, 1, "just above the first band is the second pool's");
}

/// `--max-entries`: the bottom of the plot is the summarized band, drawn as its own id.
#[test]
fn max_entries_draws_the_summarized_band() {
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(ViewerOptions { max_entries: Some(20), ..native_options() });
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

/// The coarse tiles of a format-7 archive bring their texels' colour keys (`TileKeys`), uploaded
/// as they are; an archive without them (format 6, upgraded in memory) makes the keys from the
/// sites. Both draw the same pixels.
#[test]
fn stored_tile_keys_draw_what_keys_from_the_sites_draw() {
    use memviz::viewer::timeline::tile_key;
    let frame = |archive: &Path| {
        let (gpu, app) = open(archive, 1000, 600);
        let t = app.timeline().unwrap();
        let coarsest = t.doc.session.elements(DeviceIdx(0)).tiles.len() - 1;
        let tile =
            t.plot.textures.texels(&tile_key(DeviceIdx(0), Plane::Elements, coarsest, 0)).expect("the coarsest tile");
        let stored = tile.site_keys.is_some();
        let rect = t.plot.plot_rect;
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
