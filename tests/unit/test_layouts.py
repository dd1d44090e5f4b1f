#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Python's copies of the protocol's and the API's layouts against C's.

scripts/nc_wire.py restates nc_proto.h's structs, and the netchannel package
netchannel.h's: wire_layout (built from the headers, NC_CHANNEL_STATS among
them) prints what C has, and each copy must agree, field by field where the
copy names its fields.

Usage: test_layouts.py WIRE_LAYOUT SOURCE_DIR LIBNETCHANNEL
"""
import ctypes
import json
import os
import subprocess
import sys
import unittest

LAYOUT, SRC, LIB = sys.argv[1:4]
# A library built with the sanitizers needs their runtime loaded first (as ncd_test's
# python_env() does for the integration tests): run again with it preloaded.
if "LD_PRELOAD" not in os.environ:
    ldd = subprocess.run(["ldd", LIB], capture_output=True, text=True).stdout
    runtime = [ln.split("=>")[1].split()[0] for ln in ldd.splitlines()
               if "=>" in ln and ("libasan" in ln or "libubsan" in ln)]
    if runtime:
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  dict(os.environ, LD_PRELOAD=":".join(runtime), ASAN_OPTIONS="detect_leaks=0"))
del sys.argv[1:4]
sys.path.insert(0, os.path.join(SRC, "scripts"))
sys.path.insert(0, os.path.join(SRC, "python"))
os.environ["NETCHANNEL_LIB"] = LIB

import nc_wire  # noqa: E402
import netchannel  # noqa: E402

C = json.loads(subprocess.run([LAYOUT], capture_output=True, text=True, check=True).stdout)


def ctypes_fields(cls):
    """[name, offset, size] of each field of a ctypes Structure."""
    return [[n, getattr(cls, n).offset, getattr(cls, n).size] for n, _ in cls._fields_]


class Layouts(unittest.TestCase):
    def test_wire_constants(self):
        self.assertEqual(nc_wire.MAGIC, C["magic"])
        self.assertEqual(nc_wire.CONTROL_PROTOCOL_VERSION, C["version"])
        self.assertEqual(nc_wire.NAME.size, C["name_size"])

    def test_wire_structs(self):
        sizes = C["sizes"]
        for copy, struct in ((nc_wire.REQ, "nc_ctl_req"), (nc_wire.REP, "nc_ctl_rep"),
                             (nc_wire.HELLO_BODY, "nc_ctl_hello"),
                             (nc_wire.HELLO_REPLY, "nc_ctl_hello_reply"),
                             (nc_wire.RULE, "nc_ctl_rule"), (nc_wire.CREATE_BODY, "nc_ctl_create"),
                             (nc_wire.NAT_BODY, "nc_ctl_nat"), (nc_wire.CHANNEL, "nc_ctl_channel"),
                             (nc_wire.METER_BODY, "nc_ctl_meter"),
                             (nc_wire.NAME, "nc_ctl_name"), (nc_wire.ID, "nc_ctl_id"),
                             (nc_wire.CLI_HEAD, "nc_ctl_cli"),
                             (nc_wire.CHANNEL_STATS, "nc_ctl_channel_stats")):
            with self.subTest(struct=struct):
                self.assertEqual(copy.size, sizes[struct])

    def test_wire_channel_stats(self):
        self.assertEqual([f[0] for f in C["nc_ctl_channel_stats"]],
                         list(nc_wire.CHANNEL_STATS_FIELDS))
        # Each field's offset, as the format lays them out.
        import struct
        off = 0
        for (name, c_off, c_size), code in zip(C["nc_ctl_channel_stats"],
                                               nc_wire.CHANNEL_STATS.format.lstrip("<")):
            size = struct.calcsize("<" + code)
            with self.subTest(field=name):
                self.assertEqual((off, size), (c_off, c_size))
            off += size

    def test_api_channel_stats(self):
        self.assertEqual(ctypes_fields(netchannel._Stats), C["nc_channel_stats"])
        self.assertEqual(ctypes.sizeof(netchannel._Stats), C["sizes"]["nc_channel_stats"])
        # The API's struct is its size, then the reply's, field for field.
        self.assertEqual([f[0] for f in C["nc_channel_stats"][:2]], ["size", "reserved"])
        self.assertEqual([[n, off - 8, size] for n, off, size in C["nc_channel_stats"][2:]],
                         C["nc_ctl_channel_stats"])

    def test_api_sized_structs(self):
        for cls, struct in ((netchannel._Opts, "nc_channel_opts"), (netchannel._Rule, "nc_rule"),
                            (netchannel._Meter, "nc_meter_opts"),
                            (netchannel._Port, "nc_port"),
                            (netchannel._ClientInfo, "nc_client_info")):
            with self.subTest(struct=struct):
                self.assertEqual(ctypes_fields(cls), C[struct])
                self.assertEqual(ctypes.sizeof(cls), C["sizes"][struct])
        # Each starts as netchannel.h says: its size, set to its own.
        for cls in (netchannel._Opts, netchannel._Rule, netchannel._Stats,
                    netchannel._ClientInfo, netchannel._Meter):
            self.assertEqual(cls().size, ctypes.sizeof(cls))


if __name__ == "__main__":
    unittest.main()
