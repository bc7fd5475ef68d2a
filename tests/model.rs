//! Model-aware shapes (`--model`, the hub fetch), annotation filtering and `--max-entries`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use memviz::layout::{Checkpoints, Layout};
use memviz::lod::raster::{drawn_stack, largest};

use crate::support::*;

/// The gpt2_small fixture's model: 4 layers × 256, vocabulary 8192 (see record_snapshots.py).
const GPT2_SMALL_CONFIG: &str = r#"{"model_type": "gpt2", "n_embd": 256, "n_head": 8, "n_layer": 4, "vocab_size": 8192, "n_positions": 256, "n_inner": null}"#;

/// A one-shot-per-connection HTTP server on 127.0.0.1 that records request heads and answers
/// `config.json` for any path ending in it.
struct Hub {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

fn hub() -> Hub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    let server = std::thread::Builder::new().name("test-hub".into()).spawn(move || {
        for stream in listener.incoming().take(16) {
            let Ok(mut stream) = stream else { continue };
            let mut head = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let ok = head.lines().next().is_some_and(|l| l.contains("/org/tiny-gpt2/resolve/main/config.json"));
            seen.lock().unwrap().push(head);
            let (status, body) = if ok { ("200 OK", GPT2_SMALL_CONFIG) } else { ("404 Not Found", "{}") };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    server.expect("the test hub's thread starts");
    Hub { port, requests }
}

fn stats_with_model(cache: &std::path::Path, endpoint: &str, token: Option<&str>) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"));
    cmd.env("MEMVIZ_CACHE_DIR", cache).env("HF_ENDPOINT", endpoint).env("HOME", cache).env_remove("HF_HOME");
    match token {
        Some(t) => cmd.env("HF_TOKEN", t),
        None => cmd.env_remove("HF_TOKEN"),
    };
    cmd.args(["--no-cache", "stats", "--json", "--model", "org/tiny-gpt2"]).arg(data("gpt2_small.pickle"));
    cmd.output().unwrap()
}

#[test]
fn hub_fetch_sends_the_token_caches_and_explains_offline() {
    let server = hub();
    let dir = tempdir();
    let endpoint = format!("http://127.0.0.1:{}", server.port);
    let secret = "hf_testtoken_123";

    let first = stats_with_model(dir.path(), &endpoint, Some(secret));
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].to_lowercase().contains(&format!("authorization: bearer {secret}")), "{}", requests[0]);
    let out = String::from_utf8_lossy(&first.stdout);
    assert!(
        !out.contains(secret) && !String::from_utf8_lossy(&first.stderr).contains(secret),
        "the token is never printed"
    );
    let s: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(s["model"], "h=256 i=1024 v=8192 heads=8 head_dim=32 ctx=256");
    // The 8 MiB allocations at the peak are the tied embedding (and its gradient / Adam states).
    let top = s["devices"][0]["top_at_peak"].as_array().unwrap();
    let eight = top.iter().find(|a| a["size"] == 8 * 1024 * 1024).expect("an 8 MiB allocation at the peak");
    assert_eq!(eight["shapes"][0], "v×h fp32");

    // Second run: served from the cache, the server is not asked again.
    let second = stats_with_model(dir.path(), &endpoint, Some(secret));
    assert!(second.status.success());
    assert_eq!(server.requests.lock().unwrap().len(), 1, "cache hit");
    assert_eq!(first.stdout, second.stdout);

    // Offline (nothing listens there) and no cache: a clear one-line error, exit 1.
    let empty = tempdir();
    let offline = stats_with_model(empty.path(), "http://127.0.0.1:9", None);
    let err = String::from_utf8_lossy(&offline.stderr);
    assert_eq!(offline.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot fetch org/tiny-gpt2/config.json") && err.contains("offline?"), "{err}");
}

#[test]
fn local_config_and_vocab_override() {
    let dir = tempdir();
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, GPT2_SMALL_CONFIG).unwrap();
    // A folder holding config.json works too; --vocab-size replaces the config's.
    let out = memviz_ok([
        "stats".as_ref(),
        "--json".as_ref(),
        "--model".as_ref(),
        dir.path().as_os_str(),
        "--vocab-size".as_ref(),
        "8193".as_ref(),
        data("gpt2_small.pickle").as_os_str(),
    ]);
    let s: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert!(s["model"].as_str().unwrap().contains("v=8193"), "{}", s["model"]);
    assert!(s["shape_candidates"].is_null());
    let without = memviz_ok(["stats".as_ref(), "--json".as_ref(), data("gpt2_small.pickle").as_os_str()]);
    let w: serde_json::Value = serde_json::from_slice(&without).unwrap();
    // Its config (n_embd 256, n_inner 4·256, vocab 8192), from the weights' sizes — not h=512,
    // which its activations suggest (1,024 tokens × 256 fp32 is 512² × 4 B).
    let c = &w["shape_candidates"];
    assert_eq!((c["h"].as_u64(), c["i"].as_u64(), c["v"].as_u64()), (Some(256), Some(1024), Some(8192)), "{c}");
    // Candidates that explain little are not shown: frag_oom's 3–4 MiB tensors.
    let frag = memviz_ok(["stats".as_ref(), "--json".as_ref(), data("frag_oom.pickle").as_os_str()]);
    let f: serde_json::Value = serde_json::from_slice(&frag).unwrap();
    assert_eq!(
        f["shape_candidates"],
        serde_json::json!({"h": null, "i": null, "v": null}),
        "{}",
        f["shape_candidates"]
    );
}

/// A snapshot with PyTorch-internal annotations around the peak and a user one.
fn annotated_snapshot(dir: &std::path::Path) -> std::path::PathBuf {
    let ann =
        |name: &str, stage: &str, t: i64| serde_json::json!({"name": name, "stage": stage, "device": 0, "time_us": t});
    let ev = |action: &str, addr: u64, size: u64, t: i64| serde_json::json!({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t});
    let snap = serde_json::json!({
        "segments": [],
        "device_traces": [[ev("alloc", 4096, 1024, 10), ev("alloc", 8192, 2048, 20), ev("free_completed", 8192, 2048, 30)]],
        "external_annotations": [
            ann("## step 0 ##", "START", 5),
            ann("## Call CompiledFxGraph f3ab ##", "START", 15),
            ann("pad_mm_benchmark", "START", 16),
            ann("pad_mm_benchmark", "END", 25),
            ann("## Call CompiledFxGraph f3ab ##", "END", 26),
            ann("## step 0 ##", "END", 40),
        ],
    });
    let path = dir.join("annotated.json");
    std::fs::write(&path, snap.to_string()).unwrap();
    path
}

#[test]
fn internal_annotations_are_hidden_unless_asked() {
    let dir = tempdir();
    let snap = annotated_snapshot(dir.path());
    let during = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<std::ffi::OsString> = vec!["stats".into(), "--json".into()];
        args.extend(extra.iter().map(|a| a.into()));
        args.push(snap.clone().into());
        let s: serde_json::Value = serde_json::from_slice(&memviz_ok(&args)).unwrap();
        s["devices"][0]["peak"]["annotation"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(during(&[]), vec!["## step 0 ##"]);
    assert_eq!(
        during(&["--all-annotations"]),
        vec!["## step 0 ##", "## Call CompiledFxGraph f3ab ##", "pad_mm_benchmark"]
    );
    assert_eq!(during(&["--annotation-filter", "*Compiled*##"]), vec!["## Call CompiledFxGraph f3ab ##"]);
    assert_eq!(during(&["--annotation-filter", "pad_mm"]), vec!["pad_mm_benchmark"]);

    // The real fixture's spans are user annotations: all kept by default.
    let s: serde_json::Value = serde_json::from_slice(&memviz_ok([
        "stats".as_ref(),
        "--json".as_ref(),
        data("gpt2_small.pickle").as_os_str(),
    ]))
    .unwrap();
    let a = s["devices"][0]["peak"]["annotation"].as_array().unwrap();
    assert!(a[0].as_str().unwrap().starts_with("## step "), "{a:?}");
}

/// `--max-entries N`: the band plus the drawn elements add up to the layout's total at every
/// action, and at most N elements are drawn.
#[test]
fn max_entries_band_totals_equal_the_layout_totals() {
    let (snap, _) = memviz::ingest::read_path(&data("gpt2_small.pickle")).unwrap();
    let layout = Layout::build(&snap, memviz::model::DeviceId(0));
    let view = layout.view();
    let cps = Checkpoints::build(view);
    let golden = json_file(&data("gpt2_small.layout.json"));
    let totals = golden["devices"][0]["totals"].as_array().unwrap();
    for n in [1, 10, 100, 1000] {
        let keep = largest(view.elements.size, n);
        assert_eq!(keep.iter().filter(|&&k| k).count(), n);
        let mut replay = view.replay();
        let mut k = -1i64;
        loop {
            if k % 7 == 0 || k == -1 {
                let mut stack = cps.view().lazy_stack_at(view, (k + 1) as usize);
                let (band, drawn) =
                    drawn_stack(&mut stack, view.elements.size, Some(memviz::lod::raster::Band::keep(&keep)));
                let drawn_total: u64 = drawn.iter().map(|&(id, _)| view.elements.size[id as usize]).sum();
                let expect = if k < 0 { layout.initial_total } else { totals[k as usize].as_u64().unwrap() };
                assert_eq!(band + drawn_total, expect, "n={n} action {k}");
                assert!(drawn.iter().all(|&(id, _)| keep[id as usize]));
                assert!(drawn.first().is_none_or(|&(_, off)| off == band), "drawn elements start above the band");
            }
            if replay.step().is_none() {
                break;
            }
            k += 1;
        }
    }
}
