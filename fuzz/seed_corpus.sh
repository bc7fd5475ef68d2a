#!/usr/bin/env bash
# Seed corpora for the fuzz targets, made from the bundled real fixtures, the synthetic ones and
# the mutation corpus of tests/data/mutate.py (every real or synthetic pickle under each of its
# twelve mutations) and the golden archives' bodies (without header or block table), written to fuzz/corpus/<target>/ (ignored
# by git).
#   bash fuzz/seed_corpus.sh && cd fuzz && cargo +nightly fuzz run pickle -- -max_len=1048576
set -euo pipefail
cd "$(dirname "$0")/.."
data=tests/data
out=fuzz/corpus
rm -rf "$out" && mkdir -p "$out"/{pickle,json,ingest} && tmp=$(mktemp -d)
for f in "$data"/*.pickle "$data"/synth/*.pickle; do
  cp "$f" "$out/pickle/"
  python3 "$data/mutate.py" "$f" "$tmp" >/dev/null
done
cp "$tmp"/*.pickle "$out/pickle/"
for f in "$data"/synth/*.pickle "$data"/fx_meta.pickle "$data"/oom_streams.pickle "$tmp"/fx_meta.*.pickle "$tmp"/annotate_meta.*.pickle; do
  j="$out/json/$(basename "$f" .pickle).json"
  if ! python3 extract_snapshot.py "$f" -o "$j"; then
    # A mutation extract_snapshot.py has no JSON form for (frames_tuple's tuples where it reads
    # lists) stays a pickle seed only; a fixture it cannot convert still stops the script.
    [[ $f == "$tmp"/* ]] || exit 1
    rm -f "$j" && echo "no JSON seed from $(basename "$f")" >&2
  fi
done
cp "$data"/synth/*.json "$data"/bad/*.json "$out/json/"
# The attack pass's hostile inputs that fit a seed (memo ladder, concatenated lz4 frames).
hostile=../shared/fixtures/hostile/make_hostile.py
if [[ -f $hostile ]]; then
  python3 "$hostile" "$tmp/hostile" >/dev/null
  cp "$tmp/hostile/memo_ladder.pickle" "$out/pickle/"
  cp "$tmp/hostile/memo_ladder.pickle" "$tmp/hostile/concat.pickle.lz4" "$out/ingest/" 2>/dev/null || true
fi
cp "$out"/pickle/* "$out"/json/* "$out/ingest/"
for f in annotate_meta host_memory two_devices; do
  p="$data/synth/$f.pickle"
  gzip -c "$p" >"$out/ingest/$f.pickle.gz"
  xz -c "$p" >"$out/ingest/$f.pickle.xz"
  bzip2 -c "$p" >"$out/ingest/$f.pickle.bz2"
  command -v zstd >/dev/null && zstd -q -c "$p" >"$out/ingest/$f.pickle.zst"
done
mkdir -p "$out/archive"
# An archive's body, as a seed for the `archive` target.
body() {
  python3 -c 'import struct, sys
d = open(sys.argv[1], "rb").read()
sys.stdout.buffer.write(d[64:64 + struct.unpack_from("<Q", d, 16)[0]])' "$1" >"$out/archive/$(basename "$1").body"
}
# A body is the header's archive_len bytes after it (the block table since format 6 follows: the
# rkyv root sits at the body's end). Only the current version's body validates as the current
# schema; the older ones stay as seeds the harness turns away.
for f in "$data"/golden/*.memviz; do
  body "$f"
done
# Checksum-valid hostile archives (issue 41): one field of the current golden changed per
# variant, on the parts the viewer and commands divide by, index with or trust.
made=tests/data/hostile/make_hostile_archives.py
current=$(ls "$data"/golden/*.memviz | sort -V | tail -1)
python3 "$made" "$current" "$tmp/archives" --no-chunks \
  --only minimap,levels,tiles,origin,annotations,traces,devices.len,spans,checkpoints,action_time_us >/dev/null
for f in "$tmp"/archives/*.memviz; do
  body "$f"
done
rm -rf "$tmp"
echo "seeds: $(ls "$out/pickle" | wc -l) pickle, $(ls "$out/json" | wc -l) json, $(ls "$out/ingest" | wc -l) ingest, $(ls "$out/archive" | wc -l) archive"
