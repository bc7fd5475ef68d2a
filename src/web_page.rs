//! The browser viewer's files — the page (`web/index.html`), its web worker, its JavaScript glue
//! and the gzipped wasm, as `web/build.sh` makes them — embedded into the binary when it was built
//! after them (`build.rs`), or read from `MEMVIZ_WEB_DIR` (a page rebuilt without relinking).
//! `memviz serve` serves them; `memviz export html` inlines them with an archive into one file.

use std::borrow::Cow;
use std::path::Path;

use anyhow::Context;
use base64::Engine;

/// What to do when there is no page to serve or export.
pub const MISSING: &str =
    "this memviz was built without the browser viewer: run web/build.sh, then cargo build --release";

/// The largest archive `export html` inlines: the page decodes it whole in a tab, from base64
/// text a third larger (`memviz serve` fetches larger ones as bytes).
pub const MOST_INLINE: u64 = 256 << 20;

/// The page's import of its glue, which an exported page replaces by the glue itself.
const IMPORT: &str = "import init, { WebHandle } from './pkg/memviz_web.js';";
/// Where an exported page gets its inline data.
const DATA: &str = "<!-- memviz export html: the wasm and the archive, inline -->";

pub struct WebFiles {
    pub page: Cow<'static, str>,
    pub glue: Cow<'static, str>,
    /// The page's web worker (`web/worker.js`): a second module with its own copy of the archive.
    pub worker: Cow<'static, str>,
    pub wasm_gz: Cow<'static, [u8]>,
}

impl WebFiles {
    /// `MEMVIZ_WEB_DIR`'s files, else the embedded ones, else none.
    pub fn find() -> anyhow::Result<Option<WebFiles>> {
        if let Some(dir) = std::env::var_os("MEMVIZ_WEB_DIR") {
            return WebFiles::read(Path::new(&dir)).map(Some);
        }
        Ok(embedded())
    }

    fn read(dir: &Path) -> anyhow::Result<WebFiles> {
        let text = |f: &str| std::fs::read_to_string(dir.join(f)).with_context(|| format!("MEMVIZ_WEB_DIR: {f}"));
        Ok(WebFiles {
            page: text("index.html")?.into(),
            glue: text("pkg/memviz_web.js")?.into(),
            worker: text("worker.js")?.into(),
            wasm_gz: std::fs::read(dir.join("pkg/memviz_web_bg.wasm.gz"))
                .context("MEMVIZ_WEB_DIR: pkg/memviz_web_bg.wasm.gz (web/build.sh makes it)")?
                .into(),
        })
    }

    /// The wasm itself, for a client that takes no gzip.
    pub fn wasm(&self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&*self.wasm_gz), &mut out)?;
        Ok(out)
    }

    /// One page that opens `archive` (called `name`) from `file://`: the glue in place of its
    /// import, the gzipped wasm and the archive as base64 in two inert script elements.
    pub fn standalone(&self, archive: &[u8], name: &str) -> anyhow::Result<String> {
        anyhow::ensure!(
            self.page.contains(IMPORT) && self.page.contains(DATA) && self.glue.contains("function __wbg_init"),
            "the browser viewer's page does not match this memviz (rebuild it: web/build.sh)"
        );
        anyhow::ensure!(!self.glue.contains("</script"), "the viewer's glue cannot be inlined in a page");
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let name = name.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;");
        let data = format!(
            "<script type=\"application/octet-stream\" id=\"memviz-wasm\">{}</script>\n\
             <script type=\"application/octet-stream\" id=\"memviz-archive\" data-name=\"{name}\">{}</script>",
            b64(&self.wasm_gz),
            b64(archive)
        );
        let glue = format!("{}\n  const init = __wbg_init;", self.glue);
        Ok(self.page.replacen(IMPORT, &glue, 1).replacen(DATA, &data, 1))
    }
}

#[cfg(memviz_web)]
fn embedded() -> Option<WebFiles> {
    Some(WebFiles {
        page: Cow::Borrowed(include_str!(concat!(env!("MEMVIZ_WEB_BUILT"), "/index.html"))),
        glue: Cow::Borrowed(include_str!(concat!(env!("MEMVIZ_WEB_BUILT"), "/pkg/memviz_web.js"))),
        worker: Cow::Borrowed(include_str!(concat!(env!("MEMVIZ_WEB_BUILT"), "/worker.js"))),
        wasm_gz: Cow::Borrowed(include_bytes!(concat!(env!("MEMVIZ_WEB_BUILT"), "/pkg/memviz_web_bg.wasm.gz"))),
    })
}

#[cfg(not(memviz_web))]
fn embedded() -> Option<WebFiles> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exported_page_carries_the_glue_the_wasm_and_the_archive_inline() {
        let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/web/index.html")).unwrap();
        let files = WebFiles {
            page: page.into(),
            glue: "export class WebHandle {}\nasync function __wbg_init(m) {}\n".into(),
            worker: String::new().into(),
            wasm_gz: vec![1, 2, 3].into(),
        };
        let html = files.standalone(b"MEMVIZ\0archive", "run \"42\".memviz").unwrap();
        assert!(!html.contains("./pkg/memviz_web.js"), "no import left");
        let glue = html.find("async function __wbg_init(m) {}").expect("the glue inline");
        assert!(html[glue..].contains("const init = __wbg_init;"));
        assert!(html.contains("id=\"memviz-wasm\">AQID</script>"));
        assert!(html.contains("data-name=\"run &quot;42&quot;.memviz\">TUVNVklaAGFyY2hpdmU=</script>"));
        let no_glue = WebFiles { glue: "x".into(), ..files };
        assert!(no_glue.standalone(b"", "a").is_err());
    }
}
