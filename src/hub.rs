//! `--model ID|PATH`: a local `config.json` (or a folder holding one), or a Hugging Face model id
//! whose `config.json` is fetched from the hub once and cached.
//!
//! The hub's base URL is `$HF_ENDPOINT` (default `https://huggingface.co`), as the hub's own tools
//! do. A token from `$HF_TOKEN` (or `$HF_HOME/token`, `~/.cache/huggingface/token`) is sent only to
//! that host — never on a redirect to another one — and never printed. Cache:
//! `<user cache>/memviz/models/<id>/config.json`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};

use crate::analysis::shapes::ModelDims;

const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
const MAX_REDIRECTS: usize = 5;

/// Reads or fetches the model's config and extracts its dimensions.
pub fn model_dims(spec: &str, vocab: Option<u64>, quantized: bool) -> anyhow::Result<ModelDims> {
    let config = load_config(spec)?;
    ModelDims::from_config(&config, vocab, quantized).map_err(|e| anyhow!("--model {spec}: {e}"))
}

fn load_config(spec: &str) -> anyhow::Result<serde_json::Value> {
    let local = Path::new(spec);
    if local.exists() || looks_like_path(spec) {
        // A path never goes to the network, so a typo cannot send a local path to a remote host.
        let file = if local.is_dir() { local.join("config.json") } else { local.to_owned() };
        let text =
            std::fs::read_to_string(&file).map_err(|e| anyhow!("--model {}: cannot read it: {e}", file.display()))?;
        return serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", file.display()));
    }
    if !is_model_id(spec) {
        bail!("--model {spec}: no such file, and not a Hugging Face model id (like `gpt2` or `org/name`)");
    }
    let cached = cache_path(spec);
    if let Some(path) = &cached
        && let Ok(text) = std::fs::read_to_string(path)
        && let Ok(v) = serde_json::from_str(&text)
    {
        return Ok(v);
    }
    let endpoint = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| DEFAULT_ENDPOINT.to_owned());
    let endpoint = endpoint.trim_end_matches('/');
    let url = format!("{endpoint}/{spec}/resolve/main/config.json");
    let text = fetch(&url, host_of(endpoint), token().as_deref()).map_err(|e| {
        anyhow!(
            "cannot fetch {spec}/config.json from {endpoint} ({e}); offline? pass a local config.json with --model PATH"
        )
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|_| anyhow!("{url}: the hub did not return a JSON config.json"))?;
    if let Some(path) = cached {
        let write = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&path, &text));
        if let Err(e) = write {
            eprintln!("warning: could not cache {}: {e}", path.display());
        }
    }
    Ok(value)
}

/// A local file, whether or not it exists: ends in `.json`, starts like a path (`/`, `.`, `~`),
/// has more than one `/` or a `\\`. (`org/name`, one slash, is a hub id.)
fn looks_like_path(s: &str) -> bool {
    s.ends_with(".json") || s.starts_with(['/', '.', '~']) || s.matches('/').count() > 1 || s.contains('\\')
}

/// `gpt2`, `org/name`, `org/name-v1.5`: letters, digits and `-_.` with at most one `/`.
fn is_model_id(s: &str) -> bool {
    !s.is_empty()
        && s.matches('/').count() <= 1
        && !s.starts_with(['/', '.'])
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !s.contains("..")
}

fn cache_path(id: &str) -> Option<PathBuf> {
    let base = crate::output::user_cache_dir()?;
    Some(base.join("models").join(id.replace('/', "--")).join("config.json"))
}

/// The user's hub token, if any (never printed).
fn token() -> Option<String> {
    if let Ok(t) = std::env::var("HF_TOKEN")
        && !t.trim().is_empty()
    {
        return Some(t.trim().to_owned());
    }
    let hf_home = std::env::var_os("HF_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface")))?;
    std::fs::read_to_string(hf_home.join("token")).ok().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
}

fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?', '#']).next().unwrap_or(rest)
}

/// GET `url`, following redirects by hand so the token only ever goes to `token_host`.
fn fetch(url: &str, token_host: &str, token: Option<&str>) -> Result<String, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(20)))
        .max_redirects(0)
        .http_status_as_error(false)
        .build()
        .into();
    let mut url = url.to_owned();
    for _ in 0..=MAX_REDIRECTS {
        let mut req = agent.get(&url).header("User-Agent", concat!("memviz/", env!("CARGO_PKG_VERSION")));
        if let Some(t) = token
            && host_of(&url) == token_host
        {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        let mut resp = req.call().map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        if (300..400).contains(&status) {
            let next =
                resp.headers().get("location").and_then(|l| l.to_str().ok()).ok_or("a redirect without Location")?;
            url = if next.starts_with("http") { next.to_owned() } else { format!("{}{next}", origin(&url)) };
            continue;
        }
        if status != 200 {
            return Err(match status {
                401 | 403 => format!("HTTP {status}: the model is gated or private (set HF_TOKEN)"),
                404 => "HTTP 404: no such model".to_owned(),
                s => format!("HTTP {s}"),
            });
        }
        return resp.body_mut().read_to_string().map_err(|e| e.to_string());
    }
    Err("too many redirects".into())
}

fn origin(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => format!("{scheme}://{}", rest.split('/').next().unwrap_or(rest)),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_never_fetched() {
        for p in ["missing.json", "some/dir/config.json", "./m", "/abs/m", "~/m", "a\\b"] {
            assert!(looks_like_path(p), "{p}");
        }
        for id in ["gpt2", "openai-community/gpt2", "org/name-v1.5"] {
            assert!(!looks_like_path(id), "{id}");
        }
        let err = load_config("definitely/not/here/config.json").unwrap_err().to_string();
        assert!(err.contains("cannot read it") && !err.contains("fetch"), "{err}");
    }

    #[test]
    fn ids_and_hosts() {
        assert!(is_model_id("gpt2"));
        assert!(is_model_id("meta-llama/Llama-3.1-8B"));
        assert!(!is_model_id("a/b/c"));
        assert!(!is_model_id("../etc/passwd"));
        assert_eq!(host_of("http://127.0.0.1:8080/org/m/resolve/main/config.json"), "127.0.0.1:8080");
        assert_eq!(origin("https://hf.co/a/b"), "https://hf.co");
    }
}
