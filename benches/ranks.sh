#!/usr/bin/env bash
# Multi-rank jobs: `memviz index` of a rank folder against the files one by one, and
# `memviz ranks` over 1,024 archives (hard links of the four fixture ranks' archives, so the
# folder costs no disk).
# Usage: benches/ranks.sh [RANK_DIR]   (default: tests/data/ranks, the four GPT-2 ranks)
# Prints wall time and peak RSS of each; builds the release binary first.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-tests/data/ranks}
cargo build --release --quiet
bin=$PWD/target/release/memviz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
measure() { # label, command...
  local label=$1; shift
  local log; log=$(mktemp)
  if ! /usr/bin/time -f "%e %M" -o "$log" "$@" > /dev/null 2> "$work/stderr"; then
    cat "$work/stderr" >&2; exit 1
  fi
  read -r secs kb < "$log"; rm -f "$log"
  printf "%-52s %7.2f s %7.0f MB peak RSS\n" "$label" "$secs" "$((kb / 1024))"
}
mkdir -p "$work/folder" "$work/each" "$work/copies"
cp "$src"/* "$work/folder/"
cp "$src"/* "$work/each/"
n=$(ls "$work/folder" | wc -l)
measure "index the folder ($n ranks)" "$bin" index "$work/folder"
measure "index the $n files one by one" sh -c "for f in '$work'/each/*; do '$bin' index \"\$f\"; done"
# 64 ranks: copies of the fixture's, renamed so that each has its own rank number.
for i in $(seq 0 63); do cp "$work/folder/$(ls "$work/folder" | grep -v memviz | sed -n "$((i % n + 1))p")" "$work/copies/rank$i.pickle"; done
mkdir -p "$work/copies_each" && cp "$work"/copies/* "$work/copies_each/"
measure "index a folder of 64 ranks" "$bin" index "$work/copies"
measure "index the 64 files one by one" sh -c "for f in '$work'/copies_each/*; do '$bin' index \"\$f\"; done"
mkdir -p "$work/job"
archives=("$work"/folder/*.memviz)
for i in $(seq 0 1023); do ln "${archives[$((i % ${#archives[@]}))]}" "$work/job/rank$i.memviz"; done
measure "ranks over 1,024 archives" "$bin" ranks "$work/job"
measure "ranks over 1,024 archives --json" "$bin" ranks "$work/job" --json
