#!/usr/bin/env bash
# Builds the browser viewer into web/pkg: the wasm (release, and gzipped) and its JavaScript glue,
# made by wasm-bindgen's CLI at the crate's exact version (a memviz built after this embeds them):
#   cargo install wasm-bindgen-cli --version 0.2.130
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --target wasm32-unknown-unknown
wasm-bindgen --target web --out-dir pkg target/wasm32-unknown-unknown/release/memviz_web.wasm
# What memviz embeds and serves (Content-Encoding: gzip): a third of the wasm's size.
gzip -9 -n -c pkg/memviz_web_bg.wasm > pkg/memviz_web_bg.wasm.gz
echo "web/pkg: $(du -sh pkg | cut -f1)"
