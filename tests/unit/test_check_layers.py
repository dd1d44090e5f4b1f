#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/check_layers.py finds what it is there to find.

The real order passes (the unit test 'layers'); here the same code is held to
orders it breaks: a module moved below one it uses (an include and a call
against the order), two modules made peers, an allow line that excuses
nothing, and a file in no module; and an arrow an allow line excuses passes.

Usage: test_check_layers.py LAYERS SRCDIR MODULE=LIB.a... main=MAIN.o
"""
import os
import subprocess
import sys
import tempfile
import unittest

ARGS = sys.argv[1:]
del sys.argv[1:]
LAYERS, SRCDIR, LIBS = ARGS[0], ARGS[1], ARGS[2:]
CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                     "check_layers.py")


class CheckLayers(unittest.TestCase):
    def check(self, layers_text):
        with tempfile.NamedTemporaryFile("w", suffix=".layers", delete=False) as f:
            f.write(layers_text)
        self.addCleanup(os.unlink, f.name)
        return subprocess.run([sys.executable, CHECK, f.name, SRCDIR] + LIBS,
                              capture_output=True, text=True)

    def real(self):
        return open(LAYERS).read()

    def test_the_order_holds(self):
        r = self.check(self.real())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("0 arrows against the order", r.stdout)
        self.assertIn("0 circles", r.stdout)

    def test_a_module_below_what_it_uses(self):
        # datapath uses channel (its headers and its calls): under it, both are against the order.
        text = self.real().replace("layer channel\n", "").replace(
            "layer datapath\n", "layer datapath\nlayer channel\n")
        r = self.check(text)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertRegex(r.stdout, r"datapath/\S+: include channel/channel\.h: datapath uses "
                                   r"channel, a higher layer")
        self.assertRegex(r.stdout, r"datapath/\S+: call ncd_\w+: datapath uses channel, "
                                   r"a higher layer")

    def test_peers_use_neither_the_other(self):
        text = self.real().replace("layer channel\n", "").replace(
            "layer port\n", "layer port channel\n")
        r = self.check(text)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertRegex(r.stdout, r"channel/\S+: (include|call) \S+: channel uses port, a peer")

    def test_a_stale_allow_line(self):
        r = self.check(self.real() + "allow core/log.c call ncd_no_such_symbol\n")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("allow core/log.c call ncd_no_such_symbol: no such arrow any more",
                      r.stdout)

    def test_an_allowed_arrow(self):
        text = self.real().replace("layer channel\n", "").replace(
            "layer port\n", "layer port channel\n")
        bad = [line.split(": ")[1:3] for line in self.check(text).stdout.splitlines()
               if ": channel uses port" in line]
        self.assertTrue(bad)
        allow = "".join(f"allow {f} {what}\n" for f, what in bad)
        r = self.check(text + allow)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn(f"{len(bad)} allowed", r.stdout)

    def test_a_file_in_no_module(self):
        text = self.real().replace("layer main=main.c\n", "layer main=nothing.c\n")
        r = self.check(text)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("main.c: in no module", r.stdout)


if __name__ == "__main__":
    unittest.main()
