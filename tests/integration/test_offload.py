#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""rte_flow offload of channels, on real vdevs.

No software PMD in DPDK 22.11 accepts MARK, so the mark path runs against the
daemon's mock (--mark-mock): flow rules go to a table in the daemon and an rx
callback marks the packets that match them, reading the rte_flow pattern
against the frame. The fallback runs against the real PMDs (net_pcap,
net_null), whose rte_flow_validate refuses.
"""
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402

NCCTL = os.path.join(T.BUILD, "app/ncctl/ncctl")
EAL = ["-l", "0-1", "--no-pci", "--log-level", "lib.eal:error", "--no-telemetry",
       "--base-virtaddr", "0x200000000000"]

# blk wins over dns (they overlap; blk has the higher priority), web80 over web6: the losers
# stay in software. web6's range is no prefix in any case.
CHANNELS = [
    {"name": "dns", "match": {"proto": "udp", "dst": "192.0.2.1/32", "dport": 53},
     "priority": 10, "queue": 0},
    {"name": "blk", "match": {"src": "198.51.100.0/24", "proto": "udp", "dport": 53},
     "priority": 20, "action": "drop"},
    {"name": "web6", "match": {"proto": "tcp", "dst": "2001:db8::1", "dport": "80-443"}},
    {"name": "web80", "match": {"proto": "tcp", "dst": "2001:db8::1", "dport": 80},
     "priority": 5},
    {"name": "u54", "match": {"proto": "udp", "dst": "192.0.2.1", "dport": 54}, "queue": 0},
]
OFFLOADABLE = ("blk", "web80", "u54")
DELIVER = ("dns", "web6", "web80", "u54")


def config(w, device, channels, exc=None, offload=None):
    port = {"name": "wire0", "device": device,
            "exception": {"device": exc or f"net_pcap1,tx_pcap={w}/exc.pcap"}}
    if offload:
        port["flow_offload"] = offload
    return {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64}, "ports": [port],
            "workers": [{"lcore": 1}], "control": {"socket": f"{w}/ncd.sock"},
            "channels": channels}


def nic_reads(frame, pkt):
    """Would a NIC match this frame's headers: untagged, well-formed, no IPv6 extension
    header between IP and L4, not a fragment?"""
    if pkt["malformed"] or pkt["other_host"] or pkt["family"] is None or pkt["frag"]:
        return False
    etype = int.from_bytes(frame[12:14], "big")
    if etype == 0x0800:
        return True
    return etype == 0x86dd and frame[20] == pkt["proto"]


class Offload(T.DaemonCase):
    def ncctl(self, *cmds, check=True):
        args = [NCCTL, "-s", os.path.join(self.w, "ncd.sock"), "--json"]
        for c in cmds:
            args += ["-c", c]
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
        if check:
            self.assertEqual(r.returncode, 0, f"{cmds}: {r.stdout}{r.stderr}")
        return r

    def js(self, cmd):
        return json.loads(self.ncctl(cmd).stdout)

    def offload(self, name):
        return self.js(f"show channel {name}")["offload"][0]

    def start(self, cfg, args=()):
        self.daemon = T.Daemon(cfg, self.w, self.prefix, args=args)
        self.daemon.start()
        return self.daemon

    def exact_run(self, args, wrong=0):
        """The mixed traffic through a daemon with args: every channel gets exactly its flows,
        and the marks counted are exactly the packets a NIC (the mock) marked for offloaded
        channels, minus the ones it marked wrongly on purpose. Returns (states, stats)."""
        _, meta = T.generate(self.w)
        frames = T.read_pcap(os.path.join(self.w, "in.pcap"))
        want = {n: [] for n in DELIVER}
        hits_mark = {ch["name"]: 0 for ch in CHANNELS}
        mock = any(a.startswith("--mark-mock") for a in args)
        ignored = 0
        whole = {p["index"]: f for p, f in T.arrivals(meta, frames) if "whole" in p}
        for i, (pkt, frame) in enumerate(zip(meta, frames)):
            valid = not pkt["malformed"] and not pkt["other_host"] and pkt["family"] is not None
            bad_mark = wrong and (i + 1) % wrong == 0
            # A fragment's mark is not read: reassembly leaves the datagram unmarked.
            if bad_mark and valid and not pkt["frag"]:
                ignored += 1
            if pkt["frag"]:
                if not pkt.get("whole"):
                    continue
                frame = whole[pkt["index"]]
                pkt = dict(pkt, frag=False)
            ch = T.expected_channel(CHANNELS, pkt)
            if ch is None:
                continue
            if ch.get("action") != "drop":
                want[ch["name"]].append(T.trimmed(frame))
            if mock and ch["name"] in OFFLOADABLE and nic_reads(frame, meta[i]) and not bad_mark:
                hits_mark[ch["name"]] += 1
        if mock:
            self.assertGreater(hits_mark["u54"], 3)

        d = self.start(config(self.w, f"net_pcap0,rx_pcap={self.w}/in.pcap,"
                              f"tx_pcap={self.w}/tx.pcap", CHANNELS), args)
        states = {n["name"]: n["offload"][0] for n in self.js("show channel all")}
        info = self.js("show port info 0")[0]
        for name in DELIVER:
            self.assert_receives(name, want[name])
        self.assertEqual(d.stop(), 0, d.output())
        st = d.read_stats()
        port = st["ports"][0]
        self.assertTrue(T.accounting_ok(port), port)
        self.assertEqual(port["rx"], len(frames))
        chans = {c["name"]: c for c in st["channels"]}
        for name, n in hits_mark.items():
            self.assertEqual(chans[name]["hits_mark"], n, name)
            self.assertEqual(chans[name]["hits_mark"] + chans[name]["hits_trie"],
                             chans[name]["hits"], name)
        self.assertEqual(port["mark_hits"], sum(hits_mark.values()))
        self.assertEqual(port["mark_ignored"], ignored)
        self.assertEqual(st["mempool"]["in_use"], 0)
        return states, info, chans

    def assert_states(self, states, want):
        for name, (state, reason) in want.items():
            self.assertEqual(states[name]["state"], state, (name, states[name]))
            self.assertEqual(states[name]["offloaded"], state.startswith("mark"), name)
            if reason is None:
                self.assertNotIn("reason", states[name], name)
            else:
                self.assertIn(reason, states[name]["reason"], name)

    def test_mark_path_exact(self):
        """With the mock marking: the offloadable channels are offloaded (MARK and QUEUE
        where the config asks for a queue), the others say why not, marked packets skip the
        trie and still reach exactly their channels; malformed packets the mock marked are
        not delivered."""
        states, info, chans = self.exact_run(["--mark-mock"])
        self.assert_states(states, {
            "dns": ("software", "overlaps channel blk, which wins over it"),
            "blk": ("mark", None),
            "web6": ("software", "overlaps channel web80, which wins over it"),
            "web80": ("mark", None),
            "u54": ("mark+queue", None)})
        self.assertEqual(states["u54"]["queue"], 0)
        self.assertEqual((info["marks"], info["flow_rules"], info["flow_errors"]), ("mock", 3, 0))
        self.assertTrue(info["rte_flow"])
        self.assertGreater(chans["dns"]["hits_trie"], 20)
        self.assertEqual(chans["dns"]["hits_mark"], 0)
        # web80's packets with extension headers are the trie's: the NIC reads no further; so
        # is the datagram reassembled from fragments (a fragment's mark is not taken).
        self.assertEqual(chans["web80"]["hits_trie"], 3)

    def test_wrong_marks_ignored(self):
        """Every 7th packet gets a bad mark (an id beyond any channel, a wrong generation,
        or 0): each is ignored, counted, and the packet classified by the trie. A NIC without
        QUEUE: the fallback to MARK alone."""
        states, info, _ = self.exact_run(["--mark-mock=wrong=7,noqueue"], wrong=7)
        self.assert_states(states, {"u54": ("mark", None), "blk": ("mark", None)})
        self.assertEqual(info["flow_errors"], 1)     # u54's MARK+QUEUE

    def test_fallback_on_pcap_and_null(self):
        """Real PMDs without rte_flow: the daemon learns it once at start (ENOSYS), every
        channel runs in software without a rule tried, and the port info and the reasons say
        so. With flow_offload off, nothing is tried."""
        none = "the PMD has no rte_flow (rte_flow_validate: ENOSYS)"
        states, info, chans = self.exact_run([])
        self.assert_states(states, {"dns": ("software", none), "blk": ("software", none),
                                    "web80": ("software", none), "u54": ("software", none)})
        self.assertFalse(info["rte_flow"])
        self.assertEqual(info["flow_rules"], 0)
        self.assertEqual(info["flow_errors"], 0)
        self.assertEqual(sum(c["hits_mark"] for c in chans.values()), 0)
        T.cleanup_prefix(self.prefix)

        ch = [{"name": "lis", "match": {"proto": "udp", "dst": "192.0.2.1"}}]
        self.start(config(self.w, "net_null0", ch, exc="none"))
        self.assert_states({"lis": self.offload("lis")}, {"lis": ("software", none)})
        self.assertEqual(self.js("show port info 0")[0]["flow_errors"], 0)
        self.assertEqual(self.daemon.stop(), 0)
        T.cleanup_prefix(self.prefix)
        self.start(config(self.w, "net_null0", ch, exc="none", offload="off"), ["--mark-mock"])
        self.assertEqual(self.offload("lis"), {"port": "wire0", "offloaded": False,
                                               "state": "off",
                                               "reason": "flow_offload is off"})
        self.assertEqual(self.daemon.stop(), 0)

    def infinite(self, channels, args, offload=None):
        from scapy.all import IP, UDP, Ether, Raw, wrpcap
        wrpcap(os.path.join(self.w, "loop.pcap"),
               [Ether(dst=T.PCAP_MAC) / IP(src=f"203.0.113.{i + 1}", dst="192.0.2.1") /
                UDP(sport=1000 + i, dport=53 if i % 2 else 54) / Raw(b"x" * 18)
                for i in range(16)])
        return self.start(config(self.w, f"net_pcap0,rx_pcap={self.w}/loop.pcap,infinite_rx=1",
                                 channels, exc="none", offload=offload), args)

    def counters(self, name):
        return self.js(f"show channel {name}")["counters"]

    def wait_for(self, what, cond, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = cond()
            if v:
                return v
            time.sleep(0.05)
        self.fail(f"timed out waiting for {what}")

    def test_runtime_overlap_and_stale_marks(self):
        """While traffic flows: a channel that wins over an offloaded one takes its flow rule
        away, and gives it back when it goes. Marks left by a removed rule (the mock's stale
        option) name an old generation: ignored, and the trie classifies the packets."""
        self.infinite([{"name": "lis", "match": {"proto": "udp", "dst": "192.0.2.1"}}],
                      ["--mark-mock=stale"])
        self.assertEqual(self.offload("lis")["state"], "mark")
        self.wait_for("marked hits on lis", lambda: self.counters("lis")["hits_mark"] > 0)
        e1 = self.js("channel create e1 proto udp dst 192.0.2.1 dport 53 priority 10")
        self.assertEqual(e1["offload"][0]["state"], "mark")
        first_mark = e1["offload"][0]["mark"]
        self.assertEqual(self.offload("lis")["state"], "software")
        self.assertEqual(self.offload("lis")["reason"], "overlaps channel e1, which wins over it")
        self.wait_for("marked hits on e1", lambda: self.counters("e1")["hits_mark"] > 0)
        # lis in software: its packets (dport 54) all come from the trie now.
        before = self.counters("lis")
        self.wait_for("trie hits on lis", lambda: self.counters("lis")["hits_trie"] >
                      before["hits_trie"] + 1000)
        self.assertEqual(self.counters("lis")["hits_mark"], before["hits_mark"])

        self.ncctl("channel destroy e1")
        self.assertEqual(self.offload("lis")["state"], "mark")
        ignored0 = self.js("show port stats 0")[0]["mark_ignored"]
        e1 = self.js("channel create e1 proto udp dst 192.0.2.1 dport 53 priority 10")
        self.assertEqual(e1["offload"][0]["state"], "mark")
        self.assertEqual(e1["id"], first_mark & 0x1ffff)
        self.assertNotEqual(e1["offload"][0]["mark"], first_mark)
        # The first e1's rule still marks dport 53 with its old mark: every such packet is
        # the trie's, and counted as an ignored mark.
        self.wait_for("trie hits on the new e1", lambda: self.counters("e1")["hits_trie"] > 1000)
        self.assertEqual(self.counters("e1")["hits_mark"], 0)
        self.assertGreater(self.js("show port stats 0")[0]["mark_ignored"], ignored0 + 1000)
        self.assertEqual(self.daemon.stop(), 0)
        st = self.daemon.read_stats()
        self.assertTrue(T.accounting_ok(st["ports"][0]), st["ports"][0])

    def test_required(self):
        """flow_offload required: a rule that cannot be offloaded is refused, at start and at
        run time, with the reason; on a PMD without rte_flow the daemon does not start."""
        bad = [{"name": "r", "match": {"proto": "udp", "dst": "192.0.2.1",
                                        "dport": "1000-2000"}}]
        d = T.Daemon(config(self.w, "net_null0", bad, exc="none", offload="required"), self.w,
                     self.prefix, args=["--mark-mock"])
        with self.assertRaises(AssertionError) as e:
            d.start()
        self.assertIn("channel r: port wire0 requires offload, but the rule has a port range "
                      "that is not a prefix", str(e.exception))
        T.cleanup_prefix(self.prefix)

        lis = [{"name": "lis", "match": {"proto": "udp", "dst": "192.0.2.1", "dport": 53}}]
        d = T.Daemon(config(self.w, "net_null0", lis, exc="none", offload="required"), self.w,
                     self.prefix)
        with self.assertRaises(AssertionError) as e:
            d.start()
        self.assertIn("channel lis: port wire0 requires offload, but: the PMD has no rte_flow "
                      "(rte_flow_validate: ENOSYS)", str(e.exception))
        self.assertEqual(d.proc.returncode, 1)
        T.cleanup_prefix(self.prefix)

        self.start(config(self.w, "net_null0", lis, exc="none", offload="required"),
                   ["--mark-mock"])
        self.assertEqual(self.offload("lis")["state"], "mark")
        for cmd in ("channel create r proto udp dst 192.0.2.1 dport 1000-2000",
                    "channel create o proto udp dst 192.0.2.0/24 priority 5"):
            r = self.ncctl(cmd, check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("requires offload", r.stdout)
        self.assertEqual([c["name"] for c in self.js("show channel all")], ["lis"])
        self.assertEqual(self.offload("lis")["state"], "mark")
        self.assertEqual(self.daemon.stop(), 0)
        self.assertIn("channel o: port wire0 requires offload, but the rule overlaps channel "
                      "lis", self.daemon.output())

    def test_bifurcated_needs_isolate(self):
        """exception mode bifurcated asks the PMD for rte_flow_isolate: net_null cannot, and
        the daemon says so and exits."""
        cfg = config(self.w, "net_null0", [], exc="none")
        cfg["ports"][0]["exception"] = {"mode": "bifurcated"}
        d = T.Daemon(cfg, self.w, self.prefix)
        with self.assertRaises(AssertionError) as e:
            d.start()
        self.assertIn("port wire0: exception mode bifurcated, but rte_flow_isolate: ",
                      str(e.exception))
        self.assertEqual(d.proc.returncode, 1)


if __name__ == "__main__":
    unittest.main()
