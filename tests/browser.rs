//! The viewer in a real browser: `memviz serve` serves the page (web/index.html and its wasm) and a
//! bundled archive, headless Chromium (software WebGL2, no GPU) opens it, and the screenshot
//! shows the timeline drawn. Needs `web/build.sh` run
//! and Debian's `chromium`; CI provides both, elsewhere the test says what is missing and passes.

use std::path::Path;

use crate::support::*;

/// `memviz serve` over the golden archives with the page (`MEMVIZ_WEB_DIR`), its cache in `dir`,
/// and the page's URL on gpt2_small's archive.
fn serve_page(dir: &Path) -> (crate::serve::Server, String) {
    let (web, golden) = (repo().join("web"), repo().join("tests/data/golden"));
    let server = crate::serve::start_with(&[golden.to_str().unwrap()], &dir.join("cache"), &[("MEMVIZ_WEB_DIR", &web)]);
    let archive = format!("/archive/0/gpt2_small.v{}.memviz", memviz_format::FORMAT_VERSION);
    let url = format!("http://{}/web/index.html?archive={archive}", server.addr);
    (server, url)
}

/// Whether an sRGB pixel is the viewer's background (or near it).
fn background(p: &[u8]) -> bool {
    p[0] < 60 && p[1] < 60 && p[2] < 70
}

#[test]
fn the_viewer_draws_an_archive_in_headless_chromium() {
    let glue = repo().join("web/pkg/memviz_web.js");
    let chromium = Path::new("/usr/bin/chromium");
    if !glue.exists() || !chromium.exists() {
        assert!(std::env::var_os("CI").is_none(), "CI must run web/build.sh and install chromium");
        eprintln!("skipped: web/pkg (web/build.sh) or /usr/bin/chromium missing");
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
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut rgba = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut rgba).unwrap();
    let channels = info.color_type.samples();
    let (w, h) = (info.width as usize, info.height as usize);
    assert_eq!((w, h), (1200, 700));
    // The plot's lower band (the long-lived allocations of every step): drawn, not background.
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
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(drawn * 10 > all * 8, "{drawn} of {all} pixels drawn in the plot: {stderr}");
    // Elements in their sites' colours, not one blank page colour.
    assert!(colours.len() >= 4, "{} colours in the plot: {stderr}", colours.len());
}

/// Whether Node.js can load playwright-core (`npm install playwright-core`; CI puts it on
/// `NODE_PATH`).
fn has_playwright() -> bool {
    std::process::Command::new("node")
        .args(["-e", "require('playwright-core')"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_click_in_the_browser_pins_what_the_viewer_picks_there() {
    if !repo().join("web/pkg/memviz_web.js").exists() || !Path::new("/usr/bin/chromium").exists() || !has_playwright() {
        assert!(std::env::var_os("CI").is_none(), "CI must run web/build.sh, install chromium and playwright-core");
        eprintln!("skipped: web/pkg, /usr/bin/chromium or playwright-core (node) missing");
        return;
    }
    let dir = tempdir();
    let (_server, url) = serve_page(dir.path());
    let out = std::process::Command::new("node")
        .arg(repo().join("tests/clients/browser_client.js"))
        .arg(&url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    assert!(seen["under"].is_u64(), "an element low in the plot: {seen}");
    assert_eq!(seen["pinned"], seen["under"], "the click pinned what the viewer picks there: {seen}");
    assert!(seen["after_empty_click"].is_null(), "a click above the data unpins: {seen}");
}
