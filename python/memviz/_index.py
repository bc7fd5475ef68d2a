"""After a dump: index it in the background with the wheel's own `memviz`, and say where it is."""

import os
import shutil
import subprocess
import sys
import sysconfig

EXE = "memviz.exe" if os.name == "nt" else "memviz"


def binary():
    """The `memviz` binary installed with this package (the wheel puts it in the scripts folder
    of the environment it is installed in, or of the user scheme for `pip install --user`), else
    the first on PATH, else None."""
    schemes = [None]
    if hasattr(sysconfig, "get_preferred_scheme"):  # Python 3.10+
        schemes.append(sysconfig.get_preferred_scheme("user"))
    else:
        schemes.append(f"{os.name}_user")
    for scheme in schemes:
        try:
            folder = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        candidate = os.path.join(folder, EXE)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which(EXE)


def start(path, exe):
    """Run `memviz index PATH` in its own session (so it outlives this process, and a Ctrl-C or a
    signal to the job's process group leaves it be); its output is discarded."""
    return subprocess.Popen(
        [exe, "index", path],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        start_new_session=True,
    )


def announce(rank, why, path, size_bytes, seconds, indexing, ranks):
    """One line on stderr: what was written, where, and the command that opens it."""
    line = f"memviz: rank {rank} {why}: wrote {path} ({size_bytes / 1e6:.1f} MB in {seconds:.1f} s)"
    if indexing:
        line += "; indexing it in the background"
    line += f"; open it with: memviz open {path}"
    if ranks > 1:
        line += f" (every rank: memviz ranks {os.path.dirname(path) or '.'})"
    print(line, file=sys.stderr, flush=True)
