//! `memviz mcp`: a Model Context Protocol server over stdio (the official Rust SDK, `rmcp`)
//! whose tools are memviz's answers. A tool takes the command's arguments by name, checked
//! against the tool's input schema and the command's own rules (the groups of its clap
//! definition: exactly one instant, one query), builds the command's typed arguments and calls
//! the command's function; it returns the answer's document as structured content, described
//! by the tool's output schema (derived from the report types), and as the JSON text `--json`
//! prints. Archives opened by one call stay mapped for the next while the file is unchanged
//! ([`Kept`], the server's own). A failure is a tool error with the command's one-line message;
//! a call never takes the server down.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};

use super::reading::{Kept, Opening, guarded};
use super::report::{Answer, PerDevice};
use crate::analysis::{find, live, oom, range, ranks, segments, stats, steps};
use crate::cli::{
    AnswerArgs, AtArgs, DEFAULT_TOP, DiffArgs, FindArgs, GroupByArg, ModelArgs, OomArgs, RangeArgs, RanksArgs,
    SegmentsArgs, StatsArgs, StepsArgs,
};
use crate::model::DeviceId;

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

/// The output schema of a tool: the JSON schema of its answer's document as it is written
/// (serialized: a field left out when empty is not required).
fn output_schema(name: &str) -> JsonObject {
    fn of<T: schemars::JsonSchema>() -> schemars::Schema {
        schemars::generate::SchemaSettings::draft2020_12().for_serialize().into_generator().into_root_schema_for::<T>()
    }
    let schema = match name {
        "stats" => of::<stats::Stats>(),
        "at" => of::<PerDevice<live::LiveSet>>(),
        "range" => of::<PerDevice<range::RangeReport>>(),
        "steps" => of::<PerDevice<steps::StepsReport>>(),
        "diff" => of::<super::DiffOutput>(),
        "find" => of::<PerDevice<find::FindReport>>(),
        "segments" => of::<PerDevice<segments::MemoryMap>>(),
        "oom" => of::<PerDevice<oom::OomReport>>(),
        "ranks" => of::<ranks::RanksReport>(),
        other => unreachable!("no output schema for {other}"),
    };
    match schema.to_value() {
        Value::Object(o) => o,
        _ => unreachable!("a schema is an object"),
    }
}

/// A call's arguments, checked against its tool's [`Spec`] as they are read.
struct Given<'a> {
    tool: &'static Spec,
    args: &'a JsonObject,
}

impl<'a> Given<'a> {
    /// Every argument named by the tool, every positional one given, and the groups of the
    /// command's clap definition kept: of a required group (`at`'s instant, `find`'s query),
    /// exactly one.
    fn check(name: &str, args: &'a JsonObject) -> Result<Given<'a>, String> {
        let tool = TOOLS.iter().find(|s| s.name == name).ok_or_else(|| format!("no tool named {name:?}"))?;
        let known = |k: &str| tool.positional.iter().chain(tool.options).any(|p| p.0 == k);
        if let Some(k) = args.keys().find(|k| !known(k)) {
            return Err(format!("{name}: no argument `{k}`"));
        }
        if let Some(p) = tool.positional.iter().find(|p| args.get(p.0).is_none_or(Value::is_null)) {
            return Err(format!("{name}: `{}` is required", p.0));
        }
        let given = Given { tool, args };
        let command = <crate::cli::Cli as clap::CommandFactory>::command();
        if let Some(sub) = command.find_subcommand(name) {
            for group in sub.get_groups().filter(|g| g.is_required_set()) {
                let members: Vec<&str> = group.get_args().map(|a| a.as_str()).collect();
                let set = members.iter().filter(|m| given.is_set(m)).count();
                if set != 1 {
                    return Err(format!("{name}: give exactly one of {}", members.join(", ")));
                }
            }
        }
        Ok(given)
    }

    /// Whether `key` was given (a `false` flag or a `null` counts as not given).
    fn is_set(&self, key: &str) -> bool {
        !matches!(self.args.get(key), None | Some(Value::Null | Value::Bool(false)))
    }

    fn kind(&self, key: &str) -> &'static str {
        self.tool.positional.iter().chain(self.tool.options).find(|p| p.0 == key).map_or("value", |p| p.1)
    }

    /// A string (or a number, as its text) argument.
    fn text(&self, key: &str) -> Result<Option<String>, String> {
        match self.args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => Err(format!("{}: `{key}` is a {}", self.tool.name, self.kind(key))),
        }
    }

    /// An argument read by the command line's own parser for it.
    fn parsed<T>(&self, key: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>, String> {
        self.text(key)?.map(|t| parse(&t).map_err(|e| format!("{}: `{key}`: {e}", self.tool.name))).transpose()
    }

    fn number<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, String> {
        self.parsed(key, |t| t.parse::<T>().map_err(|_| format!("expected a {}, got `{t}`", self.kind(key))))
    }

    fn flag(&self, key: &str) -> Result<bool, String> {
        match self.args.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("{}: `{key}` is a boolean", self.tool.name)),
        }
    }

    fn path(&self, key: &str) -> Result<PathBuf, String> {
        Ok(PathBuf::from(self.text(key)?.unwrap_or_default()))
    }

    fn paths(&self, key: &str) -> Result<Vec<PathBuf>, String> {
        match self.args.get(key) {
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| {
                    i.as_str().map(PathBuf::from).ok_or_else(|| format!("{}: `{key}` holds strings", self.tool.name))
                })
                .collect(),
            _ => Ok(vec![self.path(key)?]),
        }
    }

    fn device(&self, key: &str) -> Result<Option<DeviceId>, String> {
        self.parsed(key, DeviceId::parse)
    }

    /// The options every answer takes; `device` under the name given.
    fn common(&self) -> Result<AnswerArgs, String> {
        Ok(AnswerArgs {
            json: true,
            csv: false,
            device: self.device("device")?,
            top: DEFAULT_TOP,
            categories: self.text("categories")?.map(PathBuf::from),
        })
    }
}

/// Answers one call: its arguments checked and made into the command's, answered by the
/// command's function under [`guarded`] (what it read is checked before the answer leaves):
/// the JSON text `--json` prints and the document, or the one-line error.
pub fn call(name: &str, args: &JsonObject, kept: &Kept) -> Result<(String, Value), String> {
    let g = Given::check(name, args)?;
    let opening = Opening::keeping(true, kept);
    let o = &opening;
    let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<(String, Value), String> {
        match name {
            "stats" => {
                let args = StatsArgs {
                    input: g.path("input")?,
                    json: true,
                    categories: g.text("categories")?.map(PathBuf::from),
                    model: ModelArgs::default(),
                };
                done(guarded(o, |o| super::stats(&args, o)))
            }
            "at" => {
                let group_by = g.parsed("group_by", |t| <GroupByArg as clap::ValueEnum>::from_str(t, true))?;
                let args = AtArgs {
                    stacks: g.flag("stacks")?,
                    input: g.path("input")?,
                    action: g.parsed("action", crate::cli::parse_action)?,
                    time: g.parsed("time", crate::cli::parse_time)?,
                    peak: g.flag("peak")?,
                    end: g.flag("end")?,
                    group_by: group_by.unwrap_or(GroupByArg::Stack),
                    list: g.flag("list")?,
                    common: g.common()?,
                };
                done(guarded(o, |o| super::at(&args, o)))
            }
            "range" => {
                let range = g.parsed("range", crate::cli::parse_range)?.ok_or("range: `range` is required")?;
                let args = RangeArgs { input: g.path("input")?, range, common: g.common()? };
                done(guarded(o, |o| super::range(&args, o)))
            }
            "steps" => {
                let args =
                    StepsArgs { input: g.path("input")?, annotation: g.text("annotation")?, common: g.common()? };
                done(guarded(o, |o| super::steps(&args, o)))
            }
            "diff" => {
                let args = DiffArgs {
                    stacks: g.flag("stacks")?,
                    a: g.path("a")?,
                    b: g.path("b")?,
                    threshold: g.parsed("threshold", crate::cli::parse_percent)?,
                    device_b: g.device("device_b")?,
                    common: g.common()?,
                };
                done(guarded(o, |o| super::diff(&args, o)))
            }
            "find" => {
                let args = FindArgs {
                    stacks: g.flag("stacks")?,
                    input: g.path("input")?,
                    addr: g.text("addr")?,
                    frame: g.text("frame")?,
                    common: g.common()?,
                };
                done(guarded(o, |o| super::find(&args, o)))
            }
            "segments" => {
                let args = SegmentsArgs {
                    input: g.path("input")?,
                    event: g.number("event")?,
                    action: g.parsed("action", crate::cli::parse_action)?,
                    time: g.parsed("time", crate::cli::parse_time)?,
                    oom: g.number("oom")?,
                    end: g.flag("end")?,
                    common: g.common()?,
                };
                done(guarded(o, |o| super::segments(&args, o)))
            }
            "oom" => {
                let args = OomArgs { stacks: g.flag("stacks")?, input: g.path("input")?, common: g.common()? };
                done(guarded(o, |o| super::oom(&args, o)))
            }
            "ranks" => {
                let args = RanksArgs {
                    inputs: g.paths("inputs")?,
                    annotation: g.text("annotation")?,
                    threshold: g.parsed("threshold", crate::cli::parse_percent)?,
                    json: true,
                    csv: false,
                    top: DEFAULT_TOP,
                };
                done(guarded(o, |o| super::ranks(&args, o)))
            }
            other => Err(format!("no tool named {other:?}")),
        }
    }));
    answered.unwrap_or_else(|_| Err(format!("internal error answering {name} (a bug: please report it)")))
}

/// An answer as a tool's result: its JSON text and its document. A threshold crossed
/// (`diff`'s regression, `ranks`' outlier) is an answer too: the document says so.
fn done<T: serde::Serialize>(answer: anyhow::Result<Answer<T>>) -> Result<(String, Value), String> {
    let mut answer = answer.map_err(|e| format!("{e:#}").replace('\n', " "))?;
    let text = answer.json().map_err(|e| e.to_string())?;
    let value = answer.value().map_err(|e| e.to_string())?;
    answer.finish();
    Ok((text, value))
}

#[derive(Clone, Default)]
struct Memviz {
    kept: Arc<Kept>,
}

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
            .map(|s| {
                Tool::new(Cow::Borrowed(s.name), Cow::Borrowed(s.description), Arc::new(schema(s)))
                    .with_raw_output_schema(Arc::new(output_schema(s.name)))
            })
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
        let kept = Arc::clone(&self.kept);
        let answered = tokio::task::spawn_blocking(move || call(&name, &args, &kept))
            .await
            .unwrap_or_else(|_| Err("internal error (a bug: please report it)".to_owned()));
        Ok(match answered {
            Ok((json, document)) => {
                let mut result = CallToolResult::success(vec![ContentBlock::text(json)]);
                result.structured_content = Some(document);
                result
            }
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
        let running = Memviz::default().serve((input, output)).await.map_err(|e| anyhow::anyhow!("mcp: {e}"))?;
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
    fn calls_are_checked_as_the_command_line_checks_them() {
        let args = |v: Value| v.as_object().unwrap().clone();
        let check = |name: &str, v: Value| Given::check(name, &args(v)).map(drop);
        assert!(check("at", json!({"input": "a.pickle", "peak": true, "group_by": "category"})).is_ok());
        assert!(check("at", json!({"peak": true})).unwrap_err().contains("`input` is required"));
        assert!(check("at", json!({"input": "x", "peak": true, "frobnicate": 1})).unwrap_err().contains("no argument"));
        // The instant group of `at`'s clap definition: exactly one.
        let none = check("at", json!({"input": "x"})).unwrap_err();
        assert!(none.contains("exactly one of") && none.contains("peak"), "{none}");
        assert!(check("at", json!({"input": "x", "peak": true, "end": true})).is_err());
        assert!(check("at", json!({"input": "x", "peak": false, "end": true})).is_ok(), "a false flag is not given");
        assert!(check("find", json!({"input": "x"})).unwrap_err().contains("addr, frame"));
        assert!(check("nope", json!({})).is_err());
        let given = args(json!({"input": "-odd.pickle", "frame": "-x", "action": -1, "stacks": "yes"}));
        let odd = args(json!({"input": "-odd.pickle", "action": -1}));
        let g = Given::check("at", &odd).unwrap();
        assert_eq!(g.path("input").unwrap(), PathBuf::from("-odd.pickle"), "a value that begins with `-` stays one");
        assert_eq!(g.parsed("action", crate::cli::parse_action).unwrap(), Some(crate::cli::ActionArg::Index(-1)));
        let g = Given { tool: g.tool, args: &given };
        assert!(g.flag("stacks").unwrap_err().contains("boolean"));
        for s in TOOLS {
            assert_eq!(schema(s)["type"], "object");
            assert_eq!(output_schema(s.name)["type"], "object", "{}", s.name);
        }
    }
}
