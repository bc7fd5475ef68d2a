//! `memviz mcp` driven by a real client: the official Python MCP SDK (`mcp` on PyPI), started
//! from `tests/clients/mcp_client.py`. `MEMVIZ_PYTHON` names the interpreter that has it
//! (`.ci/run` makes a venv); without one the test says so and passes, except under CI.

use crate::support::*;

#[test]
fn a_real_mcp_client_lists_and_calls_the_tools() {
    let python = std::env::var("MEMVIZ_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_sdk =
        std::process::Command::new(&python).args(["-c", "import mcp"]).output().is_ok_and(|o| o.status.success());
    if !ready(has_sdk, &format!("the Python MCP SDK ({python}: pip install mcp)")) {
        return;
    }
    let dir = tempdir();
    let ranks = dir.path().join("ranks");
    std::fs::create_dir_all(&ranks).unwrap();
    for r in 0..4 {
        std::fs::copy(data(&format!("ranks/rank{r}.pickle")), ranks.join(format!("rank{r}.pickle"))).unwrap();
    }
    let snapshot = data("gpt2_small.pickle");
    let out = std::process::Command::new(&python)
        .arg(repo().join("tests/clients/mcp_client.py"))
        .args([env!("CARGO_BIN_EXE_memviz").as_ref(), snapshot.as_os_str(), ranks.as_os_str()])
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["server"], "memviz");
    // Every tool describes its answer (outputSchema), and every answer came back as structured
    // content the client checked against it.
    assert_eq!(seen["output_schemas"], seen["tools"]);
    assert_eq!(seen["answered"], serde_json::json!(["range", "diff", "segments", "oom", "at"]));
    let tools: Vec<&str> = seen["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    for t in ["stats", "at", "range", "steps", "diff", "find", "segments", "oom", "ranks"] {
        assert!(tools.contains(&t), "{tools:?}");
    }
    // The same answers as the command line's --json.
    let stats: serde_json::Value =
        serde_json::from_slice(&memviz_ok(["stats".as_ref(), snapshot.as_os_str(), "--json".as_ref()])).unwrap();
    assert_eq!(seen["stats_peak"], stats["devices"][0]["peak"]["bytes"]);
    assert_eq!(seen["at_total"], stats["devices"][0]["peak"]["bytes"]);
    assert!(seen["at_categories"].as_array().unwrap().iter().any(|c| c == "optimizer_state"));
    assert_eq!(seen["find_count"], 104);
    assert_eq!(seen["steps"], 4);
    assert_eq!(seen["outliers"], serde_json::json!([3]));
    // Errors are tool errors with the command's one line, and the server answers on.
    for key in ["bad_action", "missing_file", "bad_range"] {
        let e = &seen[key];
        assert_eq!(e[0], true, "{key}: {e}");
        let text = e[1].as_str().unwrap();
        assert!(!text.is_empty() && !text.contains('\n'), "{key}: {text:?}");
    }
    assert!(seen["bad_action"][1].as_str().unwrap().contains("out of range"));
    assert_eq!(seen["after_errors"], stats["devices"][0]["peak"]["bytes"]);
}

/// Lines that are not JSON-RPC requests get the JSON-RPC errors on the server's own output, one
/// whole line each, and the server answers on (no SDK needed: raw lines on its standard input).
#[test]
fn malformed_requests_get_json_rpc_errors_and_the_server_answers_on() {
    use std::io::{BufRead, Write};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_memviz"))
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut lines: Vec<Vec<u8>> = vec![
        b"this is not json".to_vec(),
        vec![0xff, 0xfe, b'{', b'}'],
        b"[1, 2, 3]".to_vec(),
        br#"{"jsonrpc": "1.0", "id": 7, "method": "tools/list"}"#.to_vec(),
    ];
    let mut long = br#"{"jsonrpc": "2.0", "id": 8, "method": "x", "params": ""#.to_vec();
    long.resize(memviz::commands::mcp::MAX_REQUEST + 10, b'a');
    lines.push(long);
    lines.push(
        br#"{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}"#
            .to_vec(),
    );
    let writer = std::thread::Builder::new()
        .name("mcp-test-input".into())
        .spawn(move || {
            for l in lines {
                input.write_all(&l).unwrap();
                input.write_all(b"\n").unwrap();
            }
            input
        })
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut replies = Vec::new();
    for _ in 0..6 {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        replies.push(serde_json::from_str::<serde_json::Value>(&line).unwrap_or_else(|e| panic!("{e}: {line:?}")));
    }
    drop(writer.join().unwrap());
    let codes: Vec<_> = replies[..5].iter().map(|r| r["error"]["code"].as_i64()).collect();
    assert_eq!(codes, [Some(-32700), Some(-32700), Some(-32600), Some(-32600), Some(-32600)], "{replies:?}");
    assert_eq!(replies[3]["id"], 7, "the id of a request that is not JSON-RPC 2.0 is kept");
    assert_eq!(replies[5]["id"], 1);
    assert_eq!(replies[5]["result"]["serverInfo"]["name"], "memviz", "{}", replies[5]);
    assert!(child.wait().unwrap().success(), "exits 0 once its input is closed");
}
