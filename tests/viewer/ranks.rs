//! The rank strip of a job and the two-rank comparison.

#[allow(unused_imports)]
use super::*;

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
    let mut app = ViewerApp::new(native_options());
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
    assert!(t.doc.session.archive.path.ends_with("rank1.memviz"), "{}", t.doc.session.archive.path.display());
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
        cmp.a.doc.session.archive.path.ends_with("rank0.memviz")
            && cmp.b.doc.session.archive.path.ends_with("rank3.memviz")
    );
    assert!(cmp.a.plot.plot_rect.bottom() <= cmp.b.plot.plot_rect.top(), "rank 0 above rank 3");
    // Each half draws its own archive's elements (two views in one frame, each its own GPU state).
    let Some(memviz::viewer::app::Content::Compare(cmp)) = Some(&app.content) else { unreachable!() };
    let (a, b) = (&cmp.a, &cmp.b);
    assert!(assert_ids_are_its_own(&mut gpu, a) >= 6);
    assert!(assert_ids_are_its_own(&mut gpu, b) >= 6);

    // Zoom the top one to its third step: the bottom one shows its own third step.
    let memviz::viewer::app::Content::Compare(cmp) = &mut app.content else { unreachable!() };
    let (s0, s1) = (cmp.axes[0].starts[2], cmp.axes[0].starts[3]);
    cmp.a.doc.view.x0 = f64::from(s0);
    cmp.a.doc.view.x1 = f64::from(s1);
    gpu.settle(&mut app, 3000);
    let cmp = app.compare().unwrap();
    let (b0, b1) = (f64::from(cmp.axes[1].starts[2]), f64::from(cmp.axes[1].starts[3]));
    assert!(
        (cmp.b.doc.view.x0 - b0).abs() < 0.5 && (cmp.b.doc.view.x1 - b1).abs() < 0.5,
        "{:?} vs {b0}..{b1}",
        cmp.b.doc.view
    );
    assert!(assert_ids_are_its_own(&mut gpu, &app.compare().unwrap().b) >= 4);
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
