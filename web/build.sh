#!/usr/bin/env bash
# Builds the browser viewer into web/pkg: the wasm (release, and gzipped) and its JavaScript glue,
# made by wasm-bindgen's CLI at the crate's exact version (a memviz built after this embeds them):
#   cargo install wasm-bindgen-cli --version 0.2.130
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --target wasm32-unknown-unknown
wasm-bindgen --target web --out-dir pkg target/wasm32-unknown-unknown/release/memviz_web.wasm
# wasm-opt where one of binaryen 116 or later is at hand ($WASM_OPT, on PATH, or npm's
# `binaryen` package on NODE_PATH): -O1 makes the gzipped wasm a tenth smaller (3.75 -> 3.35 MB)
# in ~40 s. Older ones break wasm-bindgen's externref table (binaryen 108: the page fails at start).
opt=""
for c in "${WASM_OPT:-}" "$(command -v wasm-opt || true)" "${NODE_PATH:+$NODE_PATH/.bin/wasm-opt}"; do
  [ -n "$c" ] && [ -x "$c" ] || continue
  v=$("$c" --version 2>/dev/null | grep -o 'version [0-9]*' | grep -o '[0-9]*' || true)
  if [ "${v:-0}" -ge 116 ]; then opt=$c; break; fi
  echo "web/build.sh: $c is binaryen ${v:-?}, older than 116: not used"
done
if [ -n "$opt" ]; then
  "$opt" -O1 --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
    --enable-mutable-globals --enable-reference-types pkg/memviz_web_bg.wasm -o pkg/memviz_web_bg.wasm
else
  echo "web/build.sh: no wasm-opt of binaryen 116 or later: the wasm is left as wasm-bindgen made it"
fi
# What memviz embeds and serves (Content-Encoding: gzip): a third of the wasm's size.
gzip -9 -n -c pkg/memviz_web_bg.wasm > pkg/memviz_web_bg.wasm.gz
echo "web/pkg: $(du -sh pkg | cut -f1)"
