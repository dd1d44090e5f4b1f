#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Workers that sleep when there is nothing to do (workers[].idle), on the test bed: an idle
worker uses almost no CPU, and the host, a client and the counters work as with a polling
one."""
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
import test_testbed as TB  # noqa: E402
from test_datapath import EAL  # noqa: E402
from bench_idle import worker_cpu  # noqa: E402  (scripts/, on ncd_test's path)


class Idle(TB.TestBed):
    """The test bed (exception mode tap) with one worker in the idle mode a test asks for."""

    def setUp(self):
        T.DaemonCase.setUp(self)
        self.bed_up(f"id{os.getpid()}")

    def start(self, idle, device="net_af_xdp0,iface=veth0", host=True):
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0", "device": device}],
               "workers": [{"lcore": 1, "idle": idle}], "control": {"socket": self.sock}}
        self.daemon = T.Daemon(cfg, self.w, self.prefix, netns=self.env["TB_HOST_NS"])
        self.daemon.start()
        if host:
            r = subprocess.run([TB.TESTBED, "host", self.name], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)

    def worker(self):
        return self.ncctl("show workers")[0]

    def test_adaptive_worker_sleeps_when_idle(self):
        """An adaptive worker with nothing to do: its thread uses at most 5% of a core over
        3 s and is asleep most of the time, as show workers says; a ping through the
        exception path, the kernel's answer to it, and nc-echo's echoes (its client's
        transmit) each wake it, and nothing is lost."""
        e = self.env
        self.start("adaptive")
        w = self.worker()
        self.assertEqual(w["idle"], "adaptive")
        # The ports' first frames (the kernel's ND and MLD on a new TAP) settle first.
        T.wait_until(lambda: self.worker()["sleeps"] > 100, timeout=5, what="the worker asleep")
        cpu0, t0 = worker_cpu(self.daemon.proc.pid), time.time()
        T.wait_until(lambda: time.time() - t0 >= 3, timeout=5, what="3 s idle")
        share = (worker_cpu(self.daemon.proc.pid) - cpu0) / (time.time() - t0)
        print(f"adaptive worker, idle: {share:.1%} of a core", file=sys.stderr)
        self.assertLessEqual(share, 0.05)
        rates = T.wait_until(lambda: self.worker()["rates"], timeout=5, what="rates")
        self.assertGreater(rates["asleep_share"], 0.8, rates)
        before = self.worker()
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            r = self.ns("PEER", "ping", "-c", "5", "-i", "0.3", "-W", "2", addr)
            self.assertIn("5 packets transmitted, 5 received, 0% packet loss", r.stdout)
        self.bg("HOST", TB.ECHO, "-s", self.sock, "--dport", "7", "--ip",
                ready="echoing udp port 7")
        got = self.udp(e["TB_HOST4"], 7, 20)
        self.assertEqual(got, {"echo": 20, "kernel": 0, "lost": 0, "wrong": 0})
        after = self.worker()
        self.assertGreater(after["wakeups"], before["wakeups"], "a packet woke it")
        self.assertGreater(after["asleep_seconds"], before["asleep_seconds"])
        st = self.ncctl("show port stats wire0")[0]
        self.assertTrue(T.accounting_ok(st), st)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_poll_worker_never_sleeps(self):
        """The default, poll: the worker spins, and says so."""
        self.start("poll")
        T.wait_until(lambda: self.worker()["rates"], timeout=5, what="rates")
        w = self.worker()
        self.assertEqual((w["idle"], w["sleeps"], w["asleep_seconds"]), ("poll", 0, 0))
        self.assertEqual(w["rates"]["asleep_share"], 0)

    def test_interrupt_needs_an_rx_wakeup(self):
        """interrupt on a port whose PMD has no rx wake-up (net_null): the start is refused,
        naming the worker, the port and the way out."""
        with self.assertRaises(AssertionError) as cm:
            self.start("interrupt", device="net_null0", host=False)
        msg = str(cm.exception)
        self.assertIn("workers[0].idle: interrupt, but port wire0 queue 0 (net_null0) has no "
                      "rx wake-up", msg)
        self.assertIn("use adaptive", msg)
        self.assertEqual(self.daemon.proc.returncode, 2)

    def test_interrupt_worker_on_the_test_bed(self):
        """interrupt on net_af_xdp and its TAP: both have wake-ups; ping and the kernel's
        answers go through, and the worker sleeps between them."""
        e = self.env
        self.start("interrupt")
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            r = self.ns("PEER", "ping", "-c", "5", "-i", "0.2", "-W", "2", addr)
            self.assertIn("5 packets transmitted, 5 received, 0% packet loss", r.stdout)
        w = self.worker()
        self.assertEqual(w["idle"], "interrupt")
        self.assertGreater(w["wakeups"], 0)
        self.assertNotIn("sleeps are timed", self.daemon.output())


def load_tests(loader, tests, pattern):
    """This file's cases only: Idle inherits the test bed's."""
    return unittest.TestSuite(Idle(n) for n in sorted(vars(Idle)) if n.startswith("test_"))


if __name__ == "__main__":
    unittest.main()
