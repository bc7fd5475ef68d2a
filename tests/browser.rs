//! The viewer in a real browser: `memviz serve` serves the page (web/index.html and its wasm, embedded
//! in the binary) and a bundled archive, headless Chromium (software WebGL2, no GPU) opens it, and
//! the screenshot shows the timeline drawn; a click pins, a key switches the view, the copied link
//! reopens it, and the page `memviz export html` writes draws the same pixels from `file://` — in
//! Firefox too. Needs `web/build.sh` run before memviz is built, Debian's `chromium` and
//! `firefox-esr`, and playwright-core / puppeteer-core from npm; CI provides them, elsewhere the
//! test says what is missing and passes.

use std::path::Path;

use crate::support::*;

/// One browser at a time: each test's browser starts many threads (SwiftShader's, Mesa's), and
/// two side by side on a 2-core machine can starve one past its budget.
fn one_browser() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `memviz serve` over the golden archives (the page it embeds), its cache in `dir`, and the
/// page's URL on gpt2_small's archive.
fn serve_page(dir: &Path) -> (crate::serve::Server, String) {
    let golden = repo().join("tests/data/golden");
    let server = crate::serve::start_with(&[golden.to_str().unwrap()], &dir.join("cache"), &[]);
    let archive = format!("/archive/0/gpt2_small.v{}.memviz", memviz_format::FORMAT_VERSION);
    let url = format!("http://{}/web/index.html?archive={archive}", server.addr);
    (server, url)
}

/// Whether an sRGB pixel is the viewer's background (or near it).
fn background(p: &[u8]) -> bool {
    p[0] < 60 && p[1] < 60 && p[2] < 70
}

/// A PNG's size, channels a pixel and pixels.
fn read_png(path: &Path) -> (usize, usize, usize, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut rgba = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut rgba).unwrap();
    (info.width as usize, info.height as usize, info.color_type.samples(), rgba)
}

#[test]
fn the_viewer_draws_an_archive_in_headless_chromium() {
    let _one = one_browser();
    let chromium = Path::new("/usr/bin/chromium");
    if !ready(has_page() && chromium.exists(), "web/pkg (web/build.sh) and /usr/bin/chromium") {
        return;
    }
    let dir = tempdir();
    let (_server, url) = serve_page(dir.path());
    let shot = dir.path().join("page.png");
    let chrome = |what: &str, profile: &str| {
        std::process::Command::new(chromium)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader"])
            .args(["--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"])
            .arg(format!("--user-data-dir={}", dir.path().join(profile).display()))
            .args(["--window-size=1200,700", "--virtual-time-budget=20000", what])
            .arg(&url)
            .output()
            .unwrap()
    };
    // The page says when the viewer drew its first frame (what the page asks of the wasm works).
    let dom = chrome("--dump-dom", "profile-dom");
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("<title>memviz: first frame drawn</title>"), "{}", &dom[..dom.len().min(400)]);
    let out = chrome(&format!("--screenshot={}", shot.display()), "profile");
    assert!(shot.exists(), "no screenshot: {}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_plot_drawn(&shot, &stderr);
}

/// The screenshot at `shot` (1200×700) shows gpt2_small's timeline: the plot's lower band (the
/// long-lived allocations of every step) drawn, not background, in several sites' colours.
fn assert_plot_drawn(shot: &Path, context: &str) {
    let (w, h, channels, rgba) = read_png(shot);
    assert_eq!((w, h), (1200, 700));
    let (mut drawn, mut all) = (0, 0);
    let mut colours = std::collections::BTreeSet::new();
    for y in (h * 62 / 100)..(h * 80 / 100) {
        for x in (w / 10)..(w * 9 / 10) {
            let i = (y * w + x) * channels;
            all += 1;
            if !background(&rgba[i..i + 3]) {
                drawn += 1;
                colours.insert([rgba[i], rgba[i + 1], rgba[i + 2]]);
            }
        }
    }
    assert!(drawn * 10 > all * 8, "{drawn} of {all} pixels drawn in the plot: {context}");
    // Elements in their sites' colours, not one blank page colour.
    assert!(colours.len() >= 4, "{} colours in the plot: {context}", colours.len());
}

/// What the GPU draws at each pixel a client read (its id buffer: `tests/clients/drawn_ids.js`)
/// is what the viewer picks there; elements and empty pixels among them.
fn assert_drawn_is_picked(seen: &serde_json::Value) {
    let drawn = seen["drawn"].as_array().unwrap_or_else(|| panic!("no id buffer read: {seen}"));
    for d in drawn {
        let id = d["drawn"].as_u64().unwrap_or_else(|| panic!("the id buffer read back: {d}"));
        let picked = if id == u64::from(memviz::lod::raster::EMPTY) { serde_json::Value::Null } else { id.into() };
        assert_eq!(d["picked"], picked, "the pick equals the drawn texel: {d}");
    }
    let elements = drawn.iter().filter(|d| d["picked"].is_u64()).count();
    assert!(elements >= 3 && elements < drawn.len(), "elements and empty pixels among those read: {seen}");
}

/// Whether web/build.sh made the page's glue.
fn has_page() -> bool {
    repo().join("web/pkg/memviz_web.js").exists()
}

/// [`ready`] for a test that drives Chromium with playwright-core (`npm install
/// playwright-core`; CI puts it on `NODE_PATH`).
fn playwright_ready() -> bool {
    let have = has_page() && Path::new("/usr/bin/chromium").exists() && node_has("playwright-core");
    ready(have, "web/pkg (web/build.sh), /usr/bin/chromium and playwright-core (node)")
}

#[test]
fn a_click_pins_a_key_switches_the_view_a_link_reopens_it_and_an_exported_page_draws_the_same() {
    let _one = one_browser();
    if !playwright_ready() {
        return;
    }
    let dir = tempdir();
    let (_server, url) = serve_page(dir.path());
    let golden = data(&format!("golden/gpt2_small.v{}.memviz", memviz_format::FORMAT_VERSION));
    let page = dir.path().join("gpt2_small.html");
    let out = memviz(["export".as_ref(), "html".as_ref(), golden.as_os_str(), "-o".as_ref(), page.as_os_str()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let exported = format!("file://{}", page.display());
    let seen = client("browser_client.js", &[url.as_ref(), exported.as_ref(), dir.path().as_os_str()]);
    assert!(seen["under"].is_u64(), "an element low in the plot: {seen}");
    assert_drawn_is_picked(&seen);
    assert_eq!(seen["pinned"], seen["under"], "the click pinned what the viewer picks there: {seen}");
    assert!(seen["after_empty_click"].is_null(), "a click above the data unpins: {seen}");

    // Key 2: the pools view, the element still pinned; the copied link opens the same.
    assert_eq!(seen["switched"]["view"], "pools", "{seen}");
    assert_eq!(seen["switched"]["pinned"], seen["under"], "{seen}");
    let answered: Vec<&str> = seen["answered"].as_array().unwrap().iter().filter_map(|j| j.as_str()).collect();
    assert!(answered.contains(&"pools") && answered.contains(&"oom marks"), "the worker answered: {seen}");
    let link = seen["link"].as_str().unwrap();
    let (page_url, archive) = url.split_once('?').unwrap();
    assert!(link.starts_with(&format!("{page_url}?{}", archive.replace('/', "%2F"))), "{link}");
    assert!(link.contains("&view=pools&") && link.contains("&element="), "{link}");
    assert_eq!(seen["reopened"], seen["switched"], "the link reopens the same view: {seen}");
    assert_eq!(seen["address"], seen["link"], "the address bar says the view: {seen}");

    // The exported page, from file://: the same view and the same pixels as the served one.
    assert_eq!(seen["exported"]["view"], "timeline", "{seen}");
    assert_eq!(seen["exported_under"], seen["under"], "{seen}");
    let (a, b) = (read_png(&dir.path().join("exported.png")), read_png(&dir.path().join("served.png")));
    assert_eq!((a.0, a.1), (b.0, b.1));
    let differ = a.3.chunks(a.2).zip(b.3.chunks(b.2)).filter(|(p, q)| p[..3] != q[..3]).count();
    assert!(
        differ * 1000 < a.0 * a.1,
        "{differ} of {} pixels differ between the exported and the served page",
        a.0 * a.1
    );
}

/// What the Node.js client `tests/clients/SCRIPT` saw, given `args`: the JSON it prints, with no
/// page error.
fn client(script: &str, args: &[&std::ffi::OsStr]) -> serde_json::Value {
    let out =
        std::process::Command::new("node").arg(repo().join("tests/clients").join(script)).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    seen
}

/// Whether Node.js can load `module` (CI puts npm's on `NODE_PATH`).
fn node_has(module: &str) -> bool {
    std::process::Command::new("node")
        .args(["-e", &format!("require('{module}')")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The exported page opens from `file://` in Firefox too (Debian's firefox-esr under Xvfb, driven
/// by puppeteer-core): the timeline drawn, and the GPU's id buffer equal to the viewer's picks.
#[test]
fn an_exported_page_draws_in_firefox_from_file() {
    let _one = one_browser();
    let firefox = Path::new("/usr/bin/firefox-esr");
    let xvfb = Path::new("/usr/bin/xvfb-run");
    let have = has_page() && firefox.exists() && xvfb.exists() && node_has("puppeteer-core");
    if !ready(have, "web/pkg (web/build.sh), /usr/bin/firefox-esr, xvfb-run and puppeteer-core (node)") {
        return;
    }
    let dir = tempdir();
    let golden = data(&format!("golden/gpt2_small.v{}.memviz", memviz_format::FORMAT_VERSION));
    let page = dir.path().join("gpt2_small.html");
    let out = memviz(["export".as_ref(), "html".as_ref(), golden.as_os_str(), "-o".as_ref(), page.as_os_str()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = std::process::Command::new(xvfb)
        .args(["-a", "-s", "-screen 0 1280x800x24", "node"])
        .arg(repo().join("tests/clients/firefox_client.js"))
        .arg(format!("file://{}", page.display()))
        .arg(dir.path())
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["view"], "timeline", "{seen}");
    assert_drawn_is_picked(&seen);
    assert_plot_drawn(&dir.path().join("firefox.png"), &format!("{seen}"));
}

#[test]
fn export_html_writes_one_page_with_the_snapshots_archive_inline() {
    if !ready(repo().join("web/pkg/memviz_web_bg.wasm.gz").exists(), "web/pkg (web/build.sh, before memviz is built)") {
        return;
    }
    let dir = tempdir();
    let snapshot = data("gpt2_small.pickle");
    // A snapshot is indexed first; the page is named after it, in the current folder.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"))
        .args(["--no-cache", "export", "html"])
        .arg(&snapshot)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(dir.path().join("gpt2_small.html")).unwrap();
    let start = page.find("id=\"memviz-archive\" data-name=\"gpt2_small.pickle\">").expect("the archive inline");
    let text = &page[start..];
    let b64 = &text[text.find('>').unwrap() + 1..text.find("</script>").unwrap()];
    let archive = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64).unwrap();
    let made = dir.path().join("made.memviz");
    memviz_ok(["index".as_ref(), snapshot.as_os_str(), "-o".as_ref(), made.as_os_str(), "--no-cache".as_ref()]);
    let header = memviz_format::HEADER_LEN;
    assert!(archive[header..] == std::fs::read(&made).unwrap()[header..], "the page's archive is the index's");
    assert!(!page.contains("./pkg/memviz_web.js"), "the glue is inline, not imported");
}

#[test]
fn a_folder_of_ranks_opens_as_the_rank_strip_in_the_browser() {
    let _one = one_browser();
    if !playwright_ready() {
        return;
    }
    let dir = tempdir();
    let ranks = repo().join("tests/data/ranks");
    let server = crate::serve::start_with(&[ranks.to_str().unwrap()], &dir.path().join("cache"), &[]);
    let seen = client("browser_job.js", &[format!("http://{}/", server.addr).as_ref()]);
    // The listing's job: the page on the folder's four snapshots, each indexed on the server.
    let link = seen["job_links"][0].as_str().unwrap();
    assert_eq!(link.matches("archive=").count(), 4, "{link}");
    assert_eq!((&seen["ranks"], &seen["loaded"], &seen["cells"]), (&4.into(), &4.into(), &4.into()), "{seen}");
    assert_eq!(seen["screen"], "strip", "{seen}");
    assert_eq!(seen["strip_address"], link, "the strip's address is the job's: {seen}");
    // A click on a rank's cell opens it; its link and the address bar name that archive alone.
    let opened = &seen["opened"];
    assert!(opened["screen"].as_str().unwrap().ends_with("/rank1.pickle"), "{seen}");
    assert_eq!(opened["view"], "timeline", "{seen}");
    let rank_link = opened["link"].as_str().unwrap();
    assert_eq!(rank_link.matches("archive=").count(), 1, "{rank_link}");
    assert!(rank_link.contains("rank1.pickle") && rank_link.contains("&view=timeline"), "{rank_link}");
    assert_eq!(opened["address"], opened["link"], "{seen}");
    // Two Shift+clicks: the two ranks compared.
    assert_eq!(seen["compared"], "compare", "{seen}");
}

/// An archive of millions of events: the page fetches its first frame's parts by Range requests
/// (a few per cent of it), draws them, then the whole archive on the same view — where a click
/// pins and the GPU draws what the viewer picks; coloured by category, its categories come from
/// the page's web worker, as do a search's matches.
#[test]
fn a_large_archive_draws_its_first_parts_then_the_whole() {
    let _one = one_browser();
    if !playwright_ready() {
        return;
    }
    let dir = tempdir();
    let served = dir.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    let archive = crate::generator::repeated_archive(&served, 2_000_000);
    std::fs::remove_file(served.join("repeated.pickle")).unwrap();
    let size = std::fs::metadata(&archive).unwrap().len();
    let server = crate::serve::start_with(&[served.to_str().unwrap()], &dir.path().join("cache"), &[]);
    let url = format!("http://{}/web/index.html?archive=/archive/0/repeated.memviz", server.addr);
    let seen = client("browser_preview.js", &[url.as_ref()]);
    assert_eq!(seen["previewing"], true, "the first frame is the preview: {seen}");

    // Before the first frame: where the parts lie, then those bytes by Range requests alone.
    let first = memviz::archive::Archive::from_memory(&std::fs::read(&archive).unwrap(), &archive)
        .unwrap()
        .first_frame_ranges();
    let want: u64 = first.iter().map(|r| r.end - r.start).sum();
    assert_eq!(seen["preview_bytes"], want, "{seen}");
    assert!(want * 10 < size, "{want} of {size} bytes first");
    let before = seen["before_first_frame"].as_array().unwrap();
    assert!(before[0]["url"].as_str().unwrap().ends_with("repeated.memviz?parts"), "{seen}");
    let mut ranges: Vec<(u64, u64)> = before[1..]
        .iter()
        .map(|r| {
            let range =
                r["range"].as_str().unwrap_or_else(|| panic!("a request without a Range before the first frame: {r}"));
            let (a, b) = range.strip_prefix("bytes=").unwrap().split_once('-').unwrap();
            (a.parse().unwrap(), b.parse::<u64>().unwrap() + 1)
        })
        .collect();
    ranges.sort();
    let asked: Vec<(u64, u64)> = first.iter().map(|r| (r.start, r.end)).collect();
    assert_eq!(ranges, asked, "the first frame's parts, each once");

    // Then the whole archive, on the same view, the plot where the preview had it: the GPU draws
    // what the viewer picks; a click pins.
    assert_eq!((&seen["after"], &seen["view"]), (&false.into(), &"timeline".into()), "{seen}");
    assert_eq!(seen["preview_plot"], seen["plot"], "the plot moved when the rest arrived: {seen}");
    assert_drawn_is_picked(&seen);
    assert!(seen["under"].is_u64() && seen["pinned"] == seen["under"], "{seen}");

    // Coloured by category: the categories worked out in the page's web worker, the same as here.
    let session = memviz::file::open_session(&archive).unwrap();
    let here = memviz::viewer::categories::DeviceCategories::compute(&session, memviz::model::DeviceIdx(0));
    assert_eq!(seen["categories"], u64::from(here.present), "{seen}");
    // The worker answered the categories, the facts under the top bar (the shape candidates), the
    // OOM markers and the annotation lane's spans.
    let answered: Vec<&str> = seen["offloaded"].as_array().unwrap().iter().filter_map(|j| j.as_str()).collect();
    for job in ["categories", "top facts", "oom marks", "annotation spans", "search"] {
        assert!(answered.contains(&job), "the worker answered no {job}: {seen}");
    }
    // A search typed in the page: the worker's matches, as many as found here.
    let here = memviz::viewer::search::answer(&session, memviz::model::DeviceIdx(0), "forward").unwrap();
    assert_eq!(seen["search_matches"], here.len() as u64 / 4, "{seen}");
    assert!(here.len() > 4 * 1000, "the search finds matches: {}", here.len() / 4);
}
