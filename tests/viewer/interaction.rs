//! Input: zoom, pan, pins, search, links.

#[allow(unused_imports)]
use super::*;

/// "Go to peak" pins the largest allocation live at the peak, and the answers panel (live at
/// cursor, icicle) draws for it.
#[test]
fn go_to_peak_pins_the_largest_live_allocation() {
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(native_options());
    app.open_archive(&golden_archive(), &ctx);
    app.answers.open = true;
    let mut gpu = Offscreen::new(1200, 700, ctx).unwrap();
    gpu.settle(&mut app, 3000);
    app.timeline_mut().unwrap().go_to_peak();
    gpu.settle(&mut app, 3000);
    if let Some(out) = std::env::var_os("MEMVIZ_TEST_SHOT") {
        std::fs::write(&out, gpu.png().unwrap()).unwrap();
    }
    let pinned = app.timeline().unwrap().doc.selection.pinned.expect("pinned at the peak");
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

/// Input through the offscreen path, as a user gives it: scroll zooms at the cursor, Shift+scroll
/// zooms bytes, drag pans, Ctrl+drag selects and zooms to a range, double-click fits bytes, a
/// click pins and a click on nothing unpins.
#[test]
fn input_drives_the_view_and_the_selection() {
    use egui::{Event, Modifiers, PointerButton, pos2, vec2};
    let (mut gpu, mut app) = open(&golden_archive(), 1000, 600);
    let rect = app.timeline().unwrap().plot.plot_rect;
    let view = |app: &ViewerApp| app.timeline().unwrap().doc.view;
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
    let (first, last) = app.timeline().unwrap().doc.selection.range.expect("the selected range");
    assert!(first as f64 <= x0 + 1.0 && last as f64 >= x1 - 1.0, "{first}..{last} vs {x0}..{x1}");

    // Click an element low in the plot: pinned; click above the data: unpinned.
    let low = pos2(rect.center().x, rect.bottom() - 3.0);
    gpu.frame(&mut app, vec![Event::PointerMoved(low)]);
    gpu.frame(&mut app, vec![button(low, true, Modifiers::NONE)]);
    gpu.frame(&mut app, vec![button(low, false, Modifiers::NONE)]);
    let picked = app.timeline().unwrap().doc.selection;
    assert!(picked.pinned.is_some() && picked.pinned == picked.hovered, "{picked:?}");
    let high = pos2(rect.center().x, rect.top() + 2.0);
    app.timeline_mut().unwrap().fit();
    settle(&mut gpu, &mut app);
    gpu.frame(&mut app, vec![Event::PointerMoved(high)]);
    gpu.frame(&mut app, vec![button(high, true, Modifiers::NONE)]);
    gpu.frame(&mut app, vec![button(high, false, Modifiers::NONE)]);
    assert_eq!(app.timeline().unwrap().doc.selection.pinned, None, "a click on nothing unpins");
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
    assert!(t.doc.search.open && t.doc.search.active(), "the field took the text: {:?}", t.doc.search.text);
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
    let mut got: Vec<u32> = t.doc.search.matches.iter().map(|e| e.0).collect();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want);

    // Matches keep their site's colour (tinted), the rest is dimmed: at pixels inside an
    // element (away from its edges and outlines), in a frame drawn after the view settled.
    gpu.frame(&mut app, Vec::new());
    let (rect, ids) = gpu.read_ids_of(app.timeline().unwrap());
    let rgba = gpu.read_rgba();
    let t = app.timeline().unwrap();
    let sites = t.doc.session.elements(t.doc.device).sites;
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
            let matched = t.doc.search.marks[id as usize / 32] >> (id % 32) & 1 == 1;
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
    let first = t.doc.search.matches[0];
    assert_eq!(t.doc.selection.pinned.map(|h| h.element), Some(first));
    assert_eq!(t.doc.search.current, Some(0));
    let start = f64::from(t.doc.session.elements(t.doc.device).layout.element(first).start_opt().unwrap().0);
    assert!(t.doc.view.x0 <= start && start < t.doc.view.x1, "{:?} shows action {start}", t.doc.view);
    gpu.frame(&mut app, vec![key(Key::Enter, Modifiers::SHIFT)]);
    let t = app.timeline().unwrap();
    assert_eq!(t.doc.search.current, Some(t.doc.search.matches.len() - 1), "Shift+Enter goes back, wrapping");
    gpu.frame(&mut app, vec![key(Key::Enter, Modifiers::NONE)]);
    assert_eq!(app.timeline().unwrap().doc.search.current, Some(0), "and Enter on");
}

/// "copy link" writes the command line that reopens the view; opened again it draws the same id
/// buffer and pins the same element. `--pin ADDR` with `--action` pins what covers the address.
#[test]
fn a_copied_link_reopens_the_same_view() {
    let golden = golden_archive();
    let (mut gpu, mut app) = open(&golden, 1000, 600);
    let rect = app.timeline().unwrap().plot.plot_rect;
    {
        let t = app.timeline_mut().unwrap();
        t.doc.view.x0 = 812.5;
        t.doc.view.x1 = 1290.0;
        t.plot.invalidate_raster();
    }
    gpu.settle(&mut app, 3000);
    let hit = app.timeline().unwrap().pick(egui::pos2(rect.center().x, rect.bottom() - 30.0)).expect("an element");
    app.timeline_mut().unwrap().doc.selection.pinned = Some(hit);
    gpu.settle(&mut app, 100);
    let (_, before) = gpu.read_ids(&app).unwrap();
    let link = memviz::viewer::open_view::ViewState::of(&app.timeline().unwrap().doc, Tab::Timeline).command(&golden);
    assert!(link.contains("--x 812.5..1290.0") && link.contains(&format!("--element {}", hit.element.0)), "{link}");

    let args = memviz::cli::with_open_default(link.split_whitespace().map(std::ffi::OsString::from));
    let cli = <memviz::cli::Cli as clap::Parser>::try_parse_from(args).unwrap();
    let memviz::cli::Command::Open(open_args) = cli.command else { panic!("{link}: not open") };
    let options = memviz::commands::viewer_options(&open_args).unwrap();
    let (mut gpu2, app2) = open_with(&golden, options, 1000, 600);
    let (_, after) = gpu2.read_ids(&app2).unwrap();
    assert_eq!(app2.timeline().unwrap().doc.view.x0, 812.5);
    assert_eq!(app2.timeline().unwrap().doc.selection.pinned.map(|h| h.element), Some(hit.element));
    assert!(before == after, "the reopened view draws other ids");
    let _ = &mut gpu2;

    // --action K --pin ADDR: the allocation covering the address right after action K.
    let t = app.timeline().unwrap();
    let el = t.doc.session.elements(t.doc.device).layout.element(hit.element);
    let k = el.start_opt().unwrap().0 as i64;
    let options = ViewerOptions {
        at: Some(memviz::viewer::tabs::OpenAt::Action(k)),
        pin: Some(memviz::viewer::tabs::Pin::Addr(el.addr + el.size / 2)),
        ..native_options()
    };
    let (_, app3) = open_with(&golden, options, 800, 500);
    assert_eq!(app3.timeline().unwrap().doc.selection.pinned.map(|h| h.element), Some(hit.element));
}
