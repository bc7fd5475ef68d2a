"""Atomic writes: a reader sees the whole new file, the whole old one, or none."""

import os
import tempfile
import unittest

import _support  # noqa: F401  (the package from this checkout)
from memviz._atomic import write_atomic


class AtomicWrite(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "rank0.exit.pickle")

    def tearDown(self):
        self.dir.cleanup()

    def test_writes_the_file_and_leaves_nothing_else(self):
        write_atomic(self.path, lambda f: f.write(b"snapshot"))
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), b"snapshot")
        self.assertEqual(os.listdir(self.dir.name), ["rank0.exit.pickle"])

    def test_a_failure_midway_leaves_no_partial_file(self):
        def half(f):
            f.write(b"half a snap")
            raise OSError("No space left on device")

        with self.assertRaises(OSError):
            write_atomic(self.path, half)
        self.assertEqual(os.listdir(self.dir.name), [])

    def test_a_failure_keeps_the_previous_file(self):
        write_atomic(self.path, lambda f: f.write(b"old"))

        def interrupted(f):
            f.write(b"new, cut short")
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            write_atomic(self.path, interrupted)
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), b"old")
        self.assertEqual(os.listdir(self.dir.name), ["rank0.exit.pickle"])

    def test_replaces_an_existing_file(self):
        write_atomic(self.path, lambda f: f.write(b"first"))
        write_atomic(self.path, lambda f: f.write(b"second"))
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), b"second")

    @unittest.skipIf(os.name != "posix", "POSIX permissions")
    def test_permissions_follow_the_umask(self):
        old = os.umask(0o027)
        try:
            write_atomic(self.path, lambda f: f.write(b"x"))
        finally:
            os.umask(old)
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o640)

    def test_the_temporary_file_is_hidden_from_memviz(self):
        seen = []
        write_atomic(self.path, lambda f: seen.extend(os.listdir(self.dir.name)))
        self.assertEqual(len(seen), 1)
        self.assertTrue(seen[0].startswith("."), seen)


if __name__ == "__main__":
    unittest.main()
