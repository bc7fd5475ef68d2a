#!/usr/bin/env python3
"""Write the synthetic edge-case snapshots, their golden layouts, and the bad-input files.

    python3 tests/data/synth/make_synth.py        (from anywhere; paths are relative to this file)

Outputs (see README.md here for what each case exercises):
  tests/data/synth/NAME.pickle       a small hand-written snapshot, pickle.dump'd (protocol 4
                                     unless the case is about protocols)
  tests/data/synth/NAME.layout.json  golden layout from ../shared/tools/timeline_oracle.py
                                     (found relative to the repository root)
  tests/data/synth/host_memory.host.layout.json   the oracle's layout of host_memory's pinned
                                     host side, as if it were a device ("device": "host")
  tests/data/synth/memoryviz_export.json (+ .layout.json)  a MemoryViz.js re-export, as JSON;
                                     its golden from the oracle's layout() imported as a module
  tests/data/bad/*                   inputs that must fail with a one-line error, exit 1

The snapshots follow the schema of the real torch 2.11 fixtures: the same keys in the same order,
frame dicts and whole frame lists shared between events as the *same* Python objects (so pickle
writes memo BINGETs for them, as real snapshots do), shared key strings, and a fresh 'N/A' string
per event for compile_context (real snapshots repeat that one as separate objects).

Deterministic: no clock, no unseeded randomness, gzip mtime 0. Re-running reproduces every byte
(the gzip'd bad file depends on this machine's zlib build; the rest on nothing but CPython's
pickle, which is stable for a given protocol).
"""
import decimal
import gzip
import json
import os
import pickle
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
ORACLE = os.path.normpath(os.path.join(REPO, "..", "shared", "tools", "timeline_oracle.py"))
BAD = os.path.join(REPO, "tests", "data", "bad")
GPT2_SMALL = os.path.join(REPO, "tests", "data", "gpt2_small.pickle")

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
T0 = 1796017411354716  # time_us of the first event in the real gpt2_small fixture
SIDE_STREAM = 94_000_000_000_000  # a cudaStream_t pointer value, > 2**32 (LONG1 in the pickle)

# ---------------------------------------------------------------------------------------------
# Shared strings and frames
# ---------------------------------------------------------------------------------------------

_STRINGS = {}


def s(text):
    """The one shared object for `text`, so every key or repeated value is memoised once."""
    return _STRINGS.setdefault(text, text)


def na():
    """A fresh 'N/A' object each call: real snapshots write compile_context per event."""
    return "".join(("N/", "A"))


def frame(name, filename, line):
    return {s("name"): s(name), s("filename"): s(filename), s("line"): line}


TORCH = "/opt/torch/.venv/lib/python3.12/site-packages/torch"
TRAIN = "/home/user/project/train.py"
MODEL = "/home/user/project/model.py"

F_CALL = frame("_call_impl", f"{TORCH}/nn/modules/module.py", 1790)
F_WCALL = frame("_wrapped_call_impl", f"{TORCH}/nn/modules/module.py", 1779)
F_MAIN = frame("<module>", TRAIN, 120)
F_TRAIN_FWD = frame("train", TRAIN, 59)
F_TRAIN_BWD = frame("train", TRAIN, 61)
F_TRAIN_OPT = frame("train", TRAIN, 62)
F_TRAIN_INIT = frame("train", TRAIN, 51)
F_BLOCK = frame("forward", MODEL, 41)
F_LINEAR = frame("forward", f"{TORCH}/nn/modules/linear.py", 125)
F_GELU = frame("forward", f"{TORCH}/nn/modules/activation.py", 734)
F_BACKWARD = frame("backward", f"{TORCH}/_tensor.py", 630)
F_ENGINE = frame("_engine_run_backward", f"{TORCH}/autograd/graph.py", 829)
F_AUTOGRAD = frame("backward", f"{TORCH}/autograd/__init__.py", 364)
F_ADAM = frame("_multi_tensor_adam", f"{TORCH}/optim/adam.py", 865)
F_ADAM_STEP = frame("step", f"{TORCH}/optim/adam.py", 247)
F_OPT_WRAP = frame("wrapper", f"{TORCH}/optim/optimizer.py", 516)
F_TO = frame("<lambda>", f"{TORCH}/nn/modules/module.py", 1097)
F_APPLY = frame("_apply", f"{TORCH}/nn/modules/module.py", 934)
F_CUDA = frame("cuda", f"{TORCH}/nn/modules/module.py", 1097)

# Whole stacks (innermost first), each one list object shared by every event that uses it.
ST_PARAM = [F_TO, F_APPLY, F_APPLY, F_CUDA, F_TRAIN_INIT, F_MAIN]
ST_LINEAR = [F_LINEAR, F_CALL, F_WCALL, F_BLOCK, F_CALL, F_WCALL, F_TRAIN_FWD, F_MAIN]
ST_GELU = [F_GELU, F_CALL, F_WCALL, F_BLOCK, F_CALL, F_WCALL, F_TRAIN_FWD, F_MAIN]
ST_BACKWARD = [F_ENGINE, F_AUTOGRAD, F_BACKWARD, F_TRAIN_BWD, F_MAIN]
ST_ADAM = [F_ADAM, F_ADAM_STEP, F_OPT_WRAP, F_TRAIN_OPT, F_MAIN]


F_INTERP = [frame("_PyEval_EvalFrameDefault", "??", 0), frame("PyMethod_New", "??", 0),
            frame("PyObject_Call", "??", 0)]
F_LIBC = [frame(name, "??", 0) for name in ("PyEval_EvalCode", "Py_RunMain", "Py_BytesMain",
                                             "__libc_start_main", "_start")]


def cxx_stack(python_stack):
    """A `stacks="all"` stack as in the real oom_streams fixture: C++ frames (line 0, file '??'
    or a .cpp basename), then interpreter frames interleaved with the Python frames, then the
    process entry frames (shared by every such stack)."""
    cxx = [
        ("torch::unwind::unwind()", "??"),
        ("torch::CapturedTraceback::gather(bool, bool, bool)", "??"),
        ("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp"),
        ("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long, "
         "CUstream_st*)", "CUDACachingAllocator.cpp"),
        ("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed "
         "char, unsigned long, CUstream_st*)", ""),
        ("at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, "
         "std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, "
         "std::optional<c10::MemoryFormat>)", "TensorFactories.cpp"),
        ("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10"
         "::CompileTimeFunctionPointer<at::Tensor (c10::SymIntArrayRef, std::optional<c10::Scalar"
         "Type>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std"
         "::optional<c10::MemoryFormat>), &at::(anonymous namespace)::wrapper_CUDA_memory_format_"
         "empty>>>::call(c10::OperatorKernel*, c10::DispatchKeySet)", "RegisterCUDA_0.cpp"),
        ("at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>, "
         "std::optional<c10::ScalarType>)", "??"),
        ("torch::autograd::THPVariable_empty(_object*, _object*, _object*)",
         "python_torch_functions_0.cpp"),
        ("PyCMethod_New", "??"),
        ("_PyObject_MakeTpCall", "??"),
    ]
    out = [frame(name, filename, 0) for name, filename in cxx]
    for f in python_stack:
        out.append(f)
        out.extend(F_INTERP)
    return out + F_LIBC


def allocator_settings():
    """The allocator_settings dict of a torch 2.11 snapshot (defaults)."""
    return {
        s("PYTORCH_CUDA_ALLOC_CONF"): "",
        s("max_split_size"): -1,
        s("garbage_collection_threshold"): 0.0,
        s("expandable_segments"): False,
        s("pinned_num_register_threads"): 1,
        s("release_lock_on_cudamalloc"): False,
        s("pinned_use_cuda_host_register"): False,
        s("graph_capture_record_stream_reuse"): False,
        s("roundup_power2_divisions"): {s(str(1 << i)): 0 for i in range(16)},
    }


# ---------------------------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------------------------


class Trace:
    """Appends trace events for one device with a deterministic clock."""

    def __init__(self, seed, t=T0):
        self.events = []
        self.t = t
        self.rng = random.Random(seed)

    def tick(self, lo=2, hi=400):
        self.t += self.rng.randint(lo, hi)
        return self.t

    def event(self, action, addr, size, stream=0, frames=None, time=True, device_free=None,
              **extra):
        ev = {s("action"): s(action)}
        if device_free is not None:  # only on `oom`, which has no addr
            ev[s("device_free")] = device_free
        if addr is not None:
            ev[s("addr")] = addr
        ev[s("size")] = size
        ev[s("stream")] = stream
        if time:
            ev[s("time_us")] = self.tick()
        ev[s("compile_context")] = na()
        ev[s("user_metadata")] = ""
        if frames is not None:
            ev[s("frames")] = frames
        for key, value in extra.items():
            ev[s(key)] = value
        self.events.append(ev)
        return ev

    def alloc(self, addr, size, frames, stream=0, **kw):
        return self.event("alloc", addr, size, stream, frames, **kw)

    def free_requested(self, addr, size, frames, stream=0, **kw):
        return self.event("free_requested", addr, size, stream, frames, **kw)

    def free_completed(self, addr, size, frames, stream=0, **kw):
        return self.event("free_completed", addr, size, stream, frames, **kw)

    def free(self, addr, size, frames, stream=0):
        """free_requested immediately followed by free_completed (the usual pair)."""
        self.free_requested(addr, size, frames, stream)
        self.free_completed(addr, size, frames, stream)

    def segment_alloc(self, addr, size, frames, stream=0):
        return self.event("segment_alloc", addr, size, stream, frames)

    def segment_free(self, addr, size, frames, stream=0):
        return self.event("segment_free", addr, size, stream, frames)


def block(size, state, requested=None, frames=None, address=True):
    """Block spec for segment(): address=False leaves the block's `address` key out."""
    return (size, state, size if requested is None else requested, frames, address)


def segment(address, blocks, device=0, stream=0, seg_type="large", frames=None):
    """A segment dict with its blocks laid out from `address`; totals computed as torch does
    (allocated: active_allocated blocks; active and requested: allocated or pending free)."""
    out, addr = [], address
    allocated = active = requested_total = 0
    for size, state, requested, bframes, with_address in blocks:
        b = {}
        if with_address:
            b[s("address")] = addr
        b[s("size")] = size
        b[s("requested_size")] = requested
        b[s("state")] = s(state)
        b[s("frames")] = bframes if bframes is not None else []
        out.append(b)
        if state == "active_allocated":
            allocated += size
        if state in ("active_allocated", "active_pending_free"):
            active += size
            requested_total += requested
        addr += size
    return {
        s("device"): device, s("address"): address, s("total_size"): addr - address,
        s("allocated_size"): allocated, s("active_size"): active,
        s("requested_size"): requested_total, s("stream"): stream,
        s("segment_type"): s(seg_type), s("segment_pool_id"): (0, 0),
        s("is_expandable"): False, s("frames"): frames if frames is not None else [],
        s("blocks"): out,
    }


def annotation(stage, name, device, time_us):
    return {s("stage"): s(stage), s("name"): s(name), s("device"): device, s("time_us"): time_us}


def snapshot(segments, traces, annotations=()):
    return {
        s("segments"): segments,
        s("device_traces"): traces,
        s("allocator_settings"): allocator_settings(),
        s("external_annotations"): list(annotations),
    }


def step_annotations(trace, device, names, t_start):
    """START/END pairs spanning [t_start, trace.t], nested as record_function writes them."""
    out = [annotation("START", n, device, t_start + i) for i, n in enumerate(names)]
    out += [annotation("END", n, device, trace.t + 1 + i) for i, n in enumerate(reversed(names))]
    return out


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------


def case_truncated_ring():
    """The ring buffer overflowed: the trace starts mid-run."""
    a, b, c = 0x7F3A_4000_0000, 0x7F3A_3E00_0000, 0x7F3A_6000_0000
    tr = Trace(seed=1)
    t_start = tr.t
    tr.free(a + 8 * MiB, 4 * MiB, ST_ADAM)            # free_only: alloc is older than the trace
    tr.free(b + 512 * KiB, 512 * KiB, ST_GELU)        # free_only
    tr.alloc(a + 4 * MiB, 2 * MiB, ST_LINEAR)         # live at the end (a block below)
    tr.alloc(b + 512 * KiB, 256 * KiB, ST_GELU)
    tr.free(b + 512 * KiB, 256 * KiB, ST_GELU)
    tr.free(a + 12 * MiB, 8 * MiB, ST_BACKWARD)       # free_only, then the address is reused
    tr.alloc(a + 12 * MiB, 8 * MiB, ST_BACKWARD)
    tr.segment_alloc(c, 2 * MiB, ST_GELU)
    tr.alloc(c, 1 * MiB, ST_GELU)
    tr.free(c, 1 * MiB, ST_GELU)
    tr.segment_free(c, 2 * MiB, ST_GELU)
    tr.free(b + 1 * MiB, 1 * MiB, ST_LINEAR)          # free_only
    tr.free_requested(a + 12 * MiB, 8 * MiB, ST_BACKWARD)  # pending at the end of the trace
    segments = [
        segment(b, [block(512 * KiB, "active_allocated", 400_000, ST_PARAM),      # ghost
                    block(1536 * KiB, "inactive", 1 * MiB)], seg_type="small"),
        segment(a, [block(4 * MiB, "active_allocated", 4_000_000, ST_PARAM),      # ghost
                    block(2 * MiB, "active_allocated", None, ST_LINEAR),          # the live alloc
                    block(2 * MiB, "active_allocated", 1_500_000, ST_PARAM, address=False),  # ghost
                    block(4 * MiB, "inactive", 3 * MiB),
                    block(8 * MiB, "active_pending_free", None, ST_BACKWARD)]),
    ]
    return snapshot(segments, [tr.events],
                    step_annotations(tr, 0, ["## step 7 ##", "## optimizer ##"], t_start))


def case_pending_free_stream():
    """A side-stream block whose free is requested early and completes much later."""
    a, side = 0x7F3A_4000_0000, 0x7F3A_8000_0000
    tr = Trace(seed=2)
    t_start = tr.t
    tr.segment_alloc(a, 20 * MiB, ST_PARAM)
    tr.alloc(a, 4 * MiB, ST_PARAM)                                   # live at the end
    tr.segment_alloc(side, 20 * MiB, ST_LINEAR, SIDE_STREAM)
    tr.alloc(side, 8 * MiB, ST_LINEAR, SIDE_STREAM)                  # the pending one
    tr.alloc(a + 4 * MiB, 2 * MiB, ST_LINEAR)
    tr.free_requested(side, 8 * MiB, ST_LINEAR, SIDE_STREAM)         # early: record_stream use
    for i in range(6):                                               # unrelated churn meanwhile
        x = a + 6 * MiB + (i % 2) * MiB
        tr.alloc(x, 1 * MiB, ST_GELU)
        if i % 2:
            tr.free(x - MiB, 1 * MiB, ST_GELU)
            tr.free(x, 1 * MiB, ST_GELU)
    tr.alloc(side + 8 * MiB, 2 * MiB, ST_GELU, SIDE_STREAM)
    tr.free(side + 8 * MiB, 2 * MiB, ST_GELU, SIDE_STREAM)
    tr.free(a + 4 * MiB, 2 * MiB, ST_LINEAR)
    tr.free_completed(side, 8 * MiB, ST_LINEAR, SIDE_STREAM)         # much later
    tr.alloc(side, 4 * MiB, ST_BACKWARD, SIDE_STREAM)                # reuses the address
    segments = [
        segment(a, [block(4 * MiB, "active_allocated", None, ST_PARAM),
                    block(16 * MiB, "inactive", 1 * MiB)]),
        segment(side, [block(4 * MiB, "active_allocated", None, ST_BACKWARD),
                       block(16 * MiB, "inactive", 2 * MiB)], stream=SIDE_STREAM),
    ]
    return snapshot(segments, [tr.events],
                    step_annotations(tr, 0, ["## step 0 ##", "## forward ##"], t_start))


def case_two_devices():
    """Two devices, each with its own trace, interleaved segments and annotations."""
    a0, b0, a1 = 0x7F3A_4000_0000, 0x7F3A_4200_0000, 0x7F20_0000_0000
    t0, t1 = Trace(seed=3), Trace(seed=4, t=T0 + 55)
    s0, s1 = t0.t, t1.t
    t0.segment_alloc(a0, 20 * MiB, ST_PARAM)
    t0.alloc(a0, 8 * MiB, ST_PARAM)                      # live
    t0.alloc(a0 + 8 * MiB, 4 * MiB, ST_LINEAR)
    t0.alloc(a0 + 12 * MiB, 4 * MiB, ST_GELU)
    t0.free(a0 + 8 * MiB, 4 * MiB, ST_LINEAR)
    t0.alloc(a0 + 8 * MiB, 2 * MiB, ST_BACKWARD)         # live
    t0.free(a0 + 12 * MiB, 4 * MiB, ST_GELU)
    t1.free(a1 + 2 * MiB, 2 * MiB, ST_ADAM)              # free_only on device 1
    t1.alloc(a1 + 4 * MiB, 4 * MiB, ST_LINEAR)
    t1.alloc(a1 + 8 * MiB, 1 * MiB, ST_GELU)             # live
    t1.free(a1 + 4 * MiB, 4 * MiB, ST_LINEAR)
    t1.alloc(a1 + 4 * MiB, 3 * MiB, ST_BACKWARD)
    t1.free(a1 + 4 * MiB, 3 * MiB, ST_BACKWARD)
    segments = [  # device order interleaved on purpose
        segment(a0, [block(8 * MiB, "active_allocated", None, ST_PARAM),
                     block(2 * MiB, "active_allocated", None, ST_BACKWARD),
                     block(10 * MiB, "inactive", 4 * MiB)]),
        segment(a1, [block(2 * MiB, "active_allocated", 2_000_000, ST_PARAM),   # ghost on dev 1
                     block(6 * MiB, "inactive", 3 * MiB),
                     block(1 * MiB, "active_allocated", None, ST_GELU),
                     block(11 * MiB, "inactive")], device=1),
        segment(b0, [block(1 * MiB, "active_allocated", 1_000_000, ST_PARAM),   # ghost on dev 0
                     block(1 * MiB, "inactive")], seg_type="small"),
    ]
    ann = step_annotations(t0, 0, ["## step 0 ##"], s0) + step_annotations(t1, 1, ["## step 0 ##"], s1)
    ann.sort(key=lambda x: x["time_us"])
    return snapshot(segments, [t0.events, t1.events], ann)


def case_segments_only():
    """Recording was off: segments only, device_traces = [[]]. Device 1 has a segment with no
    active block (a device with segments but no elements and no trace list at all)."""
    a, b, c = 0x7F3A_4000_0000, 0x7F3A_3E00_0000, 0x7F20_0000_0000
    segments = [
        segment(b, [block(512, "active_allocated", 400, ST_LINEAR),
                    block(2 * MiB - 512, "inactive", 1000)], seg_type="small"),
        segment(a, [block(8 * MiB, "active_allocated", 7_000_000, ST_PARAM),
                    block(4 * MiB, "inactive", 4 * MiB),
                    block(8 * MiB, "active_allocated", None, ST_ADAM)]),
        segment(c, [block(2 * MiB, "inactive", 0)], device=1, seg_type="small"),
    ]
    return snapshot(segments, [[]])


def case_protocols():
    """A small but complete training step; dumped with protocols 2, 3 and 5. Holds no bytes.
    `synthetic_opcode_coverage` (an unknown top-level key) adds the tuple/dict/str shapes a
    snapshot rarely has, so every opcode a plain-data pickle can use appears somewhere."""
    a, b = 0x7F3A_4000_0000, 0x7F3A_3E00_0000
    long_file = "/home/user/" + "very_long_directory_name/" * 11 + "layers.py"  # > 255 bytes
    f_long = frame("forward", long_file, 70000)          # line > 65535 -> BININT
    st_long = [f_long, F_CALL, F_WCALL, F_TRAIN_FWD, F_MAIN]
    f_uni = frame("vorwärts_μ", "/home/user/project/模型.py", 12)
    st_uni = [f_uni, F_CALL, F_WCALL, F_TRAIN_FWD, F_MAIN]
    tr = Trace(seed=5)
    t_start = tr.t
    tr.segment_alloc(a, 20 * MiB, ST_PARAM)
    tr.alloc(a, 6 * MiB, ST_PARAM)
    tr.alloc(a + 6 * MiB, 6 * MiB, ST_PARAM)
    tr.segment_alloc(b, 2 * MiB, ST_LINEAR)
    for i in range(4):
        tr.alloc(b + i * 256 * KiB, 256 * KiB, (ST_LINEAR, ST_GELU, st_long, st_uni)[i])
    tr.alloc(a + 12 * MiB, 4 * MiB, ST_BACKWARD)
    for i in (3, 1, 0, 2):
        tr.free(b + i * 256 * KiB, 256 * KiB, (ST_LINEAR, ST_GELU, st_long, st_uni)[i])
    tr.alloc(b, 512, ST_ADAM)
    tr.alloc(b + 512, 512, ST_ADAM)
    tr.free(a + 12 * MiB, 4 * MiB, ST_BACKWARD)
    tr.free(b, 512, ST_ADAM)
    # Two stacks="all" call sites. The second one refers back to frames the first pickled past
    # memo index 255, so every protocol here has LONG_BINPUT/MEMOIZE and LONG_BINGET.
    for stack in (cxx_stack(ST_GELU), cxx_stack(ST_LINEAR)):
        tr.alloc(a + 12 * MiB, 2 * MiB, stack)
        tr.free(a + 12 * MiB, 2 * MiB, stack)
    segments = [
        segment(b, [block(512, "inactive", 8), block(512, "active_allocated", 8, ST_ADAM),
                    block(2 * MiB - 1024, "inactive", 262144)], seg_type="small"),
        segment(a, [block(6 * MiB, "active_allocated", None, ST_PARAM),
                    block(6 * MiB, "active_allocated", 6_000_000, ST_PARAM),
                    block(8 * MiB, "inactive", 4 * MiB)]),
    ]
    snap = snapshot(segments, [tr.events], step_annotations(
        tr, 0, ["## step 0 ##", "## forward (μbatch 0) ##"], t_start))
    snap[s("allocator_settings")][s("garbage_collection_threshold")] = 0.8
    snap[s("synthetic_opcode_coverage")] = {
        s("tuples"): [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
        s("one_item_dict"): {s("k"): None},
        s("ints"): [0, 255, 256, 65535, 65536, -1, -129, 2**31 - 1, 2**31, -2**31, -2**31 - 1,
                    2**63 - 1, 2**64 - 1],
        s("floats"): [0.5, -1e-300, 1e300],
        s("bools"): [True, False],
        s("empty"): [{}, [], ""],
    }
    return snap


def case_long1_9byte():
    """Addresses >= 2**63 (LONG1 with 9 bytes, sign byte 00) and huge ints in unknown keys."""
    hi = 0xFFFF_8000_0000_0000
    tr = Trace(seed=6)
    big = hi + 0x1_0000_0000
    tr.free(hi + 0x20_0000, 1 * MiB, ST_ADAM)                       # free_only, addr >= 2**63
    tr.segment_free(hi + 0x20_0000, 2 * MiB, ST_ADAM)
    tr.alloc(hi + 0x1000, 0x1000, ST_LINEAR)                        # 0xFFFF_8000_0000_1000, live
    tr.segment_alloc(big, 6 * GiB, ST_PARAM)
    tr.alloc(big, 6 * GiB, ST_PARAM, huge_negative=-(2**71))        # size > 2**32, unknown key
    tr.free(big, 6 * GiB, ST_PARAM)
    tr.segment_free(big, 6 * GiB, ST_PARAM)
    tr.alloc(hi + 0x3000, 512, ST_GELU)
    tr.free(hi + 0x3000, 512, ST_GELU)
    segments = [
        segment(hi, [block(0x1000, "active_allocated", 4000, ST_PARAM),       # ghost >= 2**63
                     block(0x1000, "active_allocated", None, ST_LINEAR),
                     block(2 * MiB - 0x2000, "inactive", 512)], seg_type="small"),
    ]
    snap = snapshot(segments, [tr.events])
    snap[s("huge_unknown")] = 2**80
    return snap


def case_legacy_list():
    """Old torch (1.13 / 2.0) `_snapshot()`: a bare list of segments. Blocks have no `address`
    (running sum from the segment start); the oldest have no `requested_size` either (ghost size
    falls back to `size`) and carry a `history` list instead of `frames`."""
    a, b, c = 0x7F3A_4000_0000, 0x7F3A_3E00_0000, 0x7F20_0000_0000

    def old_block(size, state, history=None, requested=None):
        blk = {s("size"): size}
        if requested is not None:
            blk[s("requested_size")] = requested
        blk[s("state")] = s(state)
        if history is not None:
            blk[s("history")] = history
        return blk

    def hist(addr, real_size, frames):
        return [{s("addr"): addr, s("real_size"): real_size, s("frames"): frames}]

    def old_segment(device, address, blocks, seg_type="large"):
        size = sum(blk["size"] for blk in blocks)
        allocated = sum(blk["size"] for blk in blocks if blk["state"] == "active_allocated")
        return {s("device"): device, s("address"): address, s("total_size"): size,
                s("allocated_size"): allocated, s("active_size"): allocated,
                s("stream"): 0, s("segment_type"): s(seg_type), s("blocks"): blocks}

    return [
        old_segment(0, a, [old_block(8 * MiB, "active_allocated", hist(a, 8_000_000, ST_PARAM)),
                           old_block(4 * MiB, "inactive"),
                           old_block(8 * MiB, "active_allocated",
                                     hist(a + 12 * MiB, 8 * MiB, ST_ADAM))]),
        old_segment(0, b, [old_block(1 * MiB, "inactive", requested=0),
                           old_block(1 * MiB, "active_allocated",
                                     hist(b + MiB, 1_000_000, ST_LINEAR), requested=1_000_000)],
                    "small"),
        old_segment(1, c, [old_block(2 * MiB, "active_allocated",
                                     hist(c, 2 * MiB, ST_GELU), requested=2_097_000)], "small"),
    ]


def case_no_frames_time():
    """Events without `frames` and/or `time_us`, unknown actions, unknown and optional keys."""
    a = 0x7F3A_4000_0000
    tr = Trace(seed=7)
    tr.segment_alloc(a, 20 * MiB, ST_PARAM)
    tr.alloc(a, 2 * MiB, None)                                           # no frames
    tr.alloc(a + 2 * MiB, 2 * MiB, ST_LINEAR, time=False)                # no time_us
    tr.alloc(a + 4 * MiB, 1 * MiB, None, time=False)                     # neither
    tr.event("snapshot", 0, 0)                                           # not an action
    tr.free(a + 2 * MiB, 2 * MiB, None)
    tr.event("mystery_action", a + 4 * MiB, 123, frames=ST_GELU,
             future_key={s("nested"): [1, (2, 3)], s("label"): s("???")})
    tr.alloc(a + 8 * MiB, 4 * MiB, ST_BACKWARD, pool_id=(1, 0), forward_frames=ST_LINEAR,
             tensor_meta={s("dtype"): s("float32"), s("shape"): [1024, 1024]})
    tr.free_requested(a + 4 * MiB, 1 * MiB, None, time=False)
    tr.free_completed(a + 4 * MiB, 1 * MiB, None, time=False)
    tr.free_requested(a + 8 * MiB, 4 * MiB, ST_BACKWARD)
    tr.free_completed(a + 8 * MiB, 4 * MiB, ST_BACKWARD, time=False)
    segments = [
        segment(a, [block(2 * MiB, "active_allocated"),
                    block(18 * MiB, "inactive", 4 * MiB)]),
    ]
    return snapshot(segments, [tr.events])


def case_oom_noaddr():
    """An `oom` event (device_free, size, no addr) after the allocator released its cache, and
    a legacy merged `free` event (torch < 2.1) that ends an earlier alloc."""
    a, b, c = 0x7F3A_4000_0000, 0x7F3A_6000_0000, 0x7F3A_3E00_0000
    tr = Trace(seed=8)
    tr.segment_alloc(a, 20 * MiB, ST_PARAM)
    tr.alloc(a, 12 * MiB, ST_PARAM)                                      # live
    tr.segment_alloc(c, 2 * MiB, ST_LINEAR)
    tr.alloc(c, 512 * KiB, ST_LINEAR)
    tr.event("free", c, 512 * KiB, frames=ST_LINEAR)                     # legacy merged free
    tr.segment_alloc(b, 20 * MiB, ST_GELU)
    tr.alloc(b, 16 * MiB, ST_GELU)
    tr.free(b, 16 * MiB, ST_GELU)
    tr.segment_free(b, 20 * MiB, ST_GELU)                                # cache released...
    tr.segment_free(c, 2 * MiB, ST_LINEAR)
    tr.event("oom", None, 400 * GiB, frames=ST_BACKWARD, device_free=149_112_881_152)  # no addr
    tr.alloc(a + 12 * MiB, 2 * MiB, ST_ADAM)
    tr.free(a + 12 * MiB, 2 * MiB, ST_ADAM)
    segments = [segment(a, [block(12 * MiB, "active_allocated", None, ST_PARAM),
                            block(8 * MiB, "inactive", 2 * MiB)])]
    return snapshot(segments, [tr.events])


# ---------------------------------------------------------------------------------------------
# torch >= 2.11 as of 2026: the full trace-entry key set, annotate events, fx frames, pinned host
# memory, and a snapshot as PyTorch's MemoryViz.js leaves it
# ---------------------------------------------------------------------------------------------
#
# Key order follows torch/csrc/cuda/Module.cpp (THCPModule_memorySnapshot, 2026):
#   trace entry: action, addr (device_free on oom), size, stream, time_us, compile_context,
#                user_metadata, internal_metadata (only if non-empty), pool_id, then `frames` and
#                `forward_frames`, which are inserted after symbolisation (so they come last);
#                an entry without a captured context has no `frames` key at all.
#   segment:     device, address, total_size, allocated_size, active_size, requested_size, stream,
#                segment_type, segment_pool_id, is_expandable, then `frames` right here if there
#                is no context (one empty list shared by the whole snapshot), `blocks`, and
#                `frames`/`forward_frames` after `blocks` if there is one.
#   block:       address, size, requested_size, state, frames, forward_frames.
#   forward_frames: a list of *strings* (the forward traceback, one formatted traceback line per
#                string, as MemoryViz's format_forward_frames joins them), a fresh list per dict.
#   host_segments: device -1, segment_type "small", stream 0, one block covering the segment.

P_INDUCTOR = "/tmp/torchinductor_user/kh/ckhksbjbtwvohdk5zf3r7gdujacha6wa4vo5z3mfvhh44ndmychi.py"
P_FX = "/tmp/tmp3k9q_2lz/fx_generated_forward_5f1c2a.py"  # FX_GRAPH_MODULE_FILE_PREFIX + .py


def fresh(text):
    """A new str object equal to `text` (torch converts each std::string to its own py::str)."""
    return "".join([text[: len(text) // 2], text[len(text) // 2:]])


def fx_frame(name, filename, line, op, node, target, original_trace=None, node_info=None):
    """A frame augmented by _dump_snapshot(augment_with_fx_traces=True): the fx keys come after
    name/filename/line, fx_original_trace only if the node has a stack trace."""
    f = frame(name, filename, line)
    f[s("fx_node_op")] = s(op)
    f[s("fx_node_name")] = s(node)
    f[s("fx_node_target")] = s(target)
    if original_trace is not None:
        f[s("fx_original_trace")] = original_trace
    if node_info is not None:
        f[s("fx_node_info")] = node_info
    return f


F_FX_ADDMM = fx_frame(
    "forward", P_FX, 14, "call_function", "addmm_1", "aten.addmm.default",
    original_trace=(
        f'  File "{TRAIN}", line 59, in train\n'
        "    out = model(x)\n"
        f'  File "{MODEL}", line 41, in forward\n'
        "    x = self.fc(x)\n"
        f'  File "{TORCH}/nn/modules/linear.py", line 125, in forward\n'
        "    return F.linear(input, self.weight, self.bias)\n"),
    node_info="addmm_1 = torch.ops.aten.addmm.default(primals_2, view, permute); view = None")
F_FX_GELU = fx_frame("forward", P_FX, 17, "call_function", "gelu", "aten.gelu.default",
                     node_info="gelu = torch.ops.aten.gelu.default(addmm_1)")
F_FX_CALL = frame("call", P_INDUCTOR, 1599)
F_OUTPUT_CODE = frame("__call__", f"{TORCH}/_inductor/output_code.py", 656)
F_COMPILED = frame("_fn", f"{TORCH}/_dynamo/eval_frame.py", 1044)
ST_FX_ADDMM = [F_FX_ADDMM, F_FX_CALL, F_OUTPUT_CODE, F_COMPILED, F_CALL, F_WCALL, F_TRAIN_FWD,
               F_MAIN]
ST_FX_GELU = [F_FX_GELU, F_FX_CALL, F_OUTPUT_CODE, F_COMPILED, F_CALL, F_WCALL, F_TRAIN_FWD,
              F_MAIN]
ST_KV = [frame("allocate_kv", MODEL, 77), F_BLOCK, F_CALL, F_WCALL, F_TRAIN_FWD, F_MAIN]
ST_ANNOTATE = [frame("_annotate_tensor", f"{TORCH}/cuda/memory.py", 1218),
               frame("tag_kv_cache", MODEL, 88), F_TRAIN_FWD, F_MAIN]
ST_PIN = [frame("pin_memory", f"{TORCH}/utils/data/_utils/pin_memory.py", 73),
          frame("_next_data", f"{TORCH}/utils/data/dataloader.py", 789),
          frame("__next__", f"{TORCH}/utils/data/dataloader.py", 733),
          frame("train", TRAIN, 55), F_MAIN]
ST_H2D = [frame("train", TRAIN, 56), F_MAIN]


def forward_tb(*sites):
    """A forward traceback as torch writes it in `forward_frames`: a fresh list of fresh str,
    outermost call first, each one formatted traceback entry ending in a newline."""
    return [fresh(f'  File "{filename}", line {line}, in {name}\n    {code}\n')
            for filename, line, name, code in sites]


FWD_LINEAR = ((TRAIN, 59, "train", "out = model(x)"), (MODEL, 41, "forward", "x = self.fc(x)"))
FWD_GELU = ((TRAIN, 59, "train", "out = model(x)"), (MODEL, 42, "forward", "x = self.act(x)"))


def allocator_settings_2026():
    """allocator_settings as torch writes it in 2026 (two pinned-allocator keys more than 2.11;
    their values here, -1 = no limit, are this fixture's choice)."""
    out = allocator_settings()
    rp = out.pop(s("roundup_power2_divisions"))
    out[s("max_round_threshold")] = -1
    out[s("max_cached_size")] = -1
    out[s("roundup_power2_divisions")] = rp
    return out


class Trace2026(Trace):
    """Trace entries with the 2026 key set and order (see the block comment above).

    set_metadata() is torch._C._cuda_setMemoryMetadata: every later entry carries the string (an
    `annotate` entry carries its own text instead). pool_id is a fresh 2-tuple per entry, as
    torch converts the entry's mempool id each time. `to` appends to another list (host_traces)
    on the same clock."""

    def __init__(self, seed, t=T0):
        super().__init__(seed, t)
        self.metadata = ""

    def set_metadata(self, text):
        self.metadata = text

    def event(self, action, addr, size, stream=0, frames=None, time=True, device_free=None,
              compile_context=None, user_metadata=None, internal_metadata="", pool=(0, 0),
              forward_frames=None, to=None, **extra):
        ev = {s("action"): s(action)}
        if device_free is not None:
            ev[s("device_free")] = device_free
        else:
            ev[s("addr")] = addr
        ev[s("size")] = size
        ev[s("stream")] = stream
        if time:
            ev[s("time_us")] = self.tick()
        ev[s("compile_context")] = na() if compile_context is None else fresh(compile_context)
        um = self.metadata if user_metadata is None else user_metadata
        ev[s("user_metadata")] = fresh(um) if um else ""
        if internal_metadata:
            ev[s("internal_metadata")] = fresh(internal_metadata)
        ev[s("pool_id")] = (pool[0], pool[1])
        if frames is not None:
            ev[s("frames")] = frames
        if forward_frames is not None:
            ev[s("forward_frames")] = forward_frames
        for key, value in extra.items():
            ev[s(key)] = value
        (self.events if to is None else to).append(ev)
        return ev

    def free(self, addr, size, frames, stream=0, **kw):
        fwd = kw.pop("forward_frames", None)
        self.free_requested(addr, size, frames, stream,
                            forward_frames=fwd() if fwd else None, **kw)
        self.free_completed(addr, size, frames, stream,
                            forward_frames=fwd() if fwd else None, **kw)

    def segment_alloc(self, addr, size, frames, stream=0, **kw):
        return self.event("segment_alloc", addr, size, stream, frames, **kw)

    def segment_free(self, addr, size, frames, stream=0, **kw):
        return self.event("segment_free", addr, size, stream, frames, **kw)

    def annotate(self, addr, size, text, frames=ST_ANNOTATE, **kw):
        """torch.cuda.memory._annotate_tensor: addr = the allocation's base, text in
        user_metadata. Not a layout action."""
        return self.event("annotate", addr, size, 0, frames, user_metadata=text, **kw)


def block2026(size, state, requested=None, frames=None, forward=None):
    """Block spec for segment2026(): forward is a callable returning a fresh forward_frames list."""
    return (size, state, size if requested is None else requested, frames, forward)


def segment2026(address, blocks, empty, device=0, stream=0, seg_type="large", frames=None,
                pool=(0, 0), forward=None, extra_block_keys=None):
    """A segment dict in the 2026 key order; `empty` is the snapshot's one shared empty frame
    list (torch's `empty_frames`), used for every dict without a context."""
    out, addr = [], address
    allocated = active = requested_total = 0
    for size, state, requested, bframes, bforward in blocks:
        b = {s("address"): addr, s("size"): size, s("requested_size"): requested,
             s("state"): s(state), s("frames"): bframes if bframes else empty}
        if bframes and bforward is not None:
            b[s("forward_frames")] = bforward()
        out.append(b)
        if state == "active_allocated":
            allocated += size
        if state in ("active_allocated", "active_pending_free"):
            active += size
            requested_total += requested
        addr += size
    seg = {
        s("device"): device, s("address"): address, s("total_size"): addr - address,
        s("allocated_size"): allocated, s("active_size"): active,
        s("requested_size"): requested_total, s("stream"): stream,
        s("segment_type"): s(seg_type), s("segment_pool_id"): (pool[0], pool[1]),
        s("is_expandable"): False,
    }
    if not frames:
        seg[s("frames")] = empty
    seg[s("blocks")] = out
    if frames:
        seg[s("frames")] = frames
        if forward is not None:
            seg[s("forward_frames")] = forward()
    return seg


def host_segment(address, size, state, empty, frames=None, pool=(0, 0)):
    """A pinned host segment as torch writes it (host allocator: one block per segment)."""
    seg = {
        s("device"): -1, s("address"): address, s("total_size"): size,
        s("allocated_size"): size if state == "active_allocated" else 0,
        s("active_size"): size if state in ("active_allocated", "active_pending_free") else 0,
        s("requested_size"): size, s("stream"): 0, s("segment_type"): s("small"),
        s("segment_pool_id"): (pool[0], pool[1]), s("is_expandable"): False,
    }
    if not frames:
        seg[s("frames")] = empty
    seg[s("blocks")] = [{s("address"): address, s("size"): size, s("requested_size"): size,
                         s("state"): s(state), s("frames"): frames if frames else empty}]
    if frames:
        seg[s("frames")] = frames
    return seg


def snapshot2026(segments, traces, annotations=(), host_segments=(), host_traces=()):
    return {
        s("segments"): segments,
        s("device_traces"): traces,
        s("allocator_settings"): allocator_settings_2026(),
        s("external_annotations"): list(annotations),
        s("host_segments"): list(host_segments),
        s("host_traces"): list(host_traces),
    }


def case_annotate_meta():
    """annotate events, user/internal metadata, compile_context, pool ids, fx frames,
    forward_frames, two streams: every 2026 key, in torch's order."""
    a, side, pool = 0x7F3A_4000_0000, 0x7F3A_8000_0000, 0x7F3A_A000_0000
    priv = (1, 3)
    fwd_lin = lambda: forward_tb(*FWD_LINEAR)  # noqa: E731
    fwd_gelu = lambda: forward_tb(*FWD_GELU)  # noqa: E731
    tr = Trace2026(seed=9)
    t_start = tr.t
    tr.segment_alloc(a, 20 * MiB, ST_PARAM)
    tr.alloc(a, 4 * MiB, ST_PARAM)                                       # live
    tr.alloc(a + 4 * MiB, 2 * MiB, ST_KV)                                # live, annotated twice
    tr.annotate(a + 4 * MiB, 2 * MiB, "kv cache layer 3")
    tr.alloc(a + 6 * MiB, 1 * MiB, ST_GELU)
    tr.annotate(a + 6 * MiB, 0, "scratch for layer 3")                   # its alloc is freed...
    tr.free(a + 6 * MiB, 1 * MiB, ST_GELU)
    tr.alloc(a + 6 * MiB, 512 * KiB, ST_LINEAR)                          # ...reused: not inherited
    tr.set_metadata("step=1")                                            # _cuda_setMemoryMetadata
    tr.annotate(a + 4 * MiB, 2 * MiB, "kv cache layer 3 (seq 0..127)")   # second one: last wins
    tr.annotate(a + 12 * MiB, 0, "weights loaded before recording")      # a block that is a ghost
    tr.annotate(a + 16 * MiB, 0, "stale pointer")                        # nothing live there
    # torch.compile'd region in a private pool (MemPool / CUDA graph pool id (1, 3))
    cc0, cc1 = "inductor kernel triton_poi_fused_0", "inductor kernel triton_poi_fused_gelu_1"
    tr.segment_alloc(pool, 2 * MiB, ST_FX_ADDMM, compile_context=cc0, pool=priv)
    tr.alloc(pool, 1 * MiB, ST_FX_ADDMM, compile_context=cc0, pool=priv)  # live
    tr.alloc(pool + 1 * MiB, 512 * KiB, ST_FX_GELU, compile_context=cc1, pool=priv,
             internal_metadata="cudagraph_tree node 0")
    tr.free(pool + 1 * MiB, 512 * KiB, ST_FX_GELU, compile_context=cc1, pool=priv)
    # backward: allocations that carry the forward traceback; a side-stream segment
    tr.alloc(a + 8 * MiB, 2 * MiB, ST_BACKWARD, forward_frames=fwd_lin(),
             internal_metadata="autograd: AddmmBackward0")
    tr.segment_alloc(side, 2 * MiB, ST_BACKWARD, SIDE_STREAM, forward_frames=fwd_lin())
    tr.alloc(side, 1 * MiB, ST_BACKWARD, SIDE_STREAM, forward_frames=fwd_lin(),
             internal_metadata="nccl:all_reduce bucket 0")
    tr.free_requested(side, 1 * MiB, ST_BACKWARD, SIDE_STREAM, forward_frames=fwd_lin())
    tr.free(a + 8 * MiB, 2 * MiB, ST_BACKWARD, forward_frames=fwd_lin)
    tr.free_completed(side, 1 * MiB, ST_BACKWARD, SIDE_STREAM, forward_frames=fwd_lin())
    tr.alloc(side, 512 * KiB, ST_BACKWARD, SIDE_STREAM, forward_frames=fwd_lin())  # live
    tr.set_metadata("step=2")
    tr.alloc(a + 10 * MiB, 1 * MiB, ST_BACKWARD, forward_frames=fwd_gelu())        # live
    empty = []
    segments = [
        segment2026(a, [block2026(4 * MiB, "active_allocated", 4_000_000, ST_PARAM),
                        block2026(2 * MiB, "active_allocated", None, ST_KV),
                        block2026(512 * KiB, "active_allocated", 500_000, ST_LINEAR),
                        block2026(1536 * KiB, "inactive", 1 * MiB),
                        block2026(2 * MiB, "inactive", 2 * MiB),
                        block2026(1 * MiB, "active_allocated", None, ST_BACKWARD, fwd_gelu),
                        block2026(1 * MiB, "inactive", 0),
                        block2026(2 * MiB, "active_allocated", 2_000_000),        # ghost
                        block2026(6 * MiB, "inactive", 0)], empty, frames=ST_PARAM),
        segment2026(side, [block2026(512 * KiB, "active_allocated", None, ST_BACKWARD, fwd_lin),
                           block2026(1536 * KiB, "inactive", 1 * MiB)], empty,
                    stream=SIDE_STREAM, seg_type="small", frames=ST_BACKWARD, forward=fwd_lin),
        segment2026(pool, [block2026(1 * MiB, "active_allocated", 1_000_000, ST_FX_ADDMM),
                           block2026(1 * MiB, "inactive", 512 * KiB)], empty,
                    seg_type="small", frames=ST_FX_ADDMM, pool=priv),
    ]
    return snapshot2026(segments, [tr.events], step_annotations(
        tr, 0, ["## step 1 ##", "## forward ##"], t_start))


def case_host_memory():
    """Pinned host memory (record_pinned_host_memory=True): host_segments with device -1 and one
    block each, host_traces one flat list, next to an ordinary device 0."""
    a = 0x7F3A_4000_0000
    h1, h2, h0, h3 = 0x7F00_0000_0000, 0x7F00_0040_0000, 0x7F00_1000_0000, 0x7F00_2000_0000
    host = []
    tr = Trace2026(seed=10)
    t_start = tr.t
    tr.free_requested(h0, 1 * MiB, ST_PIN, to=host)             # host free_only: pinned before
    tr.free_completed(h0, 1 * MiB, ST_PIN, to=host)             # recording began
    tr.segment_alloc(a, 20 * MiB, ST_PARAM)
    tr.alloc(a, 8 * MiB, ST_PARAM)                              # live
    tr.segment_alloc(h1, 2 * MiB, ST_PIN, to=host)              # cudaHostAlloc for batch 0
    tr.alloc(h1, 2 * MiB, ST_PIN, to=host)
    tr.alloc(a + 8 * MiB, 2 * MiB, ST_H2D)                      # batch 0 on the device
    tr.free_requested(h1, 2 * MiB, ST_PIN, to=host)             # pending: the copy's event
    tr.segment_alloc(h2, 4 * MiB, ST_PIN, to=host)              # batch 1 (bigger)
    tr.alloc(h2, 4 * MiB, ST_PIN, to=host)
    tr.free_completed(h1, 2 * MiB, ST_PIN, to=host)             # the copy's event completed
    tr.free(a + 8 * MiB, 2 * MiB, ST_H2D)
    tr.alloc(a + 8 * MiB, 4 * MiB, ST_H2D)                      # batch 1 on the device, live
    tr.free(h2, 4 * MiB, ST_PIN, to=host)
    tr.alloc(h1, 2 * MiB, ST_PIN, to=host)                      # cached block reused, live
    empty = []
    segments = [segment2026(a, [block2026(8 * MiB, "active_allocated", None, ST_PARAM),
                                block2026(4 * MiB, "active_allocated", None, ST_H2D),
                                block2026(8 * MiB, "inactive", 2 * MiB)], empty, frames=ST_PARAM)]
    host_segments = [
        host_segment(h1, 2 * MiB, "active_allocated", empty, ST_PIN),
        host_segment(h2, 4 * MiB, "inactive", empty, ST_PIN),
        host_segment(h0, 1 * MiB, "inactive", empty),
        host_segment(h3, 8 * MiB, "active_allocated", empty),   # host ghost: no alloc in trace
    ]
    return snapshot2026(segments, [tr.events],
                        step_annotations(tr, 0, ["## step 0 ##"], t_start),
                        host_segments, host)


def memoryviz_annotate(snap):
    """What PyTorch's MemoryViz.js does to a loaded snapshot, in place (torch/utils/viz/
    MemoryViz.js annotate_snapshot, then process_alloc_data.js process_alloc_data for the Active
    Memory Timeline of each device, every element drawn). Its JSON.stringify drops the two
    version_space functions it adds at the top level; everything else is kept."""
    seg_version, block_version = {}, {}

    def version(space, addr, increment):
        r = space.setdefault(addr, 0)
        if increment:
            space[addr] += 1
        return r

    snap["categories"] = []
    stream_names, nxt = {0: 0}, [1]

    def stream_name(x):
        if x not in stream_names:
            stream_names[x] = nxt[0]
            nxt[0] += 1
        return stream_names[x]

    new_traces = []
    for device_trace in snap["device_traces"]:
        new_trace = []
        new_traces.append(new_trace)
        for t in device_trace:
            if "frames" not in t:
                t["frames"] = []
            t["stream"] = stream_name(t["stream"])
            act = t["action"]
            if act == "free_completed":
                t["version"] = version(block_version, t["addr"], True)
                if new_trace:
                    prev = new_trace[-1]
                    if prev["action"] == "free_requested" and prev["addr"] == t["addr"]:
                        prev["action"] = "free"   # elide free_requested/free_completed
                        continue
            elif act in ("free_requested", "alloc"):
                t["version"] = version(block_version, t["addr"], False)
            elif act in ("segment_free", "segment_unmap"):
                t["version"] = version(seg_version, t["addr"], True)
            elif act in ("segment_alloc", "segment_map"):
                t["version"] = version(seg_version, t["addr"], False)
            if "category" in t and t["category"] not in snap["categories"]:
                snap["categories"].append(t["category"])
            t["idx"] = len(new_trace)
            new_trace.append(t)
    snap["device_traces"] = new_traces
    for seg in snap["segments"]:
        seg["stream"] = stream_name(seg["stream"])
        seg["version"] = version(seg_version, seg["address"], False)
        addr = seg["address"]
        for b in seg["blocks"]:
            b["addr"] = addr
            b["version"] = version(block_version, addr, False)
            b["segment_pool_id"] = seg["segment_pool_id"]
            addr += b["size"]
    if snap["categories"] and "unknown" not in snap["categories"]:
        snap["categories"].append("unknown")

    for device, trace in enumerate(snap["device_traces"]):
        segs = sorted((x for x in snap["segments"] if x["device"] == device),
                      key=lambda x: x["address"])

        def find_pool_id(addr):
            for x in segs:
                if x["address"] <= addr < x["address"] + x["total_size"]:
                    return x["segment_pool_id"]
            return None

        elements, initially, actions, addr_to = [], [], [], {}
        for e in trace:
            if e["action"] == "alloc":
                elements.append(e)
                addr_to[e["addr"]] = len(elements) - 1
                actions.append(len(elements) - 1)
            elif e["action"] == "annotate":
                if e["addr"] in addr_to:
                    elements[addr_to[e["addr"]]].setdefault("annotations", []).append(
                        e["user_metadata"])
            elif e["action"] in ("free", "free_completed"):
                if e["addr"] in addr_to:
                    actions.append(addr_to.pop(e["addr"]))
                else:
                    elements.append(e)
                    initially.append(len(elements) - 1)
                    actions.append(len(elements) - 1)
        for seg in snap["segments"]:
            if seg["device"] != device:
                continue
            for b in seg["blocks"]:
                if b["state"] == "active_allocated" and b["addr"] not in addr_to:
                    elements.append({"action": "alloc", "addr": b["addr"],
                                     "size": b["requested_size"], "frames": b["frames"],
                                     "stream": seg["stream"], "version": b["version"],
                                     "segment_pool_id": seg["segment_pool_id"], "ghost": True,
                                     "block": b})
                    initially.append(len(elements) - 1)
        for el in elements:
            if not el.get("segment_pool_id"):
                el["segment_pool_id"] = find_pool_id(el["addr"])
        initially.reverse()
        if not actions and initially:
            actions.append(initially.pop())
        current, total = [], 0
        peak = 0

        def add(i):
            nonlocal total
            current.append(i)
            total += elements[i]["size"]
            elements[i]["max_allocated_mem"] = total

        for i in initially:
            add(i)
        for i in actions:
            if i in current:
                current.remove(i)
                total -= elements[i]["size"]
            else:
                add(i)
            peak = max(peak, total)
        # The ghost elements are MemoryViz's own objects, not part of the snapshot: an exporter
        # that folds them back marks the block they came from.
        for el in elements:
            if el.get("ghost"):
                el["block"]["ghost"] = True
        snap.setdefault("max_allocated_mem", 0)
        snap["max_allocated_mem"] = max(snap["max_allocated_mem"], peak)
    return snap


def case_memoryviz_export():
    """A torch-style snapshot (plain dicts, as JSON would hold it) run through memoryviz_annotate,
    plus the keys a re-exporting viewer adds at the top level, and blocks without `address`."""
    a, side = 0x7F3A_4000_0000, 0x7F3A_8000_0000
    tr = Trace2026(seed=12)
    t_start = tr.t
    tr.segment_alloc(a, 20 * MiB, ST_PARAM)
    tr.alloc(a, 8 * MiB, ST_PARAM, category="PARAMETER")                 # live
    tr.alloc(a + 8 * MiB, 2 * MiB, ST_LINEAR, category="ACTIVATION")
    tr.annotate(a + 8 * MiB, 2 * MiB, "activation of block 0")
    tr.alloc(a + 10 * MiB, 2 * MiB, ST_GELU, category="ACTIVATION")
    tr.free(a + 10 * MiB, 2 * MiB, ST_GELU)                               # merged into `free`
    tr.segment_alloc(side, 2 * MiB, ST_BACKWARD, SIDE_STREAM)
    tr.alloc(side, 1 * MiB, ST_BACKWARD, SIDE_STREAM, category="GRADIENT")
    tr.free_requested(side, 1 * MiB, ST_BACKWARD, SIDE_STREAM)            # not adjacent to its
    tr.alloc(a + 12 * MiB, 1 * MiB, None, category=None)                  # free_completed: kept
    tr.free_completed(side, 1 * MiB, ST_BACKWARD, SIDE_STREAM)
    tr.free(a + 8 * MiB, 2 * MiB, ST_LINEAR)                              # merged
    tr.free(a + 16 * MiB, 512 * KiB, ST_ADAM)                             # free_only, merged
    tr.alloc(a + 8 * MiB, 1 * MiB, ST_ADAM, category="OPTIMIZER_STATE")   # live
    empty = []
    segments = [
        segment2026(a, [block2026(8 * MiB, "active_allocated", None, ST_PARAM),
                        block2026(1 * MiB, "active_allocated", None, ST_ADAM),
                        block2026(3 * MiB, "inactive", 2 * MiB),
                        block2026(1 * MiB, "active_allocated", 1_000_000),
                        block2026(1 * MiB, "inactive", 0),
                        block2026(2 * MiB, "active_allocated", 2_000_000),   # ghost
                        block2026(4 * MiB, "inactive", 512 * KiB)], empty, frames=ST_PARAM),
        segment2026(side, [block2026(2 * MiB, "inactive", 1 * MiB)], empty,
                    stream=SIDE_STREAM, seg_type="small", frames=ST_BACKWARD),
    ]
    snap = snapshot2026(segments, [tr.events],
                        step_annotations(tr, 0, ["## step 0 ##"], t_start))
    del snap["host_segments"], snap["host_traces"]
    # Through JSON first: the browser sees plain arrays and fresh objects, no shared frames.
    snap = json.loads(json.dumps(snap))
    memoryviz_annotate(snap)
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            del b["address"]          # a re-export that keeps MemoryViz's `addr` only
    peak = snap.pop("max_allocated_mem")
    snap["version"] = 1
    snap["max_allocated_mem"] = peak
    snap["annotations"] = [text for t in snap["device_traces"][0] if t["action"] == "annotate"
                           for text in [t["user_metadata"]]]
    return snap


CASES = [
    ("truncated_ring", case_truncated_ring, [4]),
    ("pending_free_stream", case_pending_free_stream, [4]),
    ("two_devices", case_two_devices, [4]),
    ("segments_only", case_segments_only, [4]),
    ("protocols", case_protocols, [2, 3, 5]),
    ("long1_9byte", case_long1_9byte, [4]),
    ("legacy_list", case_legacy_list, [4]),
    ("no_frames_time", case_no_frames_time, [4]),
    ("oom_noaddr", case_oom_noaddr, [4]),
    ("annotate_meta", case_annotate_meta, [4]),
    ("host_memory", case_host_memory, [4]),
]


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def dump(obj, path, protocol):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


def run_oracle(pickle_path, golden_path):
    subprocess.run([sys.executable, ORACLE, pickle_path, golden_path], check=True)


def oracle_module():
    """timeline_oracle.py imported as a module (for inputs its command line cannot read)."""
    sys.path.insert(0, os.path.dirname(ORACLE))
    dont_write, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ there
    try:
        import timeline_oracle
    finally:
        sys.path.pop(0)
        sys.dont_write_bytecode = dont_write
    return timeline_oracle


def oracle_golden(snap, golden_path, device_label=None):
    """timeline_oracle.py's main() on an in-memory snapshot: same devices, same JSON bytes.
    device_label replaces every device entry's "device" number."""
    oracle = oracle_module()
    devs = set(i for i, t in enumerate(snap.get("device_traces", [])) if t)
    devs |= set(seg.get("device", 0) for seg in snap.get("segments", []))
    res = {"devices": [oracle.layout(snap, d) for d in sorted(devs)]}
    if device_label is not None:
        for dev in res["devices"]:
            dev["device"] = device_label
    with open(golden_path, "w") as f:
        json.dump(res, f, separators=(",", ":"))


def write_host_golden(obj):
    """host_memory.host.layout.json: the oracle's layout of the host side, as if it were a
    device: {"segments": host segments with device 0, "device_traces": [host_traces]}."""
    host = {"segments": [dict(seg, device=0) for seg in obj["host_segments"]],
            "device_traces": [obj["host_traces"]]}
    oracle_golden(host, os.path.join(HERE, "host_memory.host.layout.json"), device_label="host")


def write_memoryviz_export():
    """memoryviz_export.json (JSON, as the browser re-exports it) and its golden, made by the
    oracle's layout() on the json.load'ed file."""
    path = os.path.join(HERE, "memoryviz_export.json")
    with open(path, "wb") as f:
        f.write(json.dumps(case_memoryviz_export(), separators=(",", ":"),
                           ensure_ascii=False).encode() + b"\n")
    with open(path, "rb") as f:
        snap = json.load(f)
    oracle_golden(snap, os.path.join(HERE, "memoryviz_export.layout.json"))


POST = {"host_memory": write_host_golden}


def write_synth():
    for name, make, protocols in CASES:
        obj = make()
        if name in POST:
            POST[name](obj)
        for proto in protocols:
            stem = name if len(protocols) == 1 else f"protocol{proto}"
            path = os.path.join(HERE, stem + ".pickle")
            dump(obj, path, proto)
            golden = os.path.join(HERE, stem + ".layout.json")
            if isinstance(obj, list):
                # timeline_oracle.py crashes on a bare list (it calls snap.get), so its golden
                # comes from the equivalent dict snapshot written to a temporary file.
                with tempfile.TemporaryDirectory() as tmp:
                    wrapped = os.path.join(tmp, stem + ".pickle")
                    dump({"segments": obj, "device_traces": []}, wrapped, proto)
                    run_oracle(wrapped, golden)
            else:
                run_oracle(path, golden)


# ---------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------


def short_str(text):
    """SHORT_BINUNICODE + MEMOIZE (protocol 4)."""
    raw = text.encode()
    return b"\x8c" + bytes([len(raw)]) + raw + b"\x94"


def reduce_pickle():
    """{'segments': [], 'allocator_settings': OrderedDict()} with a protocol-4 header, built by
    GLOBAL 'collections OrderedDict' + EMPTY_TUPLE + REDUCE. (A protocol-4 pickler would write
    STACK_GLOBAL; GLOBAL is what protocols 0-3 write, and protocol-4 readers must still refuse
    it. stack_global.pickle covers STACK_GLOBAL.)"""
    return (b"\x80\x04" + b"}\x94(" + short_str("segments") + b"]\x94"
            + short_str("allocator_settings")
            + b"ccollections\nOrderedDict\n\x94)R\x94" + b"u.")


def bad_json_snapshot():
    """A tiny valid snapshot as a JSON-able dict (for the wrong-type variants)."""
    ev = {"action": "alloc", "addr": 140546494431232, "size": 512, "stream": 0,
          "time_us": T0, "compile_context": "N/A", "user_metadata": "",
          "frames": [{"name": "train", "filename": TRAIN, "line": 59}]}
    seg = {"device": 0, "address": 140546494431232, "total_size": 2097152,
           "allocated_size": 512, "active_size": 512, "requested_size": 512, "stream": 0,
           "segment_type": "small", "segment_pool_id": [0, 0], "is_expandable": False,
           "frames": [], "blocks": [{"address": 140546494431232, "size": 512,
                                     "requested_size": 512, "state": "active_allocated",
                                     "frames": []}]}
    return {"segments": [seg], "device_traces": [[ev]], "allocator_settings": {},
            "external_annotations": []}


def write_bad():
    os.makedirs(BAD, exist_ok=True)

    def put(name, data):
        with open(os.path.join(BAD, name), "wb") as f:
            f.write(data)

    put("reduce.pickle", reduce_pickle())
    put("stack_global.pickle", pickle.dumps(decimal.Decimal("1.5"), protocol=4))
    put("not_snapshot.pickle", pickle.dumps("not a snapshot", protocol=4))
    wrong = bad_json_snapshot()
    wrong["device_traces"][0][0]["size"] = "abc"
    put("wrong_types.json", json.dumps(wrong, separators=(",", ":")).encode() + b"\n")
    wrong2 = bad_json_snapshot()
    wrong2["device_traces"] = {"0": wrong2["device_traces"][0]}
    put("wrong_types2.json", json.dumps(wrong2, separators=(",", ":")).encode() + b"\n")
    put("random.bin", random.Random(20240607).randbytes(4096))
    put("empty.pickle", b"")
    with open(GPT2_SMALL, "rb") as f:
        gz = gzip.compress(f.read(), compresslevel=9, mtime=0)
    put("truncated.pickle.gz", gz[: len(gz) // 2])
    put("not_json.json", b'{"segments": [')


def main():
    write_synth()
    write_memoryviz_export()
    write_bad()


if __name__ == "__main__":
    main()
