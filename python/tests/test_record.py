"""`memviz.record` against a fake torch: what it starts, what it writes and when, and that it never
raises into the code it wraps."""

import contextlib
import io
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest
import warnings
from unittest import mock

import _support
import memviz
from memviz import _index, _record


class RecordTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.dir.name, "snapshots")
        stack = contextlib.ExitStack()
        self.addCleanup(stack.close)
        stack.enter_context(_support.clean_environment())
        self.stderr = stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
        self.torch = _support.FakeTorch()
        stack.enter_context(_support.modules(torch=self.torch))

    def tearDown(self):
        self.assertIsNone(_record.active(), "a test left a recording on")
        self.dir.cleanup()

    def files(self):
        return sorted(os.listdir(self.out)) if os.path.isdir(self.out) else []

    def load(self, name):
        with open(os.path.join(self.out, name), "rb") as f:
            return pickle.load(f)


class Unavailable(RecordTest):
    def test_import_needs_no_torch(self):
        script = "import sys; sys.modules['torch'] = None; import memviz; memviz.record; memviz.step; print('ok')"
        package = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        out = subprocess.run([sys.executable, "-c", script], cwd=package, capture_output=True,
                                           text=True, timeout=60)
        self.assertEqual(out.stdout.strip(), "ok", out.stderr)

    def test_without_torch_one_warning_and_the_body_runs(self):
        ran = []
        with _support.modules(torch=None), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                with memviz.record(self.out) as rec:
                    with memviz.step():
                        ran.append(rec.recording)
        self.assertEqual(ran, [False] * 3)
        self.assertEqual(len(caught), 1)
        self.assertIn("PyTorch is not installed", str(caught[0].message))
        self.assertEqual(self.files(), [])

    def test_without_cuda_one_warning_and_no_torch_call(self):
        torch = _support.FakeTorch(cuda=False)
        with _support.modules(torch=torch), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")

            @memviz.record(self.out)
            def train():
                with memviz.step():
                    return "trained"

            self.assertEqual([train(), train()], ["trained", "trained"])
        self.assertEqual([str(w.message) for w in caught], ["memviz.record: CUDA is not available; nothing is recorded"])
        self.assertEqual((torch.history_calls, torch.ranges, self.files()), ([], [], []))

    def test_bad_arguments_are_refused_at_once(self):
        for kwargs in (dict(stacks="cpp"), dict(every=0), dict(max_entries=-1)):
            with self.assertRaises(ValueError):
                memviz.record(self.out, **kwargs)
        with self.assertRaises(TypeError):
            memviz.record(lambda: None)


class Recording(RecordTest):
    def test_starts_history_with_what_this_torch_accepts(self):
        with memviz.record(self.out, max_entries=1234, stacks="all"):
            pass
        self.assertEqual(self.torch.history_calls[0], dict(enabled="all", stacks="all", max_entries=1234,
                                                           compile_context=True, global_record_annotations=True))
        self.assertEqual(self.torch.history_calls[-1]["enabled"], None)

    def test_an_older_torch_gets_only_what_it_takes(self):
        old = _support.FakeTorch(modern=False)
        with _support.modules(torch=old), memviz.record(self.out):
            pass
        self.assertEqual(old.history_calls[0], dict(enabled="all", stacks="python", max_entries=100_000))

    def test_context_manager_writes_the_exit_snapshot(self):
        with memviz.record(self.out) as rec:
            self.assertIs(_record.active(), rec)
        self.assertEqual(self.files(), ["rank0.exit.pickle"])
        self.assertEqual(self.load("rank0.exit.pickle")["device_traces"], [[]])
        self.assertIn(f"open it with: memviz open {os.path.join(self.out, 'rank0.exit.pickle')}",
                      self.stderr.getvalue())

    def test_decorator_records_each_call(self):
        @memviz.record(self.out)
        def train(x):
            return _record.active() is not None, x

        self.assertEqual(train(1), (True, 1))
        self.assertEqual(train.__name__, "train")
        self.assertEqual(self.torch.snapshots_taken, 1)
        train(2)
        self.assertEqual(self.torch.snapshots_taken, 2)

    def test_nested_use_of_one_recorder_records_once(self):
        rec = memviz.record(self.out)
        with rec:
            with rec:
                pass
            self.assertTrue(rec.recording)
        self.assertEqual(self.torch.snapshots_taken, 1)
        self.assertEqual(len(self.torch.history_calls), 2)  # one start, one stop

    def test_a_second_recorder_does_nothing_while_one_records(self):
        other = os.path.join(self.dir.name, "other")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with memviz.record(self.out), memviz.record(other) as inner:
                self.assertFalse(inner.recording)
        self.assertIn("already recording", str(caught[0].message))
        self.assertFalse(os.path.exists(other))
        self.assertEqual(self.files(), ["rank0.exit.pickle"])

    def test_rank_comes_from_the_environment(self):
        with mock.patch.dict(os.environ, {"RANK": "3", "WORLD_SIZE": "4"}), memviz.record(self.out):
            pass
        self.assertEqual(self.files(), ["rank3.exit.pickle"])
        self.assertIn(f"every rank: memviz ranks {self.out}", self.stderr.getvalue())

    def test_an_exception_in_the_body_still_dumps_and_propagates(self):
        with self.assertRaises(ZeroDivisionError):
            with memviz.record(self.out):
                1 / 0
        self.assertEqual(self.files(), ["rank0.exit.pickle"])

    def test_a_failed_dump_is_logged_not_raised(self):
        def broken():
            raise RuntimeError("CUDA error: an illegal memory access")

        self.torch.cuda.memory._snapshot = broken
        with self.assertLogs("memviz", "WARNING") as logs:
            with memviz.record(self.out):
                pass
        self.assertIn("could not write the exit snapshot", logs.output[0])
        self.assertEqual(self.files(), [])

    def test_a_forked_child_never_dumps(self):
        with memviz.record(self.out) as rec:
            with mock.patch("os.getpid", return_value=os.getpid() + 1):
                self.torch.oom()
                self.assertIsNone(rec._dump("signal", "got SIGTERM"))
            self.assertEqual(self.torch.snapshots_taken, 0)
        self.assertEqual(self.files(), ["rank0.exit.pickle"])

    def test_start_and_stop_and_the_interpreter_exit(self):
        rec = memviz.record(self.out).start()
        rec._at_exit()  # what atexit runs if stop() never comes
        self.assertFalse(rec.recording)
        self.assertEqual(self.files(), ["rank0.exit.pickle"])
        rec.stop()  # already stopped: nothing more
        self.assertEqual(self.torch.snapshots_taken, 1)


class OutOfMemory(RecordTest):
    def test_the_oom_is_dumped_and_the_exit_snapshot_skipped(self):
        with memviz.record(self.out):
            with memviz.step():
                pass
            self.torch.oom()
        self.assertEqual(self.files(), ["rank0.oom.pickle"])
        self.assertIn("out of memory on device 0", self.stderr.getvalue())

    def test_training_on_after_a_caught_oom_earns_an_exit_snapshot(self):
        with memviz.record(self.out):
            self.torch.oom()
            self.torch.allocated += 1
        self.assertEqual(self.files(), ["rank0.exit.pickle", "rank0.oom.pickle"])

    def test_a_torch_that_cannot_count_allocations_gets_the_exit_snapshot(self):
        def no_stats(device):
            raise RuntimeError("not supported by this allocator backend")

        self.torch.cuda.memory_stats = no_stats
        with memviz.record(self.out):
            self.torch.oom()
        self.assertEqual(self.files(), ["rank0.exit.pickle", "rank0.oom.pickle"])

    def test_a_repeated_oom_with_nothing_allocated_between_is_dumped_once(self):
        with memviz.record(self.out):
            self.torch.oom()
            self.torch.oom()  # a library caught the first and asked again, smaller
            self.assertEqual(self.torch.snapshots_taken, 1)
            self.torch.allocated += 1
            self.torch.oom()
            self.assertEqual(self.torch.snapshots_taken, 2)

    def test_on_oom_false_ignores_it(self):
        with memviz.record(self.out, on_oom=False):
            self.torch.oom()
        self.assertEqual(self.files(), ["rank0.exit.pickle"])

    def test_an_oom_outside_a_recording_is_ignored(self):
        with memviz.record(self.out):
            pass
        os.unlink(os.path.join(self.out, "rank0.exit.pickle"))
        self.torch.oom()  # the observer stays attached for the process's life
        self.assertEqual(self.files(), [])

    def test_the_observer_is_attached_once_per_process(self):
        for _ in range(3):
            with memviz.record(self.out):
                pass
        self.assertEqual(len(self.torch.observers), 1)

    def test_a_failing_oom_dump_never_raises_into_the_allocator(self):
        def broken():
            raise MemoryError

        with memviz.record(self.out):
            self.torch.cuda.memory._snapshot = broken
            with self.assertLogs("memviz", "WARNING"):
                self.torch.oom()


class Periodic(RecordTest):
    def test_every_n_steps_and_the_exit_snapshot_replaces_it(self):
        with memviz.record(self.out, every=2):
            for i in range(5):
                with memviz.step():
                    pass
                if i == 3:
                    self.assertEqual(self.files(), ["rank0.periodic.pickle"])
                    self.assertEqual(self.load("rank0.periodic.pickle")["n"], 2)  # steps 2 and 4
        self.assertEqual(self.files(), ["rank0.exit.pickle"])

    def test_a_step_cut_short_does_not_count(self):
        with memviz.record(self.out, every=1):
            with self.assertRaises(KeyError):
                with memviz.step():
                    raise KeyError
            self.assertEqual(self.files(), [])


@unittest.skipUnless(hasattr(signal, "SIGUSR1"), "SIGUSR1")
class Signals(RecordTest):
    def setUp(self):
        super().setUp()
        self.saved = signal.getsignal(signal.SIGUSR1)
        self.addCleanup(signal.signal, signal.SIGUSR1, self.saved)

    def test_sigusr1_dumps_then_calls_the_previous_handler(self):
        called = []
        signal.signal(signal.SIGUSR1, lambda s, f: called.append(s))
        with memviz.record(self.out):
            os.kill(os.getpid(), signal.SIGUSR1)
            self.assertEqual(called, [signal.SIGUSR1])
            self.assertEqual(self.files(), ["rank0.signal.pickle"])
        self.assertIn("got SIGUSR1", self.stderr.getvalue())
        self.assertEqual(self.files(), ["rank0.signal.pickle"])  # nothing happened since: no exit dump
        os.kill(os.getpid(), signal.SIGUSR1)  # our handler is gone
        self.assertEqual(self.torch.snapshots_taken, 1)

    @unittest.skipUnless(hasattr(os, "fork"), "fork")
    def test_a_forked_worker_getting_the_signal_writes_nothing(self):
        signal.signal(signal.SIGUSR1, lambda s, f: None)
        with memviz.record(self.out):
            child = os.fork()
            if child == 0:  # a DataLoader worker, say
                try:
                    os.kill(os.getpid(), signal.SIGUSR1)
                finally:
                    os._exit(0)
            os.waitpid(child, 0)
            self.assertEqual(self.files(), [])

    def test_signals_can_wait_for_a_framework(self):
        rec = memviz.record(self.out).start(signals=False)
        self.assertEqual(signal.getsignal(signal.SIGUSR1), self.saved)
        framework = []
        signal.signal(signal.SIGUSR1, lambda s, f: framework.append(s))
        rec.handle_signals()
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertEqual((framework, self.files()), ([signal.SIGUSR1], ["rank0.signal.pickle"]))
        rec.stop()


class Indexing(RecordTest):
    @unittest.skipUnless(os.name == "posix", "a script as the fake binary")
    def test_index_runs_the_binary_on_the_dump(self):
        seen = os.path.join(self.dir.name, "argv")
        fake = os.path.join(self.dir.name, "memviz")
        with open(fake, "w") as f:
            f.write(textwrap.dedent(f"""\
                #!{sys.executable}
                import sys
                open({seen!r}, "w").write(" ".join(sys.argv[1:]))
            """))
        os.chmod(fake, 0o755)
        with mock.patch.object(_index, "binary", return_value=fake), memviz.record(self.out, index=True) as rec:
            pass
        rec._indexers[os.path.join(self.out, "rank0.exit.pickle")].wait(60)
        with open(seen) as f:
            self.assertEqual(f.read(), f"index {os.path.join(self.out, 'rank0.exit.pickle')}")
        self.assertIn("indexing it in the background", self.stderr.getvalue())

    def test_no_binary_is_a_warning(self):
        with mock.patch.object(_index, "binary", return_value=None), self.assertLogs("memviz", "WARNING"):
            with memviz.record(self.out, index=True):
                pass
        self.assertEqual(self.files(), ["rank0.exit.pickle"])

    def test_the_binary_is_looked_for_in_the_scripts_folder_first(self):
        scripts = os.path.join(self.dir.name, "bin")
        os.mkdir(scripts)
        exe = os.path.join(scripts, _index.EXE)
        with open(exe, "w") as f:
            f.write("")
        os.chmod(exe, 0o755)
        with mock.patch("sysconfig.get_path", return_value=scripts):
            self.assertEqual(_index.binary(), exe)


if __name__ == "__main__":
    unittest.main()
