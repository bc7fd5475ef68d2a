#!/usr/bin/env bash
# Every checksum-valid one-field variant of an archive (tests/data/hostile/make_hostile_archives.py)
# through `memviz stats` and the viewer's `open --screenshot` in each VIEWS view, JOBS at a time:
# each must answer or end in one error line with exit 1, within the time limit (the table's
# fourth column: milliseconds) (issue 41, item 4:
# the viewer never hangs). Prints a summary and the failures; the whole table goes to $DATA.
#
#   benches/hostile_archives.sh                                  # the newest golden archive
#   MEMVIZ=bin/memviz JOBS=16 DATA=/tmp/hv benches/hostile_archives.sh OTHER.memviz
#   ONLY=tiles,minimap benches/hostile_archives.sh                 # the fields whose paths hold these
#
# Needs python3 (and the zstd tool for the variants inside chunks); the viewer needs a Vulkan
# driver (lavapipe here: VK_ICD_FILENAMES).
set -euo pipefail
cd "$(dirname "$0")/.."
MEMVIZ=$(realpath "${MEMVIZ:-target/release/memviz}")
DATA=${DATA:-target/hostile-archives}
JOBS=${JOBS:-$(nproc)}
VIEWS=${VIEWS:-timeline segments}
LIMIT=${LIMIT:-120}
input=${1:-$(ls tests/data/golden/*.memviz | sort -V | tail -1)}
rm -rf "$DATA" && mkdir -p "$DATA/variants" "$DATA/runs"
python3 tests/data/hostile/make_hostile_archives.py "$input" "$DATA/variants" ${ONLY:+--only "$ONLY"} >/dev/null
export MEMVIZ LIMIT DATA
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}

one() { # FILE MODE → one row: file, mode, exit code, seconds, stderr lines, first stderr line
  local f=$1 mode=$2 name err start rc
  name=$(basename "$f" .memviz)
  err="$DATA/runs/$name.$mode.err"
  start=$(date +%s%N)
  if [ "$mode" = stats ]; then
    timeout "$LIMIT" "$MEMVIZ" stats --json "$f" >/dev/null 2>"$err" && rc=0 || rc=$?
  else
    timeout "$LIMIT" "$MEMVIZ" open "$f" --view "$mode" --screenshot "$DATA/runs/$name.$mode.png" \
      >/dev/null 2>"$err" && rc=0 || rc=$?
    rm -f "$DATA/runs/$name.$mode.png"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$mode" "$rc" "$(( ($(date +%s%N) - start) / 1000000 ))" \
    "$(wc -l <"$err")" "$(head -1 "$err" | cut -c1-160)"
}
export -f one
for f in "$DATA"/variants/*.memviz; do
  for mode in stats $VIEWS; do echo "$f $mode"; done
done | xargs -P "$JOBS" -n 2 bash -c 'one "$0" "$1"' >"$DATA/results.tsv"
echo "variants: $(ls "$DATA"/variants/*.memviz | wc -l); runs by mode and exit code:"
awk -F'\t' '{print $2, "exit", $3}' "$DATA/results.tsv" | sort | uniq -c
# A failure: an exit code other than 0 or 1, more than one line on stderr, or the time limit.
bad=$(awk -F'\t' '($3 != 0 && $3 != 1) || $5 > 1' "$DATA/results.tsv")
echo "slowest: $(sort -t$'\t' -k4 -g -r "$DATA/results.tsv" | head -1 | cut -f1,2,4)"
if [ -n "$bad" ]; then
  echo "FAILED:" && echo "$bad"
  exit 1
fi
echo "every run answered or ended in one error line"
