#!/usr/bin/env python3
"""Convert a PyTorch CUDA memory snapshot pickle into JSON of the same schema.

    python3 extract_snapshot.py SNAPSHOT [-o OUT.json]      (JSON to stdout without -o)

This is the independent, stdlib-only reference for memviz's Rust reader: the tests check that the
Rust reader gives identical results from a pickle and from the JSON this script writes for it.

Input: a pickle (any protocol; torch writes 4, Python 3.14 writes 5), plain or gzip'd. Compression is detected by magic bytes, never by
the file name: 1f 8b is gzip; 28 b5 2f fd (zstd) and fd 37 7a 58 5a 00 (xz) are refused with a
hint, because the standard library cannot (zstd) or memviz does not (xz) read them.

Safety: the pickle is read by a restricted Unpickler whose find_class always raises, so no code
from the file ever runs (GLOBAL, STACK_GLOBAL, INST/OBJ/EXT and everything built on them fail).
After loading, the object is checked to hold only dict, list, tuple, str, int, float, bool and
None, with str dict keys, no cycles and bounded nesting. The top level must be a dict with
`segments` and/or `device_traces` (lists), or a bare list (a legacy snapshot of segments only).
Bytes after the pickle's STOP opcode are an error (a corrupt or concatenated file).

Output: json.dump(obj, separators=(",", ":")) plus a newline; key order is kept as in the pickle,
tuples become lists, ints keep every digit (addresses can exceed 2**63), non-ASCII is \\u-escaped.
With -o the JSON goes to a temporary file renamed into place, so an error leaves no partial file.

Errors: one line `error: <file>: <what>` on stderr and exit status 1 (2 for usage errors).
"""
import argparse
import contextlib
import gzip
import io
import json
import math
import os
import pickle
import pickletools
import sys
import zlib

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
XZ_MAGIC = b"\xfd7zXZ\x00"
SCALARS = (str, int, float, bool, type(None))
CONTAINERS = (dict, list, tuple)
MAX_DEPTH = 64  # real snapshots nest 6 deep (dict > list > list > dict > list > dict)
# Opcodes that load a global (find_class), call it, or need a persistent_load / buffer callback.
CODE_OPCODES = {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "EXT1", "EXT2", "EXT4", "REDUCE",
                "NEWOBJ", "NEWOBJ_EX", "BUILD", "PERSID", "BINPERSID", "NEXT_BUFFER"}


class InputError(Exception):
    """Something wrong with the input; the message is the `<what>` of the error line."""


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that refuses every global, so a pickle can only build plain data."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refusing persistent id (PERSID/BINPERSID)")


def read_input(path):
    """Return the pickle bytes of `path`, gunzipped when it starts with the gzip magic."""
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise InputError("empty file (0 bytes)")
    if data.startswith(ZSTD_MAGIC):
        raise InputError("zstd-compressed input is not supported by this stdlib-only script; "
                         "decompress it first (zstd -d) and pass the .pickle")
    if data.startswith(XZ_MAGIC):
        raise InputError("xz-compressed input is not supported; decompress it first (xz -dk)")
    if data.startswith(GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as e:
            raise InputError(f"bad gzip stream: {e}") from None
        if not data:
            raise InputError("gzip stream decompresses to 0 bytes")
    return data


def locate(data):
    """Best-effort ` at byte N (opcode X)` for a failed load: the first code-running opcode, or
    the opcode where the stream stops parsing. Pure Python, so only used on errors."""
    stream = io.BytesIO(data)
    next_op = 0  # start of the opcode after the last one genops parsed
    try:
        for op, _arg, pos in pickletools.genops(stream):
            if op.name in CODE_OPCODES:
                return f" at byte {pos} (opcode {op.name})"
            next_op = stream.tell()
    except Exception:  # the opcode at next_op is unknown or its argument is cut short
        name = pickletools.code2op.get(chr(data[next_op])) if next_op < len(data) else None
        return f" at byte {next_op}" + (f" (opcode {name.name})" if name else "")
    return ""


def load_pickle(data):
    """Unpickle `data` with RestrictedUnpickler; errors carry a byte offset where known."""
    stream = io.BytesIO(data)
    try:
        # CPython prints a stray SystemError to stderr when a huge BYTEARRAY8 fails to load;
        # keep stderr to our one line.
        with contextlib.redirect_stderr(io.StringIO()):
            obj = RestrictedUnpickler(stream).load()
    except RecursionError:
        raise InputError("pickle nests too deeply") from None
    except MemoryError:  # a corrupt length field: report where, like any other corruption
        raise InputError("bad pickle: a length asks for more memory than there is"
                         + locate(data)) from None
    except Exception as e:  # UnpicklingError, EOFError, ValueError, TypeError, struct.error, ...
        if isinstance(e, EOFError) or "truncated" in str(e):
            what = "truncated pickle (no STOP opcode before end of data)"
        elif data.lstrip()[:1] in (b"{", b"["):
            raise InputError("not a pickle: this looks like JSON, which needs no conversion")
        elif str(e).startswith("invalid load key") and not data.startswith(b"\x80"):
            what = f"not a pickle: {e}"  # no PROTO opcode and no valid opcode at byte 0
        else:
            what = f"bad pickle: {e}"
        raise InputError(what.rstrip(".") + locate(data)) from None
    end = stream.tell()
    if end != len(data):
        raise InputError(f"{len(data) - end} bytes of trailing data after the pickle's "
                         f"STOP opcode at byte {end - 1}")
    return obj


def fmt_path(path):
    """`device_traces[0][3].size` style location of a value."""
    out = ""
    if len(path) > 12:
        path = path[:6] + ["..."] + path[-5:]
    for k in path:
        if isinstance(k, int):
            out += f"[{k}]"
        elif k == "...":
            out += k
        elif k.isidentifier():
            out += f".{k}" if out else k
        else:
            out += f"[{json.dumps(k)}]"
    return out or "top level"


def check_plain(root):
    """Raise InputError unless `root` is a DAG of plain JSON-able values (shared objects OK)."""
    done, on_path, path = set(), {id(root)}, []
    frames = [(root, iter(root.items()) if type(root) is dict else enumerate(root))]
    while frames:
        container, items = frames[-1]
        is_dict = type(container) is dict
        for key, value in items:
            if is_dict and type(key) is not str:
                raise InputError(f"dict key {repr(key)[:60]} of type {type(key).__name__} at "
                                 f"{fmt_path(path)}; only str keys are allowed")
            t = type(value)
            if t is str:
                if not value.isascii():
                    try:
                        value.encode("utf-8")
                    except UnicodeEncodeError:
                        raise InputError(f"string with a lone surrogate at "
                                         f"{fmt_path(path + [key])}") from None
                continue
            if t in SCALARS:
                if t is int and value.bit_length() > 4096:  # str() enforces the digit limit
                    try:
                        str(value)
                    except ValueError:
                        raise InputError(f"integer with more than "
                                         f"{sys.get_int_max_str_digits()} digits at "
                                         f"{fmt_path(path + [key])}") from None
                if t is float and not math.isfinite(value):
                    raise InputError(f"non-finite float {value!r} at {fmt_path(path + [key])} "
                                     f"cannot be written as JSON")
                continue
            if t in CONTAINERS:
                if id(value) in done:
                    continue
                if id(value) in on_path:
                    raise InputError(f"reference cycle at {fmt_path(path + [key])}")
                if len(frames) >= MAX_DEPTH:
                    raise InputError(f"nesting deeper than {MAX_DEPTH} at "
                                     f"{fmt_path(path + [key])}")
                path.append(key)
                on_path.add(id(value))
                frames.append((value, iter(value.items()) if t is dict else enumerate(value)))
                break
            raise InputError(f"unsupported type {t.__name__} at {fmt_path(path + [key])}; "
                             f"snapshots hold only dict, list, tuple, str, int, float, bool, None")
        else:
            frames.pop()
            on_path.discard(id(container))
            done.add(id(container))
            if path:
                path.pop()


def check_snapshot(obj):
    """Raise InputError unless `obj` has the top-level shape of a snapshot."""
    if type(obj) is list:
        return  # legacy snapshot: a bare list of segments
    if type(obj) is not dict:
        raise InputError(f"not a snapshot: top level is {type(obj).__name__}, expected a dict "
                         f"(or a legacy list of segments)")
    if "segments" not in obj and "device_traces" not in obj:
        raise InputError("not a snapshot: top-level dict has neither 'segments' nor "
                         "'device_traces'")
    for key in ("segments", "device_traces"):
        if key in obj and type(obj[key]) is not list:
            raise InputError(f"{key} is {type(obj[key]).__name__}, expected list")


def write_json(obj, out):
    """Write `obj` as compact JSON to path `out` atomically, or to stdout when out is None/-."""
    if out in (None, "-"):
        json.dump(obj, sys.stdout, separators=(",", ":"), allow_nan=False)
        sys.stdout.write("\n")
        sys.stdout.flush()
        return
    tmp = f"{out}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="ascii", buffering=1 << 20) as f:
            json.dump(obj, f, separators=(",", ":"), allow_nan=False)
            f.write("\n")
        os.replace(tmp, out)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.filename == tmp:
            e.filename = out  # name the file the user asked for, not our temporary
        raise


def convert(path, out):
    data = read_input(path)
    obj = load_pickle(data)
    del data
    check_snapshot(obj)
    check_plain(obj)
    try:
        write_json(obj, out)
    except RecursionError:
        raise InputError("cannot write JSON: nesting too deep") from None


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Convert a PyTorch CUDA memory snapshot pickle (plain or gzip) to JSON.")
    parser.add_argument("snapshot", help="snapshot pickle, plain or gzip'd")
    parser.add_argument("-o", "--output", metavar="OUT.json", help="output file (default: stdout)")
    args = parser.parse_args(argv)
    try:
        convert(args.snapshot, args.output)
    except InputError as e:
        return fail(args.snapshot, str(e))
    except OSError as e:
        if isinstance(e, BrokenPipeError):  # the reader went away (| head): no message
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # quiet exit flush
            return 1
        name = e.filename if e.filename is not None else args.snapshot
        return fail(name, e.strerror or str(e))
    except MemoryError:
        return fail(args.snapshot, "out of memory")
    return 0


def fail(name, what):
    print(f"error: {name}: {' '.join(str(what).split())}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
