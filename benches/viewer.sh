#!/usr/bin/env bash
# The viewer's `open --bench` in every view, on scale_2m7, the generator's 9M-event snapshot
# and (with BIG=1) its 10 GB one: the table of docs' performance section, one row per archive
# and view (frame_ms and ui_ms percentiles, chunks the UI thread decompressed after the first
# frame, first frame from process start), and the rank strip of a 64-rank folder.
#
#   benches/viewer.sh                     # here: lavapipe, binaries from target/release
#   MEMVIZ=bin/memviz GEN=bin/gen_snapshot DATA=/tmp/d BIG=1 benches/viewer.sh   # elsewhere
#
# MEMVIZ: the memviz binary; GEN: the generator (`cargo bench --bench gen_snapshot` builds it as
# target/release/deps/gen_snapshot-*); DATA: where snapshots and archives go (made once, kept).
set -euo pipefail
cd "$(dirname "$0")/.."
MEMVIZ=${MEMVIZ:-target/release/memviz}
GEN=${GEN:-$(ls -t target/release/deps/gen_snapshot-* 2>/dev/null | grep -v '\.d$' | head -1)}
DATA=${DATA:-target/bench-data}
SHARED=${SHARED:-../shared/fixtures}
mkdir -p "$DATA"

archive() { # NAME EVENTS → $DATA/NAME.memviz
  local name=$1 events=$2
  [ -f "$DATA/$name.memviz" ] && return
  [ -f "$DATA/scale_2m7.pickle" ] || xz -dkc "$SHARED/snapshots/scale_2m7.pickle.xz" >"$DATA/scale_2m7.pickle"
  if [ "$name" != scale_2m7 ] && [ ! -f "$DATA/$name.pickle" ]; then
    "$GEN" "$DATA/scale_2m7.pickle" "$DATA/$name.pickle" --events "$events" >&2
  fi
  "$MEMVIZ" index "$DATA/$name.pickle" -o "$DATA/$name.memviz" >&2
  [ "$name" = scale_2m7 ] || rm -f "$DATA/$name.pickle"
}

row() { # LABEL VIEW ARGS…
  local label=$1 view=$2
  shift 2
  "$MEMVIZ" open "$@" --bench-view "$view" | python3 -c '
import json, sys
d = json.load(sys.stdin)
f, u = d["frame_ms"], d["ui_ms"]
cells = [sys.argv[1], d["view"], "%.1f / %.1f / %.1f" % (f["p50"], f["p99"], f["max"]),
         "%.2f / %.2f" % (u["p50"], u["p99"]), str(d["ui_thread_chunks"]), "%.0f" % d["first_frame_ms"], d["adapter"]]
print("| " + " | ".join(cells) + " |")
' "$label"
}

names="scale_2m7 gen9m"
[ "${BIG:-0}" = 1 ] && names="$names gen10g"
archive scale_2m7 0
archive gen9m 9000000
[ "${BIG:-0}" = 1 ] && archive gen10g 126500000
echo "| archive | view | frame ms p50 / p99 / max | ui ms p50 / p99 | ui-thread chunks | first frame ms | adapter |"
echo "|---|---|---|---|---|---|---|"
for name in $names; do
  for view in timeline pools segments state; do
    row "$name" "$view" "$DATA/$name.memviz"
  done
done
# 64 ranks: the bundled job's four, each 16 times.
ranks="$DATA/ranks64"
if [ ! -d "$ranks" ]; then
  mkdir -p "$ranks"
  for i in $(seq 0 63); do cp "tests/data/ranks/rank$((i % 4)).pickle" "$ranks/rank$i.pickle"; done
  "$MEMVIZ" index "$ranks" >&2
  rm -f "$ranks"/*.pickle
fi
row "64 ranks" ranks "$ranks"
