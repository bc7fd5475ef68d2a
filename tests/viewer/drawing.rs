//! What is drawn at known pixels: markers, outlines, axes, the minimap, legends, colours.

#[allow(unused_imports)]
use super::*;

/// The OOM events are red markers at their action on the element timeline, over the reserved
/// line.
#[test]
fn oom_markers_are_drawn_at_their_actions() {
    let dir = tempdir();
    let (mut gpu, mut app) = open_with(&frag_oom_archive(dir.path()), native_options(), 1200, 700);
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
    let rect = t.plot.plot_rect;
    let x = t.doc.view.screen_from_action(rect, marks[0].action as f64 + 1.0).round() as usize;
    let y = rect.center().y as usize;
    let i = (y * gpu.width as usize + x) * 4;
    let red = memviz::viewer::reserved::OOM;
    assert_eq!(&rgba[i..i + 3], &[red.r(), red.g(), red.b()], "the first OOM's marker at x = {x}");
}

#[test]
fn colour_frame_shows_the_data_and_the_pinned_outline() {
    let (mut gpu, mut app) = open(&golden_archive(), 1000, 600);
    let rgba = gpu.read_rgba();
    let rect = app.timeline().unwrap().plot.plot_rect;
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
    app.timeline_mut().unwrap().doc.selection.pinned = Some(hit);
    gpu.frame(&mut app, Vec::new());
    let rgba = gpu.read_rgba();
    let red = rgba.chunks_exact(4).filter(|c| c[0] > 220 && c[1] < 60 && c[2] < 60).count();
    assert!(red > 50, "a red outline of the pinned element ({red} red pixels)");
}

/// The wall-time axis: rasters are laid out by each action's time, and still show the data.
#[test]
fn wall_time_axis_draws_the_trace() {
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(native_options());
    app.open_archive(&golden_archive(), &ctx);
    let mut gpu = Offscreen::new(900, 600, ctx).unwrap();
    gpu.settle(&mut app, 3000);
    // Action times are decompressed on a background thread after the first frame.
    for _ in 0..2000 {
        if app.timeline().unwrap().doc.session.time_axis(DeviceIdx(0)).is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    app.timeline_mut().unwrap().set_time_axis(true);
    assert!(app.timeline().unwrap().doc.time_axis);
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

/// The tooltip and bottom bar show what the 2026 schema records about an allocation: the
/// annotate label, metadata, pool, compile context, the forward frames and fx nodes.
#[test]
fn details_show_metadata_forward_frames_and_fx() {
    use memviz::analysis::frames;
    use memviz::viewer::details::ElementInfo;
    let dir = tempdir();
    let archive = dir.path().join("annotate_meta.memviz");
    memviz_ok(["index".as_ref(), data("synth/annotate_meta.pickle").as_os_str(), "-o".as_ref(), archive.as_os_str()]);
    let session = memviz::file::open_session(&archive).unwrap();
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
    let session = memviz::file::open_session(&archive).unwrap();
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
    let (w, n) = (wide.timeline().unwrap().plot.plot_rect, narrow.timeline().unwrap().plot.plot_rect);
    assert!(n.top() > w.top(), "the top bar takes a second row at 800 px ({} vs {})", n.top(), w.top());
    assert!(n.right() <= 800.0);
}

/// The WGSL shader parses and validates with wgpu's own compiler (naga), whatever the GPU.
#[test]
fn the_shader_validates() {
    let source = std::fs::read_to_string(repo().join("viewer/src/gpu/timeline.wgsl")).unwrap();
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
    app.timeline_mut().unwrap().doc.colour_by_category = true;
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
    app.timeline_mut().unwrap().doc.hidden_categories = 1 << k;
    gpu.settle(&mut app, 100);
    gpu.frame(&mut app, Vec::new());
    check(&mut gpu, &app, Some(activation));
}

/// The minimap draws each pixel column's envelope over the whole trace: its highest total at the
/// top of the fill, its lowest at the top of the floor below it (the golden layout's totals say
/// where; the minimap's levels may widen a column's range by a bucket, so a row either way).
#[test]
fn the_minimap_draws_each_columns_peak_and_floor() {
    let (mut gpu, mut app) = open(&golden_archive(), 900, 500);
    // Zoomed in at the right, so the view's brush (shading what it covers) leaves the rest as drawn.
    let plot = app.timeline().unwrap().plot.plot_rect;
    for _ in 0..6 {
        gpu.frame(&mut app, memviz::viewer::bench::wheel(egui::pos2(plot.right() - 2.0, plot.center().y), 60.0, false));
    }
    gpu.settle(&mut app, 3000);
    let rgba = gpu.read_rgba();
    let t = app.timeline().unwrap();
    let rect = t.plot.minimap_rect;
    let brush_left = rect.left() + (t.doc.view.x0 / t.stacked().layout.actions.len() as f64) as f32 * rect.width();
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
    let (rect, view) = (t.plot.plot_rect, t.doc.view);
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

/// The viewer says what it shows: the y fit reaches the reserved line and the `--gpu`
/// capacity line (neither runs off the plot); "save PNG" picks a name no earlier save has.
#[test]
fn lines_stay_on_the_plot_and_saves_never_overwrite() {
    let archive = golden_archive();
    let session = memviz::file::open_session(&archive).unwrap();
    let reserved = session.reserved_peak(DeviceIdx(0));
    let peak = session.layout(DeviceIdx(0)).peak_bytes;
    assert!(reserved > peak, "gpt2_small reserves more than it allocates: {reserved} vs {peak}");
    let (_, app) = open(&archive, 800, 500);
    let v = app.timeline().unwrap().doc.view;
    assert!(v.y1 >= reserved as f64, "the reserved line's top {reserved} is inside 0..{}", v.y1);
    let h100 = 80u64 << 30;
    let options = ViewerOptions { gpu: Some(("H100", h100)), ..native_options() };
    let (_, app) = open_with(&archive, options, 800, 500);
    assert!(app.timeline().unwrap().doc.view.y1 >= h100 as f64, "the capacity line is on the plot");

    let dir = tempdir();
    let first = memviz::viewer::screen::unused_png_name(&dir.path().join("view-0-10").to_string_lossy());
    assert_eq!(first.file_name().unwrap(), "view-0-10.png");
    std::fs::write(&first, b"earlier").unwrap();
    let second = memviz::viewer::screen::unused_png_name(&dir.path().join("view-0-10").to_string_lossy());
    assert_eq!(second.file_name().unwrap(), "view-0-10-2.png");
}

/// A legend under the timeline names its lines and shades: its OOM swatch is the only red of
/// that exact colour in a trace without an OOM, drawn below the plot.
#[test]
fn the_timeline_legend_is_drawn_under_the_plot() {
    let (gpu, app) = open(&golden_archive(), 1000, 600);
    let rgba = gpu.read_rgba();
    let rect = app.timeline().unwrap().plot.plot_rect;
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
