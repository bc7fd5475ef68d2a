"""The Lightning and Hugging Face callbacks, driven through their hooks as each Trainer calls them,
with fake framework modules (neither framework is needed)."""

import importlib
import os
import sys
import types
import unittest

import _support
from memviz import _record


def framework(name, base):
    module = types.ModuleType(name)
    setattr(module, base, type(base, (), {}))
    return module


class CallbackTest(_support.WithFakeTorch):
    def setUp(self):
        super().setUp()
        self.out = os.path.join(self.dir.name, "snapshots")

    def use(self, module_name, **fakes):
        """Import memviz.`module_name` afresh against the fake framework modules."""
        self.stack.enter_context(_support.modules(**fakes))
        sys.modules.pop(f"memviz.{module_name}", None)
        self.addCleanup(sys.modules.pop, f"memviz.{module_name}", None)
        return importlib.import_module(f"memviz.{module_name}")

    def spans(self):
        return [name for what, name in self.torch.ranges if what == "enter"]

    def files(self):
        return sorted(os.listdir(self.out))


class Lightning(CallbackTest):
    def test_prefers_lightning_pytorch_and_records_the_fit(self):
        pl = framework("lightning.pytorch", "Callback")
        m = self.use("lightning", lightning=types.ModuleType("lightning"), lightning__pytorch=pl)
        cb = m.MemvizCallback(self.out)
        self.assertIsInstance(cb, pl.Callback)
        cb.setup(None, None, "fit")
        self.assertIsNotNone(_record.active())
        cb.on_train_start(None, None)
        for i in range(3):
            cb.on_train_batch_start(None, None, None, i)
            cb.on_train_batch_end(None, None, None, None, i)
        cb.teardown(None, None, "fit")
        self.assertIsNone(_record.active())
        self.assertEqual(self.spans(), ["## step 0 ##", "## step 1 ##", "## step 2 ##"])
        self.assertEqual(self.files(), ["rank0.exit.pickle"])

    def test_falls_back_to_pytorch_lightning(self):
        m = self.use("lightning", lightning=None, pytorch_lightning=framework("pytorch_lightning", "Callback"))
        self.assertIsInstance(m.MemvizCallback(self.out), sys.modules["pytorch_lightning"].Callback)

    def test_without_lightning_a_clear_import_error(self):
        with self.assertRaisesRegex(ImportError, "pip install lightning"):
            self.use("lightning", lightning=None, pytorch_lightning=None)

    def test_an_oom_ends_in_one_oom_snapshot(self):
        m = self.use("lightning", lightning=types.ModuleType("lightning"),
                     lightning__pytorch=framework("lightning.pytorch", "Callback"))
        cb = m.MemvizCallback(self.out, every=100)
        cb.setup(None, None, "fit")
        cb.on_train_batch_start(None, None, None, 0)
        self.torch.oom()
        cb.on_exception(None, None, RuntimeError("CUDA out of memory"))
        cb.teardown(None, None, "fit")
        self.assertEqual(self.files(), ["rank0.oom.pickle"])
        self.assertEqual(self.torch.ranges, [("enter", "## step 0 ##"), ("exit", "## step 0 ##")])

    def test_only_the_first_stage_is_recorded(self):
        m = self.use("lightning", lightning=types.ModuleType("lightning"),
                     lightning__pytorch=framework("lightning.pytorch", "Callback"))
        cb = m.MemvizCallback(self.out)
        cb.setup(None, None, "fit")
        cb.teardown(None, None, "fit")
        cb.setup(None, None, "test")
        self.assertIsNone(_record.active())
        cb.teardown(None, None, "test")
        self.assertEqual(self.torch.snapshots_taken, 1)


class Transformers(CallbackTest):
    def test_records_from_creation_with_global_step_numbers(self):
        m = self.use("transformers", transformers=framework("transformers", "TrainerCallback"))
        cb = m.MemvizCallback(self.out)
        self.assertIsNotNone(_record.active())  # before the Trainer moves the model
        state = types.SimpleNamespace(global_step=40)
        for _ in range(2):
            cb.on_step_begin(None, state, None)
            state.global_step += 1
            cb.on_step_end(None, state, None)
        cb.on_train_end(None, state, None)
        self.assertIsNone(_record.active())
        self.assertEqual(self.spans(), ["## step 40 ##", "## step 41 ##"])
        self.assertEqual(self.files(), ["rank0.exit.pickle"])

    def test_without_transformers_a_clear_import_error(self):
        with self.assertRaisesRegex(ImportError, "pip install transformers"):
            self.use("transformers", transformers=None)

    def test_training_that_never_ends_is_stopped_at_exit(self):
        m = self.use("transformers", transformers=framework("transformers", "TrainerCallback"))
        cb = m.MemvizCallback(self.out)
        cb._recorder._at_exit()
        self.assertEqual(self.files(), ["rank0.exit.pickle"])


if __name__ == "__main__":
    unittest.main()
