//! The first frame's parts (`Archive::first_frame_ranges`, what a browser fetches first): an
//! archive whose other bytes are overwritten draws the same settled first frame as the archive
//! itself, where the page's viewer draws it before the rest has arrived — no background checks,
//! whatever the viewer works out for that frame worked out from those bytes alone.

#[allow(unused_imports)]
use super::*;

use std::sync::Arc;

use memviz::archive::{Archive, Session};
use memviz::model::Job;
use memviz::viewer::platform::{FirstFrame, Platform, PlatformRef};

/// What a page's viewer has while the archive's later parts are on their way: the archive in
/// memory, and no checks (they read every byte).
struct Preview;

impl Platform for Preview {
    fn is_archive(&self, _: &Path) -> bool {
        true
    }
    fn open_archive(&self, _: &Path) -> Result<Arc<Session>, String> {
        Err("opened by the test".into())
    }
    fn open_snapshot(&self, _: &Path, _: bool, _: &dyn Fn(u64)) -> Result<Arc<Session>, String> {
        Err("opened by the test".into())
    }
    fn start_checks(&self, _: &Arc<Session>, first_frame: &Arc<FirstFrame>) {
        first_frame.drawn();
    }
    fn job(&self, _: &[std::path::PathBuf]) -> Result<Job, String> {
        Err("no job".into())
    }
    fn write(&self, _: &Path, _: &[u8]) -> anyhow::Result<()> {
        anyhow::bail!("no files")
    }
    fn print(&self, _: &str) -> anyhow::Result<()> {
        Ok(())
    }
    fn timing(&self, _: &str, _: f64) {}
}

/// A page's viewer on `ctx`, given its archives by the test.
fn page_viewer() -> ViewerApp {
    ViewerApp::new(ViewerOptions { platform: PlatformRef(Arc::new(Preview)), ..Default::default() })
}

fn session(bytes: &[u8]) -> Arc<Session> {
    Arc::new(Session::from_archive(Archive::from_memory(bytes, Path::new("a.memviz")).expect("opens")))
}

/// Runs frames until `app` is idle; its frame (RGBA).
fn settled(gpu: &mut Offscreen, app: &mut ViewerApp) -> Vec<u8> {
    assert!(gpu.settle(app, 3000), "the frame settles");
    assert!(app.failure().is_none(), "{:?}", app.failure());
    gpu.read_rgba()
}

#[test]
fn the_first_frame_reads_only_its_parts() {
    let dir = tempdir();
    // Before format 7 the first frame reads every element's site: the whole file is first.
    let v6 = std::fs::read(data("golden/gpt2_small.v6.memviz")).unwrap();
    let whole = Archive::from_memory(&v6, Path::new("v6")).unwrap().first_frame_ranges();
    let whole: Vec<(u64, u64)> = whole.into_iter().map(|r| (r.start, r.end)).collect();
    assert_eq!(whole, [(0, v6.len() as u64)]);
    let archives = [
        data("golden/gpt2_small.v7.memviz"),
        data("gpt2_small.memviz"),
        data("oom_streams.memviz"),
        frag_oom_archive(dir.path()),
        crate::generator::repeated_archive(dir.path(), 2_000_000),
    ];
    for path in archives {
        let bytes = std::fs::read(&path).unwrap();
        let first = Archive::from_memory(&bytes, &path).unwrap().first_frame_ranges();
        let kept: u64 = first.iter().map(|r| r.end - r.start).sum();
        // What a page holds before the rest arrives: the first parts, anything elsewhere.
        let mut other = vec![0x5au8; bytes.len()];
        for r in &first {
            other[r.start as usize..r.end as usize].copy_from_slice(&bytes[r.start as usize..r.end as usize]);
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        // Of a trace of millions of events, a few per cent.
        if bytes.len() > 20 << 20 {
            assert!(kept < bytes.len() as u64 / 10, "{name}: {kept} of {} bytes come first", bytes.len());
        }
        for (w, h) in [(1600, 900), (700, 420)] {
            let ctx = egui::Context::default();
            let mut gpu = Offscreen::new(w, h, ctx.clone()).expect("a wgpu adapter (lavapipe)");
            let mut app = page_viewer();
            app.open_preview(session(&bytes), &ctx);
            let want = settled(&mut gpu, &mut app);
            assert!(app.previewing());
            // The plot shows the trace: elements are drawn.
            let t = app.timeline().unwrap();
            let (_, ids) = gpu.read_ids_of(t);
            let drawn = ids.iter().filter(|&&id| id < u32::MAX - 1).count();
            assert!(drawn > 1000, "{name} at {w}×{h}: {drawn} pixels show an element");

            let mut app = page_viewer();
            app.open_preview(session(&other), &ctx);
            let got = settled(&mut gpu, &mut app);
            let differ = want.iter().zip(&got).filter(|(a, b)| a != b).count();
            assert_eq!(differ, 0, "{name} at {w}×{h}: {differ} bytes of the first frame differ with only its parts");

            // Once the rest is in, the whole archive replaces the preview: the same as opening it,
            // the plot where the preview had it (the panels around it are the same).
            let preview_plot = app.timeline().unwrap().plot.plot_rect;
            app.open_session(session(&bytes), &ctx);
            assert!(!app.previewing());
            let whole = settled(&mut gpu, &mut app);
            let plot = app.timeline().unwrap().plot.plot_rect;
            assert_eq!(preview_plot, plot, "{name} at {w}×{h}: the plot moved when the rest arrived");
            let mut direct = page_viewer();
            direct.open_session(session(&bytes), &ctx);
            assert!(whole == settled(&mut gpu, &mut direct), "{name} at {w}×{h}: the whole archive after its preview");
        }
        eprintln!("{name}: the first frame's parts are {kept} of {} bytes in {} ranges", bytes.len(), first.len());
    }
}

/// A link's view with a pinned allocation (`?element=…&x=…`): the first frame shows the link's
/// range (it cannot find the element, whose columns are not among the first parts), and the
/// allocation is pinned once the rest arrives, the range kept and the plot where it was (the
/// pinned details fill the bottom bar as tall as its hint).
#[test]
fn a_first_frame_shows_a_links_range_and_pins_its_allocation_once_the_rest_arrives() {
    let bytes = std::fs::read(data("gpt2_small.memviz")).unwrap();
    let ctx = egui::Context::default();
    let mut gpu = Offscreen::new(1200, 700, ctx.clone()).expect("a wgpu adapter (lavapipe)");
    let options = || ViewerOptions {
        platform: PlatformRef(Arc::new(Preview)),
        pin: Some(memviz::viewer::tabs::Pin::Element(40)),
        x_range: Some((100.0, 900.0)),
        ..Default::default()
    };
    // Coloured by category: the categories' row is there from the first frame.
    let mut app = ViewerApp::new(ViewerOptions { by_category: true, ..options() });
    app.open_preview(session(&bytes), &ctx);
    settled(&mut gpu, &mut app);
    let preview_plot = app.timeline().unwrap().plot.plot_rect;
    app.open_session(session(&bytes), &ctx);
    settled(&mut gpu, &mut app);
    assert!(app.timeline().unwrap().categories_ready().is_some());
    assert_eq!(app.timeline().unwrap().plot.plot_rect, preview_plot, "coloured by category, the plot moved");

    let mut app = ViewerApp::new(options());
    app.open_preview(session(&bytes), &ctx);
    settled(&mut gpu, &mut app);
    let t = app.timeline().unwrap();
    assert_eq!((t.doc.view.x0, t.doc.view.x1), (100.0, 900.0));
    assert!(t.doc.selection.pinned.is_none(), "nothing is pinned before the elements are here");
    let preview_plot = t.plot.plot_rect;
    app.open_session(session(&bytes), &ctx);
    settled(&mut gpu, &mut app);
    let t = app.timeline().unwrap();
    assert_eq!(t.doc.selection.pinned.map(|p| p.element.0), Some(40));
    assert_eq!((t.doc.view.x0, t.doc.view.x1), (100.0, 900.0));
    assert_eq!(t.plot.plot_rect, preview_plot, "the plot moved when the pinned details arrived");
}

/// What the row under the top bar says (the shape candidates, frees without their alloc), as a
/// browser's web worker sends it back: read back the same; anything else refused.
#[test]
fn the_top_bar_facts_go_through_bytes_unchanged() {
    use memviz::viewer::timeline::TopFacts;
    for name in ["gpt2_small.memviz", "oom_streams.memviz"] {
        let bytes = std::fs::read(data(name)).unwrap();
        let facts = TopFacts::compute(&session(&bytes), memviz::model::DeviceIdx(0));
        let sent = facts.encode();
        assert!(sent.len() > 9, "{name}: a shapes line: {facts:?}");
        assert_eq!(TopFacts::decode(&sent), Some(facts), "{name}");
    }
    // No shapes line, and some frees without their alloc.
    let none = [7, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(TopFacts::decode(&none).map(|f| f.encode()), Some(none.to_vec()));
    for bad in [&b""[..], &[0; 8], &[0; 10], &[0, 0, 0, 0, 0, 0, 0, 0, 2], &[0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff]] {
        assert_eq!(TopFacts::decode(bad), None, "{bad:?}");
    }
}

/// The OOM markers and the private pools, as a browser's web worker sends them back: the same as
/// worked out here, every mark in its place on both axes, every pool's bands and mask.
#[test]
fn oom_markers_and_pools_go_through_bytes_unchanged() {
    use memviz::viewer::{ooms::OomMarks, pools};
    let d = memviz::model::DeviceIdx(0);
    for name in ["frag_oom.memviz", "oom_streams.memviz"] {
        let marks = OomMarks::compute(&session(&std::fs::read(data(name)).unwrap()), d);
        assert!(!marks.marks.is_empty(), "{name} has OOMs");
        let sent = marks.encode();
        assert_eq!(OomMarks::decode(&sent), Some(marks), "{name}");
        assert_eq!(OomMarks::decode(&sent[1..]), None);
    }
    let dir = tempdir();
    let archive = dir.path().join("cudagraph.memviz");
    memviz_ok(["index".as_ref(), data("cudagraph.pickle").as_os_str(), "-o".as_ref(), archive.as_os_str()]);
    let here = pools::compute(&session(&std::fs::read(&archive).unwrap()), d).expect("cudagraph has private pools");
    let sent = pools::encode(Some(&here));
    assert_eq!(pools::decode(&sent), Some(Some(here)));
    assert_eq!(pools::decode(&pools::encode(None)), Some(None));
    assert_eq!(pools::decode(&sent[..sent.len() - 1]), None);
}

/// The annotation lane's spans, as a browser's web worker sends them back: the same placed
/// spans, depth by depth; cut short, refused.
#[test]
fn annotation_spans_go_through_bytes_unchanged() {
    use memviz::analysis::annotations::AnnotationFilter;
    use memviz::viewer::span_marks::SpanMarks;
    let mut spans = 0;
    for name in ["gpt2_small.memviz", "oom_streams.memviz", "compiled.memviz", "frag_oom.memviz"] {
        let marks = SpanMarks::compute(
            &session(&std::fs::read(data(name)).unwrap()),
            memviz::model::DeviceIdx(0),
            &AnnotationFilter::default(),
        );
        spans += marks.depths.iter().map(|d| d.marks.len()).sum::<usize>();
        let sent = marks.encode();
        assert_eq!(SpanMarks::decode(&sent), Some(marks), "{name}");
        assert_eq!(SpanMarks::decode(&sent[..sent.len() - 1]), None, "{name}");
    }
    assert!(spans > 10, "the archives have annotation spans: {spans}");
}

/// A search as a browser's web worker answers it: the matches' ids in allocation order, read back
/// the same as the viewer's own search thread finds them; a text that is no query is refused,
/// as are bytes that are not ids.
#[test]
fn a_searchs_matches_go_through_bytes_unchanged() {
    use memviz::viewer::search::{self, Search};
    let s = session(&std::fs::read(data("gpt2_small.memviz")).unwrap());
    let d = memviz::model::DeviceIdx(0);
    let ctx = egui::Context::default();
    for text in ["forward", "/lin.ar/", "0x7f"] {
        let sent = search::answer(&s, d, text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let mut own = Search::default();
        (own.open, own.text) = (true, text.into());
        for _ in 0..2000 {
            own.update(&s, d, &PlatformRef::default(), &ctx);
            if !own.pending() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(!own.pending() && own.error.is_none(), "{text}: {:?}", own.error);
        assert_eq!(search::read_answer(&sent).as_ref(), Some(&own.matches), "{text}");
        if text == "forward" {
            assert!(own.matches.len() > 10, "{}", own.matches.len());
        }
    }
    assert!(search::answer(&s, d, "/(/").is_err());
    assert_eq!(search::read_answer(&[0; 7]), None);
}
