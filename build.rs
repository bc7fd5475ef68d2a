//! Embeds the browser viewer (the page and its worker, and `web/build.sh`'s output: the JavaScript
//! glue and the gzipped wasm) into the binary when it has been built, so `memviz serve` and
//! `memviz export html` need no files beside the binary (the pip wheel carries only the
//! binary). Without it the binary says how to build the page.

use std::path::Path;

const FILES: [&str; 4] = ["index.html", "worker.js", "pkg/memviz_web.js", "pkg/memviz_web_bg.wasm.gz"];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(memviz_web)");
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("web");
    if FILES.iter().all(|f| web.join(f).is_file()) {
        for f in FILES {
            println!("cargo::rerun-if-changed={}", web.join(f).display());
        }
        println!("cargo::rustc-cfg=memviz_web");
        println!("cargo::rustc-env=MEMVIZ_WEB_BUILT={}", web.display());
    } else {
        // Not built yet: look again when web/build.sh has made pkg/ (which changes web/).
        println!("cargo::rerun-if-changed={}", web.display());
    }
}
