"""File names and rank detection: what memviz reads a job's folder by."""

import re
import unittest

import _support
from memviz import _naming


def rank_in_name(name):
    """memviz's rule (src/index/folder.rs): the last integer in the name, suffixes aside."""
    stem = re.sub(r"\.(pickle|pkl|json)(\.(gz|zst|xz|bz2|lz4))?$", "", name)
    numbers = re.findall(r"\d+", stem)
    return int(numbers[-1]) if numbers else None


class Names(unittest.TestCase):
    def test_memviz_reads_the_rank_back_whatever_the_reason(self):
        for reason in _naming.REASONS:
            for rank in (0, 3, 17, 1023):
                name = _naming.snapshot_name(rank, reason)
                self.assertEqual(name, f"rank{rank}.{reason}.pickle")
                self.assertEqual(rank_in_name(name), rank)

    def test_reasons_hold_no_digit(self):
        for reason in _naming.REASONS:
            self.assertIsNone(re.search(r"\d", reason), reason)

    def test_unknown_reason_is_refused(self):
        with self.assertRaises(ValueError):
            _naming.snapshot_name(0, "step100")


class Ranks(unittest.TestCase):
    def setUp(self):
        self.no_dist = {}

    def test_nothing_says_rank_zero(self):
        self.assertEqual(_naming.detect_rank({}, self.no_dist), 0)
        self.assertEqual(_naming.world_size({}, self.no_dist), 1)

    def test_environment_order(self):
        env = {"LOCAL_RANK": "2"}
        self.assertEqual(_naming.detect_rank(env, self.no_dist), 2)
        env["SLURM_PROCID"] = "10"
        self.assertEqual(_naming.detect_rank(env, self.no_dist), 10)
        env["RANK"] = "6"
        self.assertEqual(_naming.detect_rank(env, self.no_dist), 6)

    def test_garbage_in_a_variable_is_skipped(self):
        self.assertEqual(_naming.detect_rank({"RANK": "", "LOCAL_RANK": "x", "OMPI_COMM_WORLD_RANK": " 4 "},
                                             self.no_dist), 4)

    def test_an_initialised_process_group_wins(self):
        mods = {"torch.distributed": _support.FakeDistributed(rank=5, world=16)}
        self.assertEqual(_naming.detect_rank({"RANK": "1"}, mods), 5)
        self.assertEqual(_naming.world_size({"WORLD_SIZE": "2"}, mods), 16)

    def test_a_group_not_yet_initialised_is_not_asked(self):
        mods = {"torch.distributed": _support.FakeDistributed(rank=5, initialised=False)}
        self.assertEqual(_naming.detect_rank({"RANK": "1"}, mods), 1)

    def test_a_failing_distributed_module_falls_back(self):
        dist = _support.FakeDistributed(rank=5)

        def broken():
            raise RuntimeError("Default process group has not been initialized")

        dist.get_rank = broken
        self.assertEqual(_naming.detect_rank({"LOCAL_RANK": "3"}, {"torch.distributed": dist}), 3)

    def test_default_arguments_read_sys_modules(self):
        with _support.clean_environment(), _support.modules(torch__distributed=_support.FakeDistributed(rank=7)):
            self.assertEqual(_naming.detect_rank(), 7)


if __name__ == "__main__":
    unittest.main()
