#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Unmodified programs on channels (libnetchannel_preload, netchannel-run), on the test bed
with the real kernel as the peer. Each program runs the same way with and without the
library and gives the same answers; with it, its datagrams are counted on its channels, and
without a daemon it works on the kernel as before."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
import test_testbed as TB  # noqa: E402
from dns_fixture import KNOT_CONF, NSD_CONF, ZONE  # noqa: E402
from test_isolated import NOBODY  # noqa: E402

PRELOAD_DIR = os.path.join(T.BUILD, "lib/preload")

# An asyncio UDP echo server as anyone would write it: answers "aio:" + the datagram.
ASYNCIO_ECHO = r"""
import asyncio, socket, sys

class Echo(asyncio.DatagramProtocol):
    def connection_made(self, transport):
        self.transport = transport
    def datagram_received(self, data, addr):
        self.transport.sendto(b"aio:" + data, addr)

async def main(host, port):
    loop = asyncio.get_running_loop()
    await loop.create_datagram_endpoint(Echo, local_addr=(host, port))
    print("ready", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""

# The peer: sends N datagrams to HOST:PORT one at a time, each answered within a second or
# lost; prints one JSON line: how many came back as PREFIX + what was sent, lost or wrong.
PEER_ASK = r"""
import json, socket, sys
host, port, n, prefix = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].encode()
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1.0)
got = {"ok": 0, "lost": 0, "wrong": 0}
for i in range(n):
    msg = b"dgram %d " % i + bytes(range(i % 200))
    s.sendto(msg, (host, port))
    try:
        data, peer = s.recvfrom(65535)
    except socket.timeout:
        got["lost"] += 1
        continue
    good = data == prefix + msg and peer[1] == port
    got["ok" if good else "wrong"] += 1
print(json.dumps(got))
"""

# Receives two datagrams on UDP port argv[1], printing each, then closes the socket.
RECV_TWO = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
for _ in range(2):
    print("got", s.recv(100).decode(), flush=True)
s.close()
"""

# The peer: a good datagram, one whose UDP checksum is wrong, and another good one (scapy).
PEER_BAD_CSUM = r"""
import sys, time
from scapy.all import Ether, IP, UDP, Raw, sendp
mac, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
def dgram(data, chksum=None):
    return Ether(dst=mac) / IP(dst=host) / UDP(sport=4000, dport=port, chksum=chksum) / Raw(data)
for f in (dgram(b"good one"), dgram(b"bad", chksum=0x1234), dgram(b"good two")):
    sendp(f, iface="eth0", verbose=False)
    time.sleep(0.1)
"""

# A server that binds, then forks N children that answer "child<i>:" + the datagram; the
# parent only waits (as nsd's main process does). With --drop UID, the parent binds as root
# and becomes UID before it forks (as a server on port 53 does).
FORKING = r"""
import os, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
drop = int(sys.argv[4]) if len(sys.argv) > 4 else None
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((host, port))
if drop is not None:
    os.setgroups([])
    os.setgid(drop)
    os.setuid(drop)
kids = []
for i in range(n):
    pid = os.fork()
    if pid == 0:
        print(f"child {i} pid {os.getpid()} ready", flush=True)
        while True:
            data, peer = s.recvfrom(65535)
            s.sendto(b"child%d:" % i + data, peer)
    kids.append(pid)
print("forked", " ".join(map(str, kids)), flush=True)
for k in kids:
    os.waitpid(k, 0)
"""

# Two sockets bound to HOST:PORT with SO_REUSEPORT, read through select until N datagrams
# came (or 10 s of nothing); prints, as JSON, each socket's peers' source ports, and the total.
REUSEPORT = r"""
import json, select, socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
socks = []
for _ in range(2):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind((host, port))
    socks.append(s)
print("ready", flush=True)
got, total = [set(), set()], 0
while total < n:
    ready = select.select(socks, [], [], 10)[0]
    if not ready:
        break
    for s in ready:
        got[socks.index(s)].add(s.recvfrom(2048)[1][1])
        total += 1
print(json.dumps({"ports": [sorted(g) for g in got], "total": total}), flush=True)
for s in socks:
    s.close()
"""

# The peer: FLOWS sockets (source ports of the kernel's choosing) each send EACH datagrams to
# HOST:PORT, in turns; prints the source ports as JSON.
PEER_FLOWS = r"""
import json, socket, sys, time
host, port, flows, each = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(flows)]
for s in socks:
    s.bind(("", 0))
for k in range(each):
    for s in socks:
        s.sendto(b"flow %d" % k, (host, port))
    time.sleep(0.01)
print(json.dumps(sorted(s.getsockname()[1] for s in socks)))
"""

# A client that sends before it binds (the kernel binds it at the first send): "hello" to the
# peer's UDP server, and prints what comes back.
SEND_FIRST = r"""
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
for i in range(5):
    s.sendto(b"hello %d" % i, (host, port))
    print(s.recvfrom(100)[0].decode(), flush=True)
"""


# A server that receives each of the peer's steps (PROBE_PEER) through another part of the
# socket API and answers with what it saw, as JSON: what the application observes, which
# must be the same with the library as without it.
PROBE_SERVER = r"""
import array, errno, fcntl, json, os, select, socket, struct, sys, termios, threading, time
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
IP_PKTINFO = 8                  # <linux/in.h>; Python does not name it
s.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
s.bind(("0.0.0.0", port))
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
s6.bind(("::", port + 1))
print("ready", flush=True)

def answer(sock, peer, **seen):
    sock.sendto(json.dumps(seen, sort_keys=True).encode(), peer)

def pktinfo4(anc):
    for level, kind, data in anc:
        if level == socket.IPPROTO_IP and kind == IP_PKTINFO:
            ifindex, spec, addr = struct.unpack("i4s4s", data[:12])
            return {"ifindex": ifindex > 0, "spec_dst": socket.inet_ntoa(spec),
                    "addr": socket.inet_ntoa(addr)}

def pktinfo6(anc):
    for level, kind, data in anc:
        if level == socket.IPPROTO_IPV6 and kind == socket.IPV6_PKTINFO:
            addr, ifindex = struct.unpack("16si", data[:20])
            return {"ifindex": ifindex > 0, "addr": socket.inet_ntop(socket.AF_INET6, addr)}

# 1: poll, then recvfrom.
p = select.poll()
p.register(s, select.POLLIN)
ev = p.poll(10000)
data, peer = s.recvfrom(100)
answer(s, peer, step=1, events=[e for _, e in ev], data=data.decode(), src=peer[0])
# 2: select, FIONREAD, MSG_PEEK, then recvmsg with IP_PKTINFO; answered by sendmsg from it.
select.select([s], [], [], 10)
r, w, _ = select.select([s], [s], [], 10)
n = array.array("i", [0])
fcntl.ioctl(s, termios.FIONREAD, n)
peek = s.recv(100, socket.MSG_PEEK)
data, anc, flags, peer = s.recvmsg(100, 256)
info = pktinfo4(anc)
spec = struct.pack("i4s4s", 0, socket.inet_aton(info["spec_dst"]), bytes(4))
s.sendmsg([json.dumps(dict(step=2, readable=r == [s], writable=w == [s], fionread=n[0],
                           peek=peek.decode(), data=data.decode(), flags=flags, info=info),
                      sort_keys=True).encode()],
          [(socket.IPPROTO_IP, IP_PKTINFO, spec)], 0, peer)
# 3: a datagram longer than the buffer: MSG_TRUNC's length, and recvmsg's flag.
buf = bytearray(10)
full = s.recv_into(buf, 10, socket.MSG_TRUNC)
data, anc, flags, peer = s.recvmsg(10)
answer(s, peer, step=3, trunc_len=full, head=bytes(buf).decode(), data=data.decode(),
       msg_trunc=bool(flags & socket.MSG_TRUNC))
# 4: epoll, edge-triggered, non-blocking: three datagrams, read until EAGAIN.
s.setblocking(False)
ep = select.epoll()
ep.register(s.fileno(), select.EPOLLIN | select.EPOLLET)
got = []
while len(got) < 3:
    for fd, e in ep.poll(10):
        while True:
            try:
                got.append(s.recv(100).decode())
            except BlockingIOError:
                break
    # A second wait with nothing new must time out: the edge was used up.
idle = ep.poll(0.2)
ep.close()
answer(s, ("10.99.0.2", port + 2), step=4, got=got, idle_events=len(idle))
# 5: SO_RCVTIMEO on a blocking socket: a receive with nothing waiting times out.
s.setblocking(True)
data, peer = s.recvfrom(100)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 300000))
t0 = time.monotonic()
try:
    s.recv(100)
    timed = "received"
except OSError as e:
    timed = errno.errorcode[e.errno]
waited = time.monotonic() - t0
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
answer(s, peer, step=5, timeout=timed, waited_enough=0.25 < waited < 2.0)
# 6: a dup of the socket receives and sends; both names tell the same address.
d = socket.socket(fileno=os.dup(s.fileno()))
data, peer = d.recvfrom(100)
answer(d, peer, step=6, data=data.decode(), name=d.getsockname() == s.getsockname(),
       type=d.type == socket.SOCK_DGRAM)
d.close()
# 7: two threads blocked in recvfrom on one socket share ten datagrams.
counts = [0, 0]
def reader(i):
    s2 = socket.socket(fileno=os.dup(s.fileno()))
    s2.settimeout(1.5)
    try:
        while True:
            s2.recvfrom(100)
            counts[i] += 1
    except socket.timeout:
        pass
ts = [threading.Thread(target=reader, args=(i,)) for i in range(2)]
for t in ts:
    t.start()
for t in ts:
    t.join()
s.setblocking(True)             # the dups' timeouts made the shared description non-blocking
answer(s, ("10.99.0.2", port + 2), step=7, total=sum(counts))
# 8: the IPv6 wildcard, dual-stack: an IPv4 datagram (mapped) and an IPv6 one.
for k in range(2):
    data, anc, flags, peer = s6.recvmsg(100, 256)
    answer(s6, peer, step=8 + k, src=peer[0], info=pktinfo6(anc), data=data.decode())
# 10: connected to the peer: read and write on the descriptor, getpeername.
data, peer = s.recvfrom(100)
s.connect(peer)
os.write(s.fileno(), json.dumps({"step": 10, "peer": s.getpeername()[0]}).encode())
data = os.read(s.fileno(), 100)
s.send(json.dumps({"step": 11, "data": data.decode()}).encode())
print("done", flush=True)
"""

# The peer's side of PROBE_SERVER: its steps, and what came back, one JSON list.
PROBE_PEER = r"""
import json, socket, sys, time
host4, host6, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", port + 2))
s.settimeout(5)
out = []
def ask(*msgs, to=(host4, port), sock=s):
    for m in msgs:
        sock.sendto(m, to)
    data, peer = sock.recvfrom(2000)
    out.append([json.loads(data), peer[0], peer[1] == to[1]])
ask(b"one")
ask(b"peek-me")
ask(b"x" * 20, b"y" * 30)
ask(b"edge a", b"edge b", b"edge c")
ask(b"timeout-now")
ask(b"via-dup")
for i in range(10):
    s.sendto(b"thread %d" % i, (host4, port))
out.append([json.loads(s.recvfrom(2000)[0])])
ask(b"mapped", to=(host4, port + 1))
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s6.settimeout(5)
ask(b"six", to=(host6, port + 1), sock=s6)
ask(b"connect-me")
s.sendto(b"written", (host4, port))
out.append([json.loads(s.recvfrom(2000)[0])])
print(json.dumps(out))
"""

# The peer's side of nc_sock_probe: one JSON list of the answers.
PROBE_C_PEER = r"""
import json, socket, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
out = []
for m in (b"m0", b"m1", b"m2", b"m3"):
    s.sendto(m, (host, port))
out.append(sorted(s.recvfrom(100)[0].decode() for _ in range(4)))
s.sendto(b"ppoll", (host, port))
out.append(s.recvfrom(100)[0].decode())
s.sendto(b"headtail", (host, port))
out.append(s.recvfrom(100)[0].decode())
out.append(s.recvfrom(100)[0].decode())
print(json.dumps(out))
"""



class Preload(TB.Bed):
    """The test bed in exception mode xdp (the host's addresses on veth0, where the kernel
    has them whether or not the daemon runs); uid 65534 may claim UDP 5000-5999, 53, and the
    kernel's ephemeral ports."""

    def setUp(self):
        super().setUp()
        self.procs = []
        self.bed_up(f"pl{os.getpid()}")
        # Port 53 for the privilege case; the kernel's ephemeral ports (ip_local_port_range)
        # for sockets that send first.
        self.cfg = self.xdp_config([{"uid": 0}, {"uid": 65534, "dport": "5000-5999"},
                                    {"uid": 65534, "dport": "53"},
                                    {"uid": 65534, "dport": "32768-60999"}])
        self.run_dir = self.nobody_preload()
        self.daemon = T.Daemon(self.cfg, self.w, self.prefix, netns=self.env["TB_HOST_NS"])
        self.daemon.start()

    def nobody_preload(self):
        """Copies of netchannel-run, the preload library and libnetchannel where uid 65534
        reaches them (it cannot be relied on to reach the build tree)."""
        d = os.path.join(self.w, "run")
        os.makedirs(d, exist_ok=True)
        os.chmod(self.w, 0o755)
        os.chmod(d, 0o755)
        for f in (os.path.join(PRELOAD_DIR, "netchannel-run"),
                  os.path.join(PRELOAD_DIR, "libnetchannel_preload.so"),
                  os.path.join(T.BUILD, "tests/integration/nc_sock_probe"),
                  os.path.join(T.BUILD, "lib/netchannel/libnetchannel.so.0")):
            shutil.copy(f, d)
        return d

    def program(self, cmd, preload=True, nobody=True, ready=None, env=None):
        """cmd in the host's namespace (under netchannel-run if preload), as uid 65534 if
        nobody; its output merged, waited for a line with ready."""
        run = []
        if preload:
            run = [os.path.join(self.run_dir, "netchannel-run"), "-s", self.sock, "-v"]
        e = dict(os.environ, LD_LIBRARY_PATH=self.run_dir, **(env or {}))
        # A session of its own: the program's children are stopped with it (stop()).
        p = subprocess.Popen(["ip", "netns", "exec", self.env["TB_HOST_NS"]] +
                             (NOBODY if nobody else []) + run + list(cmd),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e,
                             start_new_session=True)
        self.addCleanup(self.stop, p)
        p.lines = []
        if ready is not None:
            for line in p.stdout:
                p.lines.append(line)
                if ready in line:
                    break
            else:
                self.fail(f"{cmd}: no line with {ready!r}:\n{''.join(p.lines)}")
        return p

    def stop(self, p):
        """Stops the program p and its children (its process group): its whole output."""
        if p.returncode is not None:
            return "".join(p.lines)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                return "".join(p.lines) + p.communicate(timeout=10)[0]
            except subprocess.TimeoutExpired:
                continue
        return "".join(p.lines) + p.communicate()[0]

    def ask(self, host, port, n, prefix=""):
        r = self.ns("PEER", "/usr/bin/python3", "-c", PEER_ASK, host, str(port), str(n), prefix)
        return json.loads(r.stdout)

    def finish_program(self, p, timeout=30):
        """The program p's whole output once it exits by itself."""
        try:
            return "".join(p.lines) + p.communicate(timeout=timeout)[0]
        except subprocess.TimeoutExpired:
            self.fail(f"{p.args} did not finish:\n{self.stop(p)}")

    def wait_bound(self, p, port):
        """Until the program p has UDP port bound (in the kernel, with or without the
        library); its output in the failure if it never does."""
        try:
            T.wait_until(lambda: p.poll() is None and
                         f":{port} " in self.ns("HOST", "ss", "-Huln").stdout,
                         what=f"UDP port {port} bound")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.stop(p)}") from None

    def preload_channels(self):
        """The preloaded sockets' channels (named plPID.N), name -> show channel's JSON."""
        out = {}
        for ch in self.ncctl("show channel all"):
            if ch["name"].startswith("pl"):
                out[ch["name"]] = ch
        return out

    def wait_channels(self, n):
        return T.wait_until(lambda: len(self.preload_channels()) >= n and self.preload_channels(),
                            timeout=10, what=f"{n} channels of the preloaded program")

    def hits(self):
        return sum(ch["counters"]["hits"] for ch in self.preload_channels().values())

    def delivered(self):
        """The port's packets delivered to channels (which includes those of channels gone)."""
        return self.ncctl("show port stats wire0")[0]["delivered"]


class Programs(Preload):
    """socat, and small programs of our own, each for a behaviour of sockets."""

    def test_socat_echo(self):
        """socat UDP-LISTEN (it peeks at the first datagram, connects to its sender, then
        echoes with read and write under poll) echoes 20 datagrams of IPv4 and of IPv6 from
        the peer with the library as without it; with it, they were its channels'."""
        e = self.env
        for host, kind in ((e["TB_HOST4"], "UDP4-LISTEN"), (e["TB_HOST6"], "UDP6-LISTEN")):
            for preload in (False, True):
                with self.subTest(host=host, preload=preload):
                    port = 5001 if preload else 5002
                    p = self.program(["socat", "-T", "20", f"{kind}:{port}", "PIPE"],
                                     preload=preload)
                    self.wait_bound(p, port)
                    got = self.ask(host, port, 20)
                    self.assertEqual(got, {"ok": 20, "lost": 0, "wrong": 0})
                    if preload:
                        # Connected to the peer: a channel from the peer's port only, which
                        # took every datagram after the first and sent every answer; the
                        # listening channels it had (one per host address of the family,
                        # or both families for UDP6-LISTEN's dual-stack socket) stay below
                        # it, and got the first.
                        chans = self.preload_channels().values()
                        narrow = [c for c in chans if c["rule"].endswith("priority 1002")]
                        wide = [c for c in chans if c["rule"].endswith("priority 1000")]
                        self.assertEqual(len(narrow) + len(wide), len(chans), chans)
                        self.assertEqual([(c["counters"]["hits"], c["counters"]["tx"])
                                          for c in narrow], [(19, 20)])
                        self.assertEqual(sum(c["counters"]["hits"] for c in wide), 1)
                        self.assertEqual(sum(c["counters"]["tx"] for c in wide), 0)
                    out = self.stop(p)
                    if preload:
                        self.assertIn("on 1 channel(s), connected", out)

    def test_asyncio_echo(self):
        """An asyncio datagram server (epoll, a non-blocking socket, recvfrom and sendto),
        bound to the IPv6 wildcard, answers IPv4 and IPv6 with the library as without it;
        with it, on a channel for each of the host's addresses."""
        e = self.env
        for preload in (False, True):
            with self.subTest(preload=preload):
                p = self.program(["/usr/bin/python3", "-u", "-c", ASYNCIO_ECHO, "::", "5003"],
                                 preload=preload, ready="ready")
                if preload:
                    # 10.99.0.1, fd99::1 and veth0's link-local address.
                    self.wait_channels(3)
                before = self.hits()
                for host in (e["TB_HOST4"], e["TB_HOST6"]):
                    self.assertEqual(self.ask(host, 5003, 20, "aio:"),
                                     {"ok": 20, "lost": 0, "wrong": 0})
                if preload:
                    self.assertGreaterEqual(self.hits() - before, 40)
                self.stop(p)

    def test_without_a_daemon_the_kernel_serves(self):
        """With the daemon stopped, the asyncio server works on the kernel under
        netchannel-run, which says why with -v (test_apps_without_a_daemon: the others)."""
        e = self.env
        self.daemon.stop()
        p = self.program(["/usr/bin/python3", "-u", "-c", ASYNCIO_ECHO, "0.0.0.0", "5004"],
                         ready="ready")
        self.assertEqual(self.ask(e["TB_HOST4"], 5004, 10, "aio:"),
                         {"ok": 10, "lost": 0, "wrong": 0})
        out = self.stop(p)
        self.assertIn("no connection to", out)
        self.assertIn("the kernel keeps it", out)

    def test_kill_9_releases_channels(self):
        """A preloaded program killed with -9 leaves no channel behind."""
        p = self.program(["/usr/bin/python3", "-u", "-c", ASYNCIO_ECHO, "::", "5005"],
                         ready="ready")
        self.wait_channels(3)
        p.kill()
        p.wait()
        T.wait_until(lambda: not self.preload_channels(), what="the channels gone")

    def test_a_child_serves_what_its_parent_bound(self):
        """A server that binds and forks a child to serve (the parent only waits): the child's
        first use of the socket makes its own connection, whose channel takes the flows (a
        priority above the parent's), and it answers the peer; its kill -9 leaves the
        parent's channel only."""
        e = self.env
        p = self.program(["/usr/bin/python3", "-u", "-c", FORKING, e["TB_HOST4"], "5006", "1"],
                         ready="child 0 pid")
        got = self.ask(e["TB_HOST4"], 5006, 20, "child0:")
        self.assertEqual(got, {"ok": 20, "lost": 0, "wrong": 0})
        chans = self.preload_channels()
        self.assertEqual(sorted(c["rule"].split(" priority ")[1] for c in chans.values()),
                         ["1000", "1001"], chans)
        child = [c for c in chans.values() if c["rule"].endswith("priority 1001")][0]
        self.assertGreaterEqual(child["counters"]["hits"], 20)
        self.assertEqual(child["counters"]["tx"], 20)

    def test_privileges_dropped_after_bind(self):
        """Root binds UDP 5007, becomes uid 65534 and forks a child to serve: the channels are
        uid 65534's (control.allow's limits and ports are that user's), and the child
        answers."""
        e = self.env
        p = self.program(["/usr/bin/python3", "-u", "-c", FORKING, e["TB_HOST4"], "5007", "1",
                          "65534"], nobody=False, ready="child 0 pid")
        self.assertEqual(self.ask(e["TB_HOST4"], 5007, 10, "child0:"),
                         {"ok": 10, "lost": 0, "wrong": 0})
        owners = {c["name"]: c["owner"] for c in
                  (self.ncctl(f"show channel {n}") for n in self.preload_channels())}
        self.assertEqual(len(owners), 2, owners)
        self.assertEqual({o["uid"] for o in owners.values()}, {65534}, owners)
        out = self.stop(p)
        self.assertIn("of the new user", out)

    def test_privileges_dropped_to_a_user_not_allowed(self):
        """Root binds UDP 6000, which uid 65534 may not claim, and becomes uid 65534: the
        library says why, and the socket carries on on the kernel, answering."""
        e = self.env
        p = self.program(["/usr/bin/python3", "-u", "-c", FORKING, e["TB_HOST4"], "6000", "1",
                          "65534"], nobody=False, ready="child 0 pid")
        self.assertEqual(self.ask(e["TB_HOST4"], 6000, 10, "child0:"),
                         {"ok": 10, "lost": 0, "wrong": 0})
        self.assertEqual(self.preload_channels(), {})
        out = self.stop(p)
        self.assertIn("no channel for the new user (uid 65534)", out)

    def test_socket_api(self):
        """What a server sees through the socket API, the same with the library as without
        it (PROBE_SERVER's steps): poll; select's readable and writable, FIONREAD, MSG_PEEK,
        recvmsg's IP_PKTINFO and a reply sent from it by sendmsg; MSG_TRUNC; epoll
        edge-triggered on a non-blocking socket, drained to EAGAIN and silent after;
        SO_RCVTIMEO; a dup; two threads sharing a socket; the IPv6 wildcard's IPv4-mapped
        and IPv6 sources with IPV6_PKTINFO; and connect, read and write."""
        e = self.env
        runs = {}
        for preload in (False, True):
            p = self.program(["/usr/bin/python3", "-u", "-c", PROBE_SERVER, "5040"],
                             preload=preload, ready="ready")
            r = self.ns("PEER", "/usr/bin/python3", "-c", PROBE_PEER, e["TB_HOST4"],
                        e["TB_HOST6"], "5040", timeout=60, check=False)
            out = self.finish_program(p)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr + out)
            self.assertIn("done", out)
            runs[preload] = json.loads(r.stdout)
            if preload:
                self.assertIn("port 5040 on 1 channel(s)", out)
                self.assertIn("port 5041 on 3 channel(s)", out)
        self.assertEqual(runs[True], runs[False])
        steps = {a[0]["step"]: a for a in runs[True]}
        self.assertEqual(steps[2][0]["info"], {"ifindex": True, "spec_dst": "10.99.0.1",
                                                "addr": "10.99.0.1"})
        self.assertEqual((steps[3][0]["trunc_len"], steps[3][0]["msg_trunc"]), (20, True))
        self.assertEqual((len(steps[4][0]["got"]), steps[4][0]["idle_events"]), (3, 0))
        self.assertEqual(steps[5][0]["timeout"], "EAGAIN")
        self.assertEqual(steps[7][0]["total"], 10)
        self.assertEqual(steps[8][0]["src"], "::ffff:10.99.0.2")
        self.assertEqual(steps[9][0]["info"]["addr"], "fd99::1")

    def test_reuseport_group_shares_the_flows(self):
        """Two sockets of one program bound to one port with SO_REUSEPORT, and 32 flows from
        the peer: each socket gets whole flows, no flow reaches both, together they get every
        datagram, with the library as the kernel does it. With it, the two sockets' channels
        are one shared channel with two consumers."""
        e = self.env
        for preload in (False, True):
            with self.subTest(preload=preload):
                p = self.program(["/usr/bin/python3", "-u", "-c", REUSEPORT, e["TB_HOST4"],
                                  "5045", str(32 * 8)], preload=preload, ready="ready")
                if preload:
                    chans = self.wait_channels(1)
                    self.assertEqual(len(chans), 1, chans)
                    ch = list(chans.values())[0]
                    self.assertEqual(len(ch["consumers"]["attached"]), 2, ch)
                r = self.ns("PEER", "/usr/bin/python3", "-c", PEER_FLOWS, e["TB_HOST4"],
                            "5045", "32", "8", timeout=60)
                sports = json.loads(r.stdout)
                out = self.finish_program(p)
                got = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][0])
                self.assertEqual(got["total"], 32 * 8, out)
                a, b = map(set, got["ports"])
                self.assertTrue(a and b, got)
                self.assertEqual(a & b, set(), "a flow reached both sockets")
                self.assertEqual(a | b, set(sports))
                if preload:
                    took = [int(n) for n in re.findall(
                        r"socket port 5045 closed: (\d+) received on channels", out)]
                    self.assertEqual(sorted(took), sorted((len(a) * 8, len(b) * 8)), out)

    def test_socket_api_in_c(self):
        """nc_sock_probe (plain C): pselect then recvmmsg with MSG_WAITFORONE and one sendmmsg
        for four datagrams, ppoll, readv and writev connected, O_NONBLOCK by fcntl and
        MSG_DONTWAIT: the same answers with the library as without it."""
        e = self.env
        runs = {}
        for preload in (False, True):
            p = self.program([os.path.join(self.run_dir, "nc_sock_probe"), "5045"],
                             preload=preload, ready="ready")
            r = self.ns("PEER", "/usr/bin/python3", "-c", PROBE_C_PEER, e["TB_HOST4"], "5045",
                        timeout=60, check=False)
            out = self.finish_program(p)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr + out)
            runs[preload] = json.loads(r.stdout)
            if preload:
                self.assertIn("port 5045 on 1 channel(s)", out)
        self.assertEqual(runs[True], runs[False])
        self.assertEqual(runs[True], [["1:m0", "1:m1", "1:m2", "1:m3"], "2:ppoll",
                                      "3:8:[head][tail]",
                                      "4:-1 EAGAIN nonblock=1 was=0 -1 EAGAIN"])

    def test_port_held_and_no_unreachable(self):
        """The port of a socket on channels is held in the kernel: a kernel socket's bind to it
        fails with EADDRINUSE; and the kernel sends no ICMP port unreachable for its
        datagrams (Icmp OutDestUnreachs), as it does for a port nobody has."""
        e = self.env
        p = self.program(["/usr/bin/python3", "-u", "-c", ASYNCIO_ECHO, "0.0.0.0", "5050"],
                         ready="ready")
        r = self.ns("HOST", "/usr/bin/python3", "-c",
                    "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                    ".bind(('0.0.0.0', 5050))", check=False)
        self.assertIn("Address already in use", r.stderr)
        before = self.icmp_unreachables()
        self.assertEqual(self.ask(e["TB_HOST4"], 5050, 20, "aio:"),
                         {"ok": 20, "lost": 0, "wrong": 0})
        self.assertEqual(self.icmp_unreachables(), before)
        self.assertEqual(self.ask(e["TB_HOST4"], 5051, 1), {"ok": 0, "lost": 1, "wrong": 0})
        T.wait_until(lambda: self.icmp_unreachables() > before,
                     what="the kernel's unreachable for a port nobody has")
        self.stop(p)

    def icmp_unreachables(self):
        snmp = self.ns("HOST", "cat", "/proc/net/snmp").stdout.splitlines()
        rows = [ln.split() for ln in snmp if ln.startswith("Icmp:")]
        return int(rows[1][rows[0].index("OutDestUnreachs")])

    def test_bad_checksum_dropped_and_counted(self):
        """A datagram with a wrong UDP checksum, between two good ones, is dropped with the
        library as without it (the server gets the two good ones), and counted: -v says so
        when the socket closes."""
        e = self.env
        mac = self.ns("HOST", "cat", "/sys/class/net/veth0/address").stdout.strip()
        for preload in (False, True):
            with self.subTest(preload=preload):
                p = self.program(["/usr/bin/python3", "-u", "-c", RECV_TWO, "5052"],
                                 preload=preload, ready="ready")
                self.ns("PEER", "/usr/bin/python3", "-c", PEER_BAD_CSUM, mac, e["TB_HOST4"],
                        "5052")
                out = self.finish_program(p)
                self.assertIn("got good one\ngot good two\n", out)
                if preload:
                    self.assertIn("socket port 5052 closed: 2 received on channels, 1 bad checksums", out)

    def test_a_socket_that_sends_first(self):
        """A socket that sends before it binds gets its channel for the port the kernel
        chose at the first send, and the peer's answers come on it."""
        e = self.env
        self.bg("PEER", "/usr/bin/python3", "-u", "-c", TB.PEER_UDP_SERVER, e["TB_PEER4"], "5020",
                ready="listening")
        p = self.program(["/usr/bin/python3", "-u", "-c", SEND_FIRST, e["TB_PEER4"], "5020"])
        out = self.finish_program(p)
        self.assertEqual([ln for ln in out.splitlines() if ln.startswith("server:")],
                         [f"server:hello {i}" for i in range(5)], out)
        self.assertRegex(out, r"socket \d+: port \d+ on 1 channel\(s\)")


class Apps(Preload):
    """Applications from Debian, unmodified."""

    def sockperf_server(self, preload, iomux):
        """sockperf's server on 10.99.0.1:5010, blocking in recvfrom (iomux None) or with one
        of its multiplexers (-F)."""
        if iomux is None:
            cmd = ["sockperf", "server", "-i", self.env["TB_HOST4"], "-p", "5010"]
        else:
            f = os.path.join(self.run_dir, "sockperf.list")
            with open(f, "w") as out:
                out.write(f"U:{self.env['TB_HOST4']}:5010\n")
            os.chmod(f, 0o644)
            cmd = ["sockperf", "server", "-f", f, "-F", iomux]
        p = self.program(cmd, preload=preload)
        self.wait_bound(p, 5010)
        return p

    def sockperf(self, *args):
        r = self.ns("PEER", "timeout", "-k", "5", "30", "sockperf", *args, "-i",
                    self.env["TB_HOST4"], "-p", "5010", timeout=40)
        return r.stdout + r.stderr

    def test_sockperf(self):
        """sockperf's server, with the library blocking in recvfrom and with epoll, poll and
        select, and without it with epoll: ping-pong and under-load clients on the peer lose
        nothing (each answer comes, none twice, in order), and a throughput client's 20,000
        messages a second all reach the server (the channel's hits, or the kernel's UDP
        counter)."""
        for preload in (False, True):
            for iomux in (None, "epoll", "poll", "select") if preload else ("epoll",):
                with self.subTest(preload=preload, iomux=iomux):
                    p = self.sockperf_server(preload, iomux)
                    out = self.sockperf("ping-pong", "-t", "1", "--mps=2000")
                    self.assertIn("# dropped messages = 0; # duplicated messages = 0; "
                                  "# out-of-order messages = 0", out)
                    # The valid duration's: the whole run's last message may be in flight.
                    m = re.search(r"\[Valid Duration\].*SentMessages=(\d+); "
                                  r"ReceivedMessages=(\d+)", out)
                    self.assertTrue(m and m.group(1) == m.group(2) and int(m.group(1)) > 500,
                                    out)
                    out = self.sockperf("under-load", "-t", "1", "--mps=10000",
                                        "--reply-every=100")
                    self.assertIn("# dropped messages = 0; # duplicated messages = 0; "
                                  "# out-of-order messages = 0", out)
                    if iomux == "epoll":
                        before = self.hits() if preload else self.kernel_udp_in()
                        out = self.sockperf("throughput", "-t", "1", "--mps=20000")
                        sent = int(re.search(r"Total of (\d+) messages sent", out).group(1))
                        self.assertGreater(sent, 15000, out)
                        got = (lambda: self.hits() - before) if preload else \
                            (lambda: self.kernel_udp_in() - before)
                        T.wait_until(lambda: got() >= sent, timeout=5,
                                     what=f"{sent} messages at the server")
                    self.stop(p)

    def kernel_udp_in(self):
        """The host's kernel's UDP InDatagrams."""
        snmp = self.ns("HOST", "cat", "/proc/net/snmp").stdout.splitlines()
        rows = [ln.split() for ln in snmp if ln.startswith("Udp:")]
        return int(rows[1][rows[0].index("InDatagrams")])

    def knot(self, preload, listen, port, user=None, extra=""):
        """knotd serving example.test on listen (a list of ADDR@PORT), as uid 65534, or
        started as root and becoming user; waits for its port."""
        d = os.path.join(self.run_dir, f"knot{port}")
        os.makedirs(os.path.join(d, "db"), exist_ok=True)
        with open(os.path.join(d, "example.test.zone"), "w") as f:
            f.write(ZONE)
        with open(os.path.join(d, "knot.conf"), "w") as f:
            f.write(KNOT_CONF.format(d=d, listen=", ".join(listen),
                                     user=(f"    user: {user}\n" if user else "") + extra))
        shutil.chown(d, 65534, 65534)
        shutil.chown(os.path.join(d, "db"), 65534, 65534)
        p = self.program(["knotd", "-c", os.path.join(d, "knot.conf")], preload=preload,
                         nobody=user is None)
        self.wait_bound(p, port)
        T.wait_until(lambda: "192.0.2.1" in self.dig(listen[0].split("@")[0].replace(
            "0.0.0.0", "10.99.0.1"), port, "www")[0],
                     what="knot answering")
        return p

    def dig(self, host, port, name, qtype="A"):
        r = self.ns("PEER", "dig", f"@{host}", "-p", str(port), f"{name}.example.test", qtype,
                    "+short", "+tries=1", "+time=1", check=False)
        return r.stdout, r.returncode

    def dnsperf(self, host, port, seconds, qps, clients=1):
        q = os.path.join(self.run_dir, "queries")
        with open(q, "w") as f:
            f.write("www.example.test A\nwww.example.test AAAA\nexample.test SOA\n")
        r = self.ns("PEER", "timeout", "-k", "5", str(seconds + 20), "dnsperf", "-s", host, "-p",
                    str(port), "-d", q, "-l", str(seconds), "-Q", str(qps), "-c", str(clients),
                    timeout=seconds + 30)
        return r.stdout

    def test_knot(self):
        """knotd (threads sharing a socket, recvmmsg and sendmmsg, the wildcard's packet
        info) on the IPv4 and IPv6 wildcards, port 5353, as uid 65534: dig gets the zone's
        answers over both families, and dnsperf's 2 s at 2,000 queries a second lose none
        and get only NOERROR, with the library as without it."""
        e = self.env
        for preload in (False, True):
            with self.subTest(preload=preload):
                p = self.knot(preload, ["0.0.0.0@5353", "::@5353"], 5353)
                before = self.hits()
                for host in (e["TB_HOST4"], e["TB_HOST6"]):
                    self.assertEqual(self.dig(host, 5353, "www"), ("192.0.2.1\n", 0))
                    self.assertEqual(self.dig(host, 5353, "www", "AAAA"), ("2001:db8::1\n", 0))
                out = self.dnsperf(e["TB_HOST4"], 5353, 2, 2000)
                self.assertRegex(out, r"Queries lost:\s+0 \(0\.00%\)")
                self.assertRegex(out, r"Response codes:\s+NOERROR \d+ \(100\.00%\)")
                sent = int(re.search(r"Queries sent:\s+(\d+)", out).group(1))
                self.assertGreater(sent, 3000, out)
                if preload:
                    self.assertGreaterEqual(self.hits() - before, sent + 4)
                self.stop(p)

    def test_knot_reuseport(self):
        """knotd's two UDP threads on one address: each binds a socket of its own to the port
        with SO_REUSEPORT (Knot 3.2 does wherever the kernel has it). Their channels are one
        shared channel with two consumers, and dnsperf's 8 clients (8 flows) are spread over
        both threads, as the kernel spreads them: each socket receives some; none is lost."""
        e = self.env
        p = self.knot(True, [f"{e['TB_HOST4']}@5354"], 5354)
        chans = self.preload_channels()
        self.assertEqual(len(chans), 1, chans)
        self.assertEqual(len(list(chans.values())[0]["consumers"]["attached"]), 2, chans)
        out = self.dnsperf(e["TB_HOST4"], 5354, 2, 2000, clients=8)
        self.assertRegex(out, r"Queries lost:\s+0 \(0\.00%\)")
        self.assertRegex(out, r"Response codes:\s+NOERROR \d+ \(100\.00%\)")
        sent = int(re.search(r"Queries sent:\s+(\d+)", out).group(1))
        log = self.stop(p)
        took = [int(n) for n in re.findall(r"socket port 5354 closed: (\d+) received on "
                                           r"channels", log)]
        self.assertEqual(len(took), 2, log)
        self.assertTrue(all(n > 0 for n in took), took)
        # dig's queries while knot started come on top of dnsperf's.
        self.assertGreaterEqual(sum(took), sent, log)

    def nsd(self, reuse, port, preload=True):
        """nsd serving example.test on 10.99.0.1:port as uid 65534, server-count 2."""
        d = os.path.join(self.run_dir, f"nsd{port}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "example.test.zone"), "w") as f:
            f.write(ZONE)
        with open(os.path.join(d, "nsd.conf"), "w") as f:
            f.write(NSD_CONF.format(d=d, port=port, reuse="yes" if reuse else "no"))
        shutil.chown(d, 65534, 65534)
        p = self.program(["nsd", "-d", "-c", os.path.join(d, "nsd.conf")], preload=preload)
        self.wait_bound(p, port)
        T.wait_until(lambda: "192.0.2.1" in self.dig(self.env["TB_HOST4"], port, "www")[0],
                     what="nsd answering")
        return p

    def test_nsd_server_count_2(self):
        """nsd with server-count 2 (it binds, then forks its servers), without and with
        reuse-port: dig and 2 s of dnsperf's 8 clients at 2,000 queries a second are
        answered, none lost, all NOERROR, on channels. Without reuse-port, each server that
        uses the socket makes a channel of its own above the one before, so the last one
        serves while the others wait; with it, each server's socket joins one shared channel
        and both servers answer queries, their flows spread as the kernel spreads them."""
        e = self.env
        for preload, reuse in ((False, False), (True, False), (True, True)):
            with self.subTest(preload=preload, reuse=reuse):
                port = 5355 + reuse
                p = self.nsd(reuse, port, preload)
                before = self.delivered()
                out = self.dnsperf(e["TB_HOST4"], port, 2, 2000, clients=8)
                self.assertRegex(out, r"Queries lost:\s+0 \(0\.00%\)")
                self.assertRegex(out, r"Response codes:\s+NOERROR \d+ \(100\.00%\)")
                sent = int(re.search(r"Queries sent:\s+(\d+)", out).group(1))
                if preload:
                    self.assertGreaterEqual(self.delivered() - before, sent)
                else:
                    self.assertEqual(self.delivered(), before)
                log = self.stop(p)
                if preload and reuse:
                    took = [int(n) for n in re.findall(
                        rf"socket port {port} closed: (\d+) received on channels", log)]
                    self.assertEqual(len(took), 2, log)
                    self.assertTrue(all(n > 0 for n in took), log)

    def test_apps_without_a_daemon(self):
        """With the daemon stopped, socat, sockperf's server and knotd under netchannel-run
        serve on the kernel, as -v says: socat echoes, sockperf's ping-pong loses nothing,
        dig gets the zone's answer."""
        e = self.env
        self.daemon.stop()
        p = self.program(["socat", "-T", "20", "UDP4-LISTEN:5001", "PIPE"])
        self.wait_bound(p, 5001)
        self.assertEqual(self.ask(e["TB_HOST4"], 5001, 10), {"ok": 10, "lost": 0, "wrong": 0})
        self.assertIn("no connection to", self.stop(p))
        p = self.sockperf_server(True, "epoll")
        out = self.sockperf("ping-pong", "-t", "1", "--mps=2000")
        self.assertIn("# dropped messages = 0; # duplicated messages = 0; "
                      "# out-of-order messages = 0", out)
        self.assertIn("no connection to", self.stop(p))
        p = self.knot(True, [f"{e['TB_HOST4']}@5353"], 5353)
        self.assertEqual(self.dig(e["TB_HOST4"], 5353, "www"), ("192.0.2.1\n", 0))
        self.assertIn("no connection to", self.stop(p))

    def test_knot_on_port_53_drops_privileges(self):
        """knotd started as root on port 53 with user nobody:nogroup: it binds as root and
        becomes uid 65534, whose channels serve the zone (control.allow gives that user
        port 53 here)."""
        e = self.env
        p = self.knot(True, [f"{e['TB_HOST4']}@53"], 53, user="nobody:nogroup")
        self.assertEqual(self.dig(e["TB_HOST4"], 53, "www"), ("192.0.2.1\n", 0))
        owners = [self.ncctl(f"show channel {n}")["owner"] for n in self.preload_channels()]
        self.assertTrue(owners, "no channel")
        self.assertEqual({o["uid"] for o in owners}, {65534}, owners)
        self.stop(p)

    def test_iperf3_udp(self):
        """iperf3's server as uid 65534: its TCP control stays with the kernel, its UDP data
        comes on a channel (connected to the client), and a 2 s run at 20 Mbit/s from the
        peer completes, with the library as without it."""
        e = self.env
        for preload in (False, True):
            with self.subTest(preload=preload):
                p = self.program(["iperf3", "-s", "-p", "5201"], preload=preload)
                T.wait_until(lambda: ":5201 " in self.ns("HOST", "ss", "-Htln").stdout,
                             what="iperf3 listening")
                before = self.delivered()
                r = self.ns("PEER", "timeout", "-k", "5", "30", "iperf3", "-c", e["TB_HOST4"],
                            "-p", "5201", "-u", "-b", "20M", "-t", "2", "--json", timeout=40)
                res = json.loads(r.stdout)
                self.assertNotIn("error", res, r.stdout)
                packets = res["end"]["sum"]["packets"]
                self.assertGreater(packets, 2000)
                # Every datagram on a channel with the library, none without it.
                if preload:
                    self.assertGreaterEqual(self.delivered() - before, packets)
                else:
                    self.assertEqual(self.delivered(), before)
                out = self.stop(p)
                if preload:
                    self.assertIn("connected", out)


if __name__ == "__main__":
    unittest.main()
