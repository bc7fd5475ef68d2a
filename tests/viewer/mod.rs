//! The GPU viewer, rendered offscreen on whatever adapter wgpu finds (Mesa lavapipe in CI):
//! the id buffer must show the layout's answer, hover must agree with it, and a real window
//! must open under Xvfb, draw and close. The helpers the files share are here.

use std::path::Path;

use eframe::egui;
use memviz::viewer::offscreen::Offscreen;
use memviz::viewer::{ViewerApp, ViewerOptions};

use crate::support::*;
use memviz::archive::Plane;
use memviz::model::{DeviceIdx, ElementId};
use memviz::viewer::tabs::Tab;

mod corrupt;
mod drawing;
mod ids;
mod interaction;
mod parts;
mod ranks;
mod windows;

pub fn open(archive: &Path, w: u32, h: u32) -> (Offscreen, ViewerApp) {
    open_with(archive, native_options(), w, h)
}

pub fn golden_archive() -> std::path::PathBuf {
    data(&format!("golden/gpt2_small.v{}.memviz", memviz_format::FORMAT_VERSION))
}

/// The golden archive changed by `mutate` and sealed again with valid checksums (a colleague's
/// file memviz did not write), as `dir/bad.memviz`.
pub fn resealed(dir: &Path, mutate: impl FnOnce(&mut memviz_format::schema::Root)) -> std::path::PathBuf {
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

/// At 20 points spread over the plot, the drawn id (and the hovered one) is the golden layout's
/// element there; returns how many points hit an element.
pub fn assert_ids_equal_golden(gpu: &mut Offscreen, app: &ViewerApp, g: &serde_json::Value) -> usize {
    let (rect, ids) = gpu.read_ids(app).expect("an open timeline");
    let t = app.timeline().unwrap();
    let elements = g["elements"].as_array().unwrap();
    let totals: Vec<u64> = g["totals"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let (x0, x1, y0, y1) = (t.doc.view.x0, t.doc.view.x1, t.doc.view.y0, t.doc.view.y1);
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
pub fn frag_oom_archive(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("frag_oom.memviz");
    memviz_ok(["index".as_ref(), data("frag_oom.pickle").as_os_str(), "-o".as_ref(), out.as_os_str()]);
    out
}

pub fn open_with(archive: &Path, options: ViewerOptions, w: u32, h: u32) -> (Offscreen, ViewerApp) {
    let ctx = egui::Context::default();
    let mut app = ViewerApp::new(options);
    app.open_archive(archive, &ctx);
    let mut gpu = Offscreen::new(w, h, ctx).expect("a wgpu adapter (lavapipe: apt-get install mesa-vulkan-drivers)");
    gpu.settle(&mut app, 3000);
    (gpu, app)
}

/// The elements drawn at 12 points of a timeline's plot equal what its own archive has there
/// (the live stack at the column's highest action, the element covering the row's middle byte):
/// how many points hit an element.
pub fn assert_ids_are_its_own(gpu: &mut Offscreen, t: &memviz::viewer::timeline::Open) -> usize {
    let (rect, ids) = gpu.read_ids_of(t);
    let s = t.doc.session.elements(t.doc.device);
    let (l, view) = (s.layout, t.doc.view);
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
        assert_eq!(
            got,
            expect,
            "{}: pixel ({px}, {py}) = action {k}, byte {byte}",
            t.doc.session.archive.path.display()
        );
        hits += usize::from(got != u32::MAX);
    }
    hits
}

pub fn rank_of_in(app: &ViewerApp) -> impl Fn(usize) -> Option<u64> + '_ {
    move |i| app.ranks.as_ref().unwrap().curves[i].as_ref().unwrap().row.rank
}
