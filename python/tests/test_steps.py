"""`memviz.step`: `## step N ##` spans, their numbers, and what they tell the recording."""

import os
import unittest

import _support
import memviz
from memviz import _steps


class Steps(_support.WithFakeTorch):
    def record(self, **options):
        return memviz.record(os.path.join(self.dir.name, "out"), **options)

    def test_each_step_is_one_numbered_span(self):
        with self.record():
            for _ in range(3):
                with memviz.step():
                    self.assertEqual(self.torch.ranges[-1][0], "enter")
        self.assertEqual(self.torch.ranges, [
            ("enter", "## step 0 ##"), ("exit", "## step 0 ##"),
            ("enter", "## step 1 ##"), ("exit", "## step 1 ##"),
            ("enter", "## step 2 ##"), ("exit", "## step 2 ##"),
        ])

    def test_a_given_number_and_counting_on_from_it(self):
        with self.record():
            with memviz.step(100) as s:
                self.assertEqual(s.number, 100)
            with memviz.step() as s:
                self.assertEqual(s.number, 101)
        self.assertEqual([name for what, name in self.torch.ranges if what == "enter"],
                         ["## step 100 ##", "## step 101 ##"])

    def test_decorator_forms(self):
        @memviz.step
        def bare(x):
            return x * 2

        @memviz.step()
        def called(x):
            return x + 1

        with self.record():
            self.assertEqual([bare(2), called(2), bare(3)], [4, 3, 6])
        self.assertEqual(bare.__name__, "bare")
        self.assertEqual([name for what, name in self.torch.ranges if what == "enter"],
                         ["## step 0 ##", "## step 1 ##", "## step 2 ##"])

    def test_the_span_closes_when_the_step_raises(self):
        with self.record():
            with self.assertRaises(RuntimeError):
                with memviz.step():
                    raise RuntimeError("CUDA out of memory")
        self.assertEqual(self.torch.ranges, [("enter", "## step 0 ##"), ("exit", "## step 0 ##")])

    def test_outside_a_recording_steps_only_count(self):
        with memviz.step() as s:
            pass
        self.assertEqual((s.number, self.torch.ranges), (0, []))
        with self.record():
            with memviz.step() as s:
                pass
        self.assertEqual(self.torch.ranges, [("enter", "## step 1 ##"), ("exit", "## step 1 ##")])

    def test_annotate_steps_false_counts_without_spans(self):
        with self.record(annotate_steps=False, every=2):
            for _ in range(2):
                with memviz.step():
                    pass
        self.assertEqual(self.torch.ranges, [])
        self.assertEqual(self.torch.snapshots_taken, 2)  # the periodic one, then the exit one

    def test_an_open_step_left_by_a_skipped_hook_is_closed_first(self):
        hooks = _steps.OpenStep()
        with self.record():
            hooks.begin(5)
            hooks.begin(6)  # the end hook of step 5 never came
            hooks.end()
            hooks.end()  # an end without a begin: nothing
        self.assertEqual(self.torch.ranges, [("enter", "## step 5 ##"), ("exit", "## step 5 ##"),
                                             ("enter", "## step 6 ##"), ("exit", "## step 6 ##")])


if __name__ == "__main__":
    unittest.main()
