"""Dumping on SIGTERM and SIGUSR1 without changing what the signal otherwise does.

Schedulers send SIGTERM before killing a job (Kubernetes, torchrun stopping the other ranks) and
Slurm sends SIGUSR1 ahead of the time limit (`--signal=USR1@90`). Our handler dumps, then hands
the signal on to whatever handled it before: a Python handler is called (Lightning's requeue,
a framework's graceful stop), an ignored signal stays ignored, and the default action is taken
again — the process dies of the signal as it would have, after the dump.
"""

import logging
import os
import signal
import threading

log = logging.getLogger("memviz")

#: The signals a recording handles, where the platform has them.
SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGUSR1") if hasattr(signal, name))


def install(on_signal, signums=SIGNALS):
    """Handle `signums` by calling `on_signal(signum)` first, then the previous handler.

    Returns a function that puts the previous handlers back (each only where ours is still the
    one installed: a handler set after ours is left alone, and it chains to ours if it chains).
    Signal handlers can only be set from the main thread; elsewhere nothing is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        log.info("memviz: not on the main thread, so no dump on %s", _names(signums))
        return lambda: None
    previous = {}

    def handler(signum, frame):
        try:
            on_signal(signum)
        except Exception:  # the dump logs its own failures; never lose the signal over it
            log.exception("memviz: handling signal %s", signum)
        _chain(previous.get(signum), signum, frame)

    for signum in signums:
        previous[signum] = signal.getsignal(signum)
        signal.signal(signum, handler)

    def restore():
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, before in previous.items():
            if signal.getsignal(signum) is handler:
                signal.signal(signum, signal.SIG_DFL if before is None else before)

    return restore


def _chain(before, signum, frame):
    """Do what `before` (a handler as `signal.getsignal` returns it) would have done."""
    if callable(before):
        before(signum, frame)
    elif before == signal.SIG_IGN:
        pass
    else:  # SIG_DFL, or a handler set outside Python (None): the default action, now
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _names(signums):
    return ", ".join(signal.Signals(s).name for s in signums)
