#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""NAT channels: pcap in, pcap out, every header and checksum checked by scapy.

The expected frames are built by scapy from the input's fields with the checksums
recomputed in full, and compared byte for byte with what netchanneld sent: its
incremental updates (RFC 1624) must give exactly the full computation's result.
"""
import errno
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
import nc_wire as W  # noqa: E402

EAL = ["-l", "0-1", "--no-pci", "--log-level", "lib.eal:error", "--no-telemetry",
       "--base-virtaddr", "0x200000000000"]
NCCTL = os.path.join(T.BUILD, "app/ncctl/ncctl")
CLIENT = os.path.join(T.BUILD, "tests/integration/nc_client_test")
PEER = "02:00:00:00:00:01"       # the sender of the input frames
VIA = "02:00:00:00:00:07"        # the NAT's static next hop
VIA1 = "02:00:00:00:00:17"       # ... out of the second port
MAC0 = T.PCAP_MAC                # wire0's MAC (the first net_pcap)
MAC1 = "02:70:63:61:70:02"       # wire1's (the third net_pcap: wire0's exception is the second)


def scapy():
    from scapy import all as s
    s.conf.verb = 0
    return s


CHANNELS = [
    {"name": "t4", "match": {"proto": "tcp", "dst": "192.0.2.10", "dport": 80},
     "action": {"nat": {"dst": "198.51.100.7", "dport": 8080, "via": VIA}}},
    {"name": "u4", "match": {"proto": "udp", "dst": "192.0.2.10", "dport": 53},
     "action": {"nat": {"dst": "198.51.100.8", "dport": 5353, "src": "192.0.2.99",
                        "sport": 40000, "port": "wire1", "via": VIA1}}},
    {"name": "t6", "match": {"proto": "tcp", "dst": "2001:db8::10", "dport": 80},
     "action": {"nat": {"dst": "2001:db8:1::7", "dport": 8080, "via": VIA}}},
    {"name": "u6", "match": {"proto": "udp", "dst": "2001:db8::10", "dport": 53},
     "action": {"nat": {"dst": "2001:db8:1::8", "src": "2001:db8::99", "port": "wire1",
                        "via": VIA1}}},
    {"name": "a4", "match": {"dst": "192.0.2.20"},
     "action": {"nat": {"dst": "198.51.100.20", "via": VIA}}},
    {"name": "p4", "match": {"proto": "udp", "dst": "192.0.2.30"},
     "action": {"nat": {"dport": 9999, "via": VIA}}},
]


def config(w, channels=CHANNELS, nat=None):
    cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
           "ports": [{"name": "wire0",
                      "device": f"net_pcap0,rx_pcap={w}/in.pcap,tx_pcap={w}/tx.pcap",
                      "exception": {"device": f"net_pcap1,tx_pcap={w}/exc.pcap"}},
                     {"name": "wire1",
                      "device": f"net_pcap2,rx_pcap={w}/in1.pcap,tx_pcap={w}/tx1.pcap",
                      "exception": {"device": "none"}}],
           "workers": [{"lcore": 1}], "control": {"socket": f"{w}/ncd.sock"},
           "channels": channels}
    if nat:
        cfg["nat"] = nat
    return cfg


def translated(s, pkt, src=None, dst=None, sport=None, dport=None, smac=MAC0, dmac=VIA):
    """What NAT must make of pkt: scapy rewrites the fields and computes the checksums."""
    p = pkt.copy()
    p[s.Ether].src, p[s.Ether].dst = smac, dmac
    ip = p[s.IP] if s.IP in p else p[s.IPv6]
    if src:
        ip.src = src
    if dst:
        ip.dst = dst
    if s.IP in p:
        del p[s.IP].chksum
    for l4 in (s.TCP, s.UDP):
        if l4 in p:
            if sport:
                p[l4].sport = sport
            if dport:
                p[l4].dport = dport
            # IPv4 UDP without a checksum keeps none.
            if not (l4 is s.UDP and s.IP in p and pkt[s.UDP].chksum == 0):
                del p[l4].chksum
    return s.Ether(bytes(p))


class Nat(T.DaemonCase):
    def run_daemon(self, cfg):
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        self.daemon.start()
        return self.daemon

    def wait_read(self):
        """Until each port has received every frame of its pcap file (in.pcap, in1.pcap)."""
        want = [len(T.read_pcap(os.path.join(self.w, f))) for f in ("in.pcap", "in1.pcap")]

        def read():
            r = subprocess.run([T.NCCTL, "-s", f"{self.w}/ncd.sock", "--json", "-c",
                                "show port stats all"], capture_output=True, text=True,
                               timeout=30)
            return r.returncode == 0 and [p["rx"] for p in json.loads(r.stdout)] == want

        T.wait_until(read, what=f"{want} frames received")

    def stop_and_stats(self):
        rc = self.daemon.stop()
        self.assertEqual(rc, 0, self.daemon.output())
        st = self.daemon.read_stats()
        return st, {c["name"]: c for c in st["channels"]}

    def test_pcap_headers_and_checksums(self):
        """Every translated frame is exactly what a full recomputation gives, for TCP, UDP
        over IPv4 and IPv6 (VLAN-tagged too), with and without a UDP checksum; datagrams in
        fragments are translated whole, ports too; the counters add up."""
        s = scapy()
        pay = b"netchanneld nat " * 4
        e0 = s.Ether(src=PEER, dst=MAC0)
        cases = []   # (input, expected output or None for dropped, which pcap)

        def add(pkt, out, where="tx"):
            cases.append((s.Ether(bytes(pkt)), out, where))

        for sp in (1024, 40001, 65535):
            p = e0 / s.IP(src="203.0.113.5", dst="192.0.2.10", ttl=17) / \
                s.TCP(sport=sp, dport=80, flags="S", seq=12345) / pay
            add(p, translated(s, s.Ether(bytes(p)), dst="198.51.100.7", dport=8080))
            p = e0 / s.IP(src="203.0.113.5", dst="192.0.2.10") / s.UDP(sport=sp, dport=53) / pay
            add(p, translated(s, s.Ether(bytes(p)), src="192.0.2.99", dst="198.51.100.8",
                              sport=40000, dport=5353, smac=MAC1, dmac=VIA1), "tx1")
            p = e0 / s.IPv6(src="2001:db8:5::5", dst="2001:db8::10") / \
                s.TCP(sport=sp, dport=80, flags="PA") / pay
            add(p, translated(s, s.Ether(bytes(p)), dst="2001:db8:1::7", dport=8080))
            p = e0 / s.IPv6(src="2001:db8:5::5", dst="2001:db8::10") / \
                s.UDP(sport=sp, dport=53) / pay
            add(p, translated(s, s.Ether(bytes(p)), src="2001:db8::99", dst="2001:db8:1::8",
                              smac=MAC1, dmac=VIA1), "tx1")
        # IPv4 UDP without a checksum: none after either.
        p = e0 / s.IP(src="203.0.113.6", dst="192.0.2.10") / s.UDP(sport=7, dport=53, chksum=0) / pay
        out = translated(s, s.Ether(bytes(p)), src="192.0.2.99", dst="198.51.100.8", sport=40000,
                         dport=5353, smac=MAC1, dmac=VIA1)
        self.assertEqual(out[s.UDP].chksum, 0)
        add(p, out, "tx1")
        # IPv6 UDP without one (not allowed in IPv6): computed in full.
        p = e0 / s.IPv6(src="2001:db8:5::6", dst="2001:db8::10") / s.UDP(sport=7, dport=53, chksum=0) / pay
        add(p, translated(s, s.Ether(bytes(p)), src="2001:db8::99", dst="2001:db8:1::8",
                          smac=MAC1, dmac=VIA1), "tx1")
        # VLAN tags stay; only the addresses behind them change.
        p = e0 / s.Dot1Q(vlan=42) / s.IP(src="203.0.113.7", dst="192.0.2.10") / \
            s.TCP(sport=999, dport=80) / pay
        add(p, translated(s, s.Ether(bytes(p)), dst="198.51.100.7", dport=8080))
        # Address-only NAT: ICMP.
        p = e0 / s.IP(src="203.0.113.8", dst="192.0.2.20") / s.ICMP(id=7, seq=1) / pay
        add(p, translated(s, s.Ether(bytes(p)), dst="198.51.100.20"))
        # UDP datagrams in fragments, to address-only and to port NAT: reassembled, translated
        # whole, and out in one frame (they fit the port's MTU). The last fragment brings it.
        for dst, kw in (("192.0.2.20", {"dst": "198.51.100.20"}), ("192.0.2.30", {"dport": 9999})):
            big = e0 / s.IP(src="203.0.113.8", dst=dst, id=77) / s.UDP(sport=5, dport=6) / \
                (pay * 8)
            frags = s.fragment(big[s.IP], fragsize=256)
            for k, frag in enumerate(frags):
                add(e0 / frag, translated(s, s.Ether(bytes(big)), **kw)
                    if k == len(frags) - 1 else "held")
        p = e0 / s.IP(src="203.0.113.9", dst="192.0.2.30") / s.UDP(sport=5, dport=6) / pay
        add(p, translated(s, s.Ether(bytes(p)), dport=9999))
        # A wrong TCP checksum stays wrong.
        bad = s.Ether(bytes(e0 / s.IP(src="203.0.113.11", dst="192.0.2.10") /
                            s.TCP(sport=4242, dport=80, chksum=0x1234) / pay))
        add(bad, "bad")

        T.write_pcap(os.path.join(self.w, "in.pcap"), [bytes(c[0]) for c in cases])
        T.write_pcap(os.path.join(self.w, "in1.pcap"), [])
        self.run_daemon(config(self.w))
        self.wait_read()
        st, chans = self.stop_and_stats()
        got = {"tx": T.read_pcap(os.path.join(self.w, "tx.pcap")),
               "tx1": T.read_pcap(os.path.join(self.w, "tx1.pcap"))}
        want = {w: [c for c in cases if c[1] not in (None, "held") and c[2] == w]
                for w in ("tx", "tx1")}
        for where in ("tx", "tx1"):
            self.assertEqual(len(got[where]), len(want[where]), where)
            for i, (g, (inp, exp, _)) in enumerate(zip(got[where], want[where])):
                if exp == "bad":
                    gp = s.Ether(g)
                    self.assertEqual(gp[s.IP].dst, "198.51.100.7")
                    fixed = s.Ether(g)
                    del fixed[s.TCP].chksum
                    self.assertNotEqual(gp[s.TCP].chksum, s.Ether(bytes(fixed))[s.TCP].chksum,
                                        "a wrong checksum was made right")
                    continue
                self.assertEqual(g.hex(), bytes(exp).hex(),
                                 f"{where} packet {i}: {inp.summary()}\n got {s.Ether(g).show(dump=True)}"
                                 f"\nwant {exp.show(dump=True)}")
        port = st["ports"][0]
        n_out = len(want["tx"]) + len(want["tx1"])
        self.assertEqual(port["rx"], len(cases))
        self.assertEqual(port["nat"], n_out)
        self.assertEqual((port["frag_in"], port["frag_datagrams"]), (6, 2))
        self.assertEqual(port["frag_out"], 2, "each datagram in one frame")
        self.assertEqual(port["drop_nat_invalid"], 0)
        self.assertTrue(T.accounting_ok(port), port)
        self.assertEqual(chans["u4"]["nat"], 4)
        self.assertEqual(chans["t6"]["nat"], 3)
        self.assertEqual(st["ports"][1]["rx"], 0)

    def test_reverse_mappings(self):
        """With reverse, replies of a translated flow are translated back to the client's
        addresses and MAC; a second client claiming the same mapping, a full table, and
        replies of no flow are each counted where they belong."""
        s = scapy()
        cmac = ["02:00:00:00:01:%02x" % i for i in range(12)]
        chans = [
            {"name": "lb", "match": {"proto": "tcp", "dst": "192.0.2.10", "dport": 80},
             "action": {"nat": {"dst": "198.51.100.7", "dport": 8080, "src": "192.0.2.1",
                                "via": VIA, "reverse": True}}},
            {"name": "lb6", "match": {"proto": "udp", "dst": "2001:db8::10", "dport": 53},
             "action": {"nat": {"dst": "2001:db8:1::8", "dport": 5353, "via": VIA,
                                "reverse": True}}},
        ]
        # Forward packets come in on wire0; the replies on wire1, polled after wire0 in the
        # same loop, so the mappings exist by then (a reply in its request's burst cannot be).
        frames, replies, want, back = [], [], [], []
        f6 = s.Ether(src=cmac[0], dst=MAC0) / s.IPv6(src="2001:db8:5::5", dst="2001:db8::10") / \
            s.UDP(sport=3333, dport=53) / b"q"
        r6 = s.Ether(src=VIA, dst=MAC1) / s.IPv6(src="2001:db8:1::8", dst="2001:db8:5::5") / \
            s.UDP(sport=5353, dport=3333) / b"answer"
        frames.append(f6)
        want.append(translated(s, s.Ether(bytes(f6)), dst="2001:db8:1::8", dport=5353))
        replies.append(r6)
        back.append(translated(s, s.Ether(bytes(r6)), src="2001:db8::10", sport=53, dmac=cmac[0]))
        # Ten clients; the table holds eight mappings, so the last three get none.
        for i in range(10):
            fwd = s.Ether(src=cmac[i], dst=MAC0) / s.IP(src=f"203.0.113.{i + 1}", dst="192.0.2.10") / \
                s.TCP(sport=1000 + i, dport=80, flags="S")
            rep = s.Ether(src=VIA, dst=MAC1) / s.IP(src="198.51.100.7", dst="192.0.2.1") / \
                s.TCP(sport=8080, dport=1000 + i, flags="SA")
            frames.append(fwd)
            replies.append(rep)
            if i < 7:
                want.append(translated(s, s.Ether(bytes(fwd)), src="192.0.2.1",
                                       dst="198.51.100.7", dport=8080))
                back.append(translated(s, s.Ether(bytes(rep)), src="192.0.2.10",
                                       dst=f"203.0.113.{i + 1}", sport=80, dmac=cmac[i]))
            if i == 0:
                # The flow's second packet, in the burst that makes its mapping: the same one.
                frames.append(fwd)
                want.append(want[-1])
        # A second client with the first one's source port: its replies could not come back.
        frames.append(s.Ether(src=cmac[11], dst=MAC0) / s.IP(src="203.0.113.99", dst="192.0.2.10") /
                      s.TCP(sport=1000, dport=80, flags="S"))
        # A reply of no flow: wire1 has no exception device, so it is dropped, and counted.
        replies.append(s.Ether(src=VIA, dst=MAC1) / s.IP(src="198.51.100.7", dst="192.0.2.1") /
                       s.TCP(sport=8080, dport=2000, flags="SA"))
        want += back
        T.write_pcap(os.path.join(self.w, "in.pcap"), [bytes(f) for f in frames])
        T.write_pcap(os.path.join(self.w, "in1.pcap"), [bytes(f) for f in replies])
        # One channel may have the whole table here (by default, half of it).
        self.run_daemon(config(self.w, chans, nat={"flows": 8, "flows_per_channel": 8}))
        self.wait_read()
        st, by = self.stop_and_stats()
        got = T.read_pcap(os.path.join(self.w, "tx.pcap"))
        self.assertEqual(len(got), len(want), [s.Ether(g).summary() for g in got])
        for i, (g, e) in enumerate(zip(got, want)):
            self.assertEqual(g.hex(), bytes(e).hex(), f"packet {i}: {s.Ether(g).summary()} "
                             f"want {e.summary()}")
        port, port1 = st["ports"][0], st["ports"][1]
        self.assertTrue(T.accounting_ok(port), port)
        self.assertTrue(T.accounting_ok(port1), port1)
        # wire1: the replies of clients 7, 8, 9 and of no flow found no mapping.
        self.assertEqual(port1["rx"], 12)
        self.assertEqual(port1["nat"], 8)
        self.assertEqual(port1["drop_no_exception"], 4)
        self.assertEqual(by["lb"]["nat"], 8)
        self.assertEqual(by["lb"]["nat_reverse"], 7)
        self.assertEqual(by["lb"]["nat_flows"], 7)
        self.assertEqual(by["lb"]["nat_drop_table_full"], 3)
        self.assertEqual(by["lb"]["nat_drop_conflict"], 1)
        self.assertEqual(by["lb6"]["nat_reverse"], 1)
        self.assertEqual(port1["nat_reverse"], 8)
        self.assertEqual(port["nat"], 9)
        self.assertEqual(port["drop_nat_table_full"], 3)
        self.assertEqual(port["drop_nat_conflict"], 1)
        self.assertEqual(st["nat"]["used"], 8)

    def test_flows_per_channel(self):
        """One NAT channel flooded with new flows holds at most nat.flows_per_channel
        mappings (the rest dropped as nat_drop_channel_full): another NAT channel's flows
        still get theirs, and are translated."""
        s = scapy()
        chans = [{"name": "flood", "match": {"proto": "udp", "dst": "192.0.2.10", "dport": 80},
                  "action": {"nat": {"dst": "198.51.100.7", "via": VIA, "reverse": True}}},
                 {"name": "calm", "match": {"proto": "udp", "dst": "192.0.2.11", "dport": 81},
                  "action": {"nat": {"dst": "198.51.100.8", "via": VIA, "reverse": True}}}]
        frames = [s.Ether(src=PEER, dst=MAC0) / s.IP(src=f"203.0.113.{i + 1}", dst="192.0.2.10") /
                  s.UDP(sport=1000 + i, dport=80) / b"x" for i in range(20)]
        frames += [s.Ether(src=PEER, dst=MAC0) / s.IP(src=f"203.0.113.{i + 1}", dst="192.0.2.11") /
                   s.UDP(sport=2000 + i, dport=81) / b"y" for i in range(3)]
        T.write_pcap(os.path.join(self.w, "in.pcap"), [bytes(f) for f in frames])
        T.write_pcap(os.path.join(self.w, "in1.pcap"), [])
        self.run_daemon(config(self.w, chans, nat={"flows": 16, "flows_per_channel": 8}))
        self.wait_read()
        st, by = self.stop_and_stats()
        self.assertEqual(st["nat"]["flows_per_channel"], 8)
        self.assertEqual((by["flood"]["nat_flows"], by["flood"]["nat_drop_channel_full"],
                          by["flood"]["nat"]), (8, 12, 8), by["flood"])
        self.assertEqual((by["calm"]["nat_flows"], by["calm"]["nat"]), (3, 3), by["calm"])
        port = st["ports"][0]
        self.assertEqual(port["drop_nat_table_full"], 12)
        self.assertTrue(T.accounting_ok(port), port)
        sent = [s.Ether(f) for f in T.read_pcap(os.path.join(self.w, "tx.pcap"))]
        self.assertEqual(sorted(p[s.IP].dst for p in sent),
                         ["198.51.100.7"] * 8 + ["198.51.100.8"] * 3)

    def ncctl(self, cmd, ok=True):
        r = subprocess.run([NCCTL, "-s", os.path.join(self.w, "ncd.sock"), "--json", "-c", cmd],
                           capture_output=True, text=True, timeout=30)
        if ok:
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            return json.loads(r.stdout)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        return r.stdout + r.stderr

    def test_idle_mappings_expire(self):
        """Mappings idle for nat.idle_timeout_ms go (and not much earlier); show nat and
        telemetry's figures say so."""
        s = scapy()
        chans = [{"name": "lb", "match": {"proto": "udp", "dst": "192.0.2.10", "dport": 53},
                  "action": {"nat": {"dst": "198.51.100.8", "via": VIA, "reverse": True}}}]
        T.write_pcap(os.path.join(self.w, "in.pcap"), [bytes(
            s.Ether(src=PEER, dst=MAC0) / s.IP(src="203.0.113.5", dst="192.0.2.10") /
            s.UDP(sport=1000 + i, dport=53) / b"q") for i in range(3)])
        T.write_pcap(os.path.join(self.w, "in1.pcap"), [])
        t0 = time.time()
        self.run_daemon(config(self.w, chans, nat={"flows": 64, "idle_timeout_ms": 1500}))
        nat = self.ncctl("show nat")
        self.assertEqual((nat["capacity"], nat["used"], nat["expired"]), (64, 3, 0), nat)
        self.assertEqual(nat["idle_timeout_ms"], 1500)
        while time.time() - t0 < 10 and self.ncctl("show nat")["used"] > 0:
            time.sleep(0.1)
        nat = self.ncctl("show nat")
        self.assertEqual((nat["used"], nat["expired"], nat["gone"]), (0, 3, 0), nat)
        self.assertGreaterEqual(time.time() - t0, 1.4)
        st, _ = self.stop_and_stats()
        # --stats writes the same NAT view as "show nat".
        self.assertEqual(st["nat"], {"capacity": 64, "flows_per_channel": 32, "used": 0,
                                     "expired": 3, "gone": 0, "idle_timeout_ms": 1500,
                                     "channels": 1, "reverse_channels": 1})

    def test_cli_and_control_protocol(self):
        """NAT channels from the CLI (errors named, the translation shown), from the control
        protocol (malformed NAT bodies refused, NAT needs a privileged user), and from the
        library (the channel lives as long as its client)."""
        T.write_pcap(os.path.join(self.w, "in.pcap"), [])
        T.write_pcap(os.path.join(self.w, "in1.pcap"), [])
        cfg = config(self.w, [])
        cfg["control"]["allow"] = [{"uid": 0}, {"uid": 65534, "dport": "1024-65535"}]
        self.run_daemon(cfg)
        for cmd, why in (
                ("proto udp dport 53 action nat dst 198.51.100.1", "takes both families"),
                ("proto udp dst 192.0.2.1 action nat", "nothing to translate"),
                ("dst 192.0.2.1 action nat dport 99", "needs a match with proto tcp, udp"),
                ("proto udp dst 192.0.2.1 action nat dst 198.51.100.0/24", "expected one IPv4"),
                ("proto udp dst 192.0.2.1 action nat dst 198.51.100.1 src 2001:db8::1",
                 "different families"),
                ("proto udp dst 192.0.2.1 action nat dst 198.51.100.1 via 02:00", "expected a MAC"),
                ("proto udp dst 192.0.2.1 action nat dst 198.51.100.1 port wire7", "wire7"),
                ("proto udp dst 192.0.2.1 action nat dst 198.51.100.1 bogus 1",
                 "unknown nat option 'bogus'"),
                ("proto udp dst 192.0.2.1 action nat dport 0", "out of range 1..65535"),
                ("proto udp dst 192.0.2.1 action forward", "deliver, drop or nat")):
            out = self.ncctl(f"channel create x {cmd}", ok=False)
            self.assertIn(why, out, cmd)
        ch = self.ncctl("channel create fwd proto udp dst 192.0.2.1 dport 53 action nat dst "
                        "198.51.100.1 dport 5353 src 192.0.2.9 sport 4000 port wire1 via "
                        "02:00:00:00:00:99 reverse")
        self.assertEqual(ch["nat"], {"dst": "198.51.100.1", "dport": 5353, "src": "192.0.2.9",
                                     "sport": 4000, "port": "wire1", "via": "02:00:00:00:00:99",
                                     "reverse": True})
        self.assertEqual(self.ncctl("show nat")["reverse_channels"], 1)
        self.ncctl("channel destroy fwd")
        self.assertEqual(self.ncctl("show nat")["reverse_channels"], 0)

        # The control protocol: struct nc_ctl_nat after nc_ctl_create.
        def nat_body(flags=W.NAT_F_DST | W.NAT_F_DPORT, family=4, dport=5353, port=0,
                     reserved=0):
            return W.nat_body(flags=flags, family=family, dst=bytes([198, 51, 100, 1]),
                              dport=dport, port=port, reserved=reserved)
        rule = W.rule(family=4, dst=bytes([192, 0, 2, 1]), dst_len=32, dport=53)
        head = lambda name, action=W.NAT: W.create_body(name, rule, action=action)
        c = W.Ctl(os.path.join(self.w, "ncd.sock"))
        c.hello()
        for body in (head("n1"),                                  # NAT without its body
                     head("n2", action=0) + nat_body(),            # a body for a deliver channel
                     head("n3") + nat_body(flags=0x80),            # an unknown flag
                     head("n4") + nat_body(family=6),              # IPv6 address for an IPv4 rule
                     head("n5") + nat_body(port=9, flags=0x13),    # no such port
                     head("n6") + nat_body(reserved=1),
                     head("n7") + nat_body(dport=0),
                     head("n8") + nat_body()[:-1]):                # one byte short
            self.assertEqual(c.call(W.CREATE, body)[0], -errno.EINVAL, body.hex())
        status, rep = c.call(W.CREATE, head("n9") + nat_body())
        self.assertEqual(status, 0)
        self.assertEqual(W.CHANNEL.unpack(rep)[1], W.NAT)
        self.assertEqual(self.ncctl("show channel n9")["nat"]["dst"], "198.51.100.1")
        c.close()
        deadline = time.time() + 5
        while time.time() < deadline and any(
                x["name"] == "n9" for x in self.ncctl("show channel all")):
            time.sleep(0.1)
        self.assertFalse(any(x["name"] == "n9" for x in self.ncctl("show channel all")))
        # An unprivileged user the allow list names may claim a port, but not NAT it.
        os.chmod(os.path.join(self.w, "ncd.sock"), 0o666)
        os.chmod(self.w, 0o755)
        # The work directory is the one place uid 65534 can surely read.
        shutil.copy(W.__file__, self.w)
        probe = ("import sys\n"
                 "sys.path.insert(0, sys.argv[4])\n"
                 "import nc_wire as W\n"
                 "c = W.Ctl(sys.argv[1])\n"
                 "c.hello()\n"
                 "print(c.call(W.CREATE, bytes.fromhex(sys.argv[2]))[0],\n"
                 "      c.call(W.CREATE, bytes.fromhex(sys.argv[3]))[0])\n")
        rule5000 = W.rule(family=4, dst=bytes([192, 0, 2, 1]), dst_len=32, dport=5000)
        deliver = W.create_body("mine", rule5000)
        natted = W.create_body("theirs", rule5000, action=W.NAT) + nat_body()
        r = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                            "/usr/bin/python3", "-c", probe, os.path.join(self.w, "ncd.sock"),
                            deliver.hex(), natted.hex(), self.w],
                           capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.stdout.split(), ["0", str(-errno.EPERM)], r.stderr)
        # The library: a NAT channel that goes with its client.
        p = subprocess.Popen(T.protected([CLIENT, os.path.join(self.w, "ncd.sock"), "nat", "lib",
                                          "7000", "198.51.100.70", "7070"],
                                         [os.path.join(self.w, f) for f in
                                          ("tx.pcap", "exc.pcap", "tx1.pcap")]),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline()
            self.assertIn("channel lib: id", line)
            ch = self.ncctl("show channel lib")
            self.assertEqual((ch["action"], ch["owner"]["kind"]), ("nat", "client"))
            self.assertEqual(ch["nat"], {"dst": "198.51.100.70", "dport": 7070, "port": "in",
                                         "reverse": True})
            p.stdin.close()
            self.assertEqual(p.wait(30), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertFalse(any(x["name"] == "lib" for x in self.ncctl("show channel all")))
        self.stop_and_stats()

    def test_ip_checksum_offload_on_tap(self):
        """Out of a port that computes IPv4 header checksums (net_tap), NAT leaves them to it:
        the kernel behind the TAP, in a network namespace of the test's own, receives the
        translated packets with header checksums scapy finds right."""
        s = scapy()
        ns = f"ncdnat{os.getpid()}"
        subprocess.run(["ip", "netns", "add", ns], check=True)
        self.addCleanup(subprocess.run, ["ip", "netns", "del", ns])
        frames = [s.Ether(src=PEER, dst=MAC0) / s.IP(src="203.0.113.5", dst="192.0.2.10", id=i) /
                  s.UDP(sport=1000 + i, dport=53) / b"through the tap" for i in range(20)]
        T.write_pcap(os.path.join(self.w, "in.pcap"), [bytes(f) for f in frames])
        cfg = config(self.w, [])
        # Endless input; the NAT channel exists only while the capture runs (under a second).
        cfg["ports"][0]["device"] += ",infinite_rx=1"
        cfg["ports"][0]["exception"]["device"] = "none"
        cfg["ports"][1]["device"] = "net_tap0,iface=ncnat0"
        self.daemon = T.Daemon(cfg, self.w, self.prefix, netns=ns)
        self.daemon.start()
        info = self.ncctl("show port info wire1")[0]
        self.assertTrue(info["ip_csum_offload"], info)
        self.assertFalse(self.ncctl("show port info wire0")[0]["ip_csum_offload"])
        cap = os.path.join(self.w, "tap.pcap")
        sniff = ("import sys, time\n"
                 "from scapy.all import AsyncSniffer, wrpcap\n"
                 "a = AsyncSniffer(iface='ncnat0', filter='udp and dst host 198.51.100.8', count=50)\n"
                 "a.start(); time.sleep(0.3); print('sniffing', flush=True)\n"
                 "a.join(timeout=10); wrpcap(sys.argv[1], a.results or [])\n")
        subprocess.run(["ip", "-n", ns, "link", "set", "ncnat0", "up"], check=True)
        p = subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", sniff, cap],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            for line in p.stdout:     # scapy may warn first
                if "sniffing" in line:
                    break
            self.ncctl("channel create u4 proto udp dst 192.0.2.10 dport 53 action nat dst "
                       "198.51.100.8 port wire1 via " + VIA1)
            out = p.communicate(timeout=30)[0]
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        c = self.ncctl("show channel u4")["counters"]
        self.ncctl("channel destroy u4")
        self.assertGreater(c["nat"], 0, c)
        got = s.rdpcap(cap)
        self.assertEqual(len(got), 50, out)
        for pkt in got:
            fixed = s.Ether(bytes(pkt))
            del fixed[s.IP].chksum
            self.assertEqual(pkt[s.IP].chksum, s.Ether(bytes(fixed))[s.IP].chksum)
            self.assertEqual(pkt[s.IP].dst, "198.51.100.8")
        st, _ = self.stop_and_stats()
        self.assertTrue(T.accounting_ok(st["ports"][0]), st["ports"][0])

if __name__ == "__main__":
    unittest.main()
