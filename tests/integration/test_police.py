#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The exception path's policer (ports[].exception.police): what goes to the kernel is metered
in buckets (arp, nd, icmp, each protect entry, other), so that a flood in one cannot starve
another. Its rates read from the daemon's counters on net_pcap, far over every bucket; then, on
the test bed with the real kernel as the peer, floods from hping3 while ping, ARP, ND and a TCP
transfer to a protected port go on."""
import json
import os
import re
import subprocess
import sys
import time
import unittest

from scapy.all import ARP, ICMP, IP, IPv6, Ether, Raw, TCP, UDP, ICMPv6EchoRequest, \
    ICMPv6ND_NS

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
import test_testbed as TB  # noqa: E402
from test_datapath import EAL  # noqa: E402

SRC_MAC = "02:00:00:00:00:01"

# One frame of each kind, with the bucket it belongs in.
FRAMES = [
    ("other", Ether(dst=T.PCAP_MAC, src=SRC_MAC) / IP(src="198.51.100.1", dst="192.0.2.1") /
     UDP(sport=4000, dport=9999) / Raw(b"u" * 18)),
    ("icmp", Ether(dst=T.PCAP_MAC, src=SRC_MAC) / IP(src="198.51.100.1", dst="192.0.2.1") /
     ICMP() / Raw(b"p" * 18)),
    ("icmp", Ether(dst=T.PCAP_MAC, src=SRC_MAC) / IPv6(src="2001:db8::1", dst="2001:db8::2") /
     ICMPv6EchoRequest()),
    ("arp", Ether(dst="ff:ff:ff:ff:ff:ff", src=SRC_MAC) /
     ARP(op=1, hwsrc=SRC_MAC, psrc="198.51.100.1", pdst="192.0.2.1")),
    ("nd", Ether(dst="33:33:ff:00:00:02", src=SRC_MAC) /
     IPv6(src="2001:db8::1", dst="ff02::1:ff00:2", hlim=255) / ICMPv6ND_NS(tgt="2001:db8::2")),
    ("ssh", Ether(dst=T.PCAP_MAC, src=SRC_MAC) / IP(src="198.51.100.1", dst="192.0.2.1") /
     TCP(sport=40000, dport=22, flags="S")),
]

RATES = {"other": {"bps": 16000000, "burst_bytes": 20000}, "icmp": {"pps": 10000, "burst": 1000},
         "arp": {"pps": 5000, "burst": 500}, "nd": {"pps": 4000, "burst": 400}}
SSH = {"name": "ssh", "match": {"proto": "tcp", "dport": 22}, "pps": 3000, "burst": 300}


class PoliceRates(T.DaemonCase):
    def start(self, police, frames):
        T.write_pcap(os.path.join(self.w, "in.pcap"), [bytes(f) for f in frames])
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0",
                          "device": f"net_pcap0,rx_pcap={self.w}/in.pcap,infinite_rx=1",
                          "exception": {"device": "net_null1", "police": police}}],
               "workers": [{"lcore": 1}], "control": {"socket": f"{self.w}/ncd.sock"}}
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        self.daemon.start()

    def ncctl(self, cmd):
        r = subprocess.run([T.NCCTL, "-s", f"{self.w}/ncd.sock", "--json", "-c", cmd],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout)

    def port(self):
        return self.ncctl("show port stats wire0")[0]

    def test_each_bucket_holds_its_rate(self):
        """A flood of every kind at once, far over each bucket: over 3 s, each bucket passes
        its rate within 3% (packets, or bits for other, whose frames are 60 bytes), drops the
        rest, and the port's counters add up: to_kernel is what passed, drop_exc_police what
        did not."""
        self.start(dict(RATES, protect=[SSH]), [f for _, f in FRAMES])
        info = self.ncctl("show port info wire0")[0]["police"]
        self.assertEqual(info["other"], {"bps": 16000000, "burst_bytes": 20000})
        self.assertEqual(info["protect"], [{"name": "ssh", "pps": 3000, "burst": 300,
                                            "match": info["protect"][0]["match"]}])
        self.assertIn("dport 22", info["protect"][0]["match"])
        T.wait_until(lambda: all(v > 0 for v in self.port()["police_dropped"].values()),
                     timeout=10, what="every bucket over its rate")
        sampler = T.Sampler(f"{self.w}/ncd.sock")
        self.addCleanup(sampler.close)
        p0, t0 = sampler.read("show port stats wire0")
        T.wait_until(lambda: time.monotonic() - t0 >= 3, timeout=10, what="3 s")
        p1, t1 = sampler.read("show port stats wire0")
        p0, p1 = p0[0], p1[0]
        secs = t1 - t0
        frame_bits = len(bytes(FRAMES[0][1])) * 8
        for bucket, want in (("other", 16000000 / frame_bits), ("icmp", 10000),
                             ("arp", 5000), ("nd", 4000), ("ssh", 3000)):
            got = (p1["police_passed"][bucket] - p0["police_passed"][bucket]) / secs
            print(f"police {bucket}: {got:,.0f} a second, set to {want:,.0f}", file=sys.stderr)
            self.assertAlmostEqual(got / want, 1, delta=0.03, msg=bucket)
        self.assertEqual(p1["drop_exc_police"], sum(p1["police_dropped"].values()))
        self.assertEqual(p1["to_kernel"], sum(p1["police_passed"].values()))
        self.assertTrue(T.accounting_ok(p1), p1)

    def test_defaults_and_bursts(self):
        """police {} takes the defaults (arp 1,000, nd 1,000, icmp 5,000, other 100,000 packets
        a second, bursts of a tenth of a second's), and a bucket's burst is honoured: a
        burst of ARP requests read at once passes its 100, give or take the refill."""
        T.write_pcap(os.path.join(self.w, "in.pcap"), [bytes(FRAMES[3][1])] * 1000)
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0", "device": f"net_pcap0,rx_pcap={self.w}/in.pcap",
                          "exception": {"device": "net_null1", "police": {}}}],
               "workers": [{"lcore": 1}], "control": {"socket": f"{self.w}/ncd.sock"}}
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        self.daemon.start()
        info = self.ncctl("show port info wire0")[0]["police"]
        self.assertEqual(info, {"arp": {"pps": 1000, "burst": 100},
                                "nd": {"pps": 1000, "burst": 100},
                                "icmp": {"pps": 5000, "burst": 500},
                                "other": {"pps": 100000, "burst": 10000}, "protect": []})
        p = T.wait_until(lambda: (lambda x: x if x["rx"] >= 1000 else None)(self.port()),
                         timeout=10, what="the burst read")
        self.assertTrue(100 <= p["police_passed"]["arp"] <= 110, p["police_passed"])
        self.assertEqual(p["police_passed"]["arp"] + p["police_dropped"]["arp"], 1000)
        self.assertTrue(T.accounting_ok(p), p)


class PoliceBed(TB.TestBed):
    """The policer with the real kernel behind it: hping3 floods from the peer, each aimed at
    one bucket, while the others' traffic goes on."""

    def setUp(self):
        T.DaemonCase.setUp(self)
        self.bed_up(f"po{os.getpid()}")
        police = {"other": {"pps": 2000, "burst": 400}, "icmp": {"pps": 2000, "burst": 200},
                  "protect": [{"name": "iperf", "match": {"proto": "tcp", "dport": 5201},
                               "pps": 30000, "burst": 3000}]}
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0", "device": "net_af_xdp0,iface=veth0",
                          "exception": {"police": police}}],
               "workers": [{"lcore": 1}], "control": {"socket": self.sock}}
        self.daemon = T.Daemon(cfg, self.w, self.prefix, netns=self.env["TB_HOST_NS"])
        self.daemon.start()
        r = subprocess.run([TB.TESTBED, "host", self.name], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.bg("HOST", "/usr/bin/python3", "-u", TB.KERNEL_UDP, "7", ready="ready")

    def _bg_flood(self, *args):
        """hping3 flooding the host from the peer, a packet every 20 us (tens of thousands a
        second, far over the bucket's 2,000), on CPU 0 (the worker has CPU 1), for 20 s at
        most; stopped by the test (by pid) once it has what it needs. Not as fast as it can:
        on 2 cores a sender at full speed starves the worker now and then, and the veth
        drops what the daemon's AF_XDP ring has no room for, before any policer sees it."""
        p = subprocess.Popen(["ip", "netns", "exec", self.env["TB_PEER_NS"], "timeout", "-k",
                              "1", "20", "taskset", "-c", "0", "hping3", "-i", "u20", "-q",
                              *args, self.env["TB_HOST4"]],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def flood(self, bucket, *args):
        """A flood in progress, far over bucket's rate: its drops are counting."""
        p = self._bg_flood(*args)
        self.addCleanup(self._stop, p)
        T.wait_until(lambda: self.port()["police_dropped"][bucket] > 5000, timeout=15,
                     what=f"the flood over {bucket}'s rate")
        return p

    def _stop(self, p):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def port(self):
        return self.ncctl("show port stats wire0")[0]

    def pings(self, addr, n=40):
        r = self.ns("PEER", "ping", "-c", str(n), "-i", "0.05", "-W", "2", addr, check=False)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", r.stdout)
        self.assertIsNotNone(m, r.stdout + r.stderr)
        return int(m.group(1)) - int(m.group(2))

    def tcp_transfer(self):
        """A 2 s iperf3 run to the host kernel's port 5201 (protected): bytes received."""
        self.bg("HOST", "iperf3", "-s", "-1", "-p", "5201", "--forceflush",
                ready="Server listening")
        r = self.ns("PEER", "timeout", "-k", "1", "20", "iperf3", "-c", self.env["TB_HOST4"],
                    "-p", "5201", "-t", "2", "-J", timeout=30)
        return json.loads(r.stdout)["end"]["sum_received"]["bytes"]

    def neighbours_resolve(self):
        """ARP and ND forgotten on both sides, then asked again: both resolve."""
        e = self.env
        for fam in ("-4", "-6"):
            self.ns("PEER", "ip", fam, "neigh", "flush", "dev", "eth0")
            self.ns("HOST", "ip", fam, "neigh", "flush", "dev", e["TB_TAP"])
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            self.assertEqual(self.pings(addr, 5), 0, f"{addr} after the neighbours were flushed")

    def test_udp_flood_leaves_ping_arp_nd_and_the_protected_port(self):
        """A UDP flood to a port no one claims, far over other's 2,000 packets a second: ping
        (IPv4 and IPv6) loses nothing, a TCP transfer to the protected port completes, ARP
        and ND resolve, and the flood's excess is dropped and counted in other's bucket."""
        t0 = time.time()
        flood = self.flood("other", "--udp", "-p", "9999")
        e = self.env
        self.assertEqual(self.pings(e["TB_HOST4"]), 0)
        self.assertEqual(self.pings(e["TB_HOST6"]), 0)
        got = self.tcp_transfer()
        print(f"iperf3 to the protected port under a UDP flood: {got * 8 / 2e6:.0f} Mbit/s",
              file=sys.stderr)
        self.assertGreater(got, 1000000)
        self.neighbours_resolve()
        self.assertIsNone(flood.poll(), "the flood ran throughout")
        self._stop(flood)
        secs = time.time() - t0
        p = self.port()
        print(f"police over {secs:.1f} s: passed {p['police_passed']}, dropped "
              f"{p['police_dropped']}", file=sys.stderr)
        # What other let by: its rate and its burst (and the probes'), not the flood.
        self.assertLessEqual(p["police_passed"]["other"], (2000 * secs + 400) * 1.03, p)
        self.assertGreater(p["police_dropped"]["other"], 2 * p["police_passed"]["other"], p)
        self.assertEqual(p["drop_exc_police"], sum(p["police_dropped"].values()))
        self.assertTrue(T.accounting_ok(p), p)

    def test_floods_of_icmp_and_of_the_protected_port_leave_the_rest(self):
        """An ICMP flood: the kernel's UDP service (other) answers every datagram and the TCP
        transfer completes. A SYN flood at the protected port: ping loses nothing and the UDP
        service answers. Each flood's excess is counted in its own bucket."""
        e = self.env
        flood = self.flood("icmp", "--icmp")
        self.assertEqual(self.udp(e["TB_HOST4"], 7, 20), {"echo": 0, "kernel": 20, "lost": 0,
                                                         "wrong": 0})
        self.assertGreater(self.tcp_transfer(), 1000000)
        self._stop(flood)
        flood = self.flood("iperf", "-S", "-p", "5201")
        self.assertEqual(self.pings(e["TB_HOST4"]), 0)
        self.assertEqual(self.udp(e["TB_HOST4"], 7, 20), {"echo": 0, "kernel": 20, "lost": 0,
                                                         "wrong": 0})
        self._stop(flood)
        p = self.port()
        print(f"police: passed {p['police_passed']}, dropped {p['police_dropped']}",
              file=sys.stderr)
        self.assertEqual(p["police_dropped"]["other"], 0, p)
        self.assertTrue(T.accounting_ok(p), p)


def load_tests(loader, tests, pattern):
    """This file's cases only: PoliceBed inherits the test bed's."""
    return unittest.TestSuite(cls(n) for cls in (PoliceRates, PoliceBed)
                              for n in sorted(vars(cls)) if n.startswith("test_"))


if __name__ == "__main__":
    unittest.main()
