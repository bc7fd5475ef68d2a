"""Where a dump goes: `rank{R}.{reason}.pickle`, and which rank this process is.

memviz reads a job's folder by file name: a file's rank is the *last* integer in its name
(`src/index/folder.rs`, `rank_in_name`), and two files with the same rank are listed apart. So the
reasons below hold no digit (a step number after the rank would be read as the rank), and a
process writes at most one file per reason, each dump of a reason replacing the last.
"""

import os
import sys

#: Why a snapshot was written, as it appears in the file name.
OOM = "oom"  #: torch's out-of-memory observer, before the exception unwinds
SIGNAL = "signal"  #: SIGTERM or SIGUSR1 (preemption, a scheduler's warning)
EXIT = "exit"  #: recording stopped: the `with` block or the decorated function ended
PERIODIC = "periodic"  #: every N steps (`every=N`); the latest replaces the one before
REASONS = (OOM, SIGNAL, EXIT, PERIODIC)

#: Launchers' variables for this process's global rank, in the order they are trusted.
#: `LOCAL_RANK` comes last: it repeats on every node.
RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "LOCAL_RANK")
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE")


def snapshot_name(rank, reason):
    """`rank3.oom.pickle`: the file name memviz reads rank 3 from."""
    if reason not in REASONS:
        raise ValueError(f"unknown dump reason {reason!r} (one of {', '.join(REASONS)})")
    return f"rank{int(rank)}.{reason}.pickle"


def _initialised_distributed(modules):
    """`torch.distributed` when torch is loaded and a process group is up, else None.

    Never imports torch: a process that has not imported it has no process group.
    """
    dist = modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist
    except Exception:  # a half-initialised or mocked torch: fall back to the environment
        pass
    return None


def _from_environment(names, environ):
    for name in names:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def detect_rank(environ=None, modules=None):
    """This process's rank: `torch.distributed` once initialised, else the launcher's
    variables (`RANK`, `SLURM_PROCID`, `OMPI_COMM_WORLD_RANK`, then `LOCAL_RANK`), else 0.

    Asked at each dump, not at start: recording should start before the process group does.
    """
    environ = os.environ if environ is None else environ
    dist = _initialised_distributed(sys.modules if modules is None else modules)
    if dist is not None:
        try:
            return int(dist.get_rank())
        except Exception:
            pass
    rank = _from_environment(RANK_VARIABLES, environ)
    return 0 if rank is None else rank


def world_size(environ=None, modules=None):
    """How many ranks the job has (1 when nothing says), to tell the user to run `memviz ranks`."""
    environ = os.environ if environ is None else environ
    dist = _initialised_distributed(sys.modules if modules is None else modules)
    if dist is not None:
        try:
            return int(dist.get_world_size())
        except Exception:
            pass
    size = _from_environment(WORLD_SIZE_VARIABLES, environ)
    return 1 if size is None else size
