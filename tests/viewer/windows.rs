//! The `open` command: a screenshot, and a real window under Xvfb.

#[allow(unused_imports)]
use super::*;

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
