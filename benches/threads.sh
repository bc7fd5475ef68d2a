#!/usr/bin/env bash
# `memviz index` at 1, 2, 4, 8, 16 threads on the 9M-event generator snapshot (and the 10 GB one
# with BIG=1): wall time, MB/s, CPU, peak RSS, and `cmp` of every archive with the 1-thread one
# (the bytes must not depend on the threads). Issue 44; figures in docs/performance.md.
#
#   MEMVIZ=target/release/memviz GEN=<gen_snapshot binary> SCALE=scale_2m7.pickle.xz DATA=/tmp/d benches/threads.sh
set -euo pipefail
: "${MEMVIZ:=target/release/memviz}" "${DATA:=/tmp/memviz-threads}" "${THREADS:=1 2 4 8 16}"
mkdir -p "$DATA"
[ -f "$DATA/scale_2m7.pickle" ] || xz -dc "$SCALE" > "$DATA/scale_2m7.pickle"
[ -f "$DATA/gen9m.pickle" ] || "$GEN" "$DATA/scale_2m7.pickle" "$DATA/gen9m.pickle" --events 9000000
inputs=(gen9m)
if [ "${BIG:-0}" = 1 ]; then
  [ -f "$DATA/gen10g.pickle" ] || "$GEN" "$DATA/scale_2m7.pickle" "$DATA/gen10g.pickle" --events 126500000
  inputs+=(gen10g)
fi
echo "cpus: $(nproc)"
for name in "${inputs[@]}"; do
  pickle="$DATA/$name.pickle"
  mb=$(( $(stat -c %s "$pickle") / 1000000 ))
  cat "$pickle" > /dev/null   # warm: the figures are the indexer's, not the disk's
  for t in $THREADS; do
    out="$DATA/$name.t$t.memviz"
    rm -f "$out"
    /usr/bin/time -f "%e %P %M" -o "$DATA/time" env MEMVIZ_TIMINGS=1 "$MEMVIZ" index "$pickle" -o "$out" --jobs "$t" 2> "$DATA/$name.t$t.log"
    read -r wall cpu rss < "$DATA/time"
    same=$(if [ "$t" = "${THREADS%% *}" ]; then echo first; elif cmp -s "$DATA/$name.t${THREADS%% *}.memviz" "$out"; then echo same; else echo DIFFERENT; fi)
    printf '%s threads=%-2s %6.2f s %6.0f MB/s cpu %5s peak RSS %5d MB  %s\n' "$name" "$t" "$wall" "$(awk "BEGIN{print $mb / $wall}")" "$cpu" $((rss / 1024)) "$same"
    grep -E "^timing: (read|layout|derive|write)" "$DATA/$name.t$t.log" | sed 's/^/    /'
  done
done
