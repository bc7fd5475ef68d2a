//! `memviz serve`: a small HTTP server next to the data, for a browser over `ssh -L`. It lists
//! the snapshots and archives under the paths it was given, serves archives with Range requests,
//! and indexes a snapshot into the cache the first time it is asked for (the page polls its
//! progress).
//!
//! What it serves is only what it was given: a request names one of the given paths and a
//! relative path under it, which must not climb (`..`), be absolute, or lead — once every link is
//! followed — out of that path; anything else is 403 with nothing read. It listens on loopback
//! by default; bound elsewhere, every request needs the random token printed in its URL (as
//! Jupyter does).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tower::ServiceExt as _;

use crate::ingest::Sniffed;

/// Folders are listed this deep, and no further.
const MAX_DEPTH: usize = 4;
/// At most this many files are listed (a folder of a million files stays answerable).
const MAX_LISTED: usize = 10_000;

/// One path given on the command line: a file, or a folder whose files are served.
#[derive(Debug)]
struct Root {
    /// As given (what the page shows).
    shown: String,
    /// Canonical: every link followed.
    path: PathBuf,
    dir: bool,
}

/// A snapshot being indexed for a request: bytes read so far, of how many, and the outcome.
#[derive(Default)]
struct Indexing {
    read: AtomicU64,
    total: u64,
    done: Mutex<Option<Result<PathBuf, String>>>,
}

/// What the server holds: the roots, the token (bound beyond loopback) and the indexing runs.
pub struct Served {
    roots: Vec<Root>,
    token: Option<String>,
    indexing: Mutex<HashMap<PathBuf, Arc<Indexing>>>,
    /// The browser viewer's page, its glue and wasm, when this build has them.
    web: Option<crate::web_page::WebFiles>,
}

/// One file the listing shows.
#[derive(Debug, Serialize)]
struct Entry {
    /// The root it is under (its place in the command line), and its path under it.
    root: usize,
    path: String,
    kind: &'static str,
    bytes: u64,
    /// The number in its name, as `memviz ranks` reads a job's folder.
    rank: Option<u64>,
}

/// A folder of several snapshots (or, where it holds none, of several archives): a job's ranks,
/// as `memviz open DIR` takes them (files in the folder itself, not below it).
#[derive(Debug, Serialize, PartialEq)]
struct JobEntry {
    root: usize,
    /// The folder under the root ("" for the root itself).
    dir: String,
    /// The entries' paths under the root, by path.
    files: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Listing {
    roots: Vec<String>,
    entries: Vec<Entry>,
    jobs: Vec<JobEntry>,
    /// True when the listing stopped at [`MAX_LISTED`] files.
    truncated: bool,
}

#[derive(Debug, Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

impl Served {
    /// The server for `paths` (each must exist); a token when `token` is set.
    pub fn new(paths: &[PathBuf], token: Option<String>) -> anyhow::Result<Served> {
        let mut roots = Vec::new();
        for p in paths {
            let path = p.canonicalize().with_context(|| format!("{}: cannot serve it", p.display()))?;
            let dir = path.is_dir();
            roots.push(Root { shown: p.display().to_string(), path, dir });
        }
        Ok(Served { roots, token, indexing: Mutex::new(HashMap::new()), web: crate::web_page::WebFiles::find()? })
    }

    /// The file `rel` names under root `id`: a relative path that does not climb, inside the
    /// root once every link is followed, a regular file. 403 for what would leave the root, 404
    /// for what is not there.
    pub fn resolve(&self, id: usize, rel: &str) -> Result<PathBuf, StatusCode> {
        let root = self.roots.get(id).ok_or(StatusCode::NOT_FOUND)?;
        let rel = Path::new(rel);
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(StatusCode::FORBIDDEN);
        }
        let joined = match (root.dir, rel.as_os_str().is_empty()) {
            (true, _) => root.path.join(rel),
            (false, true) => root.path.clone(),
            (false, false) => return Err(StatusCode::NOT_FOUND),
        };
        let real = joined.canonicalize().map_err(|_| StatusCode::NOT_FOUND)?;
        let inside = if root.dir { real.starts_with(&root.path) } else { real == root.path };
        if !inside {
            return Err(StatusCode::FORBIDDEN);
        }
        if !real.is_file() {
            return Err(StatusCode::NOT_FOUND);
        }
        Ok(real)
    }

    /// Every snapshot and archive under the roots (folders to [`MAX_DEPTH`], links that lead out
    /// of their root left out), told from other files by their first bytes.
    fn listing(&self) -> Listing {
        let mut entries = Vec::new();
        let mut truncated = false;
        for (id, root) in self.roots.iter().enumerate() {
            let mut files = Vec::new();
            if root.dir {
                walk(&root.path, &root.path, 0, &mut files);
            } else {
                files.push(root.path.clone());
            }
            files.sort();
            for f in files {
                if entries.len() == MAX_LISTED {
                    truncated = true;
                    break;
                }
                let kind = match crate::ingest::sniff(&f) {
                    Ok(Sniffed::Archive) => "archive",
                    Ok(Sniffed::Snapshot) => "snapshot",
                    _ => continue,
                };
                let rel = f.strip_prefix(&root.path).unwrap_or(Path::new("")).to_string_lossy().into_owned();
                let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let bytes = std::fs::metadata(&f).map_or(0, |m| m.len());
                entries.push(Entry {
                    root: id,
                    path: rel,
                    kind,
                    bytes,
                    rank: crate::index::folder::rank_in_name(&name),
                });
            }
        }
        let jobs = jobs(&entries);
        Listing { roots: self.roots.iter().map(|r| r.shown.clone()).collect(), entries, jobs, truncated }
    }

    /// The archive to send for `file`: itself, or a snapshot's cached archive once it is built
    /// (`Err`: still indexing, with the bytes read and the total; or the error it ended with).
    fn archive_of(self: &Arc<Self>, file: &Path) -> Result<PathBuf, IndexState> {
        match crate::ingest::sniff(file) {
            Ok(Sniffed::Archive) => return Ok(file.to_owned()),
            Ok(Sniffed::Snapshot) => {}
            _ => return Err(IndexState::NotServed),
        }
        let run = {
            let mut runs = self.indexing.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(run) = runs.get(file) {
                Arc::clone(run)
            } else {
                let total = std::fs::metadata(file).map_or(0, |m| m.len());
                let run = Arc::new(Indexing { total, ..Indexing::default() });
                runs.insert(file.to_owned(), Arc::clone(&run));
                let (job, path) = (Arc::clone(&run), file.to_owned());
                // The index runs beside the server; the page asks again until it is done.
                tokio::task::spawn_blocking(move || {
                    let built = index_in_child(&path, &job.read);
                    *job.done.lock().unwrap_or_else(PoisonError::into_inner) = Some(built);
                });
                run
            }
        };
        let done = run.done.lock().unwrap_or_else(PoisonError::into_inner).clone();
        match done {
            Some(Ok(archive)) => Ok(archive),
            Some(Err(e)) => Err(IndexState::Failed(e)),
            None => Err(IndexState::Running { read: run.read.load(Ordering::Relaxed), total: run.total }),
        }
    }
}

/// The archive of `snapshot`: the cached one, or one `memviz index` makes into the cache in a
/// child process, `read` following the bytes it read — so a snapshot that ends an index (one
/// past the memory budget's hard limit, a crash) ends the child, not the server, and the page
/// shows the child's error line.
fn index_in_child(snapshot: &Path, read: &AtomicU64) -> Result<PathBuf, String> {
    let out = match crate::index::cache::lookup(snapshot).map_err(|e| format!("{e:#}"))? {
        crate::index::cache::Cached::Found(path) => return Ok(path),
        crate::index::cache::Cached::Missing(path, _) => path,
    };
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut child = std::process::Command::new(exe)
        .arg("index")
        .arg(snapshot)
        .arg("-o")
        .arg(&out)
        .arg("--progress-lines")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting `memviz index`: {e}"))?;
    // Its error line, from standard error read on its own thread (a child blocked on a full
    // pipe would never end), at most [`CHILD_STDERR`] bytes of it kept.
    let stderr = child.stderr.take().and_then(|e| {
        let reading = std::thread::Builder::new().name("memviz-index-stderr".into());
        reading.spawn(move || error_line(e)).ok()
    });
    if let Some(stdout) = child.stdout.take() {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("read ").and_then(|n| n.trim().parse().ok()) {
                read.store(n, Ordering::Relaxed);
            }
        }
    }
    let status = child.wait().map_err(|e| format!("waiting for `memviz index`: {e}"))?;
    let said = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    match status.success() {
        true => Ok(out),
        false if !said.is_empty() => Err(said.strip_prefix("error: ").unwrap_or(&said).to_owned()),
        false => Err(format!("`memviz index` of {} ended ({status})", snapshot.display())),
    }
}

/// Standard error of a child kept at most this long (its last bytes).
const CHILD_STDERR: usize = 64 << 10;

/// The last `error: ` line of `from` (read to its end), else its last non-empty line (a timing
/// line may follow an error's where `MEMVIZ_TIMINGS` is set).
fn error_line(from: impl std::io::Read) -> String {
    let mut tail = std::collections::VecDeque::<u8>::new();
    let mut from = from;
    let mut buf = [0u8; 8192];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        tail.extend(&buf[..n]);
        let over = tail.len().saturating_sub(CHILD_STDERR);
        tail.drain(..over);
    }
    let text = String::from_utf8_lossy(tail.make_contiguous()).into_owned();
    let mut lines = text.lines().rev().map(str::trim).filter(|l| !l.is_empty());
    let last = lines.clone().next().unwrap_or_default();
    lines.find(|l| l.starts_with("error: ")).unwrap_or(last).to_owned()
}

/// The folders of `entries` (sorted by root, then path) holding at least two snapshots, or two
/// archives and no snapshot.
fn jobs(entries: &[Entry]) -> Vec<JobEntry> {
    let mut by_dir: std::collections::BTreeMap<(usize, String), (Vec<String>, Vec<String>)> = Default::default();
    for e in entries {
        let dir = Path::new(&e.path).parent().map_or(String::new(), |d| d.to_string_lossy().into_owned());
        let (snapshots, archives) = by_dir.entry((e.root, dir)).or_default();
        match e.kind {
            "snapshot" => snapshots.push(e.path.clone()),
            _ => archives.push(e.path.clone()),
        }
    }
    by_dir
        .into_iter()
        .filter_map(|((root, dir), (snapshots, archives))| {
            let files = if snapshots.is_empty() { archives } else { snapshots };
            (files.len() >= 2).then_some(JobEntry { root, dir, files })
        })
        .collect()
}

/// Why [`Served::archive_of`] has no archive to send yet.
enum IndexState {
    NotServed,
    Running { read: u64, total: u64 },
    Failed(String),
}

/// The files under `dir` (to [`MAX_DEPTH`]), each inside `root` once its links are followed.
fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if out.len() > MAX_LISTED {
            return;
        }
        let Ok(real) = entry.path().canonicalize() else { continue };
        if !real.starts_with(root) {
            continue;
        }
        if real.is_dir() && depth + 1 < MAX_DEPTH && entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(root, &entry.path(), depth + 1, out);
        } else if real.is_file() {
            out.push(entry.path());
        }
    }
}

/// The viewer's page and its three files (worker, glue, wasm), by name, from memory. The wasm goes gzipped to a client
/// that takes gzip (every browser), a third of its size over a slow tunnel.
async fn web_file(
    State(served): State<Arc<Served>>,
    axum::extract::Path(name): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(web) = &served.web else {
        return (StatusCode::NOT_FOUND, format!("{}\n", crate::web_page::MISSING)).into_response();
    };
    match name.as_str() {
        "index.html" => Html(web.page.to_string()).into_response(),
        "pkg/memviz_web.js" => ([(header::CONTENT_TYPE, "text/javascript")], web.glue.to_string()).into_response(),
        "worker.js" => ([(header::CONTENT_TYPE, "text/javascript")], web.worker.to_string()).into_response(),
        "pkg/memviz_web_bg.wasm" => {
            let gzip = headers
                .get(header::ACCEPT_ENCODING)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.split(',').any(|e| e.split(';').next().is_some_and(|e| e.trim() == "gzip")));
            let kind = (header::CONTENT_TYPE, "application/wasm");
            let vary = (header::VARY, "accept-encoding");
            if gzip {
                ([kind, vary, (header::CONTENT_ENCODING, "gzip")], web.wasm_gz.to_vec()).into_response()
            } else {
                match web.wasm() {
                    Ok(wasm) => ([kind, vary], wasm).into_response(),
                    Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
                }
            }
        }
        _ => (StatusCode::NOT_FOUND, "not found\n").into_response(),
    }
}

/// The router: the page, the listing, the archives, and the browser viewer's files.
pub fn router(served: Arc<Served>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/web/{*name}", get(web_file))
        .route("/api/list", get(list))
        .route("/archive/{id}", get(archive_root))
        .route("/archive/{id}/{*rel}", get(archive))
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&served), check_token))
        .with_state(served)
}

/// Bound beyond loopback, every request carries the token: `?token=`, `Authorization: Bearer`,
/// or the cookie a request with the right `?token=` is answered with (as Jupyter does), so that
/// the page's own requests (its script, its wasm) need not carry it.
/// Bound to loopback (no token), only requests addressed to this machine by a loopback name, so
/// that a web page elsewhere cannot read the archives by DNS rebinding (its own name made to
/// resolve to 127.0.0.1 while the laptop's browser has it open).
async fn check_token(State(served): State<Arc<Served>>, request: Request, next: Next) -> Response {
    let Some(token) = &served.token else {
        if !to_loopback(&request) {
            let refusal =
                "only requests to 127.0.0.1, localhost or [::1] are answered (bind beyond loopback with --bind)\n";
            return (StatusCode::FORBIDDEN, refusal).into_response();
        }
        return next.run(request).await;
    };
    let (in_query, cookie) = token_given(&request, token);
    if !in_query && !cookie {
        return (StatusCode::FORBIDDEN, "a token is required: use the URL memviz serve printed\n").into_response();
    }
    let mut response = next.run(request).await;
    if in_query {
        let set = format!("memviz_token={token}; Path=/; HttpOnly; SameSite=Strict");
        if let Ok(v) = HeaderValue::from_str(&set) {
            response.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    response
}

/// Whether `request`'s `Host` names a loopback address or `localhost` (any port: `ssh -L` may
/// forward another local port to this one).
fn to_loopback(request: &Request) -> bool {
    let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or(""),
        None => {
            host.rsplit_once(':').filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit())).map_or(host, |(n, _)| n)
        }
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether `request` carries `token` in its URL, and whether in its headers (a bearer or the
/// cookie).
fn token_given(request: &Request, token: &str) -> (bool, bool) {
    let query = request.uri().query().unwrap_or("");
    let in_query = query.split('&').any(|kv| kv.strip_prefix("token=") == Some(token));
    let header = |name| request.headers().get_all(name).into_iter().filter_map(|v| v.to_str().ok());
    let bearer = header(header::AUTHORIZATION).any(|v| v.strip_prefix("Bearer ") == Some(token));
    let cookie = header(header::COOKIE)
        .flat_map(|v| v.split(';'))
        .any(|c| c.trim().strip_prefix("memviz_token=") == Some(token));
    (in_query, bearer || cookie)
}

async fn list(State(served): State<Arc<Served>>) -> Json<Listing> {
    let s = Arc::clone(&served);
    Json(tokio::task::spawn_blocking(move || s.listing()).await.unwrap_or(Listing {
        roots: vec![],
        entries: vec![],
        jobs: vec![],
        truncated: false,
    }))
}

async fn archive_root(
    State(served): State<Arc<Served>>,
    axum::extract::Path(id): axum::extract::Path<usize>,
    request: Request,
) -> Response {
    send(served, id, String::new(), request).await
}

async fn archive(
    State(served): State<Arc<Served>>,
    axum::extract::Path((id, rel)): axum::extract::Path<(usize, String)>,
    request: Request,
) -> Response {
    send(served, id, rel, request).await
}

/// Sends the archive `rel` under root `id` names (a snapshot's once it is indexed: 202 with the
/// progress until then), with Range requests and conditional GETs.
async fn send(served: Arc<Served>, id: usize, rel: String, request: Request) -> Response {
    let file = match served.resolve(id, &rel) {
        Ok(f) => f,
        Err(status) => {
            return (status, format!("{}\n", status.canonical_reason().unwrap_or("refused"))).into_response();
        }
    };
    let parts = request.uri().query().is_some_and(|q| q.split('&').any(|p| p == "parts"));
    match served.archive_of(&file) {
        Ok(archive) if parts => match tokio::task::spawn_blocking(move || first_parts(&archive)).await {
            Ok(Ok(json)) => Json(json).into_response(),
            Ok(Err(e)) => (StatusCode::UNPROCESSABLE_ENTITY, format!("{e}\n")).into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
        },
        Ok(archive) => match tower_http::services::ServeFile::new(archive).oneshot(request).await {
            Ok(r) => r.into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
        },
        Err(IndexState::NotServed) => (StatusCode::NOT_FOUND, "not a snapshot or a .memviz archive\n").into_response(),
        Err(IndexState::Running { read, total }) => (
            StatusCode::ACCEPTED,
            Json(serde_json::json!({ "indexing": true, "read_bytes": read, "total_bytes": total })),
        )
            .into_response(),
        Err(IndexState::Failed(e)) => (StatusCode::UNPROCESSABLE_ENTITY, format!("{e}\n")).into_response(),
    }
}

/// Where the first frame's bytes of the archive at `path` lie (`?parts`: the page fetches those
/// first by Range requests and draws while the rest arrives): its size, and the ranges
/// (`Archive::first_frame_ranges`) as `[start, end)` pairs.
fn first_parts(path: &Path) -> Result<serde_json::Value, String> {
    let archive = crate::file::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let first: Vec<[u64; 2]> = archive.first_frame_ranges().into_iter().map(|r| [r.start, r.end]).collect();
    Ok(serde_json::json!({ "size": archive.file_len(), "first": first }))
}

/// The page: what is served, each archive a link (a snapshot's is indexed when first asked for).
async fn page(State(served): State<Arc<Served>>, Query(q): Query<TokenQuery>) -> Html<String> {
    let s = Arc::clone(&served);
    let listing = tokio::task::spawn_blocking(move || s.listing()).await.ok();
    let token = q.token.map(|t| format!("?token={}", percent(&t))).unwrap_or_default();
    let mut rows = String::new();
    for e in listing.iter().flat_map(|l| &l.entries) {
        let href = format!("/archive/{}/{}{token}", e.root, percent(&e.path));
        let root = listing.as_ref().map_or("", |l| l.roots[e.root].as_str());
        // The viewer page fetches the archive itself (the token rides in its URL).
        let view = match &served.web {
            Some(_) => {
                let page_token = token.replacen('?', "&", 1);
                format!("<a href=\"/web/index.html?archive={}{page_token}\">view</a>", percent(&href))
            }
            None => String::new(),
        };
        rows.push_str(&format!(
            "<tr><td><a href=\"{href}\">{}</a></td><td>{view}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&Path::new(root).join(&e.path).display().to_string()),
            e.kind,
            crate::analysis::units::bytes(e.bytes),
            e.rank.map_or(String::new(), |r| r.to_string()),
        ));
    }
    // A folder of ranks: the viewer page on all of them (the rank strip). The archives' URLs
    // carry no token: the page's own fetches send the cookie its first answer set.
    let mut job_rows = String::new();
    for j in listing.iter().flat_map(|l| &l.jobs).filter(|_| served.web.is_some()) {
        let archives: Vec<String> = j
            .files
            .iter()
            .map(|f| format!("archive={}", percent(&format!("/archive/{}/{}", j.root, percent(f))).replace('/', "%2F")))
            .collect();
        let page_token = token.replacen('?', "&", 1);
        let root = listing.as_ref().map_or("", |l| l.roots[j.root].as_str());
        job_rows.push_str(&format!(
            "<li><a href=\"/web/index.html?{}{page_token}\">{}</a>: {} ranks</li>\n",
            archives.join("&"),
            escape(&Path::new(root).join(&j.dir).display().to_string()),
            j.files.len(),
        ));
    }
    let jobs = match job_rows.is_empty() {
        true => String::new(),
        false => format!(
            "<h2>Jobs</h2>\n<p>Every rank of a folder side by side (the rank strip).</p>\n<ul>\n{job_rows}</ul>\n<h2>Files</h2>\n"
        ),
    };
    let note = match &served.web {
        Some(_) => "<b>view</b> opens it in the viewer in this browser (WebGPU, else WebGL2).",
        None => {
            "This memviz was built without the in-browser viewer: run <code>web/build.sh</code>, then <code>cargo build --release</code>."
        }
    };
    Html(format!(
        "<!doctype html><meta charset=utf-8><title>memviz</title>\n\
         <style>body{{font:14px system-ui;margin:2em}}td{{padding:2px 12px}}</style>\n\
         <h1>memviz</h1>\n\
         <p>Each link downloads an archive (a snapshot is indexed on this machine the first time it is asked for; \
         the link answers 202 with its progress until then). Open a downloaded archive with <code>memviz open FILE.memviz</code>. \
         {note}</p>\n{jobs}\
         <table><tr><th>file</th><th></th><th>kind</th><th>size</th><th>rank</th></tr>\n{rows}</table>\n"
    ))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A relative path for a URL: each byte outside the unreserved set and `/` percent-encoded.
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A random token (128 bits, hex) from the OS's random source.
fn random_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no random source for the token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// This machine's name, for the `ssh -L` line.
fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "HOST".into())
}

/// Serves `paths` on `bind:port` until interrupted, printing the URL and the `ssh -L` line.
pub fn serve(paths: &[PathBuf], bind: IpAddr, port: u16) -> anyhow::Result<()> {
    let token = if bind.is_loopback() { None } else { Some(random_token()?) };
    let served = Arc::new(Served::new(paths, token.clone())?);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(bind, port))
            .await
            .with_context(|| format!("cannot listen on {bind}:{port}"))?;
        let at = listener.local_addr()?;
        let query = token.as_ref().map(|t| format!("?token={t}")).unwrap_or_default();
        let shown = if bind.is_unspecified() { host_name() } else { at.ip().to_string() };
        println!("memviz serve: {}", paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
        println!("  open http://{shown}:{}/{query}", at.port());
        if bind.is_loopback() {
            println!(
                "  from a laptop: ssh -L {port}:127.0.0.1:{port} {} and open http://127.0.0.1:{port}/",
                host_name(),
                port = at.port()
            );
        }
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        axum::serve(listener, router(served)).await.context("serving")?;
        anyhow::Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child's error line is its last `error: ` line, timing lines after it or not; without
    /// one, its last line; only its last bytes are kept.
    #[test]
    fn a_childs_error_line() {
        let said = "note: x\nerror: the input is bad\ntiming: command done at 0.1 s\n\n";
        assert_eq!(error_line(said.as_bytes()), "error: the input is bad");
        assert_eq!(error_line("killed\n".as_bytes()), "killed");
        assert_eq!(error_line(&b""[..]), "");
        let long = format!("error: early\n{}\nerror: late", "x".repeat(CHILD_STDERR));
        assert_eq!(error_line(long.as_bytes()), "error: late");
    }

    #[test]
    fn requests_stay_inside_what_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("served");
        std::fs::create_dir_all(root.join("job")).unwrap();
        std::fs::write(root.join("job/rank0.pickle"), b"x").unwrap();
        std::fs::write(dir.path().join("secret.txt"), b"s").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("out")).unwrap();
        let s = Served::new(std::slice::from_ref(&root), None).unwrap();
        assert!(s.resolve(0, "job/rank0.pickle").is_ok());
        assert_eq!(s.resolve(0, "../secret.txt"), Err(StatusCode::FORBIDDEN));
        assert_eq!(s.resolve(0, "job/../../secret.txt"), Err(StatusCode::FORBIDDEN));
        assert_eq!(s.resolve(0, "/etc/passwd"), Err(StatusCode::FORBIDDEN));
        #[cfg(unix)]
        assert_eq!(s.resolve(0, "out"), Err(StatusCode::FORBIDDEN), "a link out of the root");
        assert_eq!(s.resolve(0, "job"), Err(StatusCode::NOT_FOUND), "a folder is no file");
        assert_eq!(s.resolve(1, "job/rank0.pickle"), Err(StatusCode::NOT_FOUND));
        // A file given alone serves only itself.
        let one = Served::new(&[root.join("job/rank0.pickle")], None).unwrap();
        assert!(one.resolve(0, "").is_ok());
        assert_eq!(one.resolve(0, "x"), Err(StatusCode::NOT_FOUND));
    }

    #[test]
    fn ranks_and_urls() {
        // Ranks as `memviz ranks` reads them.
        assert_eq!(crate::index::folder::rank_in_name("rank12.pickle"), Some(12));
        assert_eq!(crate::index::folder::rank_in_name("snapshot.pickle"), None);
        assert_eq!(percent("a b/c#d.memviz"), "a%20b/c%23d.memviz");
        assert_eq!(random_token().unwrap().len(), 32);
    }

    #[test]
    fn a_folder_of_several_snapshots_or_archives_is_a_job() {
        let entry = |root, path: &str, kind| Entry { root, path: path.into(), kind, bytes: 1, rank: None };
        let entries = [
            entry(0, "arch/a1.memviz", "archive"),
            entry(0, "arch/a2.memviz", "archive"),
            entry(0, "job/rank0.memviz", "archive"),
            entry(0, "job/rank0.pickle", "snapshot"),
            entry(0, "job/rank1.pickle", "snapshot"),
            entry(0, "job/sub/rank2.pickle", "snapshot"),
            entry(0, "solo.pickle", "snapshot"),
            entry(1, "r0.pickle", "snapshot"),
            entry(1, "r1.pickle", "snapshot"),
        ];
        let job = |root, dir: &str, files: &[&str]| JobEntry {
            root,
            dir: dir.into(),
            files: files.iter().map(|f| f.to_string()).collect(),
        };
        assert_eq!(
            jobs(&entries),
            [
                job(0, "arch", &["arch/a1.memviz", "arch/a2.memviz"]),
                job(0, "job", &["job/rank0.pickle", "job/rank1.pickle"]),
                job(1, "", &["r0.pickle", "r1.pickle"]),
            ]
        );
    }
}
