#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Config checks, as a user meets them.

invalid/<case>/input.json must make netchanneld exit with code 2 and print
exactly "<path><expected>" (expected: the case's file), without starting
anything. Cases named start_* are found only once the device is probed, so the
daemon really starts EAL for them; the others are caught by --check-config and
by a real start alike. "@CASEDIR@" in an input or an expected message stands for
the case's directory.

Every config in config/ must pass --check-config.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = os.environ.get("NCD_BUILD_DIR", "build")
SRC = os.environ.get("NCD_SOURCE_DIR", ".")
DAEMON = os.path.join(BUILD, "app/netchanneld/netchanneld")
HERE = os.path.dirname(os.path.abspath(__file__))


def run(args, timeout=60):
    return subprocess.run([DAEMON] + args, capture_output=True, text=True, timeout=timeout)


class Configs(unittest.TestCase):
    def test_invalid(self):
        cases = sorted(glob.glob(os.path.join(HERE, "invalid", "*", "input.json")))
        self.assertGreaterEqual(len(cases), 25)
        tmp = tempfile.mkdtemp(prefix="ncd_cfg_")
        self.addCleanup(shutil.rmtree, tmp, True)
        for case in cases:
            d = os.path.dirname(case)
            name = os.path.basename(d)
            with self.subTest(case=name):
                path = os.path.join(tmp, name + ".json")
                with open(case) as f, open(path, "w") as o:
                    o.write(f.read().replace("@CASEDIR@", d))
                with open(os.path.join(d, "expected")) as f:
                    want = path + f.read().rstrip("\n").replace("@CASEDIR@", d)
                prefix = f"ncd_cfg_{os.getpid()}_{name}"
                modes = [["--check-config"]] if not name.startswith("start_") else []
                modes.append(["--", "--in-memory", "--file-prefix", prefix,
                              "--log-level=lib.eal:error"])
                # EAL runs for start_ cases; what it leaves goes, whatever the test's outcome.
                self.addCleanup(subprocess.run, ["rm", "-rf", f"/var/run/dpdk/{prefix}"])
                for mode in modes:
                    r = run(["-c", path] + mode)
                    self.assertEqual(r.returncode, 2, f"{name} {mode[0]}: {r.stderr}")
                    lines = [l for l in r.stderr.splitlines() if l.startswith(path)]
                    self.assertEqual(lines, [want], f"{name} {mode[0]}")
                    self.assertNotIn("running", r.stdout)
                    if not name.startswith("start_"):
                        self.assertFalse(os.path.exists(f"/var/run/dpdk/{prefix}"))

    def test_usage(self):
        # Without -c: the embedded default config, which is config/default.json.
        r = run(["--check-config"])
        self.assertEqual((r.returncode, r.stdout),
                         (0, "<default config>: ok (1 ports, 1 workers, 0 channels)\n"), r.stderr)
        r = run(["--default-config"])
        with open(os.path.join(SRC, "config/default.json")) as f:
            self.assertEqual((r.returncode, r.stdout), (0, f.read()))
        r = run(["--bogus"])
        self.assertEqual(r.returncode, 2)
        r = run(["-c", "/nonexistent.json", "--check-config"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("/nonexistent.json: unable to open", r.stderr)
        r = run(["--help"])
        self.assertEqual(r.returncode, 0)
        for word in ("--check-config", "--default-config", "--stats", "EAL-ARGS", "Exit codes"):
            self.assertIn(word, r.stdout)

    def test_examples(self):
        examples = sorted(glob.glob(os.path.join(SRC, "config", "*.json")))
        self.assertGreaterEqual(len(examples), 2)
        for path in examples:
            with self.subTest(config=os.path.basename(path)):
                r = run(["-c", path, "--check-config"])
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(": ok", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
