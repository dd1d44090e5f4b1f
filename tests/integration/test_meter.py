#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Meters on channels (channels[].meter, rte_meter): the colours a channel's packets get, what
red ones get, and the rate a meter lets by, read from the daemon's counters. The input is
net_pcap: a burst read from a file as fast as the worker takes it (buckets against their
sizes), or the same file replayed for ever (a rate far over the meter's)."""
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

FRAME = bytes(Ether(dst=T.PCAP_MAC, src="02:00:00:00:00:01") /
              IP(src="198.51.100.1", dst="192.0.2.1") / UDP(sport=4000, dport=5000) /
              Raw(b"m" * 18))


class Meter(T.DaemonCase):
    def start(self, meter, frames, infinite=False, exc="net_null1"):
        T.write_pcap(os.path.join(self.w, "in.pcap"), [FRAME] * frames)
        dev = f"net_pcap0,rx_pcap={self.w}/in.pcap" + (",infinite_rx=1" if infinite else "")
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0", "device": dev, "exception": {"device": exc}}],
               "workers": [{"lcore": 1}], "control": {"socket": f"{self.w}/ncd.sock"},
               "channels": [{"name": "m", "match": {"proto": "udp", "dport": 5000},
                             "meter": meter}]}
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        self.daemon.start()

    def counters(self):
        return self.ncctl("show channel m")["counters"]

    def ncctl(self, cmd):
        r = subprocess.run([T.NCCTL, "-s", f"{self.w}/ncd.sock", "--json", "-c", cmd],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout)

    def colours_of_a_burst(self, meter, frames):
        """A burst of frames against meter: the channel's counters once all are counted."""
        self.start(meter, frames)
        c = T.wait_until(lambda: (lambda x: x if x["hits"] >= frames else None)(self.counters()),
                         timeout=10, what="every frame counted")
        self.assertEqual(c["hits"], frames, c)
        self.assertEqual(c["meter_green"] + c["meter_yellow"] + c["meter_red"], frames, c)
        return c

    def test_srtcm_burst_and_excess_burst(self):
        """srTCM (RFC 2697) in packets: 3,000 frames at once against a committed burst of
        1,000 and an excess burst of 500 at 100 packets a second: 1,000 green, 500 yellow,
        the rest red and dropped (drop_meter), give or take what the rate refills while
        the burst is read."""
        c = self.colours_of_a_burst({"pps": 100, "burst": 1000, "excess_burst": 500}, 3000)
        self.assertTrue(1000 <= c["meter_green"] <= 1010, c)
        self.assertTrue(500 <= c["meter_yellow"] <= 510, c)
        self.assertEqual(c["drop_meter"], c["meter_red"])
        self.assertEqual(c["delivered"] + c["drop_ring_full"], 3000 - c["meter_red"], c)
        port = self.ncctl("show port stats wire0")[0]
        self.assertEqual(port["drop_meter"], c["meter_red"])
        self.assertTrue(T.accounting_ok(port), port)
        ch = self.ncctl("show channel m")
        self.assertEqual(ch["meter"], {"mode": "rfc2697", "pps": 100, "burst": 1000,
                                       "excess_burst": 500, "exceed": "drop", "workers": 1})

    def test_trtcm_colours(self):
        """trTCM (RFC 2698): committed 1,000 and peak 2,000 packets of burst: 3,000 frames
        at once are 1,000 green, 1,000 yellow and 1,000 red."""
        c = self.colours_of_a_burst({"pps": 100, "burst": 1000, "peak_pps": 200,
                                     "peak_burst": 2000}, 3000)
        self.assertTrue(1000 <= c["meter_green"] <= 1010, c)
        self.assertTrue(990 <= c["meter_yellow"] <= 1010, c)
        self.assertTrue(980 <= c["meter_red"] <= 1000, c)
        self.assertEqual(self.ncctl("show channel m")["meter"]["mode"], "rfc2698")

    def test_rfc4115_colours(self):
        """RFC 4115: a committed burst of 1,000 and an excess one of 500 (its own rate, eir):
        3,000 frames at once are 1,000 green, 500 yellow and 1,500 red."""
        c = self.colours_of_a_burst({"pps": 100, "burst": 1000, "mode": "rfc4115", "eir": 100,
                                     "excess_burst": 500}, 3000)
        self.assertTrue(1000 <= c["meter_green"] <= 1010, c)
        self.assertTrue(500 <= c["meter_yellow"] <= 510, c)
        self.assertEqual(self.ncctl("show channel m")["meter"]["mode"], "rfc4115")

    def test_meter_from_the_cli(self):
        """channel create ... meter KEY=VALUE,...: the config's keys, checked as the config's
        are (the key at fault named), and the meter works as one from the config."""
        self.start({"pps": 100, "burst": 10}, 0)
        ch = self.ncctl("channel create cli proto udp dport 6000 meter "
                        "pps=100,burst=1000,excess_burst=500,exceed=kernel")
        self.assertEqual(ch["meter"], {"mode": "rfc2697", "pps": 100, "burst": 1000,
                                       "excess_burst": 500, "exceed": "kernel", "workers": 1})
        for bad, why in (("pps=100", "meter: missing: burst"),
                         ("pps=100,burst=10,exceed=later", "meter.exceed: 'later': expected "
                          "drop or kernel"),
                         ("pps=100,burst=x", "meter.burst: "),
                         ("pps", "'pps': expected KEY=VALUE")):
            r = subprocess.run([T.NCCTL, "-s", f"{self.w}/ncd.sock", "-c",
                                f"channel create bad proto udp dport 6001 meter {bad}"],
                               capture_output=True, text=True, timeout=30)
            self.assertNotEqual(r.returncode, 0, bad)
            self.assertIn(why, r.stdout + r.stderr, bad)

    def test_red_to_the_kernel(self):
        """exceed kernel: red packets go to the exception device, as misses would."""
        self.start({"pps": 100, "burst": 1000, "exceed": "kernel"}, 2000)
        c = T.wait_until(lambda: (lambda x: x if x["hits"] >= 2000 else None)(self.counters()),
                         timeout=10, what="every frame counted")
        port = self.ncctl("show port stats wire0")[0]
        self.assertEqual((c["drop_meter"], port["drop_meter"]), (0, 0))
        self.assertEqual(port["to_kernel"], c["meter_red"], (c, port))
        self.assertTrue(T.accounting_ok(port), port)

    def rate(self, meter, unit_of):
        """A rate far over meter for 4 s, after the start's burst: what it lets by a second."""
        self.start(meter, 1024, infinite=True)
        T.wait_until(lambda: self.counters()["meter_red"] > 0, timeout=10, what="over the rate")
        t0 = time.time()
        g0 = unit_of(self.counters())
        T.wait_until(lambda: time.time() - t0 >= 4, timeout=10, what="4 s")
        g1, t1 = unit_of(self.counters()), time.time()
        return (g1 - g0) / (t1 - t0)

    def test_packet_rate(self):
        """200,000 packets a second, with 0.2 s of burst: within 3% over 4 s."""
        r = self.rate({"pps": 200000, "burst": 40000},
                      lambda c: c["meter_green"] + c["meter_yellow"])
        print(f"meter at 200,000 pps let by {r:,.0f} a second", file=sys.stderr)
        self.assertAlmostEqual(r / 200000, 1, delta=0.03)

    def test_bit_rate(self):
        """100 Mbit/s, counting each frame's bytes (Ethernet header, no FCS): within 3%."""
        r = self.rate({"bps": 100000000, "burst_bytes": 2500000},
                      lambda c: (c["meter_green"] + c["meter_yellow"]) * len(FRAME) * 8)
        print(f"meter at 100 Mbit/s let by {r / 1e6:.1f} Mbit/s", file=sys.stderr)
        self.assertAlmostEqual(r / 100e6, 1, delta=0.03)


if __name__ == "__main__":
    unittest.main()
