"""`memviz.record`: torch's allocator history on, and a snapshot written whenever one is needed.

One recording per process (torch's history is process-wide). While it runs, a snapshot is
written, as `rank{R}.{reason}.pickle` in the output folder (`_naming`), atomically (`_atomic`):

- `oom`: at a CUDA out-of-memory, from torch's OOM observer, before the exception unwinds
  (the allocator still holds everything that led to it); another OOM with nothing allocated
  since (a library retrying smaller, as cuDNN's algorithm search does) is not dumped again;
- `signal`: at SIGTERM or SIGUSR1, then the signal goes on to its previous handler (`_signals`);
- `periodic`: every `every` steps (`memviz.step`), the latest replacing the one before;
- `exit`: when recording stops — unless the last dump was an `oom` or a `signal` one and nothing
  has been allocated since (torch's own count): the process is going down with it, and that dump
  already holds its last state.

Any dump but a periodic one removes this rank's `periodic` file (an earlier state of the same
recording), so a job's folder holds one snapshot per rank in the usual cases — a clean end, an
OOM, a preemption, a kill (the periodic one) — and `memviz ranks DIR` reads it as it is.

Nothing here raises into the training loop: without torch or CUDA, recording is a no-op after
one warning, and a failed dump is logged.
"""

import atexit
import functools
import logging
import os
import pickle
import signal
import threading
import time
import warnings

from . import _atomic, _index, _naming, _signals, _torch

log = logging.getLogger("memviz")

#: The ring buffer's size, in allocator events. torch's default is unbounded (each event holds a
#: stack, so host memory would grow with the run); 100,000 — the figure of PyTorch's own
#: memory-snapshot tutorial — holds several steps of a large model in a snapshot of some MB.
DEFAULT_MAX_ENTRIES = 100_000
STACKS = ("python", "all")

_active = None  # the Recorder recording now, if any


def active():
    """The recording in progress, or None."""
    return _active


def record(out, *, on_oom=True, every=None, max_entries=DEFAULT_MAX_ENTRIES, stacks="python",
           annotate_steps=True, index=False):
    """Record the CUDA allocator's history and dump it to `out` when it matters.

    Use it around the code to record, or on the function that runs it::

        with memviz.record("snapshots/"):
            train()

        @memviz.record("snapshots/")
        def train(): ...

    Start it before the model is built, so every allocation has its stack. Arguments:

    - `out`: the folder for `rank{R}.{reason}.pickle` (made if missing).
    - `on_oom`: dump at a CUDA out-of-memory error, before it unwinds.
    - `every`: also dump every N finished `memviz.step()`s (`rank{R}.periodic.pickle`).
    - `max_entries`: the history's ring buffer, in allocator events.
    - `stacks`: `"python"` (Python frames) or `"all"` (C++ frames too: slower, bigger).
    - `annotate_steps`: wrap each `memviz.step()` in a `## step N ##` annotation.
    - `index`: after each dump, run `memviz index` on it in the background.
    """
    return Recorder(out, on_oom=on_oom, every=every, max_entries=max_entries, stacks=stacks,
                    annotate_steps=annotate_steps, index=index)


class Recorder:
    """One recording's settings and state; `record()` makes it. A context manager, a decorator,
    or `start()` / `stop()` for code that has hooks rather than a block (the callbacks)."""

    def __init__(self, out, *, on_oom=True, every=None, max_entries=DEFAULT_MAX_ENTRIES,
                 stacks="python", annotate_steps=True, index=False):
        if callable(out):
            raise TypeError("memviz.record needs the output folder: @memviz.record(\"snapshots/\")")
        if stacks not in STACKS:
            raise ValueError(f"stacks must be one of {STACKS}, not {stacks!r}")
        if every is not None and (not isinstance(every, int) or every < 1):
            raise ValueError(f"every must be a positive number of steps or None, not {every!r}")
        if not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries must be a positive int, not {max_entries!r}")
        self.out = os.path.expanduser(os.fspath(out))
        self.on_oom = on_oom
        self.every = every
        self.max_entries = max_entries
        self.stacks = stacks
        self.annotate_steps = annotate_steps
        self.index = index
        self.torch = None  # the torch module, while recording
        self._pid = None  # the process recording: a forked child (a DataLoader worker) inherits us
        self._depth = 0  # nested `with` / calls of a decorated function: only the outermost counts
        self._lock = threading.RLock()  # one dump at a time (re-entrant: a signal mid-dump)
        self._restore_signals = None
        self._last_dump = None  # the reason of the last dump written, and torch's allocation count then
        self._allocations_at_dump = None
        self._steps_done = 0
        self._indexers = {}

    @property
    def recording(self):
        return self.torch is not None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def recorded(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return recorded

    def start(self, *, signals=True):
        """Start recording (a no-op, with a warning, where it cannot). `signals=False` leaves
        SIGTERM / SIGUSR1 alone until `handle_signals()`. Returns self."""
        self._depth += 1
        if self._depth == 1:
            self._begin(signals)
        return self

    def stop(self):
        """Stop recording: the `exit` dump (see the module's rules), then the history off."""
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0 and self.recording:
            self._end()

    def handle_signals(self):
        """Dump on SIGTERM / SIGUSR1 from now on (after a framework installed its own handlers,
        which ours then call)."""
        if self.recording and self._restore_signals is None:
            self._restore_signals = _signals.install(self._on_signal)

    def _begin(self, signals):
        global _active
        if _active is not None:
            _warn(f"already recording into {_active.out}; this recording into {self.out} does nothing")
            return
        torch, why = _torch.load()
        if torch is None:
            _warn(f"{why}; nothing is recorded")
            return
        try:
            if not torch.cuda.is_available():
                _warn("CUDA is not available; nothing is recorded")
                return
            os.makedirs(self.out, exist_ok=True)
            _torch.start_history(torch, self.stacks, self.max_entries)
        except Exception as e:
            _warn(f"could not start recording into {self.out}: {e}")
            return
        self.torch, self._pid = torch, os.getpid()
        self._last_dump, self._allocations_at_dump, self._steps_done = None, None, 0
        _active = self
        if self.on_oom:
            try:
                _torch.observe_oom(torch, _on_oom)
            except Exception as e:
                log.warning("memviz: no dump at an out-of-memory error: %s", e)
        if signals:
            self.handle_signals()
        atexit.register(self._at_exit)

    def _end(self):
        global _active
        try:
            if self._last_dump in (_naming.OOM, _naming.SIGNAL) and self._unchanged_since_dump():
                log.info("memviz: no exit snapshot: the %s one holds the last state", self._last_dump)
            else:
                self._dump(_naming.EXIT, "stopped recording")
        finally:
            atexit.unregister(self._at_exit)
            if self._restore_signals is not None:
                self._restore_signals()
                self._restore_signals = None
            try:
                _torch.stop_history(self.torch)
            except Exception as e:
                log.warning("memviz: could not stop recording: %s", e)
            self.torch = None
            _active = None

    def _at_exit(self):
        """The interpreter is exiting with the recording still on (started by `start()` and never
        stopped, or a callback whose end hook never ran)."""
        if self.recording:
            self._depth = 1
            self.stop()

    def _step_finished(self, ok):
        """Called by `memviz.step` as a step ends (`ok`: without an exception)."""
        if not ok or not self.recording:
            return
        self._steps_done += 1
        if self.every and self._steps_done % self.every == 0:
            self._dump(_naming.PERIODIC, f"after {self._steps_done} steps")

    def _on_signal(self, signum):
        self._dump(_naming.SIGNAL, f"got {signal.Signals(signum).name}")

    def _dump(self, reason, why):
        """Write the snapshot for `reason`; returns its path, or None (logged) if it failed.
        Nothing in a process that did not start the recording: a forked DataLoader worker gets
        the job's SIGTERM too, and has no CUDA to dump."""
        if not self.recording or os.getpid() != self._pid:
            return None
        with self._lock:
            try:
                rank = _naming.detect_rank()
                path = os.path.join(self.out, _naming.snapshot_name(rank, reason))
                started = time.perf_counter()
                snap = _torch.snapshot(self.torch)
                _atomic.write_atomic(path, lambda f: pickle.dump(snap, f))
                del snap
                seconds = time.perf_counter() - started
                if reason != _naming.PERIODIC:
                    _remove(os.path.join(self.out, _naming.snapshot_name(rank, _naming.PERIODIC)))
            except Exception as e:
                log.warning("memviz: could not write the %s snapshot into %s: %s", reason, self.out, e)
                return None
            self._last_dump, self._allocations_at_dump = reason, _torch.allocations(self.torch)
            indexing = self.index and self._start_indexer(path)
            try:
                size = os.path.getsize(path)
                _index.announce(rank, why, path, size, seconds, indexing, _naming.world_size())
            except Exception:
                pass
            return path

    def _unchanged_since_dump(self):
        count = self._allocations_at_dump
        return count is not None and _torch.allocations(self.torch) == count

    def _start_indexer(self, path):
        """`memviz index PATH` in the background, unless one is still indexing that path."""
        running = self._indexers.get(path)
        if running is not None and running.poll() is None:
            return True
        exe = _index.binary()
        if exe is None:
            log.warning("memviz: no memviz binary found to index %s (is torch-memviz installed here?)", path)
            return False
        try:
            self._indexers[path] = _index.start(path, exe)
        except OSError as e:
            log.warning("memviz: could not start %s index %s: %s", exe, path, e)
            return False
        return True


def _on_oom(device, alloc, device_allocated, device_free):
    """torch's OOM observer (attached once per process): dump for the recording in progress.
    Called inside the allocator, maybe on an autograd thread; must never raise."""
    try:
        rec = _active
        if rec is None or not rec.on_oom:
            return
        if rec._last_dump == _naming.OOM and rec._unchanged_since_dump():
            return
        rec._dump(_naming.OOM, f"out of memory on device {device} ({alloc} bytes asked, {device_free} free)")
    except Exception:
        pass


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


_warned = set()


def _warn(message):
    """A RuntimeWarning, once per process per message (a decorated function may start a
    recording at every call)."""
    if message not in _warned:
        _warned.add(message)
        warnings.warn(f"memviz.record: {message}", RuntimeWarning, stacklevel=3)
