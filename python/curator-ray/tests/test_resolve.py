"""Which curator-host a task runs: the one given, else the one the wheel put in the task's
Python environment (a Ray runtime_env installs it there)."""

import os
import sys
import tempfile
import unittest
from unittest import mock

from curator_ray import driver


class Resolve(unittest.TestCase):
    def test_a_path_or_a_binary_on_path_is_kept_else_the_environments_own(self):
        with tempfile.TemporaryDirectory() as prefix:
            bin_dir = os.path.join(prefix, "bin")
            os.makedirs(bin_dir)
            exe = os.path.join(bin_dir, "curator-host")
            with open(exe, "w") as f:
                f.write("#!/bin/sh\n")
            os.chmod(exe, 0o755)
            with mock.patch.object(sys, "prefix", prefix), mock.patch.dict(os.environ, {"PATH": "/nonexistent"}):
                self.assertEqual(driver.resolve("curator-host"), exe)
                self.assertEqual(driver.resolve("/shared/bin/curator-host"), "/shared/bin/curator-host")
            with mock.patch.object(sys, "prefix", prefix), mock.patch.dict(os.environ, {"PATH": bin_dir}):
                self.assertEqual(driver.resolve("curator-host"), "curator-host")
            with mock.patch.object(sys, "prefix", "/nonexistent"), mock.patch.dict(os.environ, {"PATH": "/nonexistent"}):
                self.assertEqual(driver.resolve("curator-host"), "curator-host")


if __name__ == "__main__":
    unittest.main()
