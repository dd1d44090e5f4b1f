#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Clients and daemons of other versions: binaries built against libnetchannel 0.1, a client of
the previous control protocol, and libnetchannel against a daemon of the previous one."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
from test_datapath import EAL  # noqa: E402
from test_tx import scapy  # noqa: E402

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


class Compat(T.DaemonCase):
    def setUp(self):
        super().setUp()
        os.chmod(self.w, 0o755)
        self.sock = os.path.join(self.w, "ncd.sock")
        # uid 65534 cannot be relied on to reach the build tree: its copies go here.
        for exe in ("tests/integration/nc_abi01_client", "lib/netchannel/libnetchannel.so.0"):
            shutil.copy(os.path.join(T.BUILD, exe), self.w)

    def start(self, dports):
        """A daemon whose wire brings, for ever, a UDP datagram to each of dports."""
        s = scapy()
        frames = [bytes(s.Ether(src="02:00:00:00:00:02", dst=T.PCAP_MAC) /
                        s.IP(src="203.0.113.1", dst="192.0.2.1") /
                        s.UDP(sport=2000, dport=d) / s.Raw(b"compat")) for d in dports]
        T.write_pcap(os.path.join(self.w, "in.pcap"), frames)
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0",
                          "device": f"net_pcap0,rx_pcap={self.w}/in.pcap,"
                                    f"tx_pcap={self.w}/tx.pcap,infinite_rx=1",
                          "exception": {"device": "net_null1,no-rx=1"}}],
               "workers": [{"lcore": 1}],
               "control": {"socket": self.sock, "group": "nogroup", "mode": "0660",
                           "allow": [{"uid": 0}, {"uid": 65534, "dport": "5000-5001"}]}}
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        self.daemon.start()

    def nobody(self, *args):
        p = subprocess.Popen(NOBODY + [os.path.join(self.w, args[0])] + list(args[1:]),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=dict(os.environ, LD_LIBRARY_PATH=self.w))
        self.procs.append(p)
        return p

    def test_binary_of_0_1(self):
        """A binary linked against 0.1 (its structs, its symbol versions) creates a channel
        with 0.1's rule and options, receives, and reads 0.1's counters: the library reads
        and writes no byte past them (the poison after each is untouched, and not taken for
        0.1's missing NAT pointer)."""
        exe = os.path.join(self.w, "nc_abi01_client")
        dyn = subprocess.run(["objdump", "-T", exe], capture_output=True, text=True,
                             check=True).stdout
        for call in ("nc_channel_create", "nc_channel_stats", "nc_rule_flow"):
            self.assertRegex(dyn, rf"\(NETCHANNEL_0\.1\)\s+{call}\n", call)
        self.start([5000])
        p = self.nobody("nc_abi01_client", self.sock, "5000", "100")
        out = self.finish(p)
        self.assertEqual(p.returncode, 0, out)
        words = out.split("abi01 ", 1)[1].split()
        got = dict(zip(words[::2], words[1::2]))
        self.assertEqual((got["received"], got["guards"]), ("100", "intact"), out)
        self.assertGreaterEqual(int(got["hits"]), 100, out)
        self.assertGreaterEqual(int(got["delivered"]), 100, out)
        self.assertLessEqual(int(got["rx_count"]), 64, out)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())


if __name__ == "__main__":
    import unittest
    unittest.main()
