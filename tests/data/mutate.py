#!/usr/bin/env python3
"""Write the mutation corpus of one snapshot: variants that real files (or other tools) produce
and that must leave the Active Memory Timeline layout exactly as it is.

    python3 tests/data/mutate.py IN.pickle OUTDIR            every mutation
    python3 tests/data/mutate.py --only line_max IN OUTDIR   only these (repeat, or a,b,c)
    python3 tests/data/mutate.py --list                      the mutation names, one a line

IN is a snapshot pickle, a .json snapshot, or either gzip'd (detected by magic bytes). Each
mutation loads IN afresh (pickle.load keeps the memo's sharing: one dict per frame, one list per
stack) and writes OUTDIR/<stem>.<mutation>.pickle with pickle.dump(..., protocol=4), <stem> being
IN's name without .gz/.pickle/.pkl/.json. Every shared object is changed once, in place (ids
are tracked, and every visited object is kept alive so no id is reused); a shared frame list
that becomes a tuple becomes one tuple shared the same way. Nothing depends on set order, time
or randomness: re-running writes the same bytes.

The mutations (see tests/data/synth/README.md, "Mutation corpus", for what each one models and
which tolerated oddity `stats` should count for it):
  line_max           every frame's `line` = 2**64-1
  line_neg           every frame's `line` = -1
  line_none          every frame's `line` = None
  filename_none      every frame's `filename` = None
  name_none          every frame's `name` = None
  frames_tuple       every `frames` / `forward_frames` list, every `blocks` list and the
                     `segments` (and `host_segments`) list become tuples (a bare legacy list
                     stays a list: it is the snapshot itself; empty lists all become the one
                     empty tuple `()`, which CPython shares)
  time_float         every `time_us` (trace entries, external annotations) = float(t) + 0.25
  metadata_dict      every trace entry's `user_metadata` = {"tag": old, "n": 1} and its
                     `compile_context` = ["N/A", 0]
  merged_free        every `free_requested` dropped, every `free_completed` renamed `free`
  unknown_keys       zz_future_key / zz_future_list / zz_future_dict added to the top level, every
                     trace entry, frame, segment, block, external annotation, allocator_settings
  blocks_no_address  `address` deleted from every block (checked first: it must equal the running
                     sum of block sizes from the segment's `address`, else the tool fails)
  no_frames          `frames` and `forward_frames` deleted from every trace entry, segment, block

"Every frame" is every dict in a `frames` or `forward_frames` list of a trace entry, a segment, a
block or a legacy block `history` entry; "trace entries" are those of `device_traces` and
`host_traces`; "segments" those of `segments` (or a bare legacy list) and `host_segments`.
Stdlib only.
"""
import argparse
import gzip
import json
import os
import pickle
import sys

FRAME_KEYS = ("frames", "forward_frames")
FREE = "free"  # one object: every renamed event refers to it (one memo entry)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    name = path[:-3] if path.endswith(".gz") else path
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if name.endswith(".json") or data.lstrip()[:1] in (b"{", b"["):
        return json.loads(data)
    return pickle.loads(data)


def stem_of(path):
    base = os.path.basename(path)
    for ext in (".gz", ".pickle", ".pkl", ".json"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base


class Walk:
    """The places of a snapshot, each object yielded once (by id)."""

    def __init__(self, snap):
        self.snap = snap
        self.keep = [snap]  # everything visited stays alive: ids stay unique

    def _once(self, objs):
        seen = set()
        for o in objs:
            if id(o) not in seen:
                seen.add(id(o))
                self.keep.append(o)
                yield o

    def top(self):
        return self.snap if isinstance(self.snap, dict) else None

    def segment_lists(self):
        """(container, key) of each list of segments; container None for a bare legacy list."""
        top = self.top()
        if top is None:
            if isinstance(self.snap, (list, tuple)):
                yield None, None
            return
        for key in ("segments", "host_segments"):
            if isinstance(top.get(key), (list, tuple)):
                yield top, key

    def segments(self):
        def gen():
            for container, key in self.segment_lists():
                for seg in (self.snap if container is None else container[key]):
                    if isinstance(seg, dict):
                        yield seg
        return self._once(gen())

    def blocks(self):
        def gen():
            for seg in self.segments():
                if isinstance(seg.get("blocks"), (list, tuple)):
                    for b in seg["blocks"]:
                        if isinstance(b, dict):
                            yield b
        return self._once(gen())

    def history(self):
        def gen():
            for b in self.blocks():
                if isinstance(b.get("history"), (list, tuple)):
                    for h in b["history"]:
                        if isinstance(h, dict):
                            yield h
        return self._once(gen())

    def traces(self):
        """Each list of trace entries: every device's, and host_traces (one flat list)."""
        top = self.top()
        if top is None:
            return
        if isinstance(top.get("device_traces"), (list, tuple)):
            for trace in top["device_traces"]:
                if isinstance(trace, (list, tuple)):
                    yield trace
        if isinstance(top.get("host_traces"), (list, tuple)):
            yield top["host_traces"]

    def events(self):
        return self._once(e for trace in self.traces() for e in trace if isinstance(e, dict))

    def annotations(self):
        top = self.top()
        anns = top.get("external_annotations") if top is not None else None
        if not isinstance(anns, (list, tuple)):
            return iter(())
        return self._once(a for a in anns if isinstance(a, dict))

    def frame_holders(self):
        return [*self.events(), *self.segments(), *self.blocks(), *self.history()]

    def frame_lists(self):
        """(holder, key, list) for every frames/forward_frames value that is a list or tuple."""
        for holder in self.frame_holders():
            for key in FRAME_KEYS:
                v = holder.get(key)
                if isinstance(v, (list, tuple)):
                    yield holder, key, v

    def frames(self):
        return self._once(f for _, _, fl in self.frame_lists() for f in fl if isinstance(f, dict))


# ---------------------------------------------------------------------------------------------
# Mutations: each takes a Walk, changes its snapshot in place, returns how many objects changed
# ---------------------------------------------------------------------------------------------


def set_frame_key(key, value):
    def mutate(w):
        n = 0
        for f in w.frames():
            f[key] = value
            n += 1
        return n
    return mutate


def frames_tuple(w):
    as_tuple = {}  # id(list) -> its one tuple, so shared lists stay shared

    def conv(v):
        t = as_tuple.get(id(v))
        if t is None:
            t = as_tuple[id(v)] = tuple(v)
            w.keep.append(v)
        return t

    n = 0
    for holder, key, v in list(w.frame_lists()):
        if isinstance(v, list):
            holder[key] = conv(v)
            n += 1
    for seg in list(w.segments()):
        if isinstance(seg.get("blocks"), list):
            seg["blocks"] = conv(seg["blocks"])
            n += 1
    for container, key in list(w.segment_lists()):
        if container is None:
            continue  # a bare legacy list is the snapshot itself: it stays a list
        if isinstance(container[key], list):
            container[key] = conv(container[key])
            n += 1
    return n


def time_float(w):
    n = 0
    for d in [*w.events(), *w.annotations()]:
        t = d.get("time_us")
        if isinstance(t, int) and not isinstance(t, bool):
            d["time_us"] = float(t) + 0.25
            n += 1
    return n


def metadata_dict(w):
    n = 0
    for e in w.events():
        e["user_metadata"] = {"tag": e.get("user_metadata"), "n": 1}
        e["compile_context"] = ["N/A", 0]
        n += 1
    return n


def merged_free(w):
    n = 0
    for trace in list(w.traces()):
        if not isinstance(trace, list):
            continue
        kept = [e for e in trace if not (isinstance(e, dict) and e.get("action") == "free_requested")]
        n += len(trace) - len(kept)
        trace[:] = kept
    for e in w.events():
        if e.get("action") == "free_completed":
            e["action"] = FREE
            n += 1
    return n


def unknown_keys(w):
    def add(d):
        d["zz_future_key"] = 1
        d["zz_future_list"] = [1, "a"]
        d["zz_future_dict"] = {"a": None}

    places = []
    top = w.top()
    if top is not None:
        places.append(top)
        if isinstance(top.get("allocator_settings"), dict):
            places.append(top["allocator_settings"])
    places += [*w.events(), *w.frames(), *w.segments(), *w.blocks(), *w.annotations()]
    n = 0
    for d in w._once(places):
        add(d)
        n += 1
    return n


def blocks_no_address(w):
    n = 0
    for seg in list(w.segments()):
        if not isinstance(seg.get("blocks"), (list, tuple)):
            continue
        addr = seg.get("address")
        for i, b in enumerate(seg["blocks"]):
            if not isinstance(b, dict):
                continue
            if "address" in b:
                if b["address"] != addr:
                    raise SystemExit(
                        f"blocks_no_address: block {i} of the segment at {seg.get('address'):#x} "
                        f"(device {seg.get('device')}) is at {b['address']:#x}, not at the running "
                        f"sum {addr:#x}: deleting its address would move it")
                del b["address"]
                n += 1
            addr += b["size"]
    return n


def no_frames(w):
    n = 0
    for holder in [*w.events(), *w.segments(), *w.blocks()]:
        for key in FRAME_KEYS:
            if key in holder:
                del holder[key]
                n += 1
    return n


MUTATIONS = {
    "line_max": set_frame_key("line", 2**64 - 1),
    "line_neg": set_frame_key("line", -1),
    "line_none": set_frame_key("line", None),
    "filename_none": set_frame_key("filename", None),
    "name_none": set_frame_key("name", None),
    "frames_tuple": frames_tuple,
    "time_float": time_float,
    "metadata_dict": metadata_dict,
    "merged_free": merged_free,
    "unknown_keys": unknown_keys,
    "blocks_no_address": blocks_no_address,
    "no_frames": no_frames,
}


def mutate(path, name):
    """(mutated snapshot, number of objects changed)."""
    w = Walk(load(path))
    n = MUTATIONS[name](w)
    return w.snap, n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="print the mutation names and exit")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="write only this mutation (repeatable, or comma-separated)")
    ap.add_argument("input", nargs="?", help="snapshot: .pickle, .json, optionally gzip'd")
    ap.add_argument("outdir", nargs="?", help="where <stem>.<mutation>.pickle files go")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(MUTATIONS))
        return 0
    if not args.input or not args.outdir:
        ap.error("IN and OUTDIR are required (or --list)")
    names = [n for o in args.only for n in o.split(",") if n] or list(MUTATIONS)
    unknown = [n for n in names if n not in MUTATIONS]
    if unknown:
        ap.error(f"unknown mutation(s): {', '.join(unknown)} (see --list)")
    os.makedirs(args.outdir, exist_ok=True)
    stem = stem_of(args.input)
    for name in names:
        snap, n = mutate(args.input, name)
        out = os.path.join(args.outdir, f"{stem}.{name}.pickle")
        with open(out, "wb") as f:
            pickle.dump(snap, f, protocol=4)
        print(f"{out}: {n} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
