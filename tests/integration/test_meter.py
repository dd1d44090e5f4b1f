#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Meters on channels (channels[].meter, rte_meter): the colours a channel's packets get, what
red ones get, and the rate a meter lets by, read from the daemon's counters. The input is
net_pcap: a burst read from a file as fast as the worker takes it (buckets against their
sizes), or the same file replayed for ever (a rate far over the meter's)."""
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import unittest
import urllib.request

from scapy.all import Ether, IP, UDP, Raw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
from test_datapath import EAL  # noqa: E402
from test_isolated import NOBODY  # noqa: E402
import nc_wire as W  # noqa: E402



def frame_to(dport):
    """A 64-byte UDP frame to port dport."""
    return bytes(Ether(dst=T.PCAP_MAC, src="02:00:00:00:00:01") /
                 IP(src="198.51.100.1", dst="192.0.2.1") / UDP(sport=4000, dport=dport) /
                 Raw(b"m" * 18))


FRAME = frame_to(5000)

# uid 65534 with the Python package: a channel of its own on udp port 5001 with a meter, then
# the meters stdin names, one a line (JSON; null takes it off), each answered "set".
METERED_CLIENT = """
import json, netchannel, sys
with netchannel.Client(sys.argv[1]) as c:
    ch = c.create("own", 5001, meter=json.loads(sys.argv[2]))
    print("created", ch.id, flush=True)
    for line in sys.stdin:
        try:
            ch.set_meter(json.loads(line))
            print("set", flush=True)
        except (netchannel.NetchannelError, ValueError) as e:
            print("refused", getattr(e, "errno", None), e, flush=True)
"""


class MeterCase(T.DaemonCase):
    """A daemon whose channel m (udp port 5000) may have a meter, read through ncctl."""

    def start(self, meter, frames, infinite=False, exc="net_null1", control=None, dports=(5000,),
              workers=1, eal=EAL):
        T.write_pcap(os.path.join(self.w, "in.pcap"),
                     [FRAME] * frames if dports == (5000,) else
                     [frame_to(d) for d in dports] * frames)
        # Several workers: a queue each (net_pcap: one a file named), on the one core there is
        # besides the main lcore's, each an lcore of its own (EAL's --lcores).
        dev = "net_pcap0" + f",rx_pcap={self.w}/in.pcap" * workers + \
            (",infinite_rx=1" if infinite else "")
        eal = eal if workers == 1 else \
            [a for a in eal if a not in ("-l", "0-1")] + \
            ["--lcores", "0@0," + ",".join(f"{i}@1" for i in range(1, workers + 1))]
        cfg = {"eal": eal, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0", "device": dev, "exception": {"device": exc},
                          "rx_queues": workers}],
               "workers": [{"lcore": i} for i in range(1, workers + 1)],
               "control": dict({"socket": f"{self.w}/ncd.sock"}, **(control or {})),
               "channels": [{"name": "m", "match": {"proto": "udp", "dport": 5000}}]}
        if meter is not None:
            cfg["channels"][0]["meter"] = meter
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        self.daemon.start()

    def counters(self):
        return self.ncctl("show channel m")["counters"]

    def ncctl(self, cmd):
        r = subprocess.run([T.NCCTL, "-s", f"{self.w}/ncd.sock", "--json", "-c", cmd],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout)

    def sampled(self, name="m"):
        """Channel name's counters, and when they were read (T.Sampler)."""
        if getattr(self, "sampler", None) is None:
            self.sampler = T.Sampler(f"{self.w}/ncd.sock")
            self.addCleanup(self.sampler.close)
        ch, t = self.sampler.read(f"show channel {name}")
        return ch["counters"], t

    def colours_of_a_burst(self, meter, frames):
        """A burst of frames against meter: the channel's counters once all are counted."""
        self.start(meter, frames)
        c = T.wait_until(lambda: (lambda x: x if x["hits"] >= frames else None)(self.counters()),
                         timeout=10, what="every frame counted")
        self.assertEqual(c["hits"], frames, c)
        self.assertEqual(c["meter_green"] + c["meter_yellow"] + c["meter_red"], frames, c)
        return c


class Meter(MeterCase):
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

    def rate(self, meter, unit_of, workers=1):
        """A rate far over meter for 4 s, after the start's burst: what it lets by a second."""
        self.start(meter, 1024, infinite=True, workers=workers)
        T.wait_until(lambda: self.counters()["meter_red"] > 0, timeout=10, what="over the rate")
        c0, t0 = self.sampled()
        T.wait_until(lambda: time.monotonic() - t0 >= 4, timeout=10, what="4 s")
        c1, t1 = self.sampled()
        return (unit_of(c1) - unit_of(c0)) / (t1 - t0)

    def test_packet_rate(self):
        """1,000,000 packets a second, with 0.1 s of burst: within 3% over 4 s."""
        r = self.rate({"pps": 1000000, "burst": 100000},
                      lambda c: c["meter_green"] + c["meter_yellow"])
        print(f"meter at 1,000,000 pps let by {r:,.0f} a second", file=sys.stderr)
        self.assertAlmostEqual(r / 1000000, 1, delta=0.03)

    def test_trtcm_rates(self):
        """trTCM (RFC 2698) at a committed 100,000 and a peak 300,000 packets a second, far
        over both: green at the committed rate, yellow at the rest of the peak, each within
        3% over 4 s."""
        r = self.rate({"pps": 100000, "burst": 10000, "peak_pps": 300000, "peak_burst": 30000},
                      lambda c: c["meter_green"])
        print(f"trTCM: green {r:,.0f} a second", file=sys.stderr)
        self.assertAlmostEqual(r / 100000, 1, delta=0.03)
        c0, t0 = self.sampled()
        T.wait_until(lambda: time.monotonic() - t0 >= 4, timeout=10, what="4 s")
        c1, t1 = self.sampled()
        y = (c1["meter_yellow"] - c0["meter_yellow"]) / (t1 - t0)
        print(f"trTCM: yellow {y:,.0f} a second", file=sys.stderr)
        self.assertAlmostEqual(y / 200000, 1, delta=0.03)

    def test_two_workers_share_the_rate(self):
        """Two workers (on this 2-core machine, two lcores on the one core the main lcore
        leaves), each with a queue far over the rate: each meters at half of 400,000 packets
        a second, and the channel passes 400,000 within 3% over 4 s."""
        r = self.rate({"pps": 400000, "burst": 40000},
                      lambda c: c["meter_green"] + c["meter_yellow"], workers=2)
        print(f"meter at 400,000 pps over two workers let by {r:,.0f} a second",
              file=sys.stderr)
        self.assertEqual(self.ncctl("show channel m")["meter"]["workers"], 2)
        self.assertAlmostEqual(r / 400000, 1, delta=0.03)

    def test_bit_rate(self):
        """100 Mbit/s, counting each frame's bytes (Ethernet header, no FCS): within 3%."""
        r = self.rate({"bps": 100000000, "burst_bytes": 2500000},
                      lambda c: (c["meter_green"] + c["meter_yellow"]) * len(FRAME) * 8)
        print(f"meter at 100 Mbit/s let by {r / 1e6:.1f} Mbit/s", file=sys.stderr)
        self.assertAlmostEqual(r / 100e6, 1, delta=0.03)


    def test_meters_where_an_operator_looks(self):
        """A channel over its meter, under a flood: show channel (text) shows the meter and
        its colours; the monitor its red packets a second (JSON and a text column); telemetry
        (dpdk-telemetry.py) and the exporter its colour counters, as show channel has them."""
        self.start({"pps": 1000, "burst": 100}, 1, infinite=True,
                   eal=[a for a in EAL if a != "--no-telemetry"])
        T.wait_until(lambda: self.counters()["meter_red"] > 0, timeout=10, what="red packets")
        r = subprocess.run([T.NCCTL, "-s", f"{self.w}/ncd.sock", "-c", "show channel m"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        for want in ("pps: 1000", "burst: 100", "meter_green: ", "meter_red: "):
            self.assertIn(want, r.stdout)
        r = subprocess.run([T.NCCTL, "-s", f"{self.w}/ncd.sock", "--json", "monitor", "-i",
                            "0.6", "-n", "4"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        rates = json.loads(r.stdout.splitlines()[-1])["channels"][0]["rates"]
        self.assertGreater(rates["meter_red_pps"], 100000, rates)
        r = subprocess.run([T.NCCTL, "-s", f"{self.w}/ncd.sock", "monitor", "-n", "1"],
                           capture_output=True, text=True, timeout=30)
        self.assertIn("meter red/s", r.stdout)
        tel = subprocess.run(["/usr/bin/python3", "/usr/bin/dpdk-telemetry.py", "-f",
                              self.prefix], input="/netchannel/channel,0\n",
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(tel.returncode, 0, tel.stderr)
        ch = json.loads([ln for ln in tel.stdout.splitlines()
                         if ln.startswith("{")][-1])["/netchannel/channel"]
        self.assertEqual((ch["meter/pps"], ch["meter/burst"]), (1000, 100))
        self.assertGreater(ch["counters/meter_red"], 0)
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            port = so.getsockname()[1]
        exe = os.path.join(T.BUILD, "app/exporter/nc-exporter")
        p = subprocess.Popen([exe, "-s", f"{self.w}/ncd.sock", "-l", f"127.0.0.1:{port}"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        self.assertIn("serving", p.stdout.readline())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        lab = '{channel="m",id="0",action="deliver",owner="config"}'
        got = {k: float(v) for k, v in (ln.rsplit(" ", 1) for ln in text.splitlines()
                                         if ln.startswith("netchannel_channel_meter_"))}
        self.assertGreater(got["netchannel_channel_meter_red_total" + lab], 0, got)
        self.assertGreater(got["netchannel_channel_meter_green_total" + lab], 0, got)
        p.terminate()
        self.assertEqual(p.wait(10), 0)


class LiveMeter(MeterCase):
    """Meters set and changed while the channel's traffic flows: by its client (the library,
    the Python package), by the operator (channel meter, reload), and what a client of
    another user may not do."""

    def setUp(self):
        super().setUp()
        self.sock = os.path.join(self.w, "ncd.sock")
        self.env = T.nobody_package(self.w)

    def start_live(self, meter=None, dports=(5000, 5001)):
        self.start(meter, 1, infinite=True, dports=dports,
                   control={"group": "nogroup", "mode": "0660",
                            "allow": [{"uid": 0}, {"uid": 65534, "dport": "5001"}]})

    def client(self, meter):
        p = subprocess.Popen(NOBODY + ["/usr/bin/python3", "-c", METERED_CLIENT, self.sock,
                                       json.dumps(meter)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=self.env)
        self.procs.append(p)
        return p

    def ask(self, p, meter):
        p.stdin.write(json.dumps(meter) + "\n")
        p.stdin.flush()
        return p.stdout.readline().strip()

    def green_rate(self, name, secs=2.0):
        """What the meter of channel name passes a second (green and yellow), over secs."""
        def passed():
            c, t = self.sampled(name)
            return c["meter_green"] + c["meter_yellow"], t
        T.wait_until(lambda: self.ncctl(f"show channel {name}")["counters"]["meter_red"] > 0,
                     timeout=10, what=f"{name} over its rate")
        g0, t0 = passed()
        T.wait_until(lambda: time.monotonic() - t0 >= secs, timeout=secs + 5, what=f"{secs} s")
        g1, t1 = passed()
        return (g1 - g0) / (t1 - t0)

    def misses(self):
        return self.ncctl("show port stats wire0")[0]["miss"]

    def assert_never_missed(self, since=0):
        """Every frame matched a channel all along: none went to the kernel as a miss."""
        self.assertEqual(self.misses(), since)

    def test_client_sets_and_changes_its_meter_while_traffic_flows(self):
        """uid 65534 creates a metered channel with the Python package, raises its meter to
        5,000 packets a second and takes it off, all under a flood: each rate holds (±5%
        over 2 s), the channel keeps its id and its counters (hits only grow), and no frame
        ever misses it. A meter the config would refuse is refused with the config's
        reason, and the meter in place stays."""
        self.start_live()
        p = self.client({"pps": 1000, "burst": 100})
        cid = int(self.wait_line(p, "created").split()[1])
        missed = self.misses()
        ch = self.ncctl("show channel own")
        self.assertEqual((ch["id"], ch["meter"]["pps"], ch["meter"]["burst"]), (cid, 1000, 100))
        r = self.green_rate("own")
        self.assertAlmostEqual(r / 1000, 1, delta=0.05, msg=f"{r:.0f} a second")
        hits = self.ncctl("show channel own")["counters"]["hits"]
        self.assertEqual(self.ask(p, {"pps": 5000, "burst": 500}), "set")
        ch = self.ncctl("show channel own")
        self.assertEqual((ch["id"], ch["meter"]["pps"]), (cid, 5000))
        self.assertGreaterEqual(ch["counters"]["hits"], hits, "the same channel, counting on")
        r = self.green_rate("own")
        self.assertAlmostEqual(r / 5000, 1, delta=0.05, msg=f"{r:.0f} a second")
        line = self.ask(p, {"pps": 5000})
        self.assertTrue(line.startswith(f"refused {errno.EINVAL} "), line)
        self.assertIn("meter: missing: burst", line)
        self.assertEqual(self.ncctl("show channel own")["meter"]["pps"], 5000)
        line = self.ask(p, {"pps": 5000, "burst": 500, "burst_bytes": 9})
        self.assertIn("not both", line)
        self.assertEqual(self.ask(p, None), "set")
        ch = self.ncctl("show channel own")
        self.assertNotIn("meter", ch)
        red = ch["counters"]["meter_red"]
        T.wait_until(lambda: self.ncctl("show channel own")["counters"]["hits"] >
                     ch["counters"]["hits"] + 10000, timeout=10, what="traffic, unmetered")
        self.assertEqual(self.ncctl("show channel own")["counters"]["meter_red"], red)
        self.assert_never_missed(since=missed)
        self.finish(p)
        self.assertEqual(p.returncode, 0)

    def test_operator_changes_a_meter_in_place(self):
        """channel meter NAME SPEC|off on a static channel under a flood, then a reload that
        changes only its meter: the channel keeps its id and no frame misses it; the reload
        says it changed. Only root or the daemon's user may (uid 65534: EPERM)."""
        self.start_live({"pps": 2000, "burst": 200}, dports=(5000,))
        cid = self.ncctl("show channel m")["id"]
        r = self.green_rate("m")
        self.assertAlmostEqual(r / 2000, 1, delta=0.05, msg=f"{r:.0f} a second")
        ch = self.ncctl("channel meter m pps=4000,burst=400,exceed=kernel")
        self.assertEqual((ch["id"], ch["meter"]["pps"], ch["meter"]["exceed"]),
                         (cid, 4000, "kernel"))
        r = self.green_rate("m")
        self.assertAlmostEqual(r / 4000, 1, delta=0.05, msg=f"{r:.0f} a second")
        bad = subprocess.run([T.NCCTL, "-s", self.sock, "-c", "channel meter m pps=10"],
                             capture_output=True, text=True, timeout=30)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("meter: missing: burst", bad.stdout + bad.stderr)
        nobody = subprocess.run(NOBODY + [T.NCCTL, "-s", self.sock, "-c",
                                          "channel meter m off"],
                                capture_output=True, text=True, timeout=30)
        self.assertNotEqual(nobody.returncode, 0)
        self.assertIn("root or the daemon's user only", nobody.stdout + nobody.stderr)
        self.assertEqual(self.ncctl("show channel m")["meter"]["pps"], 4000)
        self.assertNotIn("meter", self.ncctl("channel meter m off"))
        # The config's meter, changed and reloaded: in place.
        with open(self.daemon.config) as f:
            cfg = json.load(f)
        cfg["channels"][0]["meter"] = {"pps": 3000, "burst": 300}
        with open(self.daemon.config, "w") as f:
            json.dump(cfg, f)
        hits = self.ncctl("show channel m")["counters"]["hits"]
        out = self.ncctl("reload")
        self.assertEqual(out["last_channels"]["changed"], ["m"], out)
        ch = self.ncctl("show channel m")
        self.assertEqual((ch["id"], ch["meter"]["pps"]), (cid, 3000))
        self.assertGreaterEqual(ch["counters"]["hits"], hits, "the same channel, counting on")
        r = self.green_rate("m")
        self.assertAlmostEqual(r / 3000, 1, delta=0.05, msg=f"{r:.0f} a second")
        self.assert_never_missed()

    def test_another_users_channel_is_not_its_to_meter(self):
        """uid 65534, on the wire: CHANNEL_METER of a static channel it may attach to is
        EPERM, with the reason; of root's client's channel, or one it cannot see, ENOENT (no
        channel); unknown flags on its own are EINVAL. The meters stay as they were."""
        self.start_live({"pps": 2000, "burst": 200})
        root = W.Ctl(self.sock)
        self.assertEqual(root.hello()[0], 0)
        st, (root_id, _) = root.create("roots", W.rule(dport=5002))
        self.assertEqual(st, 0)
        self.ncctl("channel create att proto udp dport 5003 attach uid:65534")
        att = self.ncctl("show channel att")["id"]
        static = self.ncctl("show channel m")["id"]
        script = ("import json, sys\n"
                  f"sys.path.insert(0, {os.path.join(T.SRC, 'scripts')!r})\n"
                  "import nc_wire as W\n"
                  "c = W.Ctl(sys.argv[1])\n"
                  "assert c.hello()[0] == 0\n"
                  "st, (own, _) = c.create('mine', W.rule(dport=5001))\n"
                  "out = {}\n"
                  "for name, cid, flags in (('att', int(sys.argv[2]), 0), "
                  "('static', int(sys.argv[3]), 0), ('roots', int(sys.argv[4]), 0), "
                  "('none', 4000, 0), ('own_bad', own, 0x80), ('own', own, 0)):\n"
                  "    st, body = c.call(W.METER, W.METER_BODY.pack(cid, flags, 1000, 100, 0, 0, 0))\n"
                  "    out[name] = [st, body.decode(errors='replace')]\n"
                  "print(json.dumps(out))\n")
        scripts = os.path.join(self.w, "scripts")
        shutil.copytree(os.path.join(T.SRC, "scripts"), scripts)
        script = script.replace(repr(os.path.join(T.SRC, "scripts")), repr(scripts))
        r = subprocess.run(NOBODY + ["/usr/bin/python3", "-c", script, self.sock, str(att),
                                     str(static), str(root_id)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["att"][0], -errno.EPERM, out)
        self.assertIn("channel att is not this connection's", out["att"][1])
        self.assertEqual([out[k][0] for k in ("static", "roots", "none")],
                         [-errno.ENOENT] * 3, out)
        self.assertEqual(out["own_bad"][0], -errno.EINVAL, out)
        self.assertIn("unknown flags", out["own_bad"][1])
        self.assertEqual(out["own"][0], 0, out)
        self.assertEqual(self.ncctl("show channel m")["meter"]["pps"], 2000)
        self.assertNotIn("meter", self.ncctl("show channel att"))
        self.assertNotIn("meter", self.ncctl("show channel roots"))
        root.close()


if __name__ == "__main__":
    unittest.main()
