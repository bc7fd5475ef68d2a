//! `memviz serve` over real sockets: the listing, an archive with a Range request, a snapshot
//! indexed when first asked for, and the refusals — paths that climb, absolute ones, links out of
//! the served folder, a missing token beyond loopback.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::support::*;

/// A running `memviz serve`, killed when dropped.
pub struct Server {
    child: Child,
    /// Its standard output, kept open (it prints the `ssh -L` line after the URL).
    _out: std::io::Lines<BufReader<std::process::ChildStdout>>,
    /// `127.0.0.1:PORT`, and the token its URL carries (when it printed one).
    pub addr: String,
    pub token: Option<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start(args: &[&str], cache: &Path) -> Server {
    start_with(args, cache, &[])
}

/// [`start`] with more environment variables for the server.
pub fn start_with(args: &[&str], cache: &Path, env: &[(&str, &Path)]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memviz"))
        .arg("serve")
        .args(["--port", "0"])
        .args(args)
        .env("MEMVIZ_CACHE_DIR", cache)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("serve printed its URL").unwrap();
        if let Some(url) = line.trim().strip_prefix("open http://") {
            break url.to_owned();
        }
    };
    // `HOST:PORT/` or `HOST:PORT/?token=…`: connect to loopback on that port.
    let (host_port, rest) = url.split_once('/').unwrap();
    let port = host_port.rsplit_once(':').unwrap().1;
    let token = rest.strip_prefix("?token=").map(str::to_owned);
    Server { child, _out: lines, addr: format!("127.0.0.1:{port}"), token }
}

/// One GET of `target` exactly as written (no client normalizes it): status, headers, body.
fn get(server: &Server, target: &str, headers: &[&str]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(&server.addr).unwrap();
    let mut req = format!("GET {target} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|h| h.to_ascii_lowercase().starts_with("host:")) {
        req.push_str(&format!("Host: {}\r\n", server.addr));
    }
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut body = raw[split + 4..].to_vec();
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    (status, head, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let end = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let n = usize::from_str_radix(std::str::from_utf8(&b[..end]).unwrap().trim(), 16).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&b[end + 2..end + 2 + n]);
        b = &b[end + 2 + n + 2..];
    }
}

/// A served folder: a snapshot, an archive, a file that is neither, and a link out of it.
fn served_folder() -> tempfile::TempDir {
    let dir = tempdir();
    let served = dir.path().join("served");
    std::fs::create_dir_all(served.join("job")).unwrap();
    std::fs::copy(data("gpt2_small.pickle"), served.join("job/rank0.pickle")).unwrap();
    let golden = format!("golden/gpt2_small.v{}.memviz", memviz_format::FORMAT_VERSION);
    std::fs::copy(data(&golden), served.join("gpt2_small.memviz")).unwrap();
    std::fs::write(served.join("notes.txt"), "not a snapshot").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), served.join("out.memviz")).unwrap();
    dir
}

#[test]
fn serve_lists_and_sends_archives_with_ranges_and_indexes_snapshots_on_demand() {
    let dir = served_folder();
    let server = start(&[dir.path().join("served").to_str().unwrap()], &dir.path().join("cache"));
    let (status, _, body) = get(&server, "/api/list", &[]);
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let kinds: Vec<(String, String)> = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["path"].as_str().unwrap().to_owned(), e["kind"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(kinds, [("gpt2_small.memviz".into(), "archive".into()), ("job/rank0.pickle".into(), "snapshot".into())]);
    assert_eq!(list["entries"][1]["rank"], 0);

    // An archive's first bytes by a Range request: the magic.
    let (status, head, body) = get(&server, "/archive/0/gpt2_small.memviz", &["Range: bytes=0-7"]);
    assert_eq!(status, 206, "{head}");
    assert_eq!(body, memviz_format::MAGIC);
    // `?parts`: where its first frame's bytes lie (the page fetches those first), as the
    // archive itself lists them.
    let (status, _, body) = get(&server, "/archive/0/gpt2_small.memviz?parts", &[]);
    assert_eq!(status, 200);
    let parts: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let golden = std::fs::read(dir.path().join("served/gpt2_small.memviz")).unwrap();
    let own = memviz::archive::Archive::from_memory(&golden, Path::new("g")).unwrap().first_frame_ranges();
    let own: Vec<[u64; 2]> = own.into_iter().map(|r| [r.start, r.end]).collect();
    assert_eq!(parts, serde_json::json!({ "size": golden.len(), "first": own }));
    assert!(own.len() > 1 && own[0][0] == 0 && own.last().unwrap()[1] == golden.len() as u64, "{parts}");

    // A snapshot: indexed when first asked for (202 with the progress meanwhile), then its
    // archive, the same bytes `memviz index` writes past the header.
    let archive = loop {
        let (status, head, body) = get(&server, "/archive/0/job/rank0.pickle", &[]);
        match status {
            202 => std::thread::sleep(std::time::Duration::from_millis(50)),
            200 => break body,
            other => panic!("{other}: {head}"),
        }
    };
    assert!(archive.starts_with(&memviz_format::MAGIC));
    let made = dir.path().join("made.memviz");
    let snapshot = dir.path().join("served/job/rank0.pickle");
    memviz_ok(["index".as_ref(), snapshot.as_os_str(), "-o".as_ref(), made.as_os_str(), "--no-cache".as_ref()]);
    let header = memviz_format::HEADER_LEN;
    assert!(archive[header..] == std::fs::read(&made).unwrap()[header..], "the served archive is the index's");

    // The page links every archive and snapshot.
    let (status, _, page) = get(&server, "/", &[]);
    assert_eq!(status, 200);
    let page = String::from_utf8(page).unwrap();
    assert!(page.contains("/archive/0/gpt2_small.memviz") && page.contains("/archive/0/job/rank0.pickle"));
    // A file that is neither is not served.
    assert_eq!(get(&server, "/archive/0/notes.txt", &[]).0, 404);

    // The viewer's page and its wasm, from the binary (when built after web/build.sh): gzipped
    // to a client that takes gzip, whole to one that does not, the same wasm either way.
    let wasm_gz = repo().join("web/pkg/memviz_web_bg.wasm.gz");
    if !ready(wasm_gz.exists(), "web/pkg (web/build.sh, before memviz is built)") {
        return;
    }
    let (status, _, page) = get(&server, "/web/index.html", &[]);
    assert_eq!((status, page), (200, std::fs::read(repo().join("web/index.html")).unwrap()));
    let (status, head, gz) = get(&server, "/web/pkg/memviz_web_bg.wasm", &["Accept-Encoding: br, gzip;q=0.8"]);
    assert_eq!(status, 200);
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-encoding: gzip") && head.contains("content-type: application/wasm"), "{head}");
    assert_eq!(gz, std::fs::read(&wasm_gz).unwrap());
    let (status, head, wasm) = get(&server, "/web/pkg/memviz_web_bg.wasm", &[]);
    assert!(status == 200 && !head.to_ascii_lowercase().contains("content-encoding"), "{head}");
    assert_eq!(wasm, std::fs::read(repo().join("web/pkg/memviz_web_bg.wasm")).unwrap());
    assert_eq!(get(&server, "/web/pkg/memviz_web_bg.wasm.d.ts", &[]).0, 404, "only the page's files");
}

/// A snapshot whose index ends its process — here 4·10⁶ one-item lists, past the heap's hard
/// limit under a tiny budget, which stops the process with one error line — ends the child
/// `memviz index` the server runs, not the server: the page is told the child's error line
/// (422) and the server answers on (it indexed in its own process before, and died with it).
#[test]
fn an_index_that_ends_its_process_ends_the_child_not_the_server() {
    let dir = tempdir();
    let served = dir.path().join("served");
    std::fs::create_dir_all(&served).unwrap();
    // `{'note': 'segments', 'lists': [[None], …]}` (the word a snapshot is told by first), the
    // lists memoized, in batches of 1,000.
    let mut lists = b"\x80\x04}\x94(\x8c\x04note\x94\x8c\x08segments\x94\x8c\x05lists\x94]\x94".to_vec();
    for _ in 0..4_000 {
        lists.push(b'(');
        for _ in 0..1_000 {
            lists.extend_from_slice(b"]\x94Na");
        }
        lists.push(b'e');
    }
    lists.extend_from_slice(b"u.");
    std::fs::write(served.join("lists.pickle"), &lists).unwrap();
    let budget = [("MEMVIZ_MEMORY_BUDGET", Path::new("1M"))];
    let server = start_with(&[served.to_str().unwrap()], &dir.path().join("cache"), &budget);
    let (status, body) = loop {
        let (status, _, body) = get(&server, "/archive/0/lists.pickle", &[]);
        match status {
            202 => std::thread::sleep(std::time::Duration::from_millis(50)),
            other => break (other, String::from_utf8_lossy(&body).into_owned()),
        }
    };
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("needs more memory than the budget allows"), "{body}");
    assert_eq!(body.lines().count(), 1, "{body}");
    assert_eq!(get(&server, "/api/list", &[]).0, 200, "the server answers on");
    assert_eq!(get(&server, "/archive/0/lists.pickle", &[]).0, 422, "and remembers the outcome");
}

#[test]
fn serve_refuses_what_leaves_the_served_folder_and_requests_without_the_token() {
    let dir = served_folder();
    let served = dir.path().join("served");
    let server = start(&[served.to_str().unwrap()], &dir.path().join("cache"));
    assert!(server.token.is_none(), "loopback: no token");
    // Loopback: only requests addressed to it by a loopback name (DNS rebinding: a page of
    // another site whose name resolves to 127.0.0.1 is refused), whatever the port.
    assert_eq!(get(&server, "/api/list", &["Host: attacker.example:8090"]).0, 403);
    assert_eq!(get(&server, "/api/list", &["Host: attacker.example"]).0, 403);
    assert_eq!(get(&server, "/archive/0/gpt2_small.memviz", &["Host: 10.0.0.5:8090"]).0, 403);
    for host in ["localhost:9000", "LOCALHOST", "127.0.0.1", "[::1]:8090", "127.0.0.2:1"] {
        assert_eq!(get(&server, "/api/list", &[&format!("Host: {host}")]).0, 200, "{host}");
    }
    for target in [
        "/archive/0/../secret.txt",
        "/archive/0/job/../../secret.txt",
        "/archive/0/%2e%2e/secret.txt",
        "/archive/0/%2Fetc%2Fpasswd",
        "/archive/0/out.memviz",
    ] {
        let (status, head, _) = get(&server, target, &[]);
        assert_eq!(status, 403, "{target}: {head}");
    }
    assert_eq!(get(&server, "/archive/7/gpt2_small.memviz", &[]).0, 404, "no such root");

    // Beyond loopback, a token: every request without it is refused.
    let open = start(&["--bind", "0.0.0.0", served.to_str().unwrap()], &dir.path().join("cache"));
    let token = open.token.clone().expect("a token in the URL");
    assert_eq!(token.len(), 32);
    assert_eq!(get(&open, "/api/list", &[]).0, 403);
    assert_eq!(get(&open, "/archive/0/gpt2_small.memviz", &[]).0, 403);
    assert_eq!(get(&open, "/api/list?token=wrong", &[]).0, 403);
    let (status, head, _) = get(&open, &format!("/api/list?token={token}"), &[]);
    assert_eq!(status, 200);
    let bearer = format!("Authorization: Bearer {token}");
    assert_eq!(get(&open, "/archive/0/gpt2_small.memviz", &[&bearer, "Range: bytes=0-7"]).0, 206);
    // The right token in a URL sets a cookie that carries it (the page's own requests: its
    // script, its wasm); a wrong cookie is refused like no token.
    let set = head.lines().find_map(|l| l.strip_prefix("set-cookie: ")).expect("a cookie for the token");
    assert!(set.starts_with(&format!("memviz_token={token};")) && set.contains("HttpOnly"), "{set}");
    let cookie = format!("Cookie: theme=dark; memviz_token={token}");
    assert_eq!(get(&open, "/archive/0/gpt2_small.memviz", &[&cookie, "Range: bytes=0-7"]).0, 206);
    assert_eq!(get(&open, "/api/list", &["Cookie: memviz_token=wrong"]).0, 403);
}
