"""Everything memviz asks of torch, in one place, imported only when recording starts.

`import memviz` works without torch; each function here takes the torch module it was given.
The private APIs used (`_record_memory_history`, `_snapshot`, the OOM observer) are those of
`torch.cuda.memory` in torch 2.1 to 2.11; options a given torch does not take are left out,
read from its signature rather than its version.
"""

import inspect
import logging

log = logging.getLogger("memviz")

#: Options turned on whenever the installed torch accepts them: `compile_context` names the
#: torch.compile graph an allocation came from; `global_record_annotations` records every
#: `record_function` range (the `## step N ##` spans) without a profiler running.
OPTIONAL_OPTIONS = ("compile_context", "global_record_annotations")


def load():
    """The `torch` module, or None (with the reason) when it cannot be imported."""
    try:
        import torch
    except ImportError as e:
        return None, f"PyTorch is not installed ({e})"
    return torch, None


def history_options(accepted, stacks, max_entries):
    """The keyword arguments for `_record_memory_history`, given the names it `accepted`."""
    options = {"enabled": "all", "stacks": stacks, "max_entries": max_entries}
    options.update((name, True) for name in OPTIONAL_OPTIONS if name in accepted)
    return options


def start_history(torch, stacks, max_entries):
    """Start torch's allocator history (every alloc and free, with stacks); returns the options."""
    record = torch.cuda.memory._record_memory_history
    try:
        accepted = inspect.signature(record).parameters
    except (TypeError, ValueError):
        accepted = {}
    options = history_options(accepted, stacks, max_entries)
    record(**options)
    return options


def stop_history(torch):
    """Stop the history and free its ring buffer."""
    torch.cuda.memory._record_memory_history(enabled=None)


def allocations(torch):
    """How many allocations the caching allocator has made so far, over every device (None when
    torch cannot say): a dump's state is still current while this has not moved."""
    try:
        return sum(torch.cuda.memory_stats(d).get("allocation.all.allocated", 0)
                   for d in range(torch.cuda.device_count()))
    except Exception:
        return None


def snapshot(torch):
    """The allocator's state and history, as `_dump_snapshot` would pickle it."""
    return torch.cuda.memory._snapshot()


_observed = []  # the torch._C modules our observer is attached to (it cannot be detached)


def observe_oom(torch, observer):
    """Have `observer(device, alloc, device_allocated, device_free)` called at every CUDA OOM,
    before torch raises it. Attached once per process; returns whether torch offers it."""
    c = torch._C
    if any(seen is c for seen in _observed):
        return True
    attach = getattr(c, "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        log.info("memviz: this torch has no out-of-memory observer; no dump at an OOM")
        return False
    attach(observer)
    _observed.append(c)
    return True


def open_range(torch, name):
    """Open a `record_function` range (an annotation in the snapshot); returns its handle."""
    span = torch.profiler.record_function(name)
    span.__enter__()
    return span


def close_range(span):
    span.__exit__(None, None, None)
