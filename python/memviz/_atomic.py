"""Writing a file so that readers see the whole of it or nothing.

A dump can be cut short (a second signal, a full disk, the job killed) and `memviz index DIR` may
run while ranks are still writing. So each dump is written to a hidden temporary file in the same
folder (hidden: memviz skips names starting with a dot) and renamed over the final name, which
on POSIX and Windows replaces it in one step.
"""

import os


def write_atomic(path, write):
    """Call `write(file)` on a new temporary file beside `path`, then rename it to `path`.

    On any failure the temporary file is removed, `path` keeps what it held before (or stays
    absent), and the exception propagates. The file gets the permissions a plain `open` would
    (0666 less the umask).
    """
    folder, name = os.path.split(os.path.abspath(path))
    temp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    _sync_folder(folder)


def _sync_folder(folder):
    """Make the rename itself durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
