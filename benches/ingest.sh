#!/usr/bin/env bash
# Reading a snapshot end to end: `memviz stats` and `memviz index` against CPython's
# `pickle.load`, same file, same run.
# Usage: benches/ingest.sh [SNAPSHOT]   (default: scale_2m7 from ../shared/fixtures, decompressed once)
# Prints wall time, MB/s of pickle and peak RSS for each; builds the release binary first.
set -euo pipefail
cd "$(dirname "$0")/.."
snap=${1:-}
if [ -z "$snap" ]; then
  xz=../shared/fixtures/snapshots/scale_2m7.pickle.xz
  snap=target/bench-data/scale_2m7.pickle
  if [ ! -f "$snap" ]; then
    mkdir -p target/bench-data
    xz -dc "$xz" > "$snap.tmp" && mv "$snap.tmp" "$snap"
  fi
fi
cargo build --release --quiet
bytes=$(stat -L -c %s "$snap")
measure() { # label, command...
  local label=$1; shift
  local log; log=$(mktemp)
  /usr/bin/time -f "%e %M" -o "$log" "$@" > /dev/null
  read -r secs kb < "$log"; rm -f "$log"
  awk -v l="$label" -v s="$secs" -v kb="$kb" -v b="$bytes" \
    'BEGIN { printf "%-40s %7.2f s %8.0f MB/s %8.0f MB peak RSS\n", l, s, b / 1e6 / s, kb / 1024 }'
}
echo "input: $snap ($((bytes / 1000000)) MB)"
out=$(mktemp -d)/bench.memviz
measure "memviz stats --no-cache" target/release/memviz --no-cache stats "$snap"
measure "memviz index (archive with tiles)" target/release/memviz index "$snap" -o "$out"
echo "archive: $(stat -c %s "$out") bytes = $(awk -v a="$(stat -c %s "$out")" -v b="$bytes" 'BEGIN { printf "%.2f", a / b }')x the snapshot"
measure "memviz stats (from the archive)" target/release/memviz stats "$out"
measure "python3 pickle.load" python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$snap"
rm -f "$out"
