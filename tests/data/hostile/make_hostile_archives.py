#!/usr/bin/env python3
"""Write hostile variants of a valid `.memviz` archive (format 6 to 8, the current schema):
each changes one integer field (or one value inside one zstd chunk) and recomputes every
checksum (the block table, the header's archive_hash and header_hash), so the variant passes
the checksum checks and rkyv validation reaches the changed value (issue 41, item 4: "the
viewer never hangs").

    python3 make_hostile_archives.py IN.memviz --dump              the field map (path, offset, value)
    python3 make_hostile_archives.py IN.memviz OUTDIR              every variant, and OUTDIR/manifest.tsv
    python3 make_hostile_archives.py IN.memviz OUTDIR --only tiles,checkpoints   paths containing any
    python3 make_hostile_archives.py IN.memviz OUTDIR --no-chunks  only fields outside zstd chunks
    python3 make_hostile_archives.py IN.memviz OUT.memviz --set 'devices[0].tiles[3].tiles[0].rows=1'
    python3 make_hostile_archives.py IN.memviz OUT.memviz --chunk 'devices[0].allocator.states[0]:u64:0=4294967295'
    python3 make_hostile_archives.py IN.memviz OUT.memviz --flip 'devices[0].tiles[-1].tiles[0]:100'
    python3 make_hostile_archives.py --selftest                    XXH64 test vectors

Paths name the archived fields as in format/FORMAT.md: `devices[0].checkpoints.every`,
`devices[0].totals[17]` (an element of a vector), `devices[0].totals.len` (a vector's length
field), `devices[0].tiles[2].tiles[0].rows`; `[-1]` is a vector's last item. `--set`, `--chunk`
and `--flip` (one byte of a chunk's compressed frame, xor 0xff, like a bit flip on disk: the
"one byte changed" of issue 41) may repeat.

Values inside chunks are changed by decompressing the chunk with the `zstd` command-line tool
(the Python `zstandard` module is not required), changing one value and compressing it again
(the shortest of levels 3, 19 and 22); the new frame replaces the old in place and the chunk's
`data` length is shortened to it (rkyv leaves the tail unreferenced). A chunk whose new frame
would be longer than the old one is skipped (it cannot move: rkyv's validator wants a child
before its parent). Without a `zstd` tool only the fields outside chunks are changed.

Python 3 standard library only. Nothing depends on time or randomness: re-running writes the
same files.
"""

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

# --------------------------------------------------------------------------------------------
# XXH64 (seed-able), as format/src/hash.rs.

M64 = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _round(acc, inp):
    acc = (acc + inp * P2) & M64
    return (_rotl(acc, 31) * P1) & M64


def _merge(acc, val):
    acc ^= _round(0, val)
    return (acc * P1 + P4) & M64


def xxh64(data, seed=0):
    n = len(data)
    i = 0
    if n >= 32:
        v1 = (seed + P1 + P2) & M64
        v2 = (seed + P2) & M64
        v3 = seed & M64
        v4 = (seed - P1) & M64
        limit = n - 32
        unpack = struct.Struct("<4Q").unpack_from
        while i <= limit:
            a, b, c, d = unpack(data, i)
            v1 = (_rotl((v1 + a * P2) & M64, 31) * P1) & M64
            v2 = (_rotl((v2 + b * P2) & M64, 31) * P1) & M64
            v3 = (_rotl((v3 + c * P2) & M64, 31) * P1) & M64
            v4 = (_rotl((v4 + d * P2) & M64, 31) * P1) & M64
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & M64
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, i)
        h ^= _round(0, k)
        h = (_rotl(h, 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h ^= (k * P1) & M64
        h = (_rotl(h, 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h ^= (data[i] * P5) & M64
        h = (_rotl(h, 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    h ^= h >> 32
    return h


def selftest():
    assert xxh64(b"") == 0xEF46DB3751D8E999, hex(xxh64(b""))
    assert xxh64(b"a") == 0xD24EC4F1A98C6E5B, hex(xxh64(b"a"))
    assert xxh64(b"abc") == 0x44BC2CF5AD770999, hex(xxh64(b"abc"))
    s = b"Nobody inspects the spammish repetition"
    assert xxh64(s) == 0xFBCEA83C8A378BF1, hex(xxh64(s))
    print("xxh64 ok")


# --------------------------------------------------------------------------------------------
# The container: header, archive, block table (FORMAT.md section 1).

HEADER_LEN = 64
BLOCK_LEN = 64 * 1024
MAGIC = b"\x89MVZ\r\n\x1a\n"


def parse_header(f):
    if f[:8] != MAGIC:
        sys.exit("not a .memviz archive")
    version, flags, archive_len = struct.unpack_from("<IIQ", f, 8)
    if version < 6:
        sys.exit(f"format {version}: only formats 6 to 8 (the block table, the current schema) are handled")
    return version, archive_len


def reseal(f):
    """Recomputes the block table, archive_hash and header_hash of file bytes `f` (a bytearray)."""
    _, archive_len = parse_header(f)
    body = bytes(f[HEADER_LEN:HEADER_LEN + archive_len])
    table = b"".join(struct.pack("<Q", xxh64(body[i:i + BLOCK_LEN])) for i in range(0, archive_len, BLOCK_LEN))
    start = HEADER_LEN + archive_len
    f[start:start + len(table)] = table
    struct.pack_into("<Q", f, 24, xxh64(table))
    struct.pack_into("<Q", f, 56, xxh64(bytes(f[:56])))
    return f


# --------------------------------------------------------------------------------------------
# The rkyv layout (FORMAT.md section 2; rkyv 0.8, little-endian, aligned, 64-bit pointers):
# repr(C) structs, Vec = (i64 relative pointer, u64 length), String = 16 bytes (inline up to
# 16, else length with 2 tag bits and an i64 relative offset), Option = u8 tag then the value.

PRIM = {"u8": (1, "<B"), "bool": (1, "<B"), "u32": (4, "<I"), "i32": (4, "<i"), "u64": (8, "<Q"), "i64": (8, "<q")}


def vec(t):
    return ("vec", t)


def opt(t):
    return ("opt", t)


def tup(*ts):
    return ("struct", [(f"{i}", t) for i, t in enumerate(ts)])


def arr(t, n):
    return ("arr", t, n)


def struct_(*fields):
    return ("struct", list(fields))


STR = ("str",)

Source = struct_(("name", STR), ("format", STR), ("file_bytes", "u64"), ("decoded_bytes", "u64"))
FrameTable = struct_(("name", vec("u32")), ("filename", vec("u32")), ("line", vec("i64")),
                     ("fx", vec(tup("u32", arr("u32", 5)))))
StackTable = struct_(("offsets", vec("u32")), ("frames", vec("u32")))
Chunk = ("chunk", struct_(("rows", "u32"), ("data", vec("u8"))))
EventTable = struct_(
    ("len", "u32"), ("chunk_rows", "u32"),
    ("action", vec(Chunk)), ("addr", vec(Chunk)), ("size", vec(Chunk)), ("time_us", vec(Chunk)),
    ("stack", vec(Chunk)),
    ("stream", vec(tup("u32", "u64"))), ("compile_context", vec(tup("u32", "u32"))),
    ("user_metadata", vec(tup("u32", "u32"))), ("internal_metadata", vec(tup("u32", "u32"))),
    ("category", vec(tup("u32", "u32"))), ("other_action", vec(tup("u32", "u32"))),
    ("device_free", vec(tup("u32", "u64"))), ("forward_stack", vec(tup("u32", "u32"))),
    ("pool_id", vec(tup("u32", tup("i64", "i64")))))
Segment = struct_(
    ("device", "u32"), ("address", "u64"), ("total_size", "u64"), ("allocated_size", "u64"),
    ("active_size", "u64"), ("requested_size", "u64"), ("stream", "u64"), ("segment_type", "u32"),
    ("pool_id", opt(tup("i64", "i64"))), ("is_expandable", "bool"), ("stack", "u32"),
    ("forward_stack", "u32"), ("blocks", tup("u32", "u32")))
Block = struct_(("address", "u64"), ("size", "u64"), ("requested_size", "u64"), ("state", "u8"),
                ("state_str", "u32"), ("stack", "u32"), ("forward_stack", "u32"))
Annotation = struct_(("name", "u32"), ("stage", "u8"), ("stage_str", "u32"), ("device", "i64"), ("time_us", "i64"))
Elements = struct_(*[(n, vec("u64")) for n in ("addr", "size")],
                   *[(n, vec("u32")) for n in ("start", "end")], ("origin", vec("u8")),
                   *[(n, vec("u32")) for n in ("alloc_event", "free_event", "block", "stack", "slot",
                                               "annotated", "annotation")])
MinMax = struct_(("actions_per_bucket", "u64"), ("min", vec("u64")), ("max", vec("u64")))
Checkpoints = struct_(("every", "u32"), ("starts", vec("u32")), ("ids", vec("u32")))
TileLevel = struct_(("level", "u32"), ("columns", "u32"), ("sample", vec("u32")), ("tiles", vec(Chunk)))
Span = struct_(("name", "u32"), ("start_us", "i64"), ("end_us", "i64"), ("depth", "u32"))
Reserved = struct_(("initial", "u64"), ("time_us", vec("i64")), ("bytes", vec("u64")))
Series = struct_(("chunks", vec(Chunk)), ("levels", vec(MinMax)))
PoolSeries = struct_(("pool", tup("i64", "i64")), ("actions", vec("u32")), ("reserved", vec("u64")))
AllocatorSection = struct_(
    ("events", "u32"), ("every", "u32"), ("states", vec(Chunk)),
    *[(n, Series) for n in ("reserved", "allocated", "requested", "pending_free", "unallocated",
                            "largest_free", "segments")],
    ("pools", vec(PoolSeries)))
SegmentTimeline = struct_(
    ("elements", Elements), ("actions", vec("u32")), ("initial", vec("u32")), ("initial_total", "u64"),
    ("totals", vec("u64")), ("peak_bytes", "u64"), ("peak_action", "i64"), ("checkpoints", Checkpoints),
    ("tiles", vec(TileLevel)))
StepRow = struct_(("span", "u32"), ("start_action", "u32"), ("end_action", "u32"), ("total_start", "u64"),
                  ("total_end", "u64"), ("peak_bytes", "u64"), ("peak_action", "u32"), ("before_trace", "bool"))
Retaining = struct_(("stack", "u32"), ("bytes_per_step", "u64"), ("steps", "u32"))
Steps = struct_(("family", STR), ("rows", vec(StepRow)), ("retaining", vec(Retaining)))
Summary = struct_(("trace_start_us", "i64"), ("oom_events", vec("u32")), ("reserved_peak", "u64"),
                  ("span_actions", vec(tup("u32", "u32"))), ("steps", opt(Steps)))
Device = struct_(
    ("device", "u32"), ("elements", Elements), ("actions", vec("u32")), ("action_time_us", vec(Chunk)),
    ("initial", vec("u32")), ("initial_total", "u64"), ("totals", vec("u64")), ("peak_bytes", "u64"),
    ("peak_action", "i64"), ("minimap", vec(MinMax)), ("checkpoints", Checkpoints), ("tiles", vec(TileLevel)),
    ("spans", vec(Span)), ("reserved", Reserved), ("allocator", AllocatorSection),
    ("segment_timeline", SegmentTimeline), ("summary", opt(Summary)))
Root = struct_(
    ("source", Source), ("strings", vec(STR)), ("frames", FrameTable), ("stacks", StackTable),
    ("events", EventTable), ("traces", vec(tup("u32", "u32"))), ("host_trace", tup("u32", "u32")),
    ("segments", vec(Segment)), ("blocks", vec(Block)), ("annotations", vec(Annotation)),
    ("allocator_settings", opt(STR)), ("legacy", "bool"), ("unknown_keys", vec(tup(STR, "u64"))),
    ("tolerated", vec(tup(STR, "u64"))), ("devices", vec(Device)))


def align_of(t):
    if isinstance(t, str):
        return PRIM[t][0]
    k = t[0]
    if k in ("vec", "str"):
        return 8
    if k == "chunk":
        return align_of(t[1])
    if k == "opt":
        return max(1, align_of(t[1]))
    if k == "arr":
        return align_of(t[1])
    return max([align_of(ft) for _, ft in t[1]] or [1])


def _up(x, a):
    return (x + a - 1) // a * a


def layout(t):
    """(size, [(name, offset, type)]) of a struct type."""
    off = 0
    fields = []
    for name, ft in t[1]:
        off = _up(off, align_of(ft))
        fields.append((name, off, ft))
        off += size_of(ft)
    return _up(off, align_of(t)), fields


def size_of(t):
    if isinstance(t, str):
        return PRIM[t][0]
    k = t[0]
    if k in ("vec", "str"):
        return 16
    if k == "chunk":
        return size_of(t[1])
    if k == "opt":
        return _up(1, align_of(t[1])) + size_of(t[1])
    if k == "arr":
        return size_of(t[1]) * t[2]
    return layout(t)[0]


class Field:
    """One integer in the archive: `path`, absolute file offset, primitive type, value; `role`
    says what it is (scalar, vec_len, vec_ptr, elem, tag, chunk_rows) and `chunk` the chunk
    (offset of its Chunk struct) a chunk_rows belongs to."""

    __slots__ = ("path", "off", "prim", "value", "role", "extra")

    def __init__(self, path, off, prim, value, role, extra=None):
        self.path, self.off, self.prim, self.value, self.role, self.extra = path, off, prim, value, role, extra


class Archive:
    def __init__(self, data):
        self.f = bytearray(data)
        self.version, self.archive_len = parse_header(self.f)
        self.fields = []  # every Field
        self.chunks = []  # (path, chunk struct file offset, data file offset, data len, rows)
        root_pos = HEADER_LEN + self.archive_len - size_of(Root)
        self.walk(Root, root_pos, "")
        self.by_path = {fl.path: fl for fl in self.fields}

    def read(self, prim, off):
        return struct.unpack_from(PRIM[prim][1], self.f, off)[0]

    def add(self, path, off, prim, role, extra=None):
        fl = Field(path, off, prim, self.read(prim, off), role, extra)
        self.fields.append(fl)
        return fl

    def check_ptr(self, path, target, n, elem_size):
        lo, hi = HEADER_LEN, HEADER_LEN + self.archive_len
        if n and not (lo <= target and target + n * elem_size <= hi):
            raise ValueError(f"{path}: {n} items at {target} outside the archive: wrong layout?")

    def walk(self, t, off, path):
        if isinstance(t, str):
            self.add(path, off, t, "scalar")
            return
        k = t[0]
        if k == "struct":
            _, fields = layout(t)
            for name, foff, ft in fields:
                self.walk(ft, off + foff, f"{path}.{name}" if path else name)
        elif k == "chunk":
            _, fields = layout(t[1])
            rows = self.add(path + ".rows", off, "u32", "chunk_rows")
            rel, n = struct.unpack_from("<qQ", self.f, off + 8)
            self.check_ptr(path, off + 8 + rel, n, 1)
            self.add(path + ".data.len", off + 16, "u64", "vec_len", ("u8", 1))
            self.chunks.append((path, off, off + 8 + rel, n, rows.value))
        elif k == "arr":
            es = size_of(t[1])
            for i in range(t[2]):
                self.walk(t[1], off + i * es, f"{path}[{i}]")
        elif k == "opt":
            tag = self.add(path + ".tag", off, "u8", "tag")
            if tag.value == 1:
                self.walk(t[1], off + _up(1, align_of(t[1])), path)
        elif k == "str":
            b0 = self.f[off]
            if b0 & 0xC0 == 0x80:  # out of line
                self.add(path + ".strlen", off, "u64", "strlen")
        elif k == "vec":
            et = t[1]
            es = size_of(et)
            rel, n = struct.unpack_from("<qQ", self.f, off)
            target = off + rel
            self.check_ptr(path, target, n, es)
            self.add(path + ".ptr", off, "i64", "vec_ptr")
            self.add(path + ".len", off + 8, "u64", "vec_len", (et, es))
            if isinstance(et, str):
                # A column of integers: its first, second, middle and last items.
                for i in sorted({0, 1, n // 2, n - 1}):
                    if 0 <= i < n:
                        self.add(f"{path}[{i}]", target + i * es, et, "elem", n)
            elif et == STR:
                pass
            else:
                for i in range(n):
                    self.walk(et, target + i * es, f"{path}[{i}]")

    def set(self, path, value):
        fl = self.by_path.get(path)
        if fl is None:
            raise KeyError(f"no field {path!r} (see --dump)")
        struct.pack_into(PRIM[fl.prim][1], self.f, fl.off, wrap(fl.prim, value))

    def chunk_of(self, path):
        for c in self.chunks:
            if c[0] == path:
                return c
        raise KeyError(f"no chunk {path!r} (see --dump)")


def wrap(prim, v):
    size = PRIM[prim][0] * 8
    v &= (1 << size) - 1
    if prim in ("i64", "i32") and v >= 1 << (size - 1):
        v -= 1 << size
    return v


# --------------------------------------------------------------------------------------------
# Chunk contents through the zstd command-line tool.

ZSTD = shutil.which("zstd")


def zstd(args, data):
    p = subprocess.run([ZSTD, *args], input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.decode(errors="replace").strip())
    return p.stdout


def chunk_raw(a, chunk):
    _, _, doff, dlen, _ = chunk
    return zstd(["-d", "-q", "-c"], bytes(a.f[doff:doff + dlen]))


def put_chunk(a, chunk, raw):
    """Replaces `chunk`'s frame with `raw` compressed; False when it would not fit."""
    _, coff, doff, dlen, _ = chunk
    with tempfile.NamedTemporaryFile() as tmp:
        # From a file, so that the frame records its content size (as the Rust writer's does).
        tmp.write(raw)
        tmp.flush()
        frame = min((subprocess.run([ZSTD, "-q", "-c", *level, "--no-check", tmp.name],
                                    stdout=subprocess.PIPE, check=True).stdout
                     for level in (["-3"], ["-19"], ["--ultra", "-22"])), key=len)
    if len(frame) > dlen:
        return False
    a.f[doff:doff + len(frame)] = frame
    a.f[doff + len(frame):doff + dlen] = bytes(dlen - len(frame))
    struct.pack_into("<Q", a.f, coff + 16, len(frame))
    return True


def flip(a, off, mask=0xFF):
    a.f[off] ^= mask


def set_in_chunk(a, path, prim, index, value):
    chunk = a.chunk_of(path)
    raw = bytearray(chunk_raw(a, chunk))
    w, fmt = PRIM[prim]
    if index < 0:
        index += len(raw) // w
    if not 0 <= index * w < len(raw):
        raise IndexError(f"{path}: value {index} past its {len(raw) // w}")
    struct.pack_into(fmt, raw, index * w, wrap(prim, value))
    return put_chunk(a, chunk, bytes(raw))


# --------------------------------------------------------------------------------------------
# The variants.

U32_HOSTILE = [0, 1, 0x7FFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF]
U64_HOSTILE = [0, 1, 1 << 40, 1 << 62, M64]
I64_HOSTILE = [0, -1, -(1 << 63), (1 << 63) - 1]
U8_HOSTILE = [3, 255]
# --thorough: more values per field.
U32_MORE = [2, 31, 32, 63, 64, 255, 1 << 20, 1 << 31]
U64_MORE = [1 << 32, 1 << 53, (1 << 63) - 1, 1 << 63]
I64_MORE = [1, 1 << 53, -(1 << 53)]
THOROUGH = False


def hostile_values(fl):
    v = fl.value
    if fl.role == "vec_len":
        # In bounds (one less, zero) and out of bounds (one more, huge): bytecheck's business.
        out = [0, v - 1, v + 1] + ([v * 2, 1 << 40] if THOROUGH else []) if v else [1]
    elif fl.role in ("vec_ptr", "strlen"):
        return []  # moved pointers and string lengths only test bytecheck
    elif fl.role == "tag":
        return [1 - v] if v in (0, 1) else []
    elif fl.role == "chunk_rows":
        out = [0, v - 1, v + 1, v * 2, 0xFFFFFFFF]
    elif fl.role == "elem":
        # A column's item: zero, the sentinel / the largest, one more.
        big = {"u32": [0xFFFFFFFE, 0x7FFFFFFF], "u64": [M64, 1 << 62], "i64": [-(1 << 63), (1 << 63) - 1],
               "u8": [255]}[fl.prim]
        out = [0, v + 1] + big
    else:
        base = {"u32": U32_HOSTILE, "i32": U32_HOSTILE, "u64": U64_HOSTILE, "i64": I64_HOSTILE,
                "u8": U8_HOSTILE, "bool": [2]}[fl.prim]
        more = {"u32": U32_MORE, "i32": U32_MORE, "u64": U64_MORE, "i64": I64_MORE}.get(fl.prim, [])
        out = list(base) + [v + 1, v * 2] + (more + [v - 1, v // 2, v * 1000] if THOROUGH else [])
    seen, uniq = set(), []
    for x in out:
        x = wrap(fl.prim, x)
        if x != fl.value and x not in seen:
            seen.add(x)
            uniq.append(x)
    return uniq


def representative(fl):
    """Only the first item of a vector of structs is varied (the rest repeat its fields), but
    every device; a column's items are chosen in `Archive.walk`. --thorough varies all."""
    if THOROUGH:
        return True
    idx = re.findall(r"([a-z_]+)\[(\d+)\]", fl.path)
    if fl.role == "elem":
        idx = idx[:-1]
    # Every tile level; every min/max level's bucket width and lengths (their items: level 0).
    levels_ok = fl.role != "elem"
    return all(int(i) == 0 or name in ("devices", "tiles") or (name in ("minimap", "levels") and levels_ok)
               for name, i in idx)


# Chunk contents worth changing: (path suffix, width, indices); values as for a column item.
CHUNK_TARGETS = [
    # The allocator's saved state: S, B, then 6 words per segment, 4 per block.
    ("allocator.states[0]", "u64", [0, 1, 2, 3, 4, 5]),
    ("allocator.states[1]", "u64", [0, 1]),
    # Tile texels (element ids) and colour keys.
    ("tiles[-1].tiles[0]", "u32", [0, 255, 256 * 511]),
    ("tiles[-1].tiles[1]", "u32", [0, 255]),
    ("tiles[0].tiles[0]", "u32", [0]),
    ("segment_timeline.tiles[-1].tiles[0]", "u32", [0]),
    # Series (delta-coded i64) and the action times.
    ("allocator.reserved.chunks[0]", "i64", [0, 1]),
    ("allocator.segments.chunks[0]", "i64", [0, 1]),
    ("allocator.largest_free.chunks[0]", "i64", [0]),
    ("action_time_us[0]", "i64", [0, 1, -1]),
    # Event columns.
    ("events.action[0]", "u8", [0]),
    ("events.size[0]", "u64", [0]),
    ("events.time_us[0]", "i64", [0, 1]),
    ("events.stack[0]", "u32", [0]),
]
CHUNK_VALUES = {
    "u64": [0, 1 << 32, 1 << 40, (1 << 63) - 1, M64],
    "u32": [0xFFFFFFFD, 0x7FFFFFFF, 1 << 24],
    "i64": [-(1 << 63), (1 << 63) - 1, -1, 1 << 50],
    "u8": [200, 12],
}


def resolve_negative(a, path):
    """`tiles[-1]` → the last level's index, by the vec lengths in the field map."""
    parts = path.split("[-1]")
    out = parts[0]
    for rest in parts[1:]:
        n = a.by_path.get(out + ".len")
        if n is None or n.value == 0:
            return None
        out = f"{out}[{n.value - 1}]{rest}"
    return out


def variants(a, only, with_chunks):
    """(name, description, apply(archive) -> bool)."""
    out = []
    for fl in a.fields:
        if only and not any(o in fl.path for o in only):
            continue
        if not representative(fl):
            continue
        for v in hostile_values(fl):
            out.append((f"{fl.path}={v}", f"{fl.path} @{fl.off} {fl.prim} {fl.value} -> {v}",
                        (lambda p, val: lambda x: (x.set(p, val), True)[1])(fl.path, v)))
    if with_chunks:
        # One byte of a chunk's compressed frame changed in place (no recompression; what a bit
        # flip on disk does): past the frame header, in the middle, the last byte. zstd frames as
        # memviz writes them carry no checksum, so the frame either fails to decode or decodes to
        # other values of the right size.
        for path, _, doff, dlen, _ in a.chunks:
            if (only and not any(o in path for o in only)) or dlen < 16:
                continue
            for at in sorted({8, dlen // 2, dlen - 1}):
                out.append((f"{path}.data@{at}^ff", f"chunk {path} compressed byte {at} (file offset {doff + at}) xor 0xff",
                            (lambda o: lambda x: (flip(x, o), True)[1])(doff + at)))
    if with_chunks and ZSTD:
        devices = a.by_path["devices.len"].value
        for d in range(devices):
            for suffix, prim, indices in CHUNK_TARGETS:
                path = suffix if suffix.startswith("events.") else f"devices[{d}].{suffix}"
                path = resolve_negative(a, path)
                if path is None or not any(c[0] == path for c in a.chunks):
                    continue
                if only and not any(o in path for o in only):
                    continue
                for i in indices:
                    for v in CHUNK_VALUES[prim]:
                        name = f"{path}<{prim}>[{i}]={v}"
                        out.append((name, f"chunk {path} value {i} ({prim}) -> {v}",
                                    (lambda p, pr, ii, val: lambda x: set_in_chunk(x, p, pr, ii, val))(path, prim, i, v)))
    return out


def safe_name(s):
    keep = "".join(ch if ch.isalnum() or ch in "._-=" else "_" for ch in s)
    return keep[:150]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", nargs="?")
    ap.add_argument("output", nargs="?", help="a folder (every variant) or, with --set/--chunk, a file")
    ap.add_argument("--dump", action="store_true", help="print the field map and chunks")
    ap.add_argument("--only", default="", help="comma-separated substrings of the paths to vary")
    ap.add_argument("--no-chunks", action="store_true", help="leave every zstd chunk's contents alone")
    ap.add_argument("--set", action="append", default=[], metavar="PATH=VALUE")
    ap.add_argument("--chunk", action="append", default=[], metavar="PATH:PRIM:INDEX=VALUE")
    ap.add_argument("--flip", action="append", default=[], metavar="PATH:BYTE",
                    help="xor 0xff into byte BYTE of chunk PATH's compressed data (no recompression)")
    ap.add_argument("--thorough", action="store_true", help="more values, every item of every vector")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    global THOROUGH
    THOROUGH = args.thorough
    if args.selftest:
        selftest()
        return
    if not args.input:
        ap.error("IN.memviz is required")
    data = open(args.input, "rb").read()
    a = Archive(data)
    # The writer's own bytes reseal to themselves: the checksums are computed as memviz does.
    if bytes(reseal(bytearray(data))) != data:
        sys.exit("resealing the unchanged archive changed it: the checksum code is wrong")
    if args.dump:
        for fl in a.fields:
            print(f"{fl.off:8d} {fl.prim:4s} {fl.role:10s} {fl.path} = {fl.value}")
        for path, coff, doff, dlen, rows in a.chunks:
            print(f"chunk {path}: rows {rows}, {dlen} bytes at {doff}")
        return
    if args.set or args.chunk or args.flip:
        if not args.output:
            ap.error("OUT.memviz is required")
        for s in args.set:
            path, v = s.rsplit("=", 1)
            a.set(path, int(v, 0))
        for s in args.chunk:
            lhs, v = s.rsplit("=", 1)
            path, prim, index = lhs.rsplit(":", 2)
            if not set_in_chunk(a, resolve_negative(a, path) or path, prim, int(index), int(v, 0)):
                sys.exit(f"{path}: the changed chunk compresses larger than the original")
        for s in args.flip:
            path, at = s.rsplit(":", 1)
            _, _, doff, dlen, _ = a.chunk_of(resolve_negative(a, path) or path)
            if not 0 <= int(at) < dlen:
                sys.exit(f"{path}: byte {at} past its {dlen} compressed bytes")
            flip(a, doff + int(at))
        open(args.output, "wb").write(bytes(reseal(a.f)))
        return
    if not args.output:
        ap.error("OUTDIR is required")
    os.makedirs(args.output, exist_ok=True)
    stem = os.path.basename(args.input).removesuffix(".memviz")
    only = [o for o in args.only.split(",") if o]
    written = 0
    with open(os.path.join(args.output, "manifest.tsv"), "w") as manifest:
        manifest.write("file\tchange\n")
        for i, (name, desc, apply) in enumerate(variants(a, only, not args.no_chunks)):
            x = Archive(data)
            if not apply(x):
                continue
            fname = f"{stem}.{i:05d}.{safe_name(name)}.memviz"
            open(os.path.join(args.output, fname), "wb").write(bytes(reseal(x.f)))
            manifest.write(f"{fname}\t{desc}\n")
            written += 1
    print(f"{written} variants in {args.output} (manifest.tsv)")


if __name__ == "__main__":
    main()
