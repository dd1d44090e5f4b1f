#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Exception mode xdp on the test bed: netchanneld's XDP program in front of net_af_xdp sends
the daemon only what a channel could claim; the host's addresses stay on the veth itself, and
the kernel gets everything else, whether the daemon runs, was killed, or is starting again."""
import json
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
import test_testbed as TB  # noqa: E402
from test_isolated import NOBODY  # noqa: E402

# Another XDP program, not netchanneld's: libxdp's default one for AF_XDP sockets.
FOREIGN = "/usr/lib/x86_64-linux-gnu/bpf/xsk_def_xdp_prog.o"

# In the peer: for SECONDS, a UDP datagram to HOST:PORT every 100 ms, each waiting 1 s at
# most for the kernel's answer; and a TCP transfer of BYTES to HOST:TCPPORT at about 2 MB/s,
# whose server answers with the byte count and the SHA-256 it got. One JSON line at the end.
PEER_WATCH = r"""
import hashlib, json, socket, sys, threading, time
host, port, tport, seconds, total = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                     float(sys.argv[4]), int(sys.argv[5]))
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
out = {"udp_sent": 0, "udp_answered": 0, "udp_lost": [], "tcp": None}

def transfer():
    h = hashlib.sha256()
    try:
        c = socket.create_connection((host, tport), timeout=30)
        sent = 0
        while sent < total:
            chunk = bytes([sent % 251]) * min(65536, total - sent)
            c.sendall(chunk)
            h.update(chunk)
            sent += len(chunk)
            time.sleep(len(chunk) / 2e6)
        c.shutdown(socket.SHUT_WR)
        answer = c.makefile().readline().split()
        out["tcp"] = {"sent": sent, "sha": h.hexdigest(), "got": int(answer[0]),
                      "got_sha": answer[1]}
    except OSError as e:
        out["tcp"] = {"error": str(e)}

t = threading.Thread(target=transfer)
t.start()
s = socket.socket(fam, socket.SOCK_DGRAM)
s.settimeout(1.0)
print("started", flush=True)
end = time.time() + seconds
i = 0
while time.time() < end:
    t0 = time.time()
    msg = b"probe %d" % i
    s.sendto(msg, (host, port))
    out["udp_sent"] += 1
    try:
        while True:
            data, _ = s.recvfrom(2048)
            if data == b"kernel:" + msg:
                out["udp_answered"] += 1
                break
    except socket.timeout:
        out["udp_lost"].append(round(t0 - (end - seconds), 1))
    i += 1
    time.sleep(max(0, 0.1 - (time.time() - t0)))
t.join(60)
print(json.dumps(out), flush=True)
"""

# In the host: a TCP server that reads one connection to its end and answers
# "BYTES SHA256".
HOST_TCP_SINK = r"""
import hashlib, socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", int(sys.argv[1])))
s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
h, n = hashlib.sha256(), 0
while True:
    b = c.recv(1 << 16)
    if not b:
        break
    h.update(b)
    n += len(b)
c.sendall(b"%d %s\n" % (n, h.hexdigest().encode()))
c.close()
"""

# In the host: UDP sockets on the ports given (IPv4), recording each datagram's sequence
# number ("PORT SEQ") until WANT have come, or 15 s have passed; then one JSON line
# {port: [seq...]}.
HOST_SEQ = r"""
import json, selectors, socket, sys, time
want, got, sel = int(sys.argv[1]), {}, selectors.DefaultSelector()
for p in sys.argv[2:]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.bind(("0.0.0.0", int(p)))
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    got[p] = []
print("ready", flush=True)
end = time.time() + 15
while time.time() < end and sum(map(len, got.values())) < want:
    for key, _ in sel.select(0.05):
        while True:
            try:
                data = key.fileobj.recv(2048)
            except BlockingIOError:
                break
            p, seq = data.decode().split()
            got[p].append(int(seq))
print(json.dumps(got), flush=True)
"""

# In the peer: for each line PHASE on stdin, N datagrams to each of the ports given, in turn,
# "PORT SEQ" with SEQ counting on across phases, about 2,000 a second; "sent PHASE" after each.
PEER_PHASES = r"""
import socket, sys, time
host, n, ports = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
seq = 0
for line in sys.stdin:
    for _ in range(n):
        for p in ports:
            s.sendto(b"%s %d" % (p.encode(), seq), (host, int(p)))
        seq += 1
        time.sleep(0.0005)
    print("sent", line.strip(), seq, flush=True)
"""


class FailOpen(TB.TestBed):
    """The test bed with the host's addresses on veth0 itself and the port in exception mode
    xdp. Inherits the test bed's helpers (ns, bg, udp, ncctl); its own setUp starts the daemon
    only when a test asks (start())."""

    def setUp(self):
        T.DaemonCase.setUp(self)
        self.bed_up(f"fo{os.getpid()}")
        self.cfg = self.xdp_config([{"uid": 0}, {"uid": 65534, "dport": "7"}])
        # nc-echo runs as uid 65534: it reaches the socket through the group.
        os.chmod(self.w, 0o755)
        self.daemon = None
        if self._testMethodName in INHERITED:
            self.start()

    def start(self, channels=(), **extra):
        cfg = dict(self.cfg, channels=list(channels), **extra)
        self.daemon = T.Daemon(cfg, self.w, self.prefix, netns=self.env["TB_HOST_NS"])
        self.daemon.start()
        return self.daemon

    def xdp_prog(self):
        """The XDP program on veth0 as iproute2 shows it: its name, or None."""
        link = self.ns("HOST", "ip", "-d", "link", "show", "veth0").stdout
        m = re.search(r"prog/xdp\S* id \d+ name (\S+)", link)
        return m.group(1) if m else None

    def xdp_stats(self):
        return self.ncctl("show port stats wire0")[0]["xdp"]

    def test_host_online_through_kill_9_and_restart(self):
        """A ping every 100 ms, a UDP exchange with a port no channel claims every 100 ms,
        and a bounded TCP transfer to the host's kernel run while netchanneld is killed with
        -9 and started again: ping loses at most 1 s of replies, the kernel answers the UDP
        port throughout, and the transfer completes whole. nc-echo --reconnect (uid 65534)
        on UDP 7 echoes before the kill, and again on the new daemon, which took the
        interface over without a person."""
        e = self.env
        self.start()
        self.assertEqual(self.xdp_prog(), "ncd_xdp")
        self.bg("HOST", "/usr/bin/python3", "-u", TB.KERNEL_UDP, "5001", ready="ready")
        self.bg("HOST", "/usr/bin/python3", "-u", "-c", HOST_TCP_SINK, "5002",
                ready="listening")
        echo = subprocess.Popen(["ip", "netns", "exec", e["TB_HOST_NS"]] + NOBODY +
                                [TB.ECHO, "-s", self.sock, "--dport", "7", "--ip",
                                 "--reconnect"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.procs.append(echo)
        self.wait_line(echo, "echoing udp port 7")
        self.assertEqual(self.udp(e["TB_HOST4"], 7, 5)["echo"], 5, "nc-echo before the kill")
        claimed = self.xdp_stats()["claimed"]
        self.assertGreaterEqual(claimed, 5)
        ping = self.bg("PEER", "ping", "-i", "0.1", "-c", "80", "-W", "1", e["TB_HOST4"])
        watch = self.bg("PEER", "/usr/bin/python3", "-u", "-c", PEER_WATCH, e["TB_HOST4"],
                        "5001", "5002", "8", str(12 << 20), ready="started")
        # Traffic flows through the program before the kill.
        T.wait_until(lambda: self.xdp_stats()["pass"] > 20, timeout=5,
                     what="ping and the probes passed to the kernel")
        self.daemon.kill()
        # The program stays, and passes everything to the kernel, the socket gone.
        self.assertEqual(self.xdp_prog(), "ncd_xdp", "the program left with the daemon")
        killed = time.time()
        T.wait_until(lambda: time.time() - killed > 1, timeout=5, what="a second without it")
        self.start()
        self.assertIn("took veth0 over from a netchanneld that is gone", self.daemon.output())
        self.assertEqual(self.xdp_prog(), "ncd_xdp")
        T.wait_until(lambda: self.udp(e["TB_HOST4"], 7, 1)["echo"] == 1, timeout=20,
                     what="nc-echo echoing on the new daemon")
        self.assertEqual(self.udp(e["TB_HOST6"], 7, 5)["echo"], 5, "IPv6, on the new daemon")
        out, _ = ping.communicate(timeout=30)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        lost = int(m.group(1)) - int(m.group(2))
        print(f"fail-open: ping every 100 ms across kill -9 and restart: {lost} of "
              f"{m.group(1)} lost", file=sys.stderr)
        self.assertLessEqual(lost, 10, out)
        res = json.loads(watch.stdout.readline())
        watch.wait(30)
        self.assertEqual(res["udp_lost"], [], f"the kernel's UDP port went unanswered: {res}")
        self.assertGreaterEqual(res["udp_sent"], 70, res)
        tcp = res["tcp"]
        self.assertNotIn("error", tcp, tcp)
        self.assertEqual((tcp["got"], tcp["got_sha"]), (tcp["sent"], tcp["sha"]),
                         "the TCP transfer arrived whole")
        st = self.ncctl("show port stats wire0")[0]
        self.assertTrue(T.accounting_ok(st), st)
        info = self.ncctl("show port info wire0")[0]
        self.assertEqual(info["exception_mode"], "xdp")
        self.assertTrue(info["xdp"]["took_over"], info)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        # A clean stop takes the program off: the kernel has its interface as before.
        self.assertIsNone(self.xdp_prog())

    def test_drop_channel_is_the_daemons_to_enforce(self):
        """A drop channel drops while the daemon runs (the kernel's socket gets nothing, the
        daemon counts each one) and the other ports stay the kernel's; once the daemon is
        gone, fail-open means the kernel gets that port's datagrams too."""
        e = self.env
        self.start(channels=[{"name": "drop6000", "match": {"proto": "udp", "dport": 6000},
                              "action": "drop"}])
        self.bg("HOST", "/usr/bin/python3", "-u", TB.KERNEL_UDP, "6000", "6001", ready="ready")
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            self.assertEqual(self.udp(addr, 6000, 5),
                             {"echo": 0, "kernel": 0, "lost": 5, "wrong": 0}, addr)
            self.assertEqual(self.udp(addr, 6001, 5)["kernel"], 5, addr)
        ch = self.ncctl("show channel drop6000")["counters"]
        self.assertEqual((ch["hits"], ch["dropped"]), (10, 10), ch)
        st = self.ncctl("show port stats wire0")[0]
        self.assertEqual(st["dropped_by_rule"], 10, st)
        self.assertGreaterEqual(st["xdp"]["claimed"], 10, st["xdp"])
        # udp/6000 in each family, and "something of the family" for fragments.
        self.assertEqual(st["xdp"]["claimed_keys"], 4, st["xdp"])
        self.assertGreaterEqual(st["xdp"]["pass"], 10, "6001's, straight to the kernel")
        self.daemon.kill()
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            self.assertEqual(self.udp(addr, 6000, 5)["kernel"], 5,
                             f"{addr}: with the daemon gone, the kernel gets everything")

    def test_what_no_channel_takes_reaches_the_kernel_through_the_tap(self):
        """A channel on another address claims its port for every address (the program's
        claim is coarse): datagrams to the host's own address on that port come to the
        daemon, miss the channel, and reach the kernel through the TAP, which answers them
        (IPv4 and IPv6; the TAP has no address, so IPv4 needs its rp_filter off)."""
        e = self.env
        self.start(channels=[{"name": "other4", "match": {"proto": "udp", "dst": "10.99.0.77",
                                                           "dport": 5001}},
                             {"name": "other6", "match": {"proto": "udp", "dst": "fd99::77",
                                                           "dport": 5001}}])
        self.bg("HOST", "/usr/bin/python3", "-u", TB.KERNEL_UDP, "5001", ready="ready")
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            self.assertEqual(self.udp(addr, 5001, 5),
                             {"echo": 0, "kernel": 5, "lost": 0, "wrong": 0}, addr)
        st = self.ncctl("show port stats wire0")[0]
        self.assertEqual((st["rx"], st["miss"], st["to_kernel"]), (10, 10, 10), st)
        self.assertGreaterEqual(st["xdp"]["claimed"], 10, st["xdp"])
        tap = self.ns("HOST", "ip", "-d", "addr", "show", "dev", "wire0").stdout
        self.assertNotIn("inet", tap, "the TAP carries no address in mode xdp")
        rpf = self.ns("HOST", "cat", "/proc/sys/net/ipv4/conf/wire0/rp_filter").stdout.strip()
        self.assertEqual(rpf, "0")
        self.assertTrue(T.accounting_ok(st), st)

    def test_channels_come_and_go_under_traffic(self):
        """Datagrams to udp/7100 and udp/7101 at 2,000 a second each, in three phases: before
        a channel for 7100 exists, the kernel gets them all; while it exists, the channel
        gets every one of 7100's and nothing else (7101's all reach the kernel); once it is
        destroyed, the kernel gets every one of 7100's again. Nothing is lost anywhere."""
        e, n = self.env, 300
        self.start()
        sink = subprocess.Popen(["ip", "netns", "exec", e["TB_HOST_NS"], "/usr/bin/python3",
                                 "-u", "-c", HOST_SEQ, str(5 * n), "7100", "7101"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(sink)
        self.assertEqual(sink.stdout.readline().strip(), "ready")
        peer = subprocess.Popen(["ip", "netns", "exec", e["TB_PEER_NS"], "/usr/bin/python3",
                                 "-u", "-c", PEER_PHASES, e["TB_HOST4"], str(n), "7100",
                                 "7101"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.procs.append(peer)

        def phase(name):
            peer.stdin.write(name + "\n")
            peer.stdin.flush()
            self.assertTrue(peer.stdout.readline().startswith("sent " + name))

        phase("before")
        self.ncctl("channel create flow7100 proto udp dport 7100")
        phase("during")
        T.wait_until(lambda: self.ncctl("show channel flow7100")["counters"]["hits"] >= n,
                     timeout=5, what="the channel's datagrams")
        ch = self.ncctl("show channel flow7100")["counters"]
        self.ncctl("channel destroy flow7100")
        phase("after")
        peer.stdin.close()
        peer.wait(10)
        got = json.loads(sink.stdout.readline())
        before, during, after = range(0, n), range(n, 2 * n), range(2 * n, 3 * n)
        self.assertEqual(sorted(got["7101"]), list(range(3 * n)), "7101 is the kernel's")
        self.assertEqual(sorted(got["7100"]), list(before) + list(after),
                         "the kernel got 7100's before and after the channel, not during")
        self.assertEqual((ch["hits"], ch["delivered"]), (n, n), f"misdelivered or lost: {ch}")
        st = self.ncctl("show port stats wire0")[0]
        self.assertEqual((st["rx"], st["delivered"], st["to_kernel"]), (n, n, 0), st)
        self.assertTrue(T.accounting_ok(st), st)
        self.assertEqual(self.xdp_stats()["claimed_keys"], 0, "the claims went with it")

    def test_another_xdp_program_is_left_alone(self):
        """An XDP program that is not netchanneld's on the port's interface: the start fails,
        naming it and how to take it off, and the program stays."""
        self.ns("HOST", "ip", "link", "set", "dev", "veth0", "xdpgeneric", "obj", FOREIGN,
                "sec", "xdp")
        d = T.Daemon(dict(self.cfg, channels=[]), self.w, self.prefix,
                     netns=self.env["TB_HOST_NS"])
        with self.assertRaises(AssertionError) as cm:
            d.start()
        self.assertIn("port wire0: exception mode xdp: veth0 has an XDP program that is not "
                      "netchanneld's", str(cm.exception))
        self.assertIn("ip link set dev veth0 xdp off", str(cm.exception))
        self.assertEqual(d.proc.returncode, 1)
        self.assertIsNotNone(self.xdp_prog())
        self.assertNotEqual(self.xdp_prog(), "ncd_xdp")

    # The test bed's own cases, in exception mode xdp.

    def test_xdp_nc_echo_frames_and_kernel_share_the_port(self):
        """nc-echo claims UDP port 7 (IPv4 and IPv6) as it starts and gives it back as it
        exits: before and after, the kernel answers it; port 9 is the kernel's throughout."""
        self.echo_and_kernel(ip=True)

    def test_xdp_fragmented_datagrams_are_classified_whole(self):
        """Fragments come to the daemon whenever a channel claims something of their family:
        a drop channel's, a client's and the kernel's datagrams, each 3,000 bytes in three
        fragments, go where their whole datagram's ports say."""
        super().test_fragmented_datagrams_are_classified_whole()

    def test_xdp_nat_tcp_both_ways(self):
        """A NAT channel with reverse mappings: the replies' port is claimed too (here any TCP
        port, the channel keeping the client's source port), so a real TCP connection runs
        through the translation both ways."""
        super().test_nat_tcp_both_ways()

    def test_xdp_nat_of_fragmented_datagrams(self):
        """NAT of 3,000-byte UDP datagrams, and their fragmented answers, in mode xdp."""
        super().test_nat_of_fragmented_datagrams()


INHERITED = {"test_xdp_nc_echo_frames_and_kernel_share_the_port",
             "test_xdp_fragmented_datagrams_are_classified_whole", "test_xdp_nat_tcp_both_ways",
             "test_xdp_nat_of_fragmented_datagrams"}


def load_tests(loader, tests, pattern):
    """This file's cases only: FailOpen inherits the test bed's, which assume its TAP."""
    return unittest.TestSuite(FailOpen(n) for n in sorted(vars(FailOpen))
                              if n.startswith("test_"))


if __name__ == "__main__":
    unittest.main()
