#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/check_abi.py fails on what breaks libnetchannel's binaries, and only on that.

Each case builds libnetchannel from a copy of its sources, changed as the case says, and
holds it to the repository's reference (abi/libnetchannel.abi): unchanged it passes; a struct
that changes size, a call removed, or a new call in an old symbol version fails; a new call in
a new version passes, and so do a field added at the end of a struct that carries its size and
an incompatible change with a new soname.

Usage: test_check_abi.py SOURCE_DIR BUILD_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC, BUILD = sys.argv[1:3]
del sys.argv[1:3]
CHECK = os.path.join(SRC, "scripts", "check_abi.py")


class CheckAbi(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp(prefix="ncd_abi_")
        self.addCleanup(shutil.rmtree, self.d, ignore_errors=True)
        for sub in ("include", "lib/netchannel"):
            shutil.copytree(os.path.join(SRC, sub), os.path.join(self.d, sub))

    def edit(self, path, old, new):
        """The copy's path with old (which must be there) replaced by new."""
        path = os.path.join(self.d, path)
        text = open(path, encoding="utf-8").read()
        self.assertIn(old, text, path)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new, 1))

    def add_call(self, version, marked=False):
        """A new call, nc_new_call(), in symbol version `version` (a new node if it is not
        the map's); marked: NC_EXPERIMENTAL in the header."""
        self.edit("include/netchannel.h", "const char *nc_last_reason(void);",
                  "const char *nc_last_reason(void);\n" +
                  ("NC_EXPERIMENTAL\n" if marked else "") + "int nc_new_call(void);")
        with open(os.path.join(self.d, "lib/netchannel/netchannel.c"), "a") as f:
            f.write("\nNC_EXPORT int\nnc_new_call(void)\n{\n\treturn 0;\n}\n")
        path = os.path.join(self.d, "lib/netchannel/libnetchannel.map")
        text = open(path).read()
        if f"{version} {{" in text:
            self.edit("lib/netchannel/libnetchannel.map", f"{version} {{\n\tglobal:\n",
                      f"{version} {{\n\tglobal:\n\t\tnc_new_call;\n")
        else:
            with open(path, "a") as f:
                f.write(f"\n{version} {{\n\tglobal:\n\t\tnc_new_call;\n}} NETCHANNEL_PRIVATE;\n")

    def check(self, soname="libnetchannel.so.0"):
        """check_abi.py's (status, output) for the copy, built as meson builds it, with
        debug info."""
        lib = os.path.join(self.d, soname)
        src = os.path.join(self.d, "lib/netchannel")
        r = subprocess.run(
            ["cc", "-shared", "-fPIC", "-g", "-O2", "-std=gnu11", "-fvisibility=hidden",
             '-DNC_PROJECT_VERSION="abi-test"', "-I", os.path.join(self.d, "include"),
             "-I", os.path.join(BUILD, "include"),
             f"-Wl,--version-script={src}/libnetchannel.map", f"-Wl,-soname,{soname}",
             "-o", lib, f"{src}/netchannel.c", f"{src}/compat.c"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([sys.executable, CHECK, "check", os.path.join(SRC, "abi"),
                            os.path.join(self.d, "include"), lib],
                           capture_output=True, text=True, timeout=120)
        return r.returncode, r.stdout + r.stderr

    def test_unchanged_passes(self):
        rc, out = self.check()
        self.assertEqual(rc, 0, out)
        self.assertIn("1 libraries, 0 problems", out)

    def test_struct_change_fails(self):
        """A field added in the middle of struct nc_buf, which calls take in arrays."""
        self.edit("include/netchannel.h", "\tuint32_t len;   ",
                  "\tuint32_t extra;\n\tuint32_t len;   ")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("an ABI change under the same soname", out)
        self.assertIn("nc_buf", out)

    def test_field_at_the_end_of_a_sized_struct_passes(self):
        """A field added at the end of struct nc_channel_opts, which carries its size: an
        older caller's size leaves it out. Added in the middle, it moves the fields after."""
        self.edit("include/netchannel.h", "\tint shared;\n};", "\tint shared;\n\tint later;\n};")
        rc, out = self.check()
        self.assertEqual(rc, 0, out)
        self.edit("include/netchannel.h", "\tint tx;   ", "\tint extra;\n\tint tx;   ")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("nc_channel_opts", out)

    def test_removed_call_fails(self):
        self.edit("lib/netchannel/libnetchannel.map", "\t\tnc_channel_tx_mac;\n", "")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("nc_channel_tx_mac", out)

    def test_new_call_in_old_version_fails(self):
        self.add_call("NETCHANNEL_0.3")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("new call nc_new_call in NETCHANNEL_0.3, a symbol version the "
                      "reference has", out)

    def test_new_call_in_new_version_passes(self):
        self.add_call("NETCHANNEL_0.9")
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_experimental_call_must_be_marked(self):
        self.add_call("NETCHANNEL_EXPERIMENTAL")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("nc_new_call is in NETCHANNEL_EXPERIMENTAL but no public header marks "
                      "it", out)

    def test_marked_experimental_call_passes(self):
        self.add_call("NETCHANNEL_EXPERIMENTAL", marked=True)
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_incompatible_change_with_new_soname_passes(self):
        self.edit("include/netchannel.h", "\tuint32_t len;   ",
                  "\tuint32_t extra;\n\tuint32_t len;   ")
        rc, out = self.check(soname="libnetchannel.so.1")
        self.assertEqual(rc, 0, out)
        self.assertIn("soname moved from libnetchannel.so.0 to libnetchannel.so.1", out)


if __name__ == "__main__":
    unittest.main()
