#!/usr/bin/env bash
# The attack pass's hostile inputs at full size (issue 41): each must end in an answer or one
# error line, within the memory budget (1 GiB by default) and bounded temp disk.
#   MEMVIZ=target/release/memviz SHARED=../shared bash benches/hostile.sh [OUTDIR]
# Prints, per input and command: exit code, seconds, peak RSS (GNU time), and the error line.
set -euo pipefail
memviz=${MEMVIZ:-target/release/memviz}
shared=${SHARED:-../shared}
out=${1:-$(mktemp -d)}
python3 "$shared/fixtures/hostile/make_hostile.py" "$out" --big
# make_hostile.py's NONE bomb needs a printf that knows \x; this one does not.
python3 -c '
import sys
w = sys.stdout.buffer
w.write(b"\x80\x04(")
chunk = b"N" * (1 << 24)
for _ in range(4 * 10**9 // (1 << 24)):
    w.write(chunk)
w.write(b".")' | zstd -q -1 >"$out/nones_4g.pickle.zst"
# 10^8 fetches of one memoized event, in batches of 1,000 appends: a legitimate shape at a
# hostile compression ratio (~20 KB).
python3 - "$out/fetch_1e8.pickle" <<'PY'
import struct, sys
u64 = lambda x: struct.pack("<Q", x)
s = lambda x: b"\x8c" + bytes([len(x)]) + x.encode()
frame = b"}(" + s("name") + s("f") + s("filename") + s("x.py") + s("line") + b"K\x01u"
event = (b"}(" + s("action") + s("alloc") + s("addr") + b"\x8a\x08" + u64(4096) + s("size") + b"\x8a\x08" + u64(512)
         + s("stream") + b"K\x00" + s("time_us") + b"\x8a\x08" + u64(1) + s("frames") + b"](" + frame + b"eu")
with open(sys.argv[1], "wb") as f:
    f.write(b"\x80\x04}(" + s("segments") + b"]" + s("device_traces") + b"](](" + event + b"\x94e")
    batch = b"(" + b"h\x00" * 1000 + b"e"
    for _ in range(100000):
        f.write(batch)
    f.write(b"eu.")
PY
zstd -q -19 -f --rm "$out/fetch_1e8.pickle"
for f in memo_ladder.pickle concat.pickle.lz4 many_live_1e6.pickle many_live_3e6.pickle \
         bytes8_10g.pickle.zst nones_4g.pickle.zst fetch_1e8.pickle.zst; do
  for cmd in stats index; do
    args=("$cmd" "$out/$f" --no-cache)
    [[ $cmd == index ]] && args=(index "$out/$f" -o "$out/$f.memviz")
    set +e
    /usr/bin/time -f "%e s %M KB" -o "$out/time" "$memviz" "${args[@]}" >/dev/null 2>"$out/err"
    code=$?
    set -e
    printf '%-22s %-6s exit %s  %s  %s\n' "$f" "$cmd" "$code" "$(cat "$out/time" | tail -1)" "$(head -c 160 "$out/err" | head -1)"
    rm -f "$out/$f.memviz"
  done
done
