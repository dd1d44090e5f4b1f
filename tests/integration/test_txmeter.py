#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Transmit meters: a channel's (channels[].tx_meter) and a user's (control.limits.tx_pps,
tx_bps). Clients of uid 65534, with the Python package, send as fast as they can; the daemon
drains their rings at the metered rate, so they find them full (EAGAIN), and what leaves the
port, read from the daemon's counters, is the rate."""
import json
import os
import subprocess
import sys
import time
import unittest

from scapy.all import Ether, IP, UDP, Raw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
from test_datapath import EAL  # noqa: E402
from test_isolated import NOBODY  # noqa: E402

CLIENT = os.path.join(T.BUILD, "tests/integration/nc_client_test")

# Sends its frame (argv[5], hex) on a channel, as fast as it can for argv[4] seconds: attached
# to the static channel argv[3] (argv[2] "attach"), or one of its own on udp port argv[2].
# Prints "ready", then "sent N eagain M".
SENDER = """
import errno, netchannel, sys, time
sock, how, name, secs, frame = sys.argv[1:6]
with netchannel.Client(sock) as c:
    ch = c.attach(name) if how == "attach" else c.create(name, int(how), dst="192.0.2.1", tx=True)
    frame = bytes.fromhex(frame)
    print("ready", flush=True)
    sys.stdin.readline()
    sent = again = 0
    end = time.monotonic() + float(secs)
    while time.monotonic() < end:
        try:
            ch.send(frame)
            sent += 1
        except OSError as e:
            if e.errno != errno.EAGAIN:
                raise
            again += 1
    print("sent", sent, "eagain", again, flush=True)
"""


# Sends its frame (argv[3], hex) on static channel argv[2] for 3 s, and when send() finds the
# ring full, arms for room (arm_tx) and sleeps on the channel's fd (2 s at most). Prints
# "sent N wakes W cpu_s C", or "no wake-up" and exits 1.
SLEEPER = """
import errno, netchannel, os, resource, select, sys, time
sock, name, frame = sys.argv[1:4]
with netchannel.Client(sock) as c:
    ch = c.attach(name)
    frame = bytes.fromhex(frame)
    fd = ch.fileno()
    print("ready", flush=True)
    sent = wakes = 0
    end = time.monotonic() + 3
    while time.monotonic() < end:
        try:
            ch.send(frame)
            sent += 1
            continue
        except OSError as e:
            if e.errno != errno.EAGAIN:
                raise
        if ch.arm_tx():
            continue
        if not select.select([fd], [], [], 2)[0]:
            print("no wake-up", flush=True)
            sys.exit(1)
        os.read(fd, 8)
        wakes += 1
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print("sent", sent, "wakes", wakes, "cpu_s", round(ru.ru_utime + ru.ru_stime, 3), flush=True)
"""


def frame_from(sport):
    """A 60-byte UDP frame from the port (its MAC, 192.0.2.1 port sport) to a peer."""
    return bytes(Ether(src=T.PCAP_MAC, dst="02:00:00:00:00:09") /
                 IP(src="192.0.2.1", dst="203.0.113.9") / UDP(sport=sport, dport=4000) /
                 Raw(b"t" * 18))


class TxMeter(T.DaemonCase):
    def setUp(self):
        super().setUp()
        self.sock = os.path.join(self.w, "ncd.sock")
        self.env = T.nobody_package(self.w)

    def start(self, channels, limits=None):
        # One frame in, never claimed: the port is there to send from.
        T.write_pcap(os.path.join(self.w, "in.pcap"), [frame_from(9)])
        control = {"socket": self.sock, "group": "nogroup", "mode": "0660",
                   "allow": [{"uid": 0}, {"uid": 65534, "dport": "5001-5002"}]}
        if limits:
            control["limits"] = limits
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0",
                          "device": f"net_pcap0,rx_pcap={self.w}/in.pcap,tx_pcap=/dev/null",
                          "exception": {"device": "none"}}],
               "workers": [{"lcore": 1}], "control": control, "channels": channels}
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        self.daemon.start()

    def ncctl(self, cmd):
        r = subprocess.run([T.NCCTL, "-s", self.sock, "--json", "-c", cmd],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout)

    def sender(self, how, name, secs, sport):
        p = subprocess.Popen(NOBODY + ["/usr/bin/python3", "-c", SENDER, self.sock, how, name,
                                       str(secs), frame_from(sport).hex()],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=self.env)
        self.procs.append(p)
        self.assertEqual(self.wait_line(p, "ready"), "ready")
        return p

    def go(self, *procs):
        for p in procs:
            p.stdin.write("\n")
            p.stdin.flush()

    def result(self, p):
        line = self.wait_line(p, "sent ")
        _, sent, _, again = line.split()
        return int(sent), int(again)

    def sent(self, names):
        """What the channels named sent out of the port, and when it was read (one read of
        all channels, over a connection kept open: T.Sampler)."""
        if getattr(self, "sampler", None) is None:
            self.sampler = T.Sampler(self.sock)
            self.addCleanup(self.sampler.close)
        chs, t = self.sampler.read("show channel all")
        return sum(c["counters"]["tx"] for c in chs if c["name"] in names), t

    def rate(self, names, secs=3.0):
        """What the channels send a second, over secs, once their rings are full."""
        try:
            T.wait_until(lambda: all(self.ncctl(f"show channel {n}")["counters"]["tx_held"] > 0
                                     for n in names), timeout=10, what="the senders held")
        except AssertionError as e:
            for p in self.procs:
                p.kill()
            raise AssertionError(f"{e}; the senders said: " +
                                 " | ".join(p.communicate()[0] or "" for p in self.procs)) from e
        s0, t0 = self.sent(names)
        T.wait_until(lambda: time.monotonic() - t0 >= secs, timeout=secs + 5, what=f"{secs} s")
        s1, t1 = self.sent(names)
        return (s1 - s0) / (t1 - t0)

    def test_channel_tx_meter_holds_a_sender_to_its_rate(self):
        """A static channel's tx_meter at 20,000 packets a second; uid 65534 attached to it
        sends flat out for 6 s: the port sends 20,000 a second (within 3% over 3 s), the
        sender sees EAGAIN (its ring full, nothing dropped: every packet it got in left), and
        every packet sent was green or yellow."""
        self.start([{"name": "out", "match": {"proto": "udp", "dst": "192.0.2.1", "dport": 7000},
                     "tx": True, "tx_meter": {"pps": 20000, "burst": 2000},
                     "attach": [{"uid": 65534}]}])
        ch = self.ncctl("show channel out")
        self.assertEqual(ch["tx_meter"], {"mode": "rfc2697", "pps": 20000, "burst": 2000,
                                          "excess_burst": 0})
        p = self.sender("attach", "out", 6, 7000)
        self.go(p)
        r = self.rate(["out"])
        print(f"tx_meter at 20,000 pps: sent {r:,.0f} a second", file=sys.stderr)
        self.assertAlmostEqual(r / 20000, 1, delta=0.03)
        sent, again = self.result(p)
        self.assertGreater(again, 0, "the sender found its ring full")
        c = T.wait_until(lambda: (lambda c: c if c["tx"] == sent else None)(
            self.ncctl("show channel out")["counters"]), timeout=10,
            what="what the sender got in sent")
        self.assertEqual(c["tx_meter_green"] + c["tx_meter_yellow"], c["tx"], c)
        self.assertEqual((c["tx_dropped"], c["tx_spoofed"]), (0, 0), c)
        self.finish(p)
        self.assertEqual(p.returncode, 0)

    def test_a_held_sender_sleeps_until_there_is_room(self):
        """uid 65534 held to 20,000 packets a second sleeps on the channel's fd when its ring
        is full (Channel.arm_tx(), nc_channel_arm_tx()) and wakes when half of it is free:
        it sends at the rate, wakes about once for half a ring (tx_size 256 here: not per
        packet), and uses little CPU (under a fifth of the 3 s)."""
        self.start([{"name": "out", "match": {"proto": "udp", "dst": "192.0.2.1", "dport": 7000},
                     "tx": True, "tx_meter": {"pps": 20000, "burst": 2000},
                     "attach": [{"uid": 65534}]}])
        p = subprocess.Popen(NOBODY + ["/usr/bin/python3", "-c", SLEEPER, self.sock, "out",
                                       frame_from(7000).hex()],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=self.env)
        self.procs.append(p)
        self.assertEqual(self.wait_line(p, "ready"), "ready")
        line = self.wait_line(p, "sent ")
        print(f"a sleeping sender held to 20,000 pps: {line}", file=sys.stderr)
        _, sent, _, wakes, _, cpu = line.split()
        sent, wakes, cpu = int(sent), int(wakes), float(cpu)
        # 3 s at 20,000 a second, and the burst and the ring's worth before the meter held.
        self.assertTrue(60000 * 0.97 <= sent <= 60000 * 1.03 + 2000 + 256, line)
        self.assertGreater(wakes, 0, line)
        self.assertLess(wakes, sent / 50, line)
        self.assertLess(cpu, 0.6, line)
        self.finish(p)
        self.assertEqual(p.returncode, 0)

    def test_zero_copy_sender_is_held_too(self):
        """A zero-copy client (root, nc_tx_burst) on a channel with a tx_meter of 20,000
        packets a second, sending bursts flat out: the port sends at the rate (within 3%),
        nc_tx_burst takes fewer than offered (its mbufs stay the client's), and what it took
        all left."""
        self.start([{"name": "out", "match": {"proto": "udp", "dst": "192.0.2.1", "dport": 7000},
                     "tx": True, "tx_meter": {"pps": 20000, "burst": 2000}}])
        p = subprocess.Popen([CLIENT, self.sock, "flood", "out", "7000", "6"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        r = self.rate(["out"])
        print(f"tx_meter at 20,000 pps, zero-copy: sent {r:,.0f} a second", file=sys.stderr)
        self.assertAlmostEqual(r / 20000, 1, delta=0.03)
        line = self.wait_line(p, "sent ")
        _, sent, _, refused = line.split()
        self.assertGreater(int(refused), 0, line)
        c = T.wait_until(lambda: (lambda c: c if c["tx"] == int(sent) else None)(
            self.ncctl("show channel out")["counters"]), timeout=10,
            what="what the client got in sent")
        self.assertEqual(c["tx_meter_green"] + c["tx_meter_yellow"], c["tx"], c)
        out = self.finish(p)
        self.assertEqual(p.returncode, 0, out)

    def test_user_limit_holds_across_connections(self):
        """control.limits.tx_bps of 8 Mbit/s for uid 65534, which sends flat out from two
        connections, each on a channel of its own: together they send 8 Mbit/s (within 3%),
        each is held (EAGAIN), and root's channel is not held at all."""
        self.start([{"name": "roots", "match": {"proto": "udp", "dst": "192.0.2.1",
                                                "dport": 7000}, "tx": True}],
                   limits={"tx_bps": 8000000})
        a = self.sender("5001", "a", 6, 5001)
        b = self.sender("5002", "b", 6, 5002)
        self.go(a, b)
        r = self.rate(["a", "b"]) * len(frame_from(5001)) * 8
        print(f"uid 65534 limited to 8 Mbit/s: sent {r / 1e6:.2f} Mbit/s", file=sys.stderr)
        self.assertAlmostEqual(r / 8e6, 1, delta=0.03)
        for p in (a, b):
            sent, again = self.result(p)
            self.assertGreater(again, 0, "each connection found its ring full")
            self.finish(p)
            self.assertEqual(p.returncode, 0)
        self.assertEqual(self.ncctl("show channel roots")["counters"]["tx_held"], 0)


if __name__ == "__main__":
    unittest.main()
