//! `memviz mcp`: a Model Context Protocol server over stdio (the official Rust SDK, `rmcp`)
//! whose tools are memviz's answers. A tool takes the command's arguments by name and returns
//! exactly what the command prints with `--json`: the call is turned into the command line,
//! parsed by the same clap definitions (so it is checked the same way) and run with standard
//! output captured — stdout is the transport. Archives opened by one call stay mapped for the
//! next (while the file is unchanged). A failure is a tool error with the command's one-line
//! message; a call never takes the server down.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};

/// One tool: the command, its positional arguments, and its options (name, JSON type, what).
struct Spec {
    name: &'static str,
    description: &'static str,
    positional: &'static [(&'static str, &'static str, &'static str)],
    options: &'static [(&'static str, &'static str, &'static str)],
}

const DEVICE: (&str, &str, &str) = ("device", "string", "only this device (an ordinal, or host)");
const CATEGORIES: (&str, &str, &str) = ("categories", "string", "a TOML file of your own category rules, tried first");
const INPUT: (&str, &str, &str) = ("input", "string", "a snapshot (pickle, .gz, .zst, JSON) or a .memviz archive");

const STACKS: (&str, &str, &str) =
    ("stacks", "boolean", "each site's whole stack (innermost first, full paths) as `frames`");

const TOOLS: &[Spec] = &[
    Spec {
        name: "stats",
        description: "What happened on each device: events, the peak (with its annotations and category breakdown), reserved memory, OOMs, the largest live allocations at the peak.",
        positional: &[INPUT],
        options: &[CATEGORIES],
    },
    Spec {
        name: "at",
        description: "What is live at one instant (give one of action, time, peak, end): total and a table by site, frame, annotation, size, stream, pool, compile_context, metadata or category; list: every live allocation.",
        positional: &[INPUT],
        options: &[
            ("action", "string", "right after this action (-1: before the first; last)"),
            ("time", "string", "at this time since the snapshot's start, with its unit: 686.213ms, 1.5s"),
            ("peak", "boolean", "at each device's peak"),
            ("end", "boolean", "after the last action"),
            ("group_by", "string", "site, frame, annotation, size, stream, pool, compile_context, metadata, category"),
            ("list", "boolean", "list every live allocation with addr, size, site and category"),
            STACKS,
            DEVICE,
            CATEGORIES,
        ],
    },
    Spec {
        name: "range",
        description: "What actions A..B allocated, freed and left live (leak candidates by site, by category).",
        positional: &[INPUT, ("range", "string", "actions A..B (100..200, ..500, 1000..)")],
        options: &[DEVICE, CATEGORIES],
    },
    Spec {
        name: "steps",
        description: "Per training step (found from spans, the optimizer's marks or the trace's loop, or annotation): peak, net growth, retained memory; the warm-up, steady growth and the sites that keep memory.",
        positional: &[INPUT],
        options: &[
            ("annotation", "string", "the steps' span pattern (default: the steps memviz finds)"),
            DEVICE,
            CATEGORIES,
        ],
    },
    Spec {
        name: "diff",
        description: "Two snapshots compared: peaks, what is live at each peak by category and by allocation site, sites new or gone.",
        positional: &[("a", "string", "the baseline"), ("b", "string", "the one compared with it")],
        options: &[
            ("threshold", "number", "say `regressed` when B's peak is more than this many percent over A's"),
            DEVICE,
            ("device_b", "string", "B's device to compare with A's device"),
            STACKS,
            CATEGORIES,
        ],
    },
    Spec {
        name: "find",
        description: "Allocations that ever covered an address (hex), or whose stack has a frame matching a text (substring, or /regex/). Give addr or frame.",
        positional: &[INPUT],
        options: &[("addr", "string", "an address, hex"), ("frame", "string", "frame text or /regex/"), STACKS, DEVICE],
    },
    Spec {
        name: "segments",
        description: "The caching allocator's memory map (segments and blocks) at one instant (give one of event, action, time, oom, end), with fragmentation figures.",
        positional: &[INPUT],
        options: &[
            ("event", "integer", "after this raw trace event (-1: before the first)"),
            ("action", "string", "after the event behind this action"),
            ("time", "string", "at this time since the snapshot's start"),
            ("oom", "integer", "just before the N-th OOM event (0: the last)"),
            ("end", "boolean", "after the last event"),
            DEVICE,
        ],
    },
    Spec {
        name: "oom",
        description: "Why each out-of-memory happened: the request, what was free, fragmentation, the verdict.",
        positional: &[INPUT],
        options: &[STACKS, DEVICE],
    },
    Spec {
        name: "ranks",
        description: "Which rank of a job is different: per-rank peak, reserved, OOMs and steady growth, the spread and the outlier ranks with the sites that differ most.",
        positional: &[("inputs", "array", "a folder of per-rank snapshots or archives, or the files")],
        options: &[
            ("annotation", "string", "the steps' span pattern"),
            ("threshold", "number", "a rank more than this many percent over the median is an outlier"),
        ],
    },
];

fn schema(spec: &Spec) -> JsonObject {
    let mut props = serde_json::Map::new();
    for &(name, ty, what) in spec.positional.iter().chain(spec.options) {
        let p = if ty == "array" {
            json!({ "type": "array", "items": { "type": "string" }, "description": what })
        } else {
            json!({ "type": ty, "description": what })
        };
        props.insert(name.to_owned(), p);
    }
    let required: Vec<&str> = spec.positional.iter().map(|p| p.0).collect();
    let mut o = serde_json::Map::new();
    o.insert("type".into(), json!("object"));
    o.insert("properties".into(), Value::Object(props));
    o.insert("required".into(), json!(required));
    o.insert("additionalProperties".into(), json!(false));
    o
}

/// The command line for a call: `memviz NAME POSITIONAL… --OPTION VALUE… --json`.
pub fn argv(name: &str, args: &JsonObject) -> Result<Vec<String>, String> {
    let spec = TOOLS.iter().find(|s| s.name == name).ok_or_else(|| format!("no tool named {name:?}"))?;
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    // Options as `--flag=value` and the positional values after `--`: a value that begins with
    // `-` is a value, never a flag.
    let mut out = vec!["memviz".to_owned(), name.to_owned()];
    let mut positional = Vec::new();
    for &(p, ty, _) in spec.positional {
        let v = args.get(p).ok_or_else(|| format!("{name}: `{p}` is required"))?;
        match (ty, v) {
            ("array", Value::Array(items)) => {
                for i in items {
                    positional.push(text(i).ok_or_else(|| format!("{name}: `{p}` holds strings"))?);
                }
            }
            _ => positional.push(text(v).ok_or_else(|| format!("{name}: `{p}` is a {ty}"))?),
        }
    }
    for (k, v) in args {
        if spec.positional.iter().any(|p| p.0 == k) {
            continue;
        }
        let &(opt, ty, _) =
            spec.options.iter().find(|o| o.0 == k).ok_or_else(|| format!("{name}: no argument `{k}`"))?;
        let flag = format!("--{}", opt.replace('_', "-"));
        match (ty, v) {
            ("boolean", Value::Bool(true)) => out.push(flag),
            ("boolean", Value::Bool(false)) | (_, Value::Null) => {}
            ("boolean", _) => return Err(format!("{name}: `{k}` is a boolean")),
            _ => out.push(format!("{flag}={}", text(v).ok_or_else(|| format!("{name}: `{k}` is a {ty}"))?)),
        }
    }
    out.push("--json".into());
    out.push("--".into());
    out.extend(positional);
    Ok(out)
}

/// Runs one call as its command would run, its standard output captured: the JSON, or the
/// one-line error.
pub fn call(name: &str, args: &JsonObject) -> Result<String, String> {
    let argv = argv(name, args)?;
    // clap's whole message (what is missing or wrong, and the tip), without the usage lines.
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(&argv).map_err(|e| {
        let text = e.to_string();
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information"))
            .collect();
        lines.join(" ").trim_start_matches("error: ").to_owned()
    })?;
    let (result, out) = crate::output::capture(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| super::run(cli)))
            .unwrap_or_else(|_| Err(anyhow::anyhow!("internal error answering {name} (a bug: please report it)")))
    });
    match result {
        // A threshold crossed is an answer too: the JSON says so.
        Err(e) if !(e.is::<super::PeakGrew>() || e.is::<super::RankOutlier>()) => {
            Err(format!("{e:#}").replace('\n', " "))
        }
        _ => String::from_utf8(out).map_err(|e| e.to_string()),
    }
}

#[derive(Clone, Default)]
struct Memviz;

impl ServerHandler for Memviz {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("memviz", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "memviz answers questions about PyTorch CUDA memory snapshots (torch.cuda.memory._dump_snapshot pickles) and .memviz archives. Start with stats; then at (what is live at an instant, by category), steps (growth per training step), find, diff, oom, segments, ranks.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = TOOLS
            .iter()
            .map(|s| Tool::new(Cow::Borrowed(s.name), Cow::Borrowed(s.description), Arc::new(schema(s))))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if !TOOLS.iter().any(|s| s.name == request.name) {
            return Err(McpError::invalid_params(format!("no tool named {:?}", request.name), None));
        }
        let args = request.arguments.unwrap_or_default();
        // On the blocking pool: a long call (a 600 MB snapshot) holds up no other request, and a
        // cancelled one's answer is dropped.
        let name = request.name.to_string();
        let answered = tokio::task::spawn_blocking(move || call(&name, &args))
            .await
            .unwrap_or_else(|_| Err("internal error (a bug: please report it)".to_owned()));
        Ok(match answered {
            Ok(json) => CallToolResult::success(vec![ContentBlock::text(json)]),
            Err(line) => CallToolResult::error(vec![ContentBlock::text(line)]),
        }
        .into())
    }
}

/// The longest request line read; a longer one is answered `-32600` and skipped.
pub const MAX_REQUEST: usize = 16 << 20;

/// Serves until the client closes standard input. A thread reads the requests first: a line
/// that is not JSON (or not UTF-8, or nested past serde_json's 128 levels) is answered with the
/// JSON-RPC parse error `-32700`, one that is not a request (or longer than [`MAX_REQUEST`])
/// with `-32600`, both on the server's own output, one whole line at a time; the rest go on to
/// the server through a pipe.
pub fn serve() -> anyhow::Result<()> {
    super::answers::keep_sessions();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
    let out = Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let (reader, writer) = std::io::pipe()?;
    let replies = Arc::clone(&out);
    std::thread::Builder::new().name("memviz-mcp-read".into()).spawn(move || {
        screen_requests(std::io::stdin().lock(), writer, &replies);
    })?;
    runtime.block_on(async {
        let input = tokio::fs::File::from_std(std::fs::File::from(std::os::fd::OwnedFd::from(reader)));
        let output = Lines { pending: Vec::new(), out };
        let running = Memviz.serve((input, output)).await.map_err(|e| anyhow::anyhow!("mcp: {e}"))?;
        running.waiting().await.map_err(|e| anyhow::anyhow!("mcp: {e}"))?;
        Ok(())
    })
}

/// Reads request lines from `input`, forwards the well-formed ones to `server`, answers the rest.
pub fn screen_requests(
    mut input: impl std::io::BufRead,
    mut server: impl std::io::Write,
    out: &std::sync::Mutex<impl std::io::Write>,
) {
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut too_long = false;
        // One line, at most MAX_REQUEST bytes of it kept.
        let ended = loop {
            let Ok(buf) = input.fill_buf() else { break true };
            if buf.is_empty() {
                break true;
            }
            let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], Some(i + 1)),
                None => (buf, None),
            };
            if line.len() + chunk.len() > MAX_REQUEST {
                too_long = true;
            } else if !too_long {
                line.extend_from_slice(chunk);
            }
            let used = done.unwrap_or(buf.len());
            input.consume(used);
            if done.is_some() {
                break false;
            }
        };
        let reply = if too_long {
            Some(rpc_error(&Value::Null, -32600, format!("Invalid Request: longer than {} MiB", MAX_REQUEST >> 20)))
        } else {
            screen(&line)
        };
        match reply {
            Some(error) => {
                let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
                let _ = writeln!(o, "{error}").and_then(|()| o.flush());
            }
            None if line.iter().any(|b| !b.is_ascii_whitespace()) => {
                line.push(b'\n');
                if server.write_all(&line).and_then(|()| server.flush()).is_err() {
                    return;
                }
            }
            None => {}
        }
        if ended {
            return;
        }
    }
}

/// The error a request line gets before the server sees it (`None`: it goes on).
fn screen(line: &[u8]) -> Option<Value> {
    let text = match std::str::from_utf8(line) {
        Ok(t) if t.trim().is_empty() => return None,
        Ok(t) => t,
        Err(e) => return Some(rpc_error(&Value::Null, -32700, format!("Parse error: not UTF-8 ({e})"))),
    };
    let v: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Some(rpc_error(&Value::Null, -32700, format!("Parse error: {e}"))),
    };
    let id = v.get("id").filter(|i| i.is_string() || i.is_number()).cloned().unwrap_or(Value::Null);
    let is_request = v.is_object()
        && v.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && (v.get("method").is_some_and(Value::is_string) || v.get("result").is_some() || v.get("error").is_some());
    (!is_request).then(|| rpc_error(&id, -32600, "Invalid Request: not a JSON-RPC 2.0 message".to_owned()))
}

fn rpc_error(id: &Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The server's output, written a whole line at a time under the lock the request screen's
/// replies take, so the two never interleave within a line.
struct Lines {
    pending: Vec<u8>,
    out: Arc<std::sync::Mutex<std::io::Stdout>>,
}

impl tokio::io::AsyncWrite for Lines {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::io::Write as _;
        self.pending.extend_from_slice(buf);
        if let Some(end) = self.pending.iter().rposition(|&b| b == b'\n') {
            let whole: Vec<u8> = self.pending.drain(..=end).collect();
            let mut o = self.out.lock().unwrap_or_else(|e| e.into_inner());
            o.write_all(&whole)?;
            o.flush()?;
        }
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_become_command_lines() {
        let args = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(
            argv("at", &args(json!({"input": "a.pickle", "peak": true, "group_by": "category", "list": false})))
                .unwrap(),
            ["memviz", "at", "--group-by=category", "--peak", "--json", "--", "a.pickle"]
        );
        assert_eq!(
            argv("ranks", &args(json!({"inputs": ["r0.memviz", "r1.memviz"], "threshold": 20}))).unwrap(),
            ["memviz", "ranks", "--threshold=20", "--json", "--", "r0.memviz", "r1.memviz"]
        );
        // Values that begin with `-` stay values.
        assert_eq!(
            argv("find", &args(json!({"input": "-odd.pickle", "frame": "-x"}))).unwrap(),
            ["memviz", "find", "--frame=-x", "--json", "--", "-odd.pickle"]
        );
        assert!(argv("at", &args(json!({"peak": true}))).unwrap_err().contains("`input` is required"));
        assert!(argv("at", &args(json!({"input": "x", "frobnicate": 1}))).unwrap_err().contains("no argument"));
        assert!(argv("nope", &args(json!({}))).is_err());
        for s in TOOLS {
            let sc = schema(s);
            assert_eq!(sc["type"], "object");
        }
    }
}
