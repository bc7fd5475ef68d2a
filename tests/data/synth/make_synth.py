#!/usr/bin/env python3
"""Write the synthetic edge-case snapshots, their golden layouts, and the bad-input files.

    python3 tests/data/synth/make_synth.py        (from anywhere; paths are relative to this file)

Outputs (see README.md here for what each case exercises):
  tests/data/synth/NAME.pickle       a small hand-written snapshot, pickle.dump'd (protocol 4
                                     unless the case is about protocols)
  tests/data/synth/NAME.layout.json  golden layout from ../shared/tools/timeline_oracle.py
                                     (found relative to the repository root)
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
]


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def dump(obj, path, protocol):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


def run_oracle(pickle_path, golden_path):
    subprocess.run([sys.executable, ORACLE, pickle_path, golden_path], check=True)


def write_synth():
    for name, make, protocols in CASES:
        obj = make()
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
    write_bad()


if __name__ == "__main__":
    main()
