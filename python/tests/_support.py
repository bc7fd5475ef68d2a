"""Shared by the tests: the package from this checkout, and a fake torch to record against.

The fake has just what memviz calls: `cuda.is_available`, `cuda.memory_stats` (the allocation
count), `cuda.memory._record_memory_history` (with torch 2.11's signature, or an older one),
`cuda.memory._snapshot`, the OOM observer and `profiler.record_function`, each keeping what it
was asked.
"""

import contextlib
import io
import os
import sys
import tempfile
import types
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import memviz._record  # noqa: E402  (after the path above)


class FakeTorch(types.ModuleType):
    def __init__(self, cuda=True, modern=True):
        super().__init__("torch")
        self.history_calls = []
        self.observers = []
        self.ranges = []  # ("enter" | "exit", name), in order
        self.snapshots_taken = 0
        fake = self

        if modern:
            def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                                       device=None, clear_history=False, compile_context=False,
                                       global_record_annotations=False, skip_actions=None):
                fake.history_calls.append(dict(enabled=enabled, stacks=stacks, max_entries=max_entries,
                                               compile_context=compile_context,
                                               global_record_annotations=global_record_annotations))
        else:  # torch 2.1's signature
            def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                                       device=None):
                fake.history_calls.append(dict(enabled=enabled, stacks=stacks, max_entries=max_entries))

        def _snapshot():
            fake.snapshots_taken += 1
            return {"segments": [], "device_traces": [[]], "n": fake.snapshots_taken}

        class record_function:
            def __init__(self, name):
                self.name = name

            def __enter__(self):
                fake.ranges.append(("enter", self.name))

            def __exit__(self, *exc):
                fake.ranges.append(("exit", self.name))

        self.allocated = 0  # what the allocator's `allocation.all.allocated` counts

        self.cuda = types.SimpleNamespace(
            is_available=lambda: cuda,
            device_count=lambda: 1,
            memory_stats=lambda device: {"allocation.all.allocated": fake.allocated},
            memory=types.SimpleNamespace(_record_memory_history=_record_memory_history, _snapshot=_snapshot),
        )
        self._C = types.SimpleNamespace(_cuda_attach_out_of_memory_observer=self.observers.append)
        self.profiler = types.SimpleNamespace(record_function=record_function)

    def oom(self):
        """What the allocator does at an OOM: call the observers."""
        for observer in self.observers:
            observer(0, 1 << 30, 70 << 30, 1 << 20)


class FakeDistributed(types.ModuleType):
    def __init__(self, rank, world=8, initialised=True):
        super().__init__("torch.distributed")
        self.is_available = lambda: True
        self.is_initialized = lambda: initialised
        self.get_rank = lambda: rank
        self.get_world_size = lambda: world


@contextlib.contextmanager
def modules(**fakes):
    """`sys.modules` with these entries (dots as `__`; None: the import fails) for the block."""
    with mock.patch.dict(sys.modules, {name.replace("__", "."): m for name, m in fakes.items()}):
        yield


@contextlib.contextmanager
def clean_environment():
    """No launcher variables, and memviz's once-per-process warnings not yet given."""
    names = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "WORLD_SIZE", "SLURM_NTASKS",
             "OMPI_COMM_WORLD_SIZE")
    with mock.patch.dict(os.environ):
        for name in names:
            os.environ.pop(name, None)
        memviz._record._warned.clear()
        yield


class WithFakeTorch(unittest.TestCase):
    """A test with a fake torch imported, a clean environment (no rank variables), stderr
    captured, step numbers from 0 and a temporary folder `self.dir`; `self.stack` holds what
    the test enters too."""

    def setUp(self):
        from memviz import _steps

        _steps._next_number = 0
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.stack = contextlib.ExitStack()
        self.addCleanup(self.stack.close)
        self.stack.enter_context(clean_environment())
        self.stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
        self.torch = FakeTorch()
        self.stack.enter_context(modules(torch=self.torch))
