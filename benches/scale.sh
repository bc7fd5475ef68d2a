#!/usr/bin/env bash
# The scale table of docs/performance.md: for each snapshot, `memviz index` (wall, MB/s of pickle, peak
# RSS, archive size), opening its archive in the viewer (open_ms, first_frame_ms on whatever
# Vulkan driver is there: lavapipe on the project's machine), `at --peak` on the archive warm and
# cold (the archive's pages dropped from the page cache first), and CPython's `pickle.load` where
# asked (PICKLE_LOAD=1; it needs ~7× the file in RAM).
# Usage: benches/scale.sh SNAPSHOT...   (make big ones with benches/gen_snapshot.rs)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
m=target/release/memviz
evict() { python3 -c "import os,sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)" "$@"; }
timed() { # prints "secs peak_kB" of a command, its output dropped
  local log; log=$(mktemp)
  /usr/bin/time -f "%e %M" -o "$log" "$@" > /dev/null
  cat "$log"; rm -f "$log"
}
ms() { # wall milliseconds of a command, its output dropped
  local t0 t1; t0=$(date +%s%N); "$@" > /dev/null; t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
for snap in "$@"; do
  bytes=$(stat -L -c %s "$snap")
  out="${snap%.pickle}.memviz"
  read -r secs kb < <(timed "$m" index "$snap" -o "$out")
  abytes=$(stat -c %s "$out")
  shot=$(mktemp -d)/frame.png
  frame=$("$m" open "$out" --screenshot "$shot" 2>/dev/null | tr -d ' \n')
  # The viewer's peak RSS over a screenshot run: the first frame, then every background check.
  read -r _ viewer_kb < <(timed "$m" open "$out" --screenshot "$shot")
  open_ms=$(sed -E 's/.*"open_ms":([0-9.]+).*/\1/' <<< "$frame")
  first_ms=$(sed -E 's/.*"first_frame_ms":([0-9.]+).*/\1/' <<< "$frame")
  warm=$(ms "$m" at --peak "$out")
  evict "$out" "$m"
  cold=$(ms "$m" at --peak "$out")
  read -r _ cold_kb < <(evict "$out" "$m"; timed "$m" at --peak "$out")
  printf '%s: %.0f MB pickle; index %.2f s, %.0f MB/s, peak RSS %.0f MB; archive %.0f MB; open_ms %s, first_frame_ms %s, viewer peak RSS %.0f MB; at --peak warm %s ms, cold %s ms (%.0f MB RSS)\n' \
    "$(basename "$snap")" "$(bc -l <<< "$bytes / 1000000")" "$secs" "$(bc -l <<< "$bytes / 1000000 / $secs")" \
    "$(bc -l <<< "$kb / 1024")" "$(bc -l <<< "$abytes / 1000000")" "$open_ms" "$first_ms" "$(bc -l <<< "$viewer_kb / 1024")" "$warm" "$cold" \
    "$(bc -l <<< "$cold_kb / 1024")"
  if [ "${PICKLE_LOAD:-0}" = 1 ]; then
    read -r psecs pkb < <(timed python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$snap")
    printf '  pickle.load %.1f s, peak RSS %.0f MB\n' "$psecs" "$(bc -l <<< "$pkb / 1024")"
  fi
done
