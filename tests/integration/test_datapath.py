#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""netchanneld's data plane on real vdevs, with real client processes.

Each test starts its own daemon with its own --file-prefix and stops it by pid.
"""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402

# A fixed, high base address: a secondary must map the hugepages where the primary did, and
# under ASan the default addresses may be taken in the secondary.
EAL = ["-l", "0-1", "--no-pci", "--log-level", "lib.eal:error", "--no-telemetry",
       "--base-virtaddr", "0x200000000000"]

CHANNELS = [
    {"name": "dns", "match": {"proto": "udp", "dst": "192.0.2.1/32", "dport": 53}, "priority": 10},
    {"name": "web6", "match": {"proto": "tcp", "dst": "2001:db8::1", "dport": "80-443"}},
    {"name": "blk", "match": {"src": "198.51.100.0/24"}, "priority": 20, "action": "drop"},
]


def pcap_config(w, channels, exc="pcap", extra_port=None):
    port = {"name": "wire0",
            "device": f"net_pcap0,rx_pcap={w}/in.pcap,tx_pcap={w}/tx.pcap",
            "exception": {"device": f"net_pcap1,tx_pcap={w}/exc.pcap" if exc == "pcap" else exc}}
    if extra_port:
        port.update(extra_port)
    return {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64}, "ports": [port],
            "workers": [{"lcore": 1}], "control": {"socket": f"{w}/ncd.sock"},
            "channels": channels}


class Datapath(T.DaemonCase):
    def run_daemon(self, config):
        self.daemon = T.Daemon(config, self.w, self.prefix)
        self.daemon.start()
        return self.daemon

    def shown(self, cmd):
        """An ncctl show command's JSON, over the daemon's control socket."""
        return json.loads(subprocess.run([T.NCCTL, "-s", f"{self.w}/ncd.sock", "--json", "-c",
                                          cmd], capture_output=True, text=True, check=True,
                                         timeout=30).stdout)

    def wait_ports_rx(self, n, what):
        """Until every port has received at least n packets."""
        T.wait_until(lambda: all(p["rx"] >= n for p in self.shown("show port stats all")),
                     what=what)

    def test_steering(self):
        """Each channel gets exactly its flows, byte for byte and in order; the rest reach
        the exception device unchanged; the counters add up."""
        _, meta = T.generate(self.w)
        frames = T.read_pcap(os.path.join(self.w, "in.pcap"))
        self.assertEqual(len(frames), len(meta))
        want = {ch["name"]: [] for ch in CHANNELS}
        kernel, dropped, too_big = [], 0, 0
        for pkt, frame in T.arrivals(meta, frames):
            ch = T.expected_channel(CHANNELS, pkt)
            if ch is None:
                if len(frame) > 1500 + 14 + 8:
                    too_big += 1
                else:
                    kernel.append(frame)
            elif ch.get("action") == "drop":
                dropped += 1
            else:
                want[ch["name"]].append(T.trimmed(frame))
        self.assertGreater(len(want["dns"]), 20)
        self.assertGreater(len(want["web6"]), 5)

        d = self.run_daemon(pcap_config(self.w, CHANNELS))
        for name in ("dns", "web6"):
            self.assert_receives(name, want[name])
        self.assertEqual(d.stop(), 0, d.output())

        exc = T.read_pcap(os.path.join(self.w, "exc.pcap"))
        self.assertEqual(len(exc), len(kernel))
        for i, (g, e) in enumerate(zip(exc, kernel)):
            self.assertEqual(g, e, f"exception frame {i} differs")

        st = d.read_stats()
        port = st["ports"][0]
        self.assertTrue(T.accounting_ok(port), port)
        self.assertEqual(port["rx"], len(frames))
        self.assertEqual(port["delivered"], len(want["dns"]) + len(want["web6"]))
        self.assertEqual(port["dropped_by_rule"], dropped)
        self.assertEqual(port["to_kernel"], len(kernel))
        self.assertEqual(port["drop_too_big"], too_big)
        # Fragments: two datagrams made whole; an overlapping pair and a lone first fragment
        # given up (the last at exit, before its timeout).
        self.assertEqual(port["frag_in"], sum(p["frag"] for p in meta))
        self.assertEqual(port["frag_datagrams"], sum("whole" in p for p in meta))
        self.assertEqual((port["frag_drop_overlap"], port["frag_drop_timeout"]), (2, 1))
        reasons = {}
        for pkt in meta:
            if pkt["malformed"]:
                reasons[pkt["malformed"]] = reasons.get(pkt["malformed"], 0) + 1
        for reason, n in reasons.items():
            self.assertEqual(port["reasons"][reason], n, reason)
        self.assertEqual(port["reasons"]["other_host"], sum(p["other_host"] for p in meta))
        self.assertEqual(port["reasons"]["not_ip"], sum(p["family"] is None and
                                                        not p["malformed"] for p in meta))
        chans = {c["name"]: c for c in st["channels"]}
        self.assertEqual(chans["dns"]["delivered"], len(want["dns"]))
        self.assertEqual(chans["web6"]["delivered"], len(want["web6"]))
        self.assertEqual(chans["blk"]["dropped"], dropped)
        # The clients returned every mbuf: nothing is held but what the rings hold (nothing).
        self.assertEqual(st["mempool"]["in_use"], 0)

    def test_limits_drop_never_block(self):
        """A full ring and an exhausted byte budget drop and count; the worker goes on."""
        _, meta = T.generate(self.w, dns_flows=60)
        channels = [
            {"name": "tiny", "match": {"proto": "tcp", "dst": "2001:db8::1"}, "ring_size": 4},
            {"name": "budget", "match": {"proto": "udp", "dst": "192.0.2.1"},
             "queue_bytes": 4096},
        ]
        d = self.run_daemon(pcap_config(self.w, channels))
        # No consumer: the rings fill. Wait until the whole file is read.
        self.wait_ports_rx(len(meta), "the whole pcap received")
        queued = {c["name"]: c["bytes_queued"] for c in self.shown("show channel all")}
        self.assertEqual(d.stop(), 0, d.output())
        st = d.read_stats()
        port, chans = st["ports"][0], {c["name"]: c for c in st["channels"]}
        self.assertTrue(T.accounting_ok(port), port)
        self.assertEqual(port["rx"], len(meta))
        seen = [p for p, _ in T.arrivals(meta, T.read_pcap(os.path.join(self.w, "in.pcap")))]
        tiny = sum(1 for p in seen if T.expected_channel(channels, p) is not None and
                   T.expected_channel(channels, p)["name"] == "tiny")
        self.assertEqual(chans["tiny"]["hits"], tiny)
        self.assertEqual(chans["tiny"]["delivered"], 4)
        self.assertEqual(chans["tiny"]["drop_ring_full"], tiny - 4)
        budget = [p for p in seen if T.expected_channel(channels, p) is not None and
                  T.expected_channel(channels, p)["name"] == "budget"]
        self.assertEqual(chans["budget"]["hits"], len(budget))
        self.assertLessEqual(chans["budget"]["bytes"], 4096)
        self.assertGreater(chans["budget"]["drop_queue_bytes"], 0)
        self.assertEqual(chans["budget"]["delivered"] + chans["budget"]["drop_queue_bytes"],
                         len(budget))
        self.assertEqual(port["drop_ring_full"], tiny - 4)
        # Nothing was dequeued: what the budget counts queued is what was delivered, no more
        # (the bytes of packets a full ring refused are taken back).
        for name in ("tiny", "budget"):
            self.assertEqual(queued[name], chans[name]["bytes"], name)
        self.assertGreater(chans["tiny"]["bytes"], 0)

    def test_sigterm_during_traffic(self):
        """Endless traffic: SIGTERM stops the daemon cleanly, the counters add up, and the
        prefix's hugepage files and runtime directory are gone."""
        T.generate(self.w, no_jumbo="")
        cfg = pcap_config(self.w, CHANNELS, exc="net_null1")
        cfg["ports"][0]["device"] = f"net_pcap0,rx_pcap={self.w}/in.pcap,infinite_rx=1"
        d = self.run_daemon(cfg)
        self.wait_ports_rx(100000, "traffic flowing")
        files = lambda: [f for f in os.listdir("/dev/hugepages") if f.startswith(self.prefix + "map_")]
        runtime = f"/var/run/dpdk/{self.prefix}"
        self.assertNotEqual(files(), [], "the running daemon's hugepage files")
        self.assertTrue(os.path.isdir(runtime))
        t0 = time.time()
        self.assertEqual(d.stop(), 0, d.output())
        self.assertLess(time.time() - t0, 10)
        # A clean exit leaves nothing of its prefix behind.
        self.assertEqual(files(), [])
        self.assertFalse(os.path.exists(runtime))
        port = d.read_stats()["ports"][0]
        self.assertGreater(port["rx"], 10000)
        self.assertTrue(T.accounting_ok(port), port)
        self.assertGreater(port["to_kernel"], 0)
        # The rings were never drained: the drops say so.
        self.assertGreater(port["drop_ring_full"], 0)

    def prefix_files(self):
        """The prefix's hugepage files (name, inode) and whether its runtime directory is."""
        files = {(f, os.stat(os.path.join("/dev/hugepages", f)).st_ino)
                 for f in os.listdir("/dev/hugepages") if f.startswith(self.prefix + "map_")}
        return files, os.path.isdir(f"/var/run/dpdk/{self.prefix}")

    def traffic_daemon(self):
        """A daemon whose wire brings traffic for ever, running and receiving."""
        T.generate(self.w, no_jumbo="")
        cfg = pcap_config(self.w, CHANNELS, exc="net_null1")
        cfg["ports"][0]["device"] = f"net_pcap0,rx_pcap={self.w}/in.pcap,infinite_rx=1"
        d = self.run_daemon(cfg)
        self.wait_ports_rx(1000, "traffic flowing")
        return d

    def test_two_sigterms_10ms_apart(self):
        """Two SIGTERMs 10 ms apart (as GNU timeout sends them): the second waits out its
        grace period, the clean stop ends first: exit 0, nothing of the prefix left."""
        d = self.traffic_daemon()
        self.assertNotEqual(self.prefix_files(), (set(), False))
        d.proc.send_signal(signal.SIGTERM)
        time.sleep(0.01)
        d.proc.send_signal(signal.SIGTERM)
        self.assertEqual(d.proc.wait(timeout=20), 0, d.output())
        self.assertEqual(self.prefix_files(), (set(), False))
        self.assertNotIn("forcing the exit", d.output())

    def test_second_signal_forces_a_hung_stop(self):
        """A client holds DPDK's memory hotplug lock, so the stop cannot finish: a second
        signal forces the exit once 3 s have passed since the first (exit 1), and the
        prefix's hugepage files and runtime directory go all the same."""
        d = self.traffic_daemon()
        holder = subprocess.Popen([T.CONSUMER, "--prefix", self.prefix, "--hold-memory-lock",
                                   "--lcore-id", "9"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(holder)
        self.wait_line(holder, "held")
        t0 = time.time()
        d.proc.send_signal(signal.SIGTERM)
        T.wait_until(lambda: "stopping" in d.output(), what="the stop under way")
        d.proc.send_signal(signal.SIGINT)
        self.assertEqual(d.proc.wait(timeout=20), 1, d.output())
        self.assertGreaterEqual(time.time() - t0, 2.9, "the grace period")
        self.assertIn("a second stop signal, and the shutdown still runs 3 s after the first "
                      "(rte_eal_cleanup()): forcing the exit", d.output())
        self.assertEqual(self.prefix_files(), (set(), False))
        holder.stdin.close()
        self.assertEqual(holder.wait(timeout=20), 0)

    def cleanup_run(self):
        r = subprocess.run([T.DAEMON, "--file-prefix", self.prefix, "--cleanup"],
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout + r.stderr

    def test_cleanup_after_kill_9(self):
        """kill -9 leaves the prefix's hugepage files and runtime directory: netchanneld
        --cleanup (the unit's ExecStopPost) removes them, but never a live instance's; and
        the next start of the prefix removes them too."""
        d = self.traffic_daemon()
        files, rundir = self.prefix_files()
        self.assertTrue(files and rundir)
        rc, out = self.cleanup_run()
        self.assertEqual(rc, 1, out)
        self.assertIn(f"prefix '{self.prefix}' is in use by pid {d.proc.pid}", out)
        self.assertEqual(self.prefix_files(), (files, True), "nothing removed")
        d.kill()
        self.assertEqual(self.prefix_files(), (files, True), "what kill -9 leaves")
        rc, out = self.cleanup_run()
        self.assertEqual(rc, 0, out)
        self.assertIn(f"prefix '{self.prefix}': {len(files)} hugepage files removed, runtime "
                      f"directory /var/run/dpdk/{self.prefix} removed", out)
        self.assertEqual(self.prefix_files(), (set(), False))
        self.assertEqual(self.cleanup_run(),
                         (0, f"netchanneld: --cleanup: prefix '{self.prefix}': 0 hugepage files "
                             f"removed, runtime directory /var/run/dpdk/{self.prefix} absent\n"))
        # The next start's own clean-up: a kill -9 again, and a start of the same prefix.
        d = self.traffic_daemon()
        old, _ = self.prefix_files()
        d.kill()
        d = self.traffic_daemon()
        new, _ = self.prefix_files()
        self.assertEqual(old & new, set(), "the killed instance's files, removed by the start")
        self.assertEqual(d.stop(), 0, d.output())
        self.assertEqual(self.prefix_files(), (set(), False))

    def test_tap_kernel_answers(self):
        """The default exception device, a TAP with the port's MAC: the real kernel answers
        ARP and ping, and its frames go out of the port."""
        from scapy.all import ARP, ICMP, IP, Ether, Raw  # Debian's python3-scapy

        ns = f"ncdtap{os.getpid()}"
        peer = "02:00:00:00:00:01"
        frames = [bytes(Ether(src=peer, dst="ff:ff:ff:ff:ff:ff") /
                        ARP(op=1, psrc="192.0.2.2", pdst="192.0.2.1", hwsrc=peer)),
                  bytes(Ether(src=peer, dst=T.PCAP_MAC) / IP(src="192.0.2.2", dst="192.0.2.1") /
                        ICMP(id=7, seq=1) / Raw(b"netchanneld"))]
        T.write_pcap(os.path.join(self.w, "in.pcap"), frames)
        # The TAP exists before the daemon does, so that it has an address when frames arrive.
        T.sh("ip", "netns", "add", ns)
        self.addCleanup(T.sh, "ip", "netns", "del", ns)
        for cmd in (["ip", "tuntap", "add", "dev", "wire0", "mode", "tap", "multi_queue"],
                    ["sysctl", "-qw", "net.ipv6.conf.wire0.disable_ipv6=1"],
                    ["ip", "addr", "add", "192.0.2.1/24", "dev", "wire0"],
                    ["ip", "link", "set", "wire0", "up"],
                    ["ip", "neigh", "add", "192.0.2.2", "lladdr", peer, "dev", "wire0",
                     "nud", "permanent"]):
            T.sh("ip", "netns", "exec", ns, *cmd)
        cfg = pcap_config(self.w, [])
        del cfg["ports"][0]["exception"]        # the default: net_tap, iface=wire0, mac=port
        self.daemon = T.Daemon(cfg, self.w, self.prefix, netns=ns)
        self.daemon.start()
        link = subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "show", "wire0"],
                              capture_output=True, text=True, check=True).stdout
        self.assertIn(f"link/ether {T.PCAP_MAC}", link)
        deadline = time.time() + 5
        while time.time() < deadline and os.path.getsize(os.path.join(self.w, "tx.pcap")) < 100:
            time.sleep(0.1)
        time.sleep(0.3)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        out = [Ether(f) for f in T.read_pcap(os.path.join(self.w, "tx.pcap"))]
        arp = [p for p in out if ARP in p and p[ARP].op == 2]
        echo = [p for p in out if ICMP in p and p[ICMP].type == 0]
        self.assertEqual(len(arp), 1, [p.summary() for p in out])
        self.assertEqual(arp[0][ARP].hwsrc, T.PCAP_MAC)
        self.assertEqual(arp[0][ARP].psrc, "192.0.2.1")
        self.assertEqual(len(echo), 1, [p.summary() for p in out])
        self.assertEqual(echo[0].src, T.PCAP_MAC)
        self.assertEqual(echo[0].dst, peer)
        self.assertEqual(bytes(echo[0][Raw]), b"netchanneld")
        port = self.daemon.read_stats()["ports"][0]
        self.assertTrue(T.accounting_ok(port), port)
        self.assertEqual(port["to_kernel"], 2)
        self.assertEqual(port["kernel_tx"], len(out))
        self.assertEqual(port["kernel_tx_drop"], 0)

    def test_net_null_smoke(self):
        """Two net_null ports at full speed until each has received a million packets, with
        channels; one of them with two rx queues, both polled by the worker."""
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 128},
               "ports": [{"name": "a", "device": "net_null0", "rx_queues": 2,
                          "exception": {"device": "none"}},
                         {"name": "b", "device": "net_null1",
                          "exception": {"device": "net_null2"}}],
               "workers": [{"lcore": 1}], "control": {"socket": f"{self.w}/ncd.sock"},
               "channels": CHANNELS}
        d = self.run_daemon(cfg)
        self.wait_ports_rx(1000000, "a million packets on each port")
        self.assertEqual(d.stop(), 0, d.output())
        # Round robin gave the only worker all three queues: two of a, one of b.
        self.assertIn("worker 0 on lcore 1: 3 rx queues", d.output())
        st = d.read_stats()
        a, b = st["ports"]
        for port in (a, b):
            self.assertGreater(port["rx"], 100000, port)
            self.assertTrue(T.accounting_ok(port), port)
        # net_null frames are for 00:00:00:00:00:00: another host, to the exception path.
        self.assertEqual(a["drop_no_exception"], a["rx"])
        self.assertEqual(b["to_kernel"] + b["drop_exc_full"], b["rx"])
        self.assertEqual(a["reasons"]["other_host"], a["rx"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
