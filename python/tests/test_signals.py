"""Signal handling: dump first, then whatever handled the signal before."""

import os
import signal
import subprocess
import sys
import textwrap
import unittest

import _support  # noqa: F401
from memviz import _signals

POSIX = hasattr(signal, "SIGUSR1")


@unittest.skipUnless(POSIX, "SIGUSR1")
class Chaining(unittest.TestCase):
    def setUp(self):
        self.saved = signal.getsignal(signal.SIGUSR1)

    def tearDown(self):
        signal.signal(signal.SIGUSR1, self.saved)

    def test_calls_ours_then_the_previous_python_handler(self):
        order = []
        signal.signal(signal.SIGUSR1, lambda s, f: order.append("previous"))
        restore = _signals.install(lambda s: order.append("memviz"), (signal.SIGUSR1,))
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertEqual(order, ["memviz", "previous"])
        restore()
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertEqual(order, ["memviz", "previous", "previous"])

    def test_an_ignored_signal_stays_ignored(self):
        calls = []
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        restore = _signals.install(calls.append, (signal.SIGUSR1,))
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertEqual(calls, [signal.SIGUSR1])
        restore()
        self.assertEqual(signal.getsignal(signal.SIGUSR1), signal.SIG_IGN)

    def test_a_failing_callback_still_chains(self):
        order = []
        signal.signal(signal.SIGUSR1, lambda s, f: order.append("previous"))

        def broken(signum):
            raise RuntimeError("disk full")

        restore = _signals.install(broken, (signal.SIGUSR1,))
        with self.assertLogs("memviz", "ERROR"):
            os.kill(os.getpid(), signal.SIGUSR1)
        restore()
        self.assertEqual(order, ["previous"])

    def test_restore_leaves_a_later_handler_alone(self):
        restore = _signals.install(lambda s: None, (signal.SIGUSR1,))

        def later(s, f):
            pass

        signal.signal(signal.SIGUSR1, later)
        restore()
        self.assertIs(signal.getsignal(signal.SIGUSR1), later)

    def test_the_default_action_still_happens_after_the_callback(self):
        """SIGTERM with its default handler: the callback runs, then the process dies of SIGTERM."""
        package = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        script = textwrap.dedent(f"""
            import os, signal, sys
            sys.path.insert(0, {package!r})
            from memviz import _signals
            _signals.install(lambda s: print("dumped", flush=True))
            os.kill(os.getpid(), signal.SIGTERM)
            print("survived", flush=True)
        """)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.stdout.split(), ["dumped"])
        self.assertEqual(done.returncode, -signal.SIGTERM)

    def test_off_the_main_thread_nothing_is_installed(self):
        import threading

        result = []
        thread = threading.Thread(target=lambda: result.append(_signals.install(lambda s: None, (signal.SIGUSR1,))))
        thread.start()
        thread.join()
        self.assertEqual(signal.getsignal(signal.SIGUSR1), self.saved)
        result[0]()


if __name__ == "__main__":
    unittest.main()
