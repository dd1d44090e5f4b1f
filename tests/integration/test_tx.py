#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Clients that transmit (nc-echo, frames and IP packets), anti-spoofing, mbuf ownership
(quota, kill -9 while holding mbufs) and reconnecting to a new daemon."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
from test_datapath import EAL  # noqa: E402
from nc_wire import Ctl, LIST, STATS  # noqa: E402

ECHO = os.path.join(T.BUILD, "app/examples/nc-echo")
CLIENT = os.path.join(T.BUILD, "tests/integration/nc_client_test")
PORT_MAC = "02:00:00:00:00:10"


def scapy():
    from scapy import all as s
    return s


def checksums_ok(pkt):
    """Recompute the IP and UDP checksums with scapy, an independent parser."""
    s = scapy()
    again = pkt.__class__(bytes(pkt))
    if s.IP in again:
        del again[s.IP].chksum
    if s.UDP in again:
        del again[s.UDP].chksum
    again = again.__class__(bytes(again))
    for layer in (s.IP, s.UDP):
        if layer in pkt and pkt[layer].chksum != again[layer].chksum:
            return False
    return True


def echo_of(frame_bytes):
    """What nc-echo must send back for a received frame (Ethernet addresses swapped)."""
    s = scapy()
    p = s.Ether(frame_bytes)
    ip = p[s.IP] if s.IP in p else p[s.IPv6]
    p.src, p.dst = p.dst, p.src
    ip.src, ip.dst = ip.dst, ip.src
    p[s.UDP].sport, p[s.UDP].dport = p[s.UDP].dport, p[s.UDP].sport
    return bytes(p)


class Tx(T.DaemonCase):
    def setUp(self):
        super().setUp()
        self.sock = os.path.join(self.w, "ncd.sock")
        self.tx = os.path.join(self.w, "tx.pcap")

    def client(self, cmd, stdin=None):
        p = subprocess.Popen(T.protected(cmd, [self.tx]), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, stdin=stdin)
        self.procs.append(p)
        return p

    def frames(self, flows):
        s = scapy()
        out = []
        for src, dst, sport, dport in flows:
            ip = s.IPv6(src=src, dst=dst) if ":" in dst else s.IP(src=src, dst=dst)
            out.append(bytes(s.Ether(src="02:00:00:00:00:02", dst=T.PCAP_MAC) / ip /
                             s.UDP(sport=sport, dport=dport) / s.Raw(b"echo me %d" % sport)))
        return out

    def pcap_daemon(self, frames, exception="none", control=None, netns=None, tap=None):
        T.write_pcap(os.path.join(self.w, "in.pcap"), frames)
        port = {"name": "wire0",
                "device": f"net_pcap0,rx_pcap={self.w}/in.pcap,tx_pcap={self.tx},infinite_rx=1",
                "exception": {"device": tap or exception}}
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64}, "ports": [port],
               "workers": [{"lcore": 1}], "control": dict(socket=self.sock, **(control or {}))}
        self.daemon = T.Daemon(cfg, self.w, self.prefix, netns=netns)
        self.daemon.start()


    def test_echo_frames(self):
        """nc-echo, isolated (copied into its region and out of it) and zero-copy (mbufs turned
        round in place): every echo on the wire is the received datagram with its Ethernet and
        IP addresses and UDP ports swapped, checksums valid (scapy)."""
        flows = [("203.0.113.%d" % i, "192.0.2.1", 2000 + i, 7) for i in range(1, 5)]
        flows += [("2001:db8::%x" % (0x100 + i), "2001:db8::1", 3000 + i, 7) for i in range(3)]
        other = [("203.0.113.1", "192.0.2.1", 2000, 9)]      # not claimed: to the kernel
        frames = self.frames(flows + other)
        for mode in ([], ["--zero-copy"]):
            self.pcap_daemon(frames)
            p = self.client([ECHO, "-s", self.sock, "--dport", "7", "-c", "300"] + mode)
            self.wait_line(p, "echoing udp port 7")
            out = self.finish(p)
            self.assertEqual(p.returncode, 0, out)
            m = re.search(r"(\d+) echoed, 0 skipped; daemon: tx=(\d+) tx_spoofed=0 "
                          r"tx_malformed=0 tx_no_route=0 tx_no_neigh=0 tx_dropped=0", out)
            self.assertTrue(m, out)
            self.assertEqual(int(m.group(1)), 300)
            self.assertEqual(int(m.group(2)), 300, "every echo left through the port")
            self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
            T.cleanup_prefix(self.prefix)
            port = self.daemon.read_stats()["ports"][0]
            self.assertEqual(port["client_tx"], 300)
            self.assertTrue(T.accounting_ok(port), port)
            wire = T.read_pcap(self.tx)
            self.assertEqual(len(wire), 300)
            expected = {echo_of(f) for f in frames[:len(flows)]}
            s = scapy()
            seen = set()
            for f in wire:
                self.assertIn(f, expected, s.Ether(f).summary())
                self.assertTrue(checksums_ok(s.Ether(f)), s.Ether(f).show(dump=True))
                seen.add(f)
            self.assertEqual(seen, expected, f"every flow, IPv4 and IPv6, was echoed {mode}")

    def test_spoofing_and_malformed_counted(self):
        """A client may send only from its own flows, and its frames only from the port's MAC
        and with no VLAN tag; the rest is dropped and counted by reason, and only its own
        frame reaches the wire."""
        self.pcap_daemon(self.frames([("203.0.113.1", "192.0.2.1", 2000, 9)]))
        p = self.client([CLIENT, self.sock, "spoof", "liar", "5353"], stdin=subprocess.PIPE)
        m = re.search(r"burst taken (\d+) held (\d+)", self.wait_line(p, "burst taken"))
        taken, held = int(m.group(1)), int(m.group(2))
        self.assertTrue(1 <= taken <= 4, m.group(0))
        self.assertEqual(held, 64 - taken, "what the ring did not take is still the client's")
        self.assertEqual(self.wait_line(p, "sent "),
                         f"sent 9 tx {1 + taken} spoofed 6 malformed 1 no_route 1 no_neigh 0 "
                         "dropped 0 held 0")
        r = subprocess.run([T.NCCTL, "-s", self.sock, "--json", "-c", "show channel liar"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        cs = json.loads(r.stdout)["counters"]
        self.assertEqual({k: v for k, v in cs.items() if k.startswith("tx_spoofed")},
                         {"tx_spoofed": 6, "tx_spoofed_mac": 1, "tx_spoofed_vlan": 1,
                          "tx_spoofed_addr": 0, "tx_spoofed_flow": 3, "tx_spoofed_not_ip": 1})
        out = self.finish(p)               # its stdin closes: it lets go of the channel
        self.assertEqual(p.returncode, 0, out)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        wire = T.read_pcap(self.tx)
        self.assertEqual(len(wire), 1 + taken)
        s = scapy()
        for f in wire:
            pkt = s.Ether(f)
            self.assertEqual((pkt[s.IP].src, pkt[s.UDP].sport, pkt[s.IP].dst, pkt[s.UDP].dport),
                             ("192.0.2.1", 5353, "203.0.113.9", 4000))

    def test_echo_ip_next_hop_from_kernel(self):
        """nc-echo --ip: the daemon adds the Ethernet header of the next hop that the kernel's
        routing and neighbour tables (of the exception TAP) give: on-link neighbours, a gateway
        for an off-link network; an unresolved neighbour and an unroutable address are counted,
        and the kernel is asked to resolve the neighbour (its ARP request goes out)."""
        ns = f"ncdtx{os.getpid()}"
        T.sh("ip", "netns", "add", ns)
        self.addCleanup(T.sh, "ip", "netns", "del", ns)
        flows = [("192.0.2.2", "192.0.2.1", 2001, 7),         # neighbour, permanent
                 ("2001:db8::2", "2001:db8::1", 2002, 7),     # IPv6 neighbour
                 ("198.51.100.5", "192.0.2.1", 2003, 7),      # off-link: via 192.0.2.254
                 ("192.0.2.3", "192.0.2.1", 2004, 7),         # on-link, never answers ARP
                 ("203.0.113.5", "192.0.2.1", 2005, 7)]       # no route at all
        frames = self.frames(flows)
        self.pcap_daemon(frames, netns=ns, tap="net_tap0,iface=ncet0")
        gw_mac, nb_mac, nb6_mac = "02:00:00:00:00:fe", "02:00:00:00:00:02", "02:00:00:00:00:06"
        for cmd in (["ip", "link", "set", "ncet0", "up"],
                    ["ip", "addr", "add", "192.0.2.1/24", "dev", "ncet0"],
                    ["ip", "addr", "add", "2001:db8::1/64", "dev", "ncet0", "nodad"],
                    ["ip", "neigh", "replace", "192.0.2.2", "lladdr", nb_mac, "dev", "ncet0",
                     "nud", "permanent"],
                    ["ip", "neigh", "replace", "2001:db8::2", "lladdr", nb6_mac, "dev", "ncet0",
                     "nud", "permanent"],
                    ["ip", "neigh", "replace", "192.0.2.254", "lladdr", gw_mac, "dev", "ncet0",
                     "nud", "permanent"],
                    ["ip", "route", "add", "198.51.100.0/24", "via", "192.0.2.254"]):
            T.sh("ip", "netns", "exec", ns, *cmd)
        p = self.client([ECHO, "-s", self.sock, "--dport", "7", "--ip", "-c", "2000"])
        self.wait_line(p, "sending IP packets")
        out = self.finish(p)
        self.assertEqual(p.returncode, 0, out)
        m = re.search(r"tx=(\d+) tx_spoofed=0 tx_malformed=0 tx_no_route=(\d+) "
                      r"tx_no_neigh=(\d+) tx_dropped=0", out)
        self.assertTrue(m, out)
        tx, no_route, no_neigh = (int(x) for x in m.groups())
        self.assertGreater(tx, 0, out)
        self.assertGreater(no_route, 0, out)
        self.assertGreater(no_neigh, 0, out)
        # A channel that names no destination sends only from the host's own addresses (the
        # TAP's), in frames from the port's MAC: 8.8.8.8 and 2001:db8::99 are spoofed.
        s = scapy()
        legit = [("192.0.2.1", "192.0.2.2"), ("2001:db8::1", "2001:db8::2")]
        forged = [("8.8.8.8", "192.0.2.2"), ("2001:db8::99", "2001:db8::2")]
        hexes = []
        for src, dst in legit + forged:
            ip = s.IPv6(src=src, dst=dst) if ":" in src else s.IP(src=src, dst=dst)
            hexes.append(bytes(s.Ether(src=T.PCAP_MAC, dst=nb_mac) / ip /
                               s.UDP(sport=7, dport=4242) / s.Raw(b"from")).hex())
        p = self.client([os.path.join(T.BUILD, "tests/integration/nc_iso_client"), self.sock,
                         "frames", "7"] + hexes, stdin=subprocess.PIPE)
        self.assertEqual(self.wait_line(p, "sent "), "sent 4 tx 2 spoofed 2")
        r = subprocess.run([T.NCCTL, "-s", self.sock, "--json", "-c", "show channel frames"],
                           capture_output=True, text=True, timeout=30)
        cs = json.loads(r.stdout)["counters"]
        self.assertEqual((cs["tx_spoofed_addr"], cs["tx_spoofed"]), (2, 2), cs)
        self.finish(p)
        time.sleep(0.3)                     # the kernel's ARP request, through the TAP
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        st = self.daemon.read_stats()["ports"][0]
        self.assertGreater(st["next_hop"]["resolved"], 0, st)
        s = scapy()
        want = {"192.0.2.2": nb_mac, "2001:db8::2": nb6_mac, "198.51.100.5": gw_mac}
        seen, arp_for = set(), set()
        for f in T.read_pcap(self.tx):
            pkt = s.Ether(f)
            if s.ARP in pkt:
                arp_for.add(pkt[s.ARP].pdst)
                continue
            if s.UDP not in pkt or pkt[s.UDP].sport != 7:
                continue                                     # the kernel's own traffic
            if pkt[s.UDP].dport == 4242:
                self.assertIn(s.Raw(pkt[s.UDP].payload).load, [b"from"], pkt.summary())
                self.assertIn((pkt.src, pkt[1].src), [(T.PCAP_MAC, a) for a, _ in legit])
                continue
            ip = pkt[s.IP] if s.IP in pkt else pkt[s.IPv6]
            self.assertIn(ip.dst, want, pkt.summary())
            self.assertEqual(pkt.dst, want[ip.dst], pkt.summary())
            self.assertEqual(pkt.src, T.PCAP_MAC, "the port's own MAC")
            self.assertTrue(checksums_ok(pkt), pkt.show(dump=True))
            seen.add(ip.dst)
        self.assertEqual(seen, set(want), "every resolvable destination got its echoes")
        self.assertIn("192.0.2.3", arp_for, "the kernel was asked to resolve the neighbour")
        self.assertEqual(st["client_tx"], tx + 2)

    def test_quota_and_kill_9_while_holding(self):
        """A client holds at most control.mbuf_quota mbufs; killed with SIGKILL while holding
        them, it gets them all taken back: in_use returns to its baseline."""
        self.pcap_daemon(self.frames([("203.0.113.1", "192.0.2.1", 2000 + i, 5000)
                                      for i in range(8)] +
                                     [("203.0.113.1", "192.0.2.1", 2000, 9)]),
                         control={"mbuf_quota": 600})
        c = Ctl(self.sock)
        c.hello()
        T.wait_until(lambda: c.json(STATS)["ports"][0]["rx"] > 0, what="traffic")
        base = c.json(STATS)["mempool"]["in_use"]
        p = self.client([CLIENT, self.sock, "create", "hog", "5000", "1000", "hold"])
        self.wait_line(p, "channel hog")
        self.assertEqual(self.wait_line(p, "holding"), "holding 600 quota 600")
        # The 600 it holds, and its full ring (1024) behind them.
        T.wait_until(lambda: c.json(STATS)["mempool"]["in_use"] >= base + 1500,
                     what="its 600 mbufs and its full ring held")
        p.send_signal(signal.SIGKILL)
        p.wait()
        deadline = time.time() + 5
        while time.time() < deadline and c.json(STATS)["mempool"]["reclaimed"] < 600:
            time.sleep(0.05)
        st = c.json(STATS)
        self.assertEqual(st["mempool"]["reclaimed"], 600, st["mempool"])
        # A burst (32) may be in flight in the daemon at any moment.
        self.assertLessEqual(st["mempool"]["in_use"], base + 32, st["mempool"])
        c.close()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        self.assertTrue(T.accounting_ok(self.daemon.read_stats()["ports"][0]))

    @staticmethod
    def taken(c, name):
        """What a channel's consumer has dequeued: delivered, less what its ring holds."""
        delivered = sum(ch["delivered"] for ch in c.json(STATS)["channels"] if ch["name"] == name)
        return delivered - sum(ch["ring_count"] for ch in c.json(LIST) if ch["name"] == name)

    def test_dead_clients_lose_no_mbuf(self):
        """A client that receives, allocates and frees as fast as it can, killed with SIGKILL
        at any moment, loses the pool nothing: it never takes from the pool or puts into it
        itself (its alloc ring and free ring go through a worker), so whatever a kill
        interrupts is on a ring or marked. Three kills, and the pool is whole after each."""
        self.pcap_daemon(self.frames([("203.0.113.1", "192.0.2.1", 2000 + i, 5000)
                                      for i in range(8)]))
        c = Ctl(self.sock)
        c.hello()
        T.wait_until(lambda: c.json(STATS)["ports"][0]["rx"] > 0, what="traffic")
        base = c.json(STATS)["mempool"]["in_use"]
        for kill in range(3):
            p = self.client([CLIENT, self.sock, "create", "busy", "5000", "100000000", "alloc"])
            self.wait_line(p, "channel busy")
            # Killed only once it has taken 5000 packets (delivered, less what its ring still
            # holds), each with an allocation: many times its alloc ring's size.
            deadline = time.time() + 10
            while time.time() < deadline and self.taken(c, "busy") < 5000:
                time.sleep(0.05)
            self.assertGreaterEqual(self.taken(c, "busy"), 5000, f"kill {kill}")
            p.send_signal(signal.SIGKILL)
            p.wait()
            deadline = time.time() + 5
            while time.time() < deadline and "busy" in {ch["name"] for ch in c.json(LIST)}:
                time.sleep(0.05)
            st = c.json(STATS)["mempool"]
            # A burst (32) may be in flight in the daemon at any moment; nothing else may be
            # missing, after any number of kills.
            self.assertLessEqual(st["in_use"], base + 32, (kill, base, st))
            self.assertEqual(st["cache_flushed"], 0, st)
        c.close()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_lock_held_by_a_dead_client(self):
        """A client killed while it held DPDK's memory hotplug lock (as inside its
        rte_eal_init()) leaves the lock held for ever. The daemon keeps steering, new clients
        still attach and receive, channels come and go by the thousand (the heap, pinned at
        start, never grows or shrinks, which needs the lock), and SIGTERM still ends it: its
        teardown, which needs the lock, is cut short by a watchdog that names the step, after
        the counters were written. (The new client's own rte_eal_cleanup() needs the lock too,
        and waits for ever: DPDK's limitation, docs/hardening.md.)"""
        self.pcap_daemon(self.frames([("203.0.113.1", "192.0.2.1", 2000 + i, 5000)
                                      for i in range(8)]))
        p = self.client([CLIENT, self.sock, "lock"])
        self.wait_line(p, "locked")
        p.send_signal(signal.SIGKILL)
        p.wait()
        p = self.client([CLIENT, self.sock, "create", "after", "5000", "1000", "zerocopy"])
        self.assertEqual(self.wait_line(p, "received"), "received 1000 held 0")
        p.kill()
        p.wait()
        # Without the pinned heap, the control thread hung for ever within 200 creates.
        n = 1500
        cmds = "".join(f"channel create c{i} proto udp dport {10000 + i}\n" for i in range(n))
        cmds += "".join(f"channel destroy c{i}\n" for i in range(n))
        r = subprocess.run([os.path.join(T.BUILD, "app/ncctl/ncctl"), "-s", self.sock],
                           input=cmds, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(len(re.findall(r"^name: c\d+$", r.stdout, re.M)), n, r.stdout[-2000:])
        self.assertEqual(len(re.findall(r"^destroyed: c\d+$", r.stdout, re.M)), n,
                         r.stdout[-2000:])
        started = time.time()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        self.assertLess(time.time() - started, 18)
        out = self.daemon.output()
        self.assertIn("netchanneld: shutdown: ", out)
        self.assertIn("has not returned for 10 s: a lock in DPDK's shared memory is held", out)
        st = self.daemon.read_stats()
        self.assertGreaterEqual(st["ports"][0]["delivered"], 1000, st["ports"][0])
        self.assertTrue(T.accounting_ok(st["ports"][0]))

    def test_several_clients_exact_flows(self):
        """Three clients create channels at run time, at the same time: each receives only its
        own flow, byte for byte as sent; what no channel claims reaches the exception device
        unchanged, and every port counter adds up."""
        flows = {port: [("203.0.113.%d" % i, "192.0.2.1", 1000 + i, port) for i in range(1, 4)]
                 for port in (5000, 6000, 7000, 9)}
        frames = self.frames([f for fl in flows.values() for f in fl])
        exc = os.path.join(self.w, "exc.pcap")
        self.pcap_daemon(frames, exception=f"net_pcap1,tx_pcap={exc}")
        dumps, procs = {}, {}
        for port in (5000, 6000, 7000):
            dumps[port] = os.path.join(self.w, f"d{port}.pcap")
            cmd = [os.path.join(T.BUILD, "app/examples/nc-dump"), "-s", self.sock, "--dport",
                   str(port), "-c", "200", "-w", dumps[port]]
            procs[port] = subprocess.Popen(T.protected(cmd, [self.tx, exc]),
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           text=True)
            self.procs.append(procs[port])
        for port, p in procs.items():
            out = self.finish(p)
            self.assertEqual(p.returncode, 0, out)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        by_port = {port: {T.trimmed(f) for f in self.frames(fl)} for port, fl in flows.items()}
        for port, path in dumps.items():
            got = T.read_pcap(path)
            self.assertEqual(len(got), 200)
            self.assertTrue(set(got) <= by_port[port], f"port {port}: another flow's packet")
            self.assertEqual(set(got), by_port[port], f"port {port}: a flow missing")
        kernel = T.read_pcap(exc)
        self.assertTrue(set(kernel) <= set(frames), "the kernel gets frames unchanged")
        self.assertTrue(by_port[9] <= set(kernel), "the unclaimed flows reach the kernel")
        port = self.daemon.read_stats()["ports"][0]
        self.assertEqual(port["to_kernel"], len(kernel))
        self.assertTrue(T.accounting_ok(port), port)

    def test_reconnect_to_new_daemon(self):
        """nc-echo --reconnect outlives its daemon, killed with -9: it waits for a new one on
        the same socket and echoes there. Isolated, it connects again; zero-copy, it starts
        again (exec)."""
        frames = self.frames([("203.0.113.1", "192.0.2.1", 2000, 7)])
        for mode in ([], ["--zero-copy"]):
            self.pcap_daemon(frames)
            p = self.client([ECHO, "-s", self.sock, "--dport", "7", "--reconnect"] + mode)
            self.wait_line(p, "echoing udp port 7")
            c = Ctl(self.sock)
            c.hello()
            T.wait_until(lambda: c.json(STATS)["ports"][0]["client_tx"] > 0, what="echoes")
            c.close()
            self.daemon.kill()
            self.wait_line(p, "the daemon is gone")
            T.cleanup_prefix(self.prefix)
            self.pcap_daemon(frames)
            self.wait_line(p, "echoing udp port 7")
            c = Ctl(self.sock)
            c.hello()
            deadline = time.time() + 5
            while time.time() < deadline and c.json(STATS)["ports"][0]["client_tx"] == 0:
                time.sleep(0.05)
            self.assertGreater(c.json(STATS)["ports"][0]["client_tx"], 0, mode)
            c.close()
            p.send_signal(signal.SIGTERM)
            out = self.finish(p)
            self.assertEqual(p.returncode, 0, out)
            self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
            T.cleanup_prefix(self.prefix)

if __name__ == "__main__":
    unittest.main(verbosity=2)
