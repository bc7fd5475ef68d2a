"""`memviz.step`: one training step, as a `## step N ##` annotation in the snapshot.

memviz finds a training loop's steps by a family of spans whose names differ only in a number
that never goes back down (`read/src/derive/step_rules.rs`, the `numbered` rule); `## step N ##`
is the name the project's own recordings use. The span is a `torch.profiler.record_function`
range, which the allocator history records as `external_annotations` (START and END) once started
with `global_record_annotations` (where the installed torch takes it; where it does not, the span
may be missing and memviz falls back on its other rules). Steps also drive `record(every=N)`.

Outside a recording a step only counts: no torch call at all.
"""

import functools
import logging

from . import _record, _torch

log = logging.getLogger("memviz")

_next_number = 0  # the number the next unnumbered step gets


def step(n=None):
    """Mark one training step::

        for batch in loader:
            with memviz.step():
                train_step(batch)

    or decorate the function that runs one (`@memviz.step` or `@memviz.step()`). Steps are
    numbered 0, 1, 2, … in this process; `n` sets the number (a resumed job's global step),
    and the steps after it count on from there.
    """
    if callable(n):
        return Step()(n)
    return Step(n)


class Step:
    """One step's span: `begin()` / `end()`, or a context manager."""

    def __init__(self, n=None):
        self.number = None if n is None else int(n)
        self._span = None
        self._recorder = None

    def __enter__(self):
        self.begin()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.end(ok=exc_type is None)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def one_step(*args, **kwargs):
            with Step():
                return fn(*args, **kwargs)

        return one_step

    def begin(self):
        global _next_number
        if self.number is None:
            self.number = _next_number
        _next_number = self.number + 1
        rec = _record.active()
        if rec is None:
            return
        self._recorder = rec
        if rec.annotate_steps:
            try:
                self._span = _torch.open_range(rec.torch, f"## step {self.number} ##")
            except Exception as e:
                log.warning("memviz: could not annotate step %s: %s", self.number, e)

    def end(self, ok=True):
        """Close the span; `ok` says the step finished (not cut short by an exception), which is
        what `record(every=N)` counts."""
        span, self._span = self._span, None
        if span is not None:
            try:
                _torch.close_range(span)
            except Exception as e:
                log.warning("memviz: could not close step %s's annotation: %s", self.number, e)
        rec, self._recorder = self._recorder, None
        if rec is not None and rec is _record.active():
            rec._step_finished(ok)


class OpenStep:
    """The step a framework's hooks have begun and not yet ended (`on_*_begin` / `on_*_end`).

    A begin while a step is still open ends that one first, as cut short: a hook skipped by the
    framework must not leave spans nested ever deeper.
    """

    def __init__(self):
        self._step = None

    def begin(self, n=None):
        self.end(ok=False)
        self._step = Step(n)
        self._step.begin()

    def end(self, ok=True):
        current, self._step = self._step, None
        if current is not None:
            current.end(ok)
