#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Operators' tools: ncctl and netchanneld -i (the same commands, text and JSON), DPDK
telemetry (dpdk-telemetry.py), packet capture (dpdk-dumpcap), and meson install."""
import errno
import itertools
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
import nc_wire as W  # noqa: E402
from test_datapath import EAL  # noqa: E402

NCCTL = T.NCCTL
CLIENT = os.path.join(T.BUILD, "tests/integration/nc_client_test")
# Telemetry is on here (the other tests turn it off).
EAL_TEL = [a for a in EAL if a != "--no-telemetry"]


class Cli(T.DaemonCase):
    def setUp(self):
        super().setUp()
        self.sock = os.path.join(self.w, "ncd.sock")
        from scapy.all import IP, UDP, Ether, Raw
        # 60 datagrams for the dns channel, 40 for nobody: the kernel's.
        frames = [bytes(Ether(src="02:00:00:00:00:01", dst=T.PCAP_MAC) /
                        IP(src="203.0.113.1", dst="192.0.2.1") /
                        UDP(sport=1000 + i, dport=53 if i < 60 else 9) / Raw(b"q" * 30))
                  for i in range(100)]
        self.frames = frames
        T.write_pcap(os.path.join(self.w, "in.pcap"), frames)

    def start(self, infinite=False, eal=EAL, interactive=False, more=()):
        dev = f"net_pcap0,rx_pcap={self.w}/in.pcap" + (",infinite_rx=1" if infinite else "")
        exc = "none" if infinite else f"net_pcap1,tx_pcap={self.w}/exc.pcap"
        cfg = {"eal": eal, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0", "device": dev, "exception": {"device": exc}}],
               "workers": [{"lcore": 1}], "control": {"socket": self.sock},
               "channels": [{"name": "dns", "match": {"proto": "udp", "dport": 53}}] +
               list(more)}
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        if not interactive:
            self.daemon.start()
            if not infinite:
                self.wait_rx(100)

    def ncctl(self, *cmds, json_out=False, user=None, check=True):
        args = [NCCTL, "-s", self.sock] + (["--json"] if json_out else [])
        for c in cmds:
            args += ["-c", c]
        if user is not None:
            args = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + args
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
        if check:
            self.assertEqual(r.returncode, 0, f"{cmds}: {r.stdout}{r.stderr}")
        return r

    def js(self, cmd):
        return json.loads(self.ncctl(cmd, json_out=True).stdout)

    def wait_rx(self, n):
        """Until the port has received n packets (the daemon may not be listening yet)."""
        def rx():
            r = self.ncctl("show port stats 0", json_out=True, check=False)
            return r.returncode == 0 and json.loads(r.stdout)[0]["rx"] >= n

        T.wait_until(rx, what=f"{n} packets received")

    def test_show_commands_text_and_json(self):
        """Every show command against known traffic, in text and in JSON."""
        self.start()
        st = self.js("show port stats all")
        self.assertEqual(len(st), 1)
        p = st[0]
        self.assertEqual((p["rx"], p["delivered"], p["to_kernel"], p["miss"]), (100, 60, 40, 40))
        self.assertEqual(p["nic"]["ipackets"], 100)
        self.assertTrue(T.accounting_ok(p), p)
        text = self.ncctl("show port stats wire0").stdout
        for line in ("name: wire0", "rx: 100", "delivered: 60", "to_kernel: 40", "  ipackets: 100"):
            self.assertIn(line + "\n", text)
        info = self.js("show port info 0")[0]
        self.assertEqual((info["name"], info["driver"], info["mac"]), ("wire0", "net_pcap", T.PCAP_MAC))
        self.assertIn("driver: net_pcap\n", self.ncctl("show port info all").stdout)
        xs = self.js("show port xstats wire0")[0]["xstats"]
        self.assertEqual(xs["rx_good_packets"], 100)
        ch = self.js("show channel dns")
        self.assertEqual((ch["name"], ch["action"], ch["owner"]["kind"]), ("dns", "deliver", "config"))
        self.assertEqual((ch["counters"]["hits"], ch["counters"]["delivered"], ch["ring_count"]),
                         (60, 60, 60))
        self.assertEqual(ch["rule"], "any proto 17 dport 53 priority 0")
        self.assertEqual([c["name"] for c in self.js("show channel all")], ["dns"])
        self.assertEqual(self.js("show channel 0")["name"], "dns")
        text = self.ncctl("show channel dns").stdout
        self.assertIn("  hits: 60\n", text)
        self.assertIn("ring_count: 60\n", text)
        # A deliver channel that cannot send: no NAT or transmit counters in the text, which
        # JSON still has.
        self.assertNotIn("nat", text)
        self.assertNotIn("tx_spoofed", text)
        self.assertIn("drop_ring_full", text)
        self.assertEqual(ch["counters"]["nat_flows"], 0)
        self.assertEqual(ch["counters"]["tx_spoofed"], 0)
        cl = self.js("show classifier")
        self.assertEqual(cl["rules"], 1)
        self.assertGreater(cl["bytes"], 0)
        mp = self.js("show mempool")
        self.assertEqual(mp["size"], 8191)
        self.assertEqual(mp["in_use"] + mp["available"], 8191)
        self.assertGreaterEqual(mp["in_use"], 60, "the dns ring holds 60")
        # ncctl itself is a connected client while it asks.
        clients = self.js("show clients")
        self.assertEqual(len(clients), 1)
        self.assertTrue(clients[0]["hello"])
        self.assertIn("pid: ", self.ncctl("show clients").stdout)
        nat = self.js("show nat")
        self.assertEqual((nat["capacity"], nat["used"], nat["channels"]), (65536, 0, 0))
        self.assertIn("capacity: 65536", self.ncctl("show nat").stdout)
        help_ = self.ncctl("help").stdout
        for cmd in ("show port info|stats|xstats <port>", "channel create <name> [options...]",
                    "set log level <type> <level>", "show nat", "action nat", "quit",
                    "channel meter <channel> <meter>"):
            self.assertIn(cmd, help_)
        self.assertEqual(len(self.js("help")), 20)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_monitor_and_workers(self):
        """ncctl monitor: with --json one snapshot an interval (ports with rates, the workers'
        load, the mempool, the busiest channels); in text a table; show workers gives each
        worker's loops and load, busy while traffic flows."""
        self.start(infinite=True)
        r = subprocess.run([NCCTL, "-s", self.sock, "--json", "monitor", "-i", "0.6", "-n",
                            "4"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        snaps = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertEqual(len(snaps), 4)
        last = snaps[-1]
        self.assertEqual(set(last), {"time", "ports", "workers", "mempool", "channels"})
        self.assertGreater(last["ports"][0]["rates"]["rx_pps"], 0)
        self.assertEqual([c["name"] for c in last["channels"]], ["dns"])
        self.assertGreater(last["channels"][0]["rates"]["hits_pps"], 0)
        w = last["workers"][0]
        self.assertEqual((w["worker"], w["lcore"]), (0, 1))
        self.assertGreater(w["rates"]["busy_share"], 0.5, w)     # it never runs dry
        self.assertLessEqual(w["rates"]["packets_per_busy_loop"], 32, w)
        self.assertGreater(w["packets"], 0)
        r = subprocess.run([NCCTL, "-s", self.sock, "monitor", "channel", "dns", "-n", "1"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("netchanneld monitor, every 1 s", r.stdout)
        self.assertRegex(r.stdout, r"\nwire0 +\S+")
        self.assertRegex(r.stdout, r"\ndns +\S+")
        self.assertIn("\nmempool: ", r.stdout)
        r = subprocess.run([NCCTL, "-s", self.sock, "monitor", "-i", "0"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertIn("monitor: bad argument '0'", r.stderr)
        text = self.ncctl("show workers").stdout
        self.assertIn("lcore: 1\n", text)
        self.assertIn("busy_share: ", text)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_socket_and_prefix_flags(self):
        """netchanneld --socket and --file-prefix override the config's: the socket is there,
        EAL's runtime directory has the prefix, ncctl and show version answer through it; a
        relative --socket is refused (exit 2)."""
        sock = os.path.join(self.w, "other.sock")
        prefix = self.prefix + "_flag"
        self.addCleanup(T.cleanup_prefix, prefix)
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0", "device": f"net_pcap0,rx_pcap={self.w}/in.pcap",
                          "exception": {"device": "none"}}],
               "workers": [{"lcore": 1}], "control": {"socket": self.sock}}
        self.daemon = T.Daemon(cfg, self.w, self.prefix,
                               args=["--socket", sock, "--file-prefix", prefix])
        self.daemon.start()
        self.assertTrue(os.path.exists(sock), self.daemon.output())
        self.assertFalse(os.path.exists(self.sock))
        self.assertTrue(os.path.isdir(f"/var/run/dpdk/{prefix}"))
        r = subprocess.run([NCCTL, "-s", sock, "-c", "show version"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        r = subprocess.run([T.DAEMON, "--socket", "relative.sock", "--check-config"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("netchanneld: --socket: 'relative.sock' is not an absolute path", r.stderr)

    def test_versions(self):
        """--version on every binary names the release, the build's git describe and DPDK's
        version, and exits 0; "show version" gives the daemon's, DPDK's and the protocols'."""
        project = json.loads(subprocess.run(["meson", "introspect", "--projectinfo", T.BUILD],
                                            capture_output=True, text=True,
                                            check=True).stdout)["version"]
        dpdk = subprocess.run(["pkg-config", "--modversion", "libdpdk"], capture_output=True,
                              text=True, check=True).stdout.strip()
        described = set()
        for name, path in (("netchanneld", T.DAEMON), ("ncctl", NCCTL),
                           ("nc-dump", os.path.join(T.BUILD, "app/examples/nc-dump")),
                           ("nc-echo", os.path.join(T.BUILD, "app/examples/nc-echo")),
                           ("nc-exporter", os.path.join(T.BUILD, "app/exporter/nc-exporter")),
                           ("nctrie-bench", os.path.join(T.BUILD, "app/bench/nctrie-bench"))):
            r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
            self.assertEqual((r.returncode, r.stderr), (0, ""), name)
            m = re.match(rf"{re.escape(name)} (\(netchanneld\) )?{re.escape(project)} \((\S+)\), "
                         rf"DPDK {re.escape(dpdk)}\b", r.stdout)
            self.assertIsNotNone(m, r.stdout)
            described.add(m.group(2))
        # udpbench, the kernel's side of the benchmarks, has no DPDK to name.
        r = subprocess.run([os.path.join(T.BUILD, "app/bench/udpbench"), "--version"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        m = re.match(rf"udpbench \(netchanneld\) {re.escape(project)} \((\S+)\)$", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        described.add(m.group(1))
        self.assertEqual(len(described), 1, "one build, one git describe")
        # The release is the libraries' too: libX.so.0 -> libX.so.RELEASE, and NEWS has it.
        for lib in ("netchannel/netchannel", "netchannel/netchannel_zc", "trie/nctrie"):
            folder, lib = lib.split("/")
            real = os.path.realpath(os.path.join(T.BUILD, f"lib/{folder}/lib{lib}.so.0"))
            self.assertEqual(os.path.basename(real), f"lib{lib}.so.{project}")
            dyn = subprocess.run(["readelf", "-d", real], capture_output=True, text=True,
                                 check=True).stdout
            self.assertIn(f"Library soname: [lib{lib}.so.0]", dyn)
        with open(os.path.join(T.SRC, "NEWS"), encoding="utf-8") as f:
            self.assertRegex(f.readline(),
                             rf"^netchanneld {re.escape(project)} \(\d{{4}}-\d\d-\d\d\)$")
        # The Debian packages' version is the release (a native package).
        with open(os.path.join(T.SRC, "debian/changelog"), encoding="utf-8") as f:
            self.assertEqual(f.readline().split()[1], f"({project})")
        shm = int(re.search(r"#define NC_SHM_LAYOUT_VERSION (\d+)",
                            open(os.path.join(T.SRC, "include/nc_shm.h")).read()).group(1))
        region = int(re.search(r"#define NC_REGION_LAYOUT_VERSION (\d+)",
                               open(os.path.join(T.SRC, "include/nc_region.h")).read()).group(1))
        self.start()
        v = self.js("show version")
        git = described.pop()
        self.assertEqual(v, {"netchanneld": project, "git": git, "dpdk": f"DPDK {dpdk}",
                             "control_protocol": W.CONTROL_PROTOCOL_VERSION,
                             "control_protocol_min": W.CONTROL_PROTOCOL_MIN,
                             "region": region, "shared_memory": shm,
                             "build": f"netchanneld {project} ({git}), DPDK {dpdk}, "
                                      f"shared memory layout {shm}"})
        text = self.ncctl("show version").stdout
        for line in (f"control_protocol: {W.CONTROL_PROTOCOL_VERSION}",
                     f"control_protocol_min: {W.CONTROL_PROTOCOL_MIN}", f"region: {region}",
                     f"build: {v['build']}"):
            self.assertIn(line + "\n", text)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_changes_and_errors(self):
        """channel create/destroy, clear port stats, set log level; bad commands exit 1 with
        the reason; usage errors exit 2; non-root users may look but not change."""
        self.start()
        ch = self.js("channel create web proto tcp dst 192.0.2.1 dport 80-81 priority 5 "
                     "ring_size 64")
        self.assertEqual((ch["name"], ch["owner"]["kind"], ch["ring_size"]), ("web", "operator", 64))
        self.assertEqual(ch["rule"], "ipv4 proto 6 dst 192.0.2.1/32 dport 80-81 priority 5")
        # Operator channels are attachable by name, like the config's.
        r = subprocess.run([CLIENT, self.sock, "attach", "web", "80", "0", "copy"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for cmd, msg in (("channel create web proto tcp dport 99", "a channel named 'web' exists"),
                         ("channel create web2 proto tcp dst 192.0.2.1 dport 80-81 priority 5",
                          f"channel web ({ch['id']}) has the same rule and priority"),
                         ("channel create x dport 70000", "dport"),
                         ("channel create x proto tcp dport", "a value is missing"),
                         ("channel create x colour blue", "unknown option 'colour'"),
                         ("channel create x prto udp", "did you mean 'proto'?"),
                         ("chanel destroy x", "unknown command 'chanel' (try help); did you "
                                              "mean 'channel'?"),
                         ("show chanel all", "did you mean 'channel'?"),
                         ("channel create bad! dport 1", "a name is"),
                         ("show channel nosuch", "no channel 'nosuch'"),
                         ("show port stats 3", "no port '3'"),
                         ("show bogus", "expected one of"),
                         ("frobnicate", "unknown command 'frobnicate'"),
                         ("set log level netchanneld.* loud", "level 'loud'"),
                         ("channel destroy nosuch", "no channel")):
            r = self.ncctl(cmd, check=False)
            self.assertEqual(r.returncode, 1, cmd)
            self.assertIn(msg, r.stderr, cmd)
            self.assertEqual(r.stdout, "", cmd)
            r = self.ncctl(cmd, json_out=True, check=False)
            self.assertEqual((r.returncode, r.stderr), (1, ""), cmd)
            err = json.loads(r.stdout)
            self.assertIn(msg, err["error"], cmd)
            self.assertGreater(err["errno"], 0)
        self.assertEqual(self.js("channel destroy web"), {"destroyed": "web", "id": 1})
        self.assertEqual([c["name"] for c in self.js("show channel all")], ["dns"])
        self.assertEqual(self.js("set log level netchanneld.* debug"),
                         {"type": "netchanneld.*", "level": "debug"})
        self.ncctl("set log level netchanneld.* info")
        self.assertEqual(self.js("clear port stats all"), ["wire0"])
        p = self.js("show port stats 0")[0]
        self.assertEqual((p["rx"], p["delivered"], p["to_kernel"], p["nic"]["ipackets"]), (0, 0, 0, 0))
        # A user who may connect but is not root: may look, may not change.
        os.chmod(self.sock, 0o666)
        os.chmod(self.w, 0o755)
        self.assertEqual(self.ncctl("show mempool", user=65534).returncode, 0)
        r = self.ncctl("clear port stats all", user=65534, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("changes the daemon: root or the daemon's user only", r.stderr)
        # Nor capture: what a port carries is everyone's. Refused before any file is made.
        pcap = os.path.join(self.w, "nobody.pcapng")
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            NCCTL, "-s", self.sock, "capture", "port", "wire0", "-c", "1",
                            "-w", pcap], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("'capture port|channel <name> [options...]' sees every user's packets: "
                      "root or the daemon's user only", r.stderr)
        self.assertFalse(os.path.exists(pcap))
        self.assertEqual(self.js("show capture"), [])
        for bad in (["extra"], ["--bogus"]):
            self.assertEqual(subprocess.run([NCCTL, "-s", self.sock] + bad,
                                            capture_output=True).returncode, 2)
        r = subprocess.run([NCCTL, "-s", os.path.join(self.w, "nosock"), "-c", "help"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("connect to", r.stderr)
        # Under --json, ncctl's own errors are JSON on stdout too, like the daemon's.
        r = subprocess.run([NCCTL, "-s", os.path.join(self.w, "nosock"), "--json", "-c", "help"],
                           capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stderr), (1, ""))
        err = json.loads(r.stdout)
        self.assertEqual(err["errno"], errno.ENOENT)
        self.assertIn("connect to", err["error"])
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        # Every change an operator made, or tried, is in the log with who made it; looking,
        # and what was refused to a user who may not change, is not.
        log = self.daemon.output()
        me = f"pid \\d+ uid {os.getuid()}"
        for line in (r"channel create web proto tcp dst 192\.0\.2\.1 dport 80-81 priority 5 "
                     r"ring_size 64\n",
                     r"channel destroy web\n", r"clear port stats all\n",
                     r"channel create x dport 70000: failed: .*dport.*\n"):
            # One line each, stamped with the time (UTC, milliseconds), as a log file needs.
            self.assertRegex(log, r"(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z netchanneld: "
                             r"cli: " + me + ": " + line)
        self.assertNotIn("cli: pid", "".join(ln for ln in log.splitlines(True)
                                             if "show " in ln or "uid 65534" in ln))

    def test_concurrent_sessions(self):
        """An interactive ncctl session (commands on its stdin) and one-shot ncctls at the
        same time each get their own answers."""
        self.start()
        p = subprocess.Popen([NCCTL, "-s", self.sock, "--json"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        p.stdin.write("show mempool\n")
        p.stdin.flush()
        self.assertEqual(json.loads(p.stdout.readline())["size"], 8191)
        self.assertEqual(self.js("show channel dns")["name"], "dns")
        self.assertEqual(len(self.js("show clients")), 2, "both sessions are connected")
        p.stdin.write("show port stats 0\nquit\n")
        p.stdin.flush()
        self.assertEqual(json.loads(p.stdout.readline())[0]["rx"], 100)
        out, err = p.communicate(timeout=10)
        self.assertEqual((p.returncode, out, err), (0, "", ""))
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_many_channels_page_by_page(self):
        """1,500 channels: show channel all and brief list every one through ncctl (page by
        page: a reply holds 64 KiB), text and JSON; a page says where the next starts;
        telemetry lists them 256 at a time; monitor still finds the busiest."""
        n = 1500
        self.start(eal=EAL_TEL, more=[{"name": f"c{i}", "match": {"proto": "tcp",
                                                                   "dport": 1000 + i},
                                       "ring_size": 16} for i in range(n)])
        names = ["dns"] + [f"c{i}" for i in range(n)]
        full = self.js("show channel all")
        self.assertEqual([c["name"] for c in full], names)
        self.assertEqual(full[0]["counters"]["hits"], 60)
        brief = self.js("show channel brief")
        self.assertEqual([c["name"] for c in brief], names)
        self.assertEqual((brief[0]["hits"], brief[0]["delivered"], brief[1]["drops"]), (60, 60, 0))
        lines = self.ncctl("show channel brief").stdout.splitlines()
        self.assertEqual(len(lines), 1 + n + 1, "a header, then a line a channel")
        self.assertRegex(lines[1], r"^0 +dns +deliver +config +60 +60 +0  any proto 17 dport 53")
        self.assertNotIn("next:", "\n".join(lines))
        text = self.ncctl("show channel all").stdout
        self.assertEqual(text.count("\nname: ") + text.startswith("name: "), n + 1)
        self.assertEqual(text.count("rule: "), n + 1)
        page = self.js("show channel brief from 0")
        self.assertGreater(len(page["channels"]), 100)
        self.assertEqual(page["next"], len(page["channels"]))
        last = self.js(f"show channel all from {n}")
        self.assertEqual(([c["name"] for c in last["channels"]], last["next"]), ([f"c{n - 1}"], None))
        r = self.ncctl("show channel dns from 3", check=False)
        self.assertIn("usage: show channel all|brief [from <id>]", r.stderr)
        # Telemetry: 256 a page, and where the next starts.
        got, start = [], None
        while True:
            cmd = "/netchannel/channels" + (f",{start}" if start is not None else "")
            r = subprocess.run(["/usr/bin/python3", "/usr/bin/dpdk-telemetry.py", "-f",
                                self.prefix], input=cmd + "\n", capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            tel = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1])
            tel = tel["/netchannel/channels"]
            self.assertLessEqual(len(tel["names"]), 256)
            got += tel["names"]
            if "next" not in tel:
                break
            start = tel["next"]
        self.assertEqual(got, names)
        r = subprocess.run([NCCTL, "-s", self.sock, "--json", "monitor", "-i", "0.2", "-n", "1"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout.splitlines()[-1])["channels"][0]["name"], "dns")
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_classifier_snapshot(self):
        """Firewall-shaped channels (source prefixes, port ranges): the daemon compiles a
        snapshot of them in the background, show classifier says so, traffic is classified by
        it as by the trie; a destroyed channel is a dead answer until the next snapshot, and
        its flow misses meanwhile and after."""
        n = 120
        fw = [{"name": f"fw{i}", "match": {"proto": "udp", "src": f"203.0.{i}.0/24",
                                            "dport": "1-100"}, "ring_size": 16}
              for i in range(n)]
        self.start(infinite=True, more=fw)

        def snap(pred, what):
            deadline = time.time() + 20
            while time.time() < deadline:
                c = self.js("show classifier")
                if pred(c["snapshot"]):
                    return c
                time.sleep(0.1)
            self.fail(f"{what}: {c}")

        c = snap(lambda s: s["state"] == "ready", "no snapshot")
        self.assertEqual(c["rules"], n + 1)
        # One front-stage rule (dns) against 120: the snapshot holds them all.
        self.assertEqual((c["snapshot"]["rules"], c["snapshot"]["delta_rules"],
                          c["snapshot"]["stale_rules"], c["snapshot"]["failures"]),
                         (n + 1, 0, 0, 0))
        self.assertGreater(c["snapshot"]["bytes"], 0)
        self.assertGreaterEqual(c["snapshot"]["builds"], 1)
        self.assertGreaterEqual(c["snapshot"]["build_total_us"], c["snapshot"]["build_us"])
        # The order its rte_acl reads the IPv4 fields in, picked by timing them all.
        self.assertIn(c["snapshot"]["layout"]["ipv4"],
                      [f"proto,{a},{b},{x}" for a, b, x in itertools.permutations(
                          ("src", "dst", "ports"))])
        self.assertIn("snapshot:\n  state: ready\n", self.ncctl("show classifier").stdout)

        def hits():
            chans = {ch["name"]: ch["hits"] for ch in self.js("show channel brief")}
            return chans["dns"], chans.get("fw113"), self.js("show port stats 0")[0]["miss"]

        # 203.0.113.1: dport 53 is dns's (listed first), dport 9 is fw113's.
        d0, f0, k0 = hits()
        d1, f1, k1 = T.wait_until(lambda: (lambda h: h[0] - d0 > 100 and h[1] - f0 > 100 and h)(
            hits()), what="100 more hits on dns and on fw113")
        self.assertEqual(k1, k0, "no packet misses while fw113 exists")
        builds = c["snapshot"]["builds"]
        self.assertEqual(self.js("channel destroy fw113")["destroyed"], "fw113")
        # Destroyed: its flow misses at once, and the next snapshot leaves it out.
        snap(lambda s: s["builds"] > builds and s["stale_rules"] == 0 and s["rules"] == n,
             "no new snapshot")
        _, _, k2 = hits()
        T.wait_until(lambda: (lambda h: h[2] - k2 > 100 and h[0] - d1 > 100)(hits()),
                     what="fw113's flow missing, and dns still hit")
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def exporter(self):
        """nc-exporter on the daemon's socket, serving: a function that GETs a path from it,
        (status, content type, body), and the exporter's process."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        exe = os.path.join(T.BUILD, "app/exporter/nc-exporter")
        p = subprocess.Popen([exe, "-s", self.sock, "-l", f"127.0.0.1:{port}"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.assertIn("serving", p.stdout.readline())

        def get(path):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
                    return r.status, r.headers["Content-Type"], r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, None, ""
        return get, p

    def test_exporter_after_rate_intervals_under_traffic(self):
        """A scrape taken after 5 s of traffic, when every rate has been sampled over several
        intervals, passes promtool check metrics: rates and intervals are named in base
        units (netchannel_worker_rates_loops_per_second, ..._interval_seconds)."""
        self.start(infinite=True)
        get, _ = self.exporter()
        t0 = time.monotonic()
        T.wait_until(lambda: time.monotonic() - t0 >= 5 and
                     self.js("show port stats wire0")[0]["rx"] > 0, timeout=30,
                     what="5 s of traffic")
        status, _, text = get("/metrics")
        self.assertEqual(status, 200)
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        names = {ln.split("{")[0].split(" ")[0] for ln in text.splitlines()
                 if ln and not ln.startswith("#")}
        self.assertIn("netchannel_worker_rates_loops_per_second", names)
        self.assertIn("netchannel_worker_rates_interval_seconds", names)
        self.assertGreater(len([n for n in names if n.endswith("_pps")]), 0, "no rates yet")

    def test_monitor_a_channel_that_is_not_there(self):
        """ncctl monitor channel NAME for a channel that is not there says so and exits 1,
        in text and in JSON."""
        self.start()
        for js in (False, True):
            r = subprocess.run([NCCTL, "-s", self.sock] + (["--json"] if js else []) +
                               ["monitor", "channel", "nosuch", "-n", "1"],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            if js:
                self.assertEqual(json.loads(r.stdout)["error"],
                                 "monitor: channel nosuch: no such channel")
            else:
                self.assertEqual(r.stderr, "ncctl: monitor: channel nosuch: no such channel\n")
                self.assertNotIn("too many", r.stdout)

    def test_python_create_takes_the_whole_match(self):
        """The Python package's create() takes a channel's whole match (proto, dst and src
        prefixes of either family, port ranges, priority; proto None for any), the daemon
        holds the rule it was given, and bad values raise ValueError naming the field."""
        self.start()
        script = r"""
import netchannel, sys
with netchannel.Client(sys.argv[1]) as c:
    c.create("web6", proto="tcp", dst="2001:db8::/64", src="2001:db8:1::7", dport=(80, 81),
             sport="1000-2000", priority=5)
    c.create("any4", proto=None, dst="198.51.100.0/24", priority=9)
    c.create("num", proto="132", dport=2905)
    for bad in (dict(dport=70000), dict(dport="x"), dict(proto="gre"), dict(priority=2 ** 24),
                dict(dst="10.0.0.0/8", src="2001:db8::1"), dict(src="no-address")):
        try:
            c.create("bad", **bad)
            print("accepted", bad)
        except ValueError as e:
            print("ValueError", e)
    print("ready", flush=True)
    sys.stdin.read()
"""
        p = subprocess.Popen(["/usr/bin/python3", "-c", script, self.sock], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=T.package_env())
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        out = []
        for line in p.stdout:
            out.append(line.strip())
            if line.startswith("ready"):
                break
        rules = {ch["name"]: ch["rule"] for ch in self.js("show channel all")}
        p.stdin.close()
        p.wait(30)
        self.assertEqual(out, [
            "ValueError dport: 70000 is not a range within 0..65535",
            "ValueError dport: 'x' is not a port, a (lo, hi) pair or 'lo-hi'",
            "ValueError proto: 'gre' is not one of ['icmp', 'icmpv6', 'sctp', 'tcp', 'udp', "
            "'udplite'] or 0..255",
            "ValueError priority: 16777216 is not within 0..16777215",
            "ValueError dst and src are of two families: '10.0.0.0/8', '2001:db8::1'",
            "ValueError src: 'no-address' is not an address or prefix ('no-address' does not "
            "appear to be an IPv4 or IPv6 network)",
            "ready"])
        self.assertEqual(rules["web6"], "ipv6 proto 6 dst 2001:db8::/64 src 2001:db8:1::7/128 "
                                        "dport 80-81 sport 1000-2000 priority 5")
        self.assertEqual(rules["any4"], "ipv4 dst 198.51.100.0/24 priority 9")
        self.assertEqual(rules["num"], "any proto 132 dport 2905 priority 0")

    def test_calls_and_scrapes_log_nothing(self):
        """Ordinary ncctl calls and Prometheus scrapes leave no line in the daemon's log (they
        are at debug); a client that held a channel still leaves its line when it goes."""
        self.start()
        get, _ = self.exporter()
        before = self.daemon.output()
        for _ in range(5):
            self.ncctl("show port stats all")
            self.assertEqual(get("/metrics")[0], 200)
        self.ncctl("channel create tmp proto udp dport 5555", "channel destroy tmp")
        lines = self.daemon.output()[len(before):].splitlines()
        self.assertEqual([ln for ln in lines if "closed," in ln], [], lines)
        env = T.package_env()
        # A client that goes holding its channel (the daemon removes it): said at info.
        r = subprocess.run(["/usr/bin/python3", "-c", "import netchannel, os, sys\n"
                            "c = netchannel.Client(sys.argv[1])\n"
                            "c.create('held', dport=5556)\n"
                            "os._exit(0)\n", self.sock],
                           capture_output=True, text=True, env=env, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        T.wait_until(lambda: "closed, 1 channels removed" in self.daemon.output(),
                     what="the line of a client that held a channel")

    def test_prometheus_exporter(self):
        """nc-exporter serves /metrics in Prometheus' text format: promtool finds nothing
        wrong with it, and what it says is what was sent (the dns channel's 60 hits, the
        port's 100 packets); another path is 404; with the daemon gone, netchannel_up 0."""
        self.start()
        get, p = self.exporter()
        status, ctype, text = get("/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(ctype.startswith("text/plain; version=0.0.4"), ctype)
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                got[key] = float(value)
        self.assertEqual(got["netchannel_up"], 1)
        self.assertEqual(got['netchannel_port_rx_total{port="wire0"}'], 100)
        self.assertEqual(got['netchannel_port_reason_total{port="wire0",reason="not_ip"}'], 0)
        dns = '{channel="dns",id="0",action="deliver",owner="config"}'
        self.assertEqual(got["netchannel_channel_hits_total" + dns], 60)
        self.assertEqual(got["netchannel_channel_delivered_total" + dns], 60)
        self.assertIn('netchannel_mempool_in_use{pool=', text)
        self.assertIn('netchannel_worker_loops_total{worker="0",idle="poll"}', text)
        self.assertIn('netchannel_worker_sleeps_total{worker="0",idle="poll"} 0', text)
        self.assertIn('netchannel_worker_asleep_seconds_total{worker="0",idle="poll"} 0', text)
        # The reloads: none yet.
        self.assertEqual([got[k] for k in ("netchannel_reload_reloads_total",
                                           "netchannel_reload_failures_total",
                                           "netchannel_reload_last_time_seconds",
                                           "netchannel_reload_last_ok")], [0, 0, 0, 0])
        self.assertEqual(get("/")[0], 404)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        status, _, text = get("/metrics")
        self.assertEqual((status, text), (200, "# HELP netchannel_up 1 if netchanneld answered "
                                               "this scrape\n# TYPE netchannel_up gauge\n"
                                               "netchannel_up 0\n"))
        p.terminate()
        self.assertEqual(p.wait(10), 0)

    def test_ncctl_prompt_completes_names(self):
        """ncctl's prompt, on a terminal: tab completes a channel's and a port's name, which
        it asks the daemon for at each press."""
        self.start()
        master, slave = os.openpty()
        p = subprocess.Popen([NCCTL, "-s", self.sock], stdin=slave, stdout=slave, stderr=slave,
                             close_fds=True)
        os.close(slave)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        out = b""

        def read_until(want, timeout=10):
            nonlocal out
            deadline = time.time() + timeout
            while want not in out and time.time() < deadline:
                r, _, _ = select.select([master], [], [], 0.2)
                if r:
                    try:
                        out += os.read(master, 65536)
                    except OSError:
                        break
            return want in out
        self.assertTrue(read_until(b"ncctl> "), out)
        os.write(master, b"show channel d\t\n")
        self.assertTrue(read_until(b"name: dns"), out)
        os.write(master, b"show port info w\t\n")
        self.assertTrue(read_until(b"wire0"), out)
        self.assertNotIn(b"no port", out)
        os.write(master, b"quit\n")
        self.assertEqual(p.wait(10), 0, out)
        os.close(master)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_interactive_daemon(self):
        """netchanneld -i: the prompt on the terminal runs the same commands, completes
        command words and port and channel names, says what a typo likely meant; quit stops
        it."""
        self.start(interactive=True)
        cmd = [T.DAEMON, "-c", self.daemon.config, "-i", "--", "--file-prefix", self.prefix]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.wait_rx(100)           # up, over its control socket, with the pcap received
        try:
            # Tab completes the command's words, and the names of ports and channels there are.
            out, _ = p.communicate("help\nshow port stats w\t\nshow chan\t d\t\n"
                                   "shwo mempool\nquit\n", timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            self.fail("netchanneld -i did not quit")
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("show classifier", out)
        self.assertIn("rx: 100\n", out, "tab completed 'w' to the port's name, wire0")
        self.assertIn("name: dns\n", out, "tab completed 'chan' to 'channel', 'd' to 'dns'")
        self.assertNotIn("no port", out)
        self.assertNotIn("no channel", out)
        # A typo: what is wrong, and what was meant; not librte_cmdline's "Bad arguments".
        self.assertIn("unknown command 'shwo' (try help); did you mean 'show'?", out)
        self.assertNotIn("Bad arguments", out)
        self.assertIn("netchanneld: stopping", out)

    def test_telemetry(self):
        """dpdk-telemetry.py -f PREFIX reads the /netchannel/ endpoints; the values are those
        of the traffic sent."""
        self.start(eal=EAL_TEL)

        def tel(cmd):
            r = subprocess.run(["/usr/bin/python3", "/usr/bin/dpdk-telemetry.py", "-f",
                                self.prefix], input=cmd + "\n", capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1]
            return json.loads(line)[cmd.split(",")[0]]

        st = tel("/netchannel/stats")
        self.assertEqual((st["ports/wire0/rx"], st["ports/wire0/delivered"],
                          st["ports/wire0/to_kernel"]), (100, 60, 40))
        self.assertEqual(st["mempool/size"], 8191)
        self.assertEqual(tel("/netchannel/channels"), {"ids": [0], "names": ["dns"]})
        ch = tel("/netchannel/channel,0")
        self.assertEqual((ch["name"], ch["counters/hits"], ch["owner/kind"]), ("dns", 60, "config"))
        self.assertIsNone(tel("/netchannel/channel,7"), "no such channel: an error, not a crash")
        ports = tel("/netchannel/ports")
        self.assertEqual((ports["wire0/driver"], ports["wire0/stats/rx"]), ("net_pcap", 100))
        mp = tel("/netchannel/mempool")
        self.assertEqual(mp["in_use"] + mp["available"], 8191)
        self.assertEqual(tel("/netchannel/clients")["count"], 0)
        rl = tel("/netchannel/reload")
        self.assertEqual((rl["reloads"], rl["failures"], rl["last_time_seconds"]), (0, 0, 0))
        self.assertIn("/netchannel/stats", tel("/"))
        # Decimal values (rates, shares, seconds asleep) come as their text, not left out.
        T.wait_until(lambda: "workers/0/rates/busy_share" in tel("/netchannel/workers"),
                     what="a worker's rates")
        w = tel("/netchannel/workers")
        for key in ("workers/0/asleep_seconds", "workers/0/rates/busy_share",
                    "workers/0/rates/interval_s"):
            self.assertIsInstance(w[key], str, key)
            float(w[key])
        self.assertGreater(float(w["workers/0/rates/interval_s"]), 0)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_dumpcap(self):
        """dpdk-dumpcap captures a port's received packets (rte_pdump_init)."""
        self.start(infinite=True, eal=EAL_TEL)
        out = os.path.join(self.w, "cap.pcapng")
        r = subprocess.run(["dpdk-dumpcap", "--file-prefix", self.prefix, "-i", "0", "-c", "20",
                            "-w", out], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        from scapy.all import rdpcap
        pkts = [bytes(p) for p in rdpcap(out)]
        self.assertGreaterEqual(len(pkts), 20)
        for p in pkts:
            self.assertIn(p, self.frames)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())


class Readme(unittest.TestCase):
    def test_readme_tour_by_hand(self):
        """The README's tour "by hand", run as a newcomer pastes it (the build tree's
        binaries): it waits for the daemon's socket before its first client, nc-echo claims
        port 7 (its channel is in ncctl's list), the kernel answers ping, and it ends with
        nothing of its own left running."""
        text = open(os.path.join(T.SRC, "README.md"), encoding="utf-8").read()
        block = text.split("To do the same by hand:\n\n```sh\n", 1)[1].split("```", 1)[0]
        lines = block.splitlines()
        start = next(i for i, ln in enumerate(lines) if "netchanneld/netchanneld &" in ln)
        first_client = next(i for i, ln in enumerate(lines) if "nc-echo" in ln)
        self.assertTrue(any("-S /run/netchanneld/netchanneld.sock" in ln
                            for ln in lines[start:first_client]),
                        "the tour starts a client before the daemon's socket is there")
        script = "set -e\n" + block.replace("build/", T.BUILD + "/")
        self.addCleanup(subprocess.run, [os.path.join(T.SRC, "scripts/testbed.sh"), "down"],
                        capture_output=True)
        r = subprocess.run(["bash", "-c", script], cwd=T.SRC, capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("3 packets transmitted, 3 received", r.stdout)
        self.assertIn("nc-echo-7", r.stdout)


class Completion(unittest.TestCase):
    def complete(self, script, *words):
        """What bash completes for the last of words, with the installed-to-be script."""
        src = os.path.join(T.SRC, "config/bash-completion", script)
        prog = ("source \"$1\"; shift; COMP_WORDS=(\"$@\"); COMP_CWORD=$(( $# - 1 )); "
                f"_{script}; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        path = os.path.join(T.BUILD, "app/ncctl") + ":" + os.environ["PATH"]
        env = dict(os.environ, PATH=path)
        r = subprocess.run(["bash", "-c", prog, "-", src] + list(words), capture_output=True,
                           text=True, env=env, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [w for w in r.stdout.splitlines() if w]   # printf prints a line for none

    def test_bash_completion(self):
        """bash completes ncctl's options, monitor's and capture's words, and after -c the
        CLI's commands (quoted, from ncctl's own help), and netchanneld's options."""
        self.assertEqual(self.complete("ncctl", "ncctl", "-c", '"show c'),
                         ['"show channel', '"show clients', '"show classifier', '"show capture',
                          '"show config'])
        self.assertIn('"reload', self.complete("ncctl", "ncctl", "-c", '"r'))
        # Each of a command's alternatives: show port info|stats|xstats.
        self.assertEqual(self.complete("ncctl", "ncctl", "-c", '"show port '),
                         ['"show port info', '"show port stats', '"show port xstats'])
        self.assertIn('"capture channel', self.complete("ncctl", "ncctl", "-c", '"cap'))
        self.assertIn('"channel destroy', self.complete("ncctl", "ncctl", "-c", '"'))
        self.assertEqual(self.complete("ncctl", "ncctl", "monitor", "ch"), ["channel"])
        self.assertEqual(self.complete("ncctl", "ncctl", "cap"), ["capture"])
        self.assertEqual(self.complete("ncctl", "ncctl", "capture", "p"), ["port"])
        self.assertEqual(self.complete("ncctl", "ncctl", "capture", "port", "wire0", "-c", ""),
                         [], "capture's -c is a count, not a command")
        self.assertEqual(self.complete("ncctl", "ncctl", "--j"), ["--json"])
        self.assertEqual(self.complete("netchanneld", "netchanneld", "--che"),
                         ["--check-config"])
        self.assertEqual(self.complete("netchanneld", "netchanneld", "--s"),
                         ["--stats", "--socket"])


# A program of the classifier's API alone: one rule, a key it matches and one it does not.
TRIE_PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include <nc_trie.h>

int
main(void)
{
	struct nc_trie_config cfg = NC_TRIE_SIZED(nc_trie_config, .name = "t", .socket_id = -1,
						  .max_rules = 16);
	struct nc_trie *t = nc_trie_create(&cfg);
	struct nc_trie_rule r;
	struct nc_trie_key k;
	int id;

	memset(&r, 0, sizeof(r));
	r.proto = 17;
	r.proto_mask = 0xff;
	r.dport = (struct nc_trie_port){ 53, 53, NC_TRIE_PORT_RANGE };
	id = t != NULL ? nc_trie_add(t, &r) : -1;
	memset(&k, 0, sizeof(k));
	k.family = NC_TRIE_AF_INET;
	k.proto = 17;
	k.dport = 53;
	printf("match %d ", id >= 0 && nc_trie_lookup(t, &k) == (unsigned int)id ? 0 : 1);
	k.dport = 54;
	printf("miss %d\n", nc_trie_lookup(t, &k) == NC_TRIE_NOMATCH);
	nc_trie_free(t);
	return 0;
}
"""


class Install(unittest.TestCase):
    def test_meson_devenv(self):
        """meson devenv runs clients from the build tree: the Python package imports and
        loads the build's libnetchannel, a C client builds with pkg-config against the
        uninstalled libnetchannel.pc and runs, and netchannel-run is on PATH."""
        lib = os.path.join(T.BUILD, "lib/netchannel/libnetchannel.so.0")
        env = T.python_env(dict(os.environ), lib)
        env.pop("PYTHONPATH", None)
        env.pop("NETCHANNEL_LIB", None)

        def devenv(*cmd):
            r = subprocess.run(["meson", "devenv", "-C", T.BUILD] + list(cmd),
                               capture_output=True, text=True, timeout=120, env=env)
            self.assertEqual(r.returncode, 0, f"{cmd}: {r.stdout}{r.stderr}")
            return r.stdout
        self.assertEqual(devenv("/usr/bin/python3", "-c",
                                "import netchannel; print(netchannel.version())").split()[0],
                         json.loads(subprocess.run(
                             ["meson", "introspect", "--projectinfo", T.BUILD],
                             capture_output=True, text=True, check=True).stdout)["version"])
        d = tempfile.mkdtemp(prefix="ncd_devenv_")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        with open(os.path.join(d, "v.c"), "w") as f:
            f.write("#include <stdio.h>\n#include <netchannel.h>\n"
                    "int main(void) { printf(\"%s\\n\", nc_version()); return 0; }\n")
        out = devenv("sh", "-c", f"cc -o {d}/v {d}/v.c $(pkg-config --cflags --libs "
                                 f"libnetchannel) && {d}/v")
        self.assertRegex(out, r"^\d+\.\d+\.\d+ \(")
        self.assertIn("netchannel-run", devenv("netchannel-run", "--version"))

    def test_python_says_which_library_it_looked_for(self):
        """import netchannel without its library: an ImportError that names the file, where
        it was looked for, and how to point at a build tree; not a bare OSError."""
        env = dict(os.environ, PYTHONPATH=os.path.join(T.SRC, "python"))
        for lib, where in (("/nonexistent/libnetchannel.so.0", "as NETCHANNEL_LIB says"),
                           (None, "looked for where the dynamic linker looks")):
            e = dict(env)
            e.pop("LD_LIBRARY_PATH", None)
            if lib is None:
                e.pop("NETCHANNEL_LIB", None)
            else:
                e["NETCHANNEL_LIB"] = lib
            r = subprocess.run(["/usr/bin/python3", "-c", "import netchannel"], env=e,
                               capture_output=True, text=True, timeout=30)
            if lib is None and r.returncode == 0:
                continue            # an installed libnetchannel: nothing to say
            last = r.stderr.strip().splitlines()[-1]
            self.assertTrue(last.startswith("ImportError: netchannel: cannot load libnetchannel "
                                            f"'{lib or 'libnetchannel.so.0'}' ({where}"), last)
            self.assertIn("meson devenv -C BUILD", last)
            self.assertIn("NETCHANNEL_LIB", last)

    def test_meson_install(self):
        """meson install into a DESTDIR: binaries, headers, libnetchannel and libnetchannel_zc
        with their pkg-config files (libnetchannel's names no DPDK), an example config that
        checks where its port is, the systemd unit (which needs a config the example is not);
        then nc-echo's installed source builds against the installed
        pkg-config file and runs, and so does a program of the classifier's (libnctrie)."""
        d = tempfile.mkdtemp(prefix="ncd_install_")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        r = subprocess.run(["meson", "install", "-C", T.BUILD, "--destdir", d, "--no-rebuild",
                            "--quiet"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        opts = json.loads(subprocess.run(["meson", "introspect", "--buildoptions", T.BUILD],
                                         capture_output=True, text=True, check=True).stdout)
        opt = {o["name"]: o["value"] for o in opts}
        root = d + opt["prefix"]
        libdir = os.path.join(root, opt["libdir"])
        for f in ("bin/netchanneld", "bin/ncctl", "bin/nc-echo", "bin/nc-dump", "bin/nc-exporter",
                  "include/netchannel.h", "include/nc_trie.h", "include/nc_common.h",
                  "etc/netchanneld/netchanneld.json.example",
                  "lib/systemd/system/netchanneld.service",
                  "share/doc/netchanneld/examples/nc_echo.c",
                  "share/doc/netchanneld/examples/netchanneld-wire0.network",
                  "share/doc/netchanneld/docs/design.md", "share/man/man8/netchanneld.8",
                  "share/man/man8/ncctl.8", "share/man/man1/nc-dump.1",
                  "share/man/man1/nc-echo.1", "share/man/man1/nc-exporter.1",
                  "share/bash-completion/completions/ncctl",
                  "share/bash-completion/completions/netchanneld",
                  "bin/netchannel-run", "share/man/man1/netchannel-run.1",
                  "share/doc/netchanneld/docs/preload.md",
                  os.path.join(opt["libdir"], "netchanneld/libnetchannel_preload.so")):
            self.assertTrue(os.path.exists(os.path.join(root, f)), f)
        # Only the public headers: the wire format is no one's to build against.
        self.assertEqual(sorted(os.listdir(os.path.join(root, "include"))),
                         ["nc_common.h", "nc_trie.h", "netchannel.h"])
        self.assertTrue(os.path.exists(os.path.join(libdir, "libnetchannel.so.0")))
        self.assertTrue(os.path.exists(os.path.join(libdir, "libnetchannel_zc.so.0")))
        # The XDP program for fail-open ports (bpf/README.md): a BPF object.
        obj = os.path.join(libdir, "netchanneld/ncd_xdp.o")
        r = subprocess.run(["readelf", "-h", obj], capture_output=True, text=True)
        self.assertIn("Linux BPF", r.stdout, obj + r.stderr)
        unit = open(os.path.join(root, "lib/systemd/system/netchanneld.service")).read()
        self.assertIn(f"ExecStart={opt['prefix']}/bin/netchanneld -c ${{NETCHANNELD_CONFIG}}", unit)
        self.assertIn(f"NETCHANNELD_CONFIG={opt['prefix']}/etc/netchanneld/netchanneld.json", unit)
        # Without the config, the unit does not start: the example is not it.
        self.assertIn(f"ConditionPathExists={opt['prefix']}/etc/netchanneld/netchanneld.json\n",
                      unit)
        self.assertFalse(os.path.exists(os.path.join(root, "etc/netchanneld/netchanneld.json")))
        self.assertIn(f"ExecStopPost=-{opt['prefix']}/bin/netchanneld -c ${{NETCHANNELD_CONFIG}} "
                      "--cleanup", unit)
        # /run/netchanneld outlives a stop: the TAPs' kept host configuration is there.
        self.assertIn("RuntimeDirectoryPreserve=yes", unit)
        env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        # The installed example (a host's eth0, fail-open) checks where there is an eth0: in
        # a namespace of the test's with one. By the build tree's daemon: the installed one
        # looks for its XDP program where it is installed, not in the DESTDIR. The vdev
        # example checks.
        etc = os.path.join(root, "etc/netchanneld/netchanneld.json.example")
        ns = f"ncdinst{os.getpid()}"
        subprocess.run(["ip", "netns", "add", ns], check=True)
        self.addCleanup(subprocess.run, ["ip", "netns", "del", ns])
        subprocess.run(["ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name",
                        "eth1"], check=True)
        r = subprocess.run(["ip", "netns", "exec", ns,
                            os.path.join(T.BUILD, "app/netchanneld/netchanneld"), "-c", etc,
                            "--check-config"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, f"{etc}: ok (1 ports, 1 workers, 0 channels)\n")
        r = subprocess.run([os.path.join(root, "bin/netchanneld"), "-c",
                            os.path.join(root, "share/doc/netchanneld/examples/vdev.json"),
                            "--check-config"], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        pc_env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        # An isolated client's library needs no DPDK, to build or to run.
        iso = "".join(subprocess.run(["pkg-config"] + q + ["libnetchannel"], capture_output=True,
                                     text=True, check=True, env=pc_env).stdout
                      for q in (["--cflags", "--libs"], ["--print-requires"]))
        self.assertIn("-lnetchannel", iso)
        self.assertNotIn("rte", iso)
        self.assertNotIn("dpdk", iso)
        needed = subprocess.run(["objdump", "-p", os.path.join(libdir, "libnetchannel.so.0")],
                                capture_output=True, text=True, check=True).stdout
        needed = [line.split()[1] for line in needed.splitlines()
                  if line.strip().startswith("NEEDED")]
        self.assertIn("libc.so.6", needed)
        self.assertEqual([n for n in needed if "rte_" in n or "dpdk" in n], [], needed)
        pc = subprocess.run(["pkg-config", "--cflags", "--libs", "libnetchannel-zc"],
                            capture_output=True, text=True, check=True, env=pc_env)
        incs = {os.path.normpath(w[2:]) for w in pc.stdout.split() if w.startswith("-I")}
        self.assertIn(os.path.normpath(os.path.join(root, "include")), incs)
        exe = os.path.join(d, "nc-echo")
        san = ["-fsanitize=address,undefined"] if opt.get("sanitize") else []
        r = subprocess.run(["cc", "-o", exe,
                            os.path.join(root, "share/doc/netchanneld/examples/nc_echo.c")] +
                           san + pc.stdout.split(), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([exe, "--help"], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("usage: nc-echo", r.stdout)
        # The classifier, the shared library (the static one is there for --static), from its
        # own pkg-config file.
        self.assertTrue(os.path.exists(os.path.join(libdir, "libnctrie.so.0")))
        self.assertTrue(os.path.exists(os.path.join(libdir, "libnctrie.a")))
        src = os.path.join(d, "trie.c")
        with open(src, "w") as f:
            f.write(TRIE_PROGRAM)
        pc = subprocess.run(["pkg-config", "--cflags", "--libs", "libnctrie"],
                            capture_output=True, text=True, check=True, env=pc_env)
        self.assertIn("-lnctrie", pc.stdout)
        trie = os.path.join(d, "trie")
        r = subprocess.run(["cc", "-o", trie, src] + san + pc.stdout.split(),
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        needed = subprocess.run(["objdump", "-p", trie], capture_output=True, text=True,
                                check=True).stdout
        self.assertIn("NEEDED               libnctrie.so.0", needed)
        r = subprocess.run([trie], capture_output=True, text=True, env=env, timeout=30)
        self.assertEqual((r.returncode, r.stdout), (0, "match 0 miss 1\n"), r.stderr)
        # The Python package, over the installed library, and its example.
        pkg = [dp for dp, _, fs in os.walk(root) if dp.endswith("/netchannel") and
               "__init__.py" in fs]
        self.assertEqual(len(pkg), 1, pkg)
        self.assertTrue(os.path.exists(os.path.join(
            root, "share/doc/netchanneld/examples/python/nc_echo.py")))
        r = subprocess.run(["/usr/bin/python3", "-c",
                            "import netchannel; print(netchannel.version())"],
                           capture_output=True, text=True, timeout=30,
                           env=T.python_env(dict(env, PYTHONPATH=os.path.dirname(pkg[0]),
                                                 NETCHANNEL_LIB=os.path.join(
                                                     libdir, "libnetchannel.so.0")),
                                            os.path.join(libdir, "libnetchannel.so.0")))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^\d+\.\d+\.\d+ \(")
        ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, env=env).stdout
        self.assertRegex(ldd, re.escape(libdir) + r"/+libnetchannel\.so\.0")
        for tool in ("netchanneld", "ncctl"):
            r = subprocess.run([os.path.join(root, "bin", tool), "--help"], capture_output=True,
                               text=True, env=env)
            self.assertEqual(r.returncode, 0, tool)
            self.assertIn("usage:", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
