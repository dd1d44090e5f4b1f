#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The host keeps working: netchanneld owns a veth end through net_af_xdp, the real kernel is
the peer (scripts/testbed.sh), and the host's kernel works through the exception TAP while
nc-echo claims a UDP port."""
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

TESTBED = os.path.join(T.SRC, "scripts/testbed.sh")
ECHO = os.path.join(T.BUILD, "app/examples/nc-echo")
NCCTL = os.path.join(T.BUILD, "app/ncctl/ncctl")

# A kernel UDP server on the host: answers "kernel:" + the datagram.
KERNEL_UDP = os.path.join(T.SRC, "scripts/kernel_udp.py")

# The peer's side of a UDP exchange: prints one JSON line of who answered what.
PEER_UDP = """
import json, socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.settimeout(1.0)
got = {"echo": 0, "kernel": 0, "lost": 0, "wrong": 0}
for i in range(n):
    msg = b"dgram %d" % i
    s.sendto(msg, (host, port))
    try:
        data, _ = s.recvfrom(2048)
    except socket.timeout:
        got["lost"] += 1
        continue
    got["echo" if data == msg else "kernel" if data == b"kernel:" + msg else "wrong"] += 1
print(json.dumps(got))
"""

# A one-ring client (the Python package): 70 channels, udp/7001-7070, more than the 64 rings
# a connection has otherwise; echoes N datagrams, each answered on the channel the ring names
# (a datagram whose channel is not the one of its port is wrong), sleeping between them.
ONE_RING_ECHO = """
import sys
import netchannel
sys.path.insert(0, sys.argv[3])
from nc_echo import reply
with netchannel.Client(sys.argv[1], one_ring=True) as c:
    port_of = {}
    for p in range(7001, 7071):
        port_of[c.create(f"or{p}", dport=p, tx=True).id] = p
    print("ready", len(port_of), flush=True)
    n = wrong = 0
    while n < int(sys.argv[2]):
        got = c.recv(timeout=10)
        if got is None:
            break
        ch, frame = got
        if ch is None or port_of.get(ch.id) != int.from_bytes(frame[36:38], "big"):
            wrong += 1
            continue
        ch.send_ip(reply(frame))
        n += 1
    print("echoed", n, "wrong", wrong, flush=True)
    sys.stdin.read()
"""

# A TCP server on the peer: answers each line with "server <its address>: " + the line.
PEER_TCP_SERVER = """
import socket, sys
addr, port = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(8)
print("listening", flush=True)
while True:
    c, peer = s.accept()
    f = c.makefile("rwb")
    for line in f:
        f.write(b"server " + addr.encode() + b" from " + peer[0].encode() + b": " + line)
        f.flush()
    c.close()
"""

# A TCP client on the peer: sends n lines, prints what came back as JSON.
PEER_TCP_CLIENT = """
import json, socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = socket.create_connection((host, port), timeout=10)
f = c.makefile("rwb")
got = []
for i in range(n):
    f.write(b"line %d\\n" % i)
    f.flush()
    got.append(f.readline().decode().strip())
print(json.dumps({"local": c.getsockname()[:2], "peer": c.getpeername()[:2], "got": got}))
"""


# The peer's side of large datagrams (the peer's kernel fragments them): for each port, sends
# one of size bytes and prints whether an answer came, and the sha256 of what it sent.
PEER_BIG = """
import hashlib, json, os, socket, sys
host, size, ports = sys.argv[1], int(sys.argv[2]), map(int, sys.argv[3:])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.settimeout(1.5)
out = {}
for port in ports:
    msg = os.urandom(size)
    s.sendto(msg, (host, port))
    try:
        data, _ = s.recvfrom(65535)
        answer = {b"kernel:" + msg: "kernel", b"server:" + msg: "server"}.get(data, "wrong")
    except socket.timeout:
        answer = None
    out[port] = {"answer": answer, "sha": hashlib.sha256(msg).hexdigest()}
print(json.dumps(out))
"""

# A UDP server on the peer: answers "server:" + the datagram.
PEER_UDP_SERVER = """
import socket, sys
addr, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((addr, port))
print("listening", flush=True)
while True:
    data, peer = s.recvfrom(65535)
    s.sendto(b"server:" + data, peer)
"""

# A Python client of the deliver channel: prints the length of each frame and the sha256 of
# its last bytes (the datagram's payload).
CLIENT_BIG = """
import hashlib, netchannel, sys
sock, port, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with netchannel.Client(sock) as c:
    ch = c.create(f"big{port}", port)
    print("ready", flush=True)
    for _ in range(n):
        f = ch.recv(timeout=15)
        print(len(f), hashlib.sha256(f[-size:]).hexdigest() if f else None, flush=True)
"""

# Hand-made fragments from the peer (scapy): overlapping, incomplete, too big, and a flood.
PEER_FRAGS = """
import sys
from scapy.all import Ether, IP, IPv6, IPv6ExtHdrFragment, UDP, Raw, sendp
mac, host4, host6, what = sys.argv[1:5]
def v4(id, frag, mf, data, port=6666):
    return Ether(dst=mac) / IP(dst=host4, id=id, flags="MF" if mf else 0, frag=frag, proto=17) / Raw(data)
def v6(id, off, m, data):
    return Ether(dst=mac) / IPv6(dst=host6) / IPv6ExtHdrFragment(id=id, offset=off, m=m, nh=17) / Raw(data)
udp = bytes(UDP(sport=4000, dport=6666, len=8 + 32, chksum=0)) + b"o" * 32
pkts = []
if what == "overlap":
    # 40 bytes of datagram sent as 0-23 and 16-39: they overlap by 8.
    pkts = [v4(101, 0, True, udp[:24]), v4(101, 2, False, udp[16:40]),
            v6(102, 0, 1, udp[:24]), v6(102, 2, 0, udp[16:40])]
elif what == "incomplete":
    pkts = [v4(201, 0, True, udp[:24]), v6(202, 0, 1, udp[:24])]
elif what == "too_big":
    pkts = [v4(301, 8189, False, b"x" * 100), v6(302, 8189, 0, b"x" * 100)]
elif what == "flood":
    pkts = [v4(1000 + i, 0, True, udp[:24]) for i in range(int(sys.argv[5]))]
sendp(pkts, iface="eth0", verbose=False)
print(len(pkts))
"""

# Fragments as real AFS (Rx over UDP) traffic has them, hand-made on the peer and written to its
# veth as they are: DF on every fragment, MF on all but the last, a TOS, a TTL, IPv4 options
# (router alert, copied; record route, not), the last fragment first, a trailer of Ethernet
# padding, and IPv6 with a traffic class, flow label and hop limit. Each datagram is a UDP
# datagram to the host's port 6666 (a kernel socket). Prints the frames' hex as JSON.
PEER_AFS = """
import json, socket, sys
from scapy.all import Ether, IP, IPOption, IPv6, IPv6ExtHdrFragment, UDP, Raw
mac, host4, host6, peer4, peer6 = sys.argv[1:6]
size = int(sys.argv[6])
src = open("/sys/class/net/eth0/address").read().strip()
opts = [IPOption(b"\\x94\\x04\\x00\\x00"), IPOption(b"\\x07\\x07\\x04" + bytes(4)), IPOption(b"\\x01")]
def udp(ip, sport, data):
    # The UDP header and payload, its checksum over the addresses it travels between.
    return bytes(ip / UDP(sport=sport, dport=6666) / Raw(data))[len(bytes(ip)):]
def pieces(d, cut):
    return [(o, d[o:o + cut], o + cut < len(d)) for o in range(0, len(d), cut)]
frames = []
for i, cut in enumerate((size // 2 // 8 * 8, size // 3 // 8 * 8)):
    data = b"afs%d:" % i + bytes(range(256)) * (size // 256)
    d4 = udp(IP(src=peer4, dst=host4), 7000 + i, data)
    d6 = udp(IPv6(src=peer6, dst=host6), 7000 + i, data)
    f4 = [Ether(src=src, dst=mac) / IP(src=peer4, dst=host4, id=0x4100 + i, tos=0x28, ttl=37,
          options=opts, flags="DF+MF" if mf else "DF", frag=o // 8, proto=17) / Raw(p)
          for o, p, mf in pieces(d4, cut)]
    f6 = [Ether(src=src, dst=mac) / IPv6(src=peer6, dst=host6, tc=0x28, fl=0x12345, hlim=37) /
          IPv6ExtHdrFragment(id=0x6100 + i, offset=o // 8, m=int(mf), nh=17) / Raw(p)
          for o, p, mf in pieces(d6, cut)]
    for f in (f4, f6):
        f.insert(0, f.pop())          # the last fragment first
    frames += [bytes(f) for f in f4 + f6]
# A datagram whose last fragment is short and padded to 60 bytes, with bytes that are not zeros.
d = udp(IP(src=peer4, dst=host4), 7009, b"p" * 20)
frames.append(bytes(Ether(src=src, dst=mac) / IP(src=peer4, dst=host4, id=0x4199, flags="MF", frag=0, proto=17) / Raw(d[:16])))
frames.append(bytes(Ether(src=src, dst=mac) / IP(src=peer4, dst=host4, id=0x4199, frag=2, proto=17) / Raw(d[16:])) + b"\\xa5" * 16)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
for f in frames:
    s.send(f)
print(json.dumps([f.hex() for f in frames]))
"""

# What the host's kernel gets on a TAP: every frame in (not the kernel's own) that is an IP
# fragment, as hex, until n of them or a timeout; JSON.
HOST_TAP_FRAGS = """
import json, socket, sys, time
iface, n, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((iface, 0))
s.settimeout(0.2)
print("capturing", flush=True)
got, end = [], time.monotonic() + timeout
while len(got) < n and time.monotonic() < end:
    try:
        f, a = s.recvfrom(65535)
    except socket.timeout:
        continue
    if a[2] == socket.PACKET_OUTGOING:
        continue
    t = f[12:14]
    if t == b"\\x08\\x00" and int.from_bytes(f[20:22], "big") & 0x3fff:
        got.append(f.hex())
    elif t == b"\\x86\\xdd" and f[20] == 44:
        got.append(f.hex())
print(json.dumps(got), flush=True)
"""


class Bed(T.DaemonCase):
    """The test bed's helpers, for the test cases on it (no tests of its own)."""

    def bed_up(self, name):
        """The test bed NAME up (down again at cleanup), its names in self.env, the control
        socket's path in self.sock; no daemon yet."""
        self.name = name
        self.sock = os.path.join(self.w, "ncd.sock")
        out = subprocess.run([TESTBED, "up", self.name], capture_output=True, text=True)
        self.addCleanup(subprocess.run, [TESTBED, "down", self.name])
        self.assertEqual(out.returncode, 0, out.stderr)
        self.env = dict(line.split("=", 1) for line in out.stdout.split())
        self.addCleanup(self.stop_procs)

    def xdp_config(self, allow):
        """The host's addresses on veth0 itself, as on any host, not on a TAP; and a config
        for the port in exception mode xdp, control.allow's entries allow, the control
        socket reached by group nogroup (uid 65534's)."""
        self.ns("HOST", "ip", "addr", "add", "10.99.0.1/24", "dev", "veth0")
        self.ns("HOST", "ip", "addr", "add", "fd99::1/64", "dev", "veth0", "nodad")
        return {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
                "ports": [{"name": "wire0", "device": "net_af_xdp0,iface=veth0",
                           "exception": {"mode": "xdp"}}],
                "workers": [{"lcore": 1}],
                "control": {"socket": self.sock, "group": "nogroup", "mode": "0660",
                            "allow": allow}}

    def stop_procs(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def ns(self, side, *cmd, timeout=30, check=True):
        r = subprocess.run(["ip", "netns", "exec", self.env[f"TB_{side}_NS"]] + list(cmd),
                           capture_output=True, text=True, timeout=timeout)
        if check:
            self.assertEqual(r.returncode, 0, f"{cmd}: {r.stdout}{r.stderr}")
        return r

    def bg(self, side, *cmd, ready=None):
        p = subprocess.Popen(["ip", "netns", "exec", self.env[f"TB_{side}_NS"]] + list(cmd),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        if ready is not None:
            seen = []
            for line in p.stdout:
                seen.append(line)
                if ready in line:
                    break
            else:
                self.fail(f"{cmd}: no '{ready}':\n{''.join(seen)}")
        return p

    def udp(self, host, port, n):
        r = self.ns("PEER", "/usr/bin/python3", "-c", PEER_UDP, host, str(port), str(n))
        return json.loads(r.stdout)

    def ncctl(self, cmd):
        r = subprocess.run([NCCTL, "-s", self.sock, "--json", "-c", cmd], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout)


class TestBed(Bed):
    def setUp(self):
        super().setUp()
        self.procs = []
        self.bed_up(f"tb{os.getpid()}")
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0", "device": "net_af_xdp0,iface=veth0"}],
               "workers": [{"lcore": 1}], "control": {"socket": self.sock}}
        self.daemon = T.Daemon(cfg, self.w, self.prefix, netns=self.env["TB_HOST_NS"])
        self.daemon.start()
        r = subprocess.run([TESTBED, "host", self.name], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_kernel_works_through_exception_path(self):
        """ARP and neighbour discovery, ping and ping6 (each answered once: the XDP program
        took the frames from the kernel), TCP to a kernel server (HTTP, and a bounded iperf3),
        and the host's own outgoing connections, all through the TAP."""
        e = self.env
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            r = self.ns("PEER", "ping", "-c", "5", "-i", "0.2", "-W", "2", addr)
            self.assertIn("5 packets transmitted, 5 received, 0% packet loss", r.stdout)
            self.assertNotIn("DUP", r.stdout, "the kernel answered twice")
            rtt = re.search(r"rtt min/avg/max/mdev = [\d.]+/([\d.]+)/", r.stdout).group(1)
            print(f"ping {addr} through netchanneld's exception path: avg rtt {rtt} ms",
                  file=sys.stderr)
        # The peer learned the host's MAC (ARP and ND), which is the wire's: veth0's.
        mac = self.ns("HOST", "cat", "/sys/class/net/veth0/address").stdout.strip()
        neigh = self.ns("PEER", "ip", "neigh", "show", "dev", "eth0").stdout
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            self.assertRegex(neigh, re.escape(addr) + r" lladdr " + re.escape(mac))
        # TCP to the host's kernel: an HTTP server.
        self.bg("HOST", "/usr/bin/python3", "-u", "-m", "http.server", "8000", "--bind", "::",
                ready="Serving HTTP")
        for url in (f"http://{e['TB_HOST4']}:8000/", f"http://[{e['TB_HOST6']}]:8000/"):
            r = self.ns("PEER", "/usr/bin/python3", "-c",
                        "import sys, urllib.request as u; "
                        "print(len(u.urlopen(sys.argv[1], timeout=5).read()))", url)
            self.assertGreater(int(r.stdout), 0, url)
        # A bounded iperf3 run through the exception path.
        self.bg("HOST", "iperf3", "-s", "-1", "-p", "5201", "--forceflush", ready="Server listening")
        r = self.ns("PEER", "iperf3", "-c", e["TB_HOST4"], "-p", "5201", "-t", "3", "-J",
                    timeout=30)
        bps = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]
        self.assertGreater(bps, 0)
        print(f"iperf3 TCP peer -> host kernel through netchanneld: {bps / 1e6:.0f} Mbit/s",
              file=sys.stderr)
        # The host's own outgoing connection, to a server on the peer.
        self.bg("PEER", "/usr/bin/python3", "-u", "-m", "http.server", "8080", "--bind",
                e["TB_PEER4"], ready="Serving HTTP")
        r = self.ns("HOST", "/usr/bin/python3", "-c",
                    "import urllib.request as u; "
                    f"print(len(u.urlopen('http://{e['TB_PEER4']}:8080/', timeout=5).read()))")
        self.assertGreater(int(r.stdout), 0)
        port = self.ncctl("show port stats wire0")[0]
        self.assertTrue(T.accounting_ok(port), port)
        self.assertGreater(port["to_kernel"], 0)
        self.assertGreater(port["kernel_tx"], 0)
        self.assertEqual(port["delivered"], 0)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def echo_and_kernel(self, ip):
        e = self.env
        self.bg("HOST", "/usr/bin/python3", "-u", KERNEL_UDP, "7", "9", ready="ready")
        # Before nc-echo: the kernel answers port 7.
        self.assertEqual(self.udp(e["TB_HOST4"], 7, 5)["kernel"], 5)
        echo = self.bg("HOST", ECHO, "-s", self.sock, "--dport", "7", *(["--ip"] if ip else []),
                       ready="echoing udp port 7")
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            got = self.udp(addr, 7, 50)
            self.assertEqual(got, {"echo": 50, "kernel": 0, "lost": 0, "wrong": 0}, addr)
            # Other ports are still the kernel's.
            got = self.udp(addr, 9, 10)
            self.assertEqual(got, {"echo": 0, "kernel": 10, "lost": 0, "wrong": 0}, addr)
        ch = self.ncctl("show channel nc-echo-7")
        self.assertEqual(ch["counters"]["hits"], 100, "what the peer sent to port 7")
        self.assertEqual(ch["counters"]["delivered"], 100)
        self.assertEqual(ch["counters"]["tx"], 100)
        self.assertEqual(ch["counters"]["tx_spoofed"] + ch["counters"]["tx_no_neigh"], 0)
        # nc-echo (an isolated client) answered every one: none is in its ring still.
        self.assertEqual(ch["ring_count"], 0, "in ring: what the client has not taken")
        port = self.ncctl("show port stats wire0")[0]
        self.assertEqual(port["client_tx"], 100)
        self.assertTrue(T.accounting_ok(port), port)
        echo.send_signal(signal.SIGTERM)
        out, _ = echo.communicate(timeout=10)
        self.assertEqual(echo.returncode, 0, out)
        self.assertIn("100 echoed", out)
        # Once nc-echo is gone, the kernel answers port 7 again.
        self.assertEqual(self.udp(e["TB_HOST4"], 7, 5)["kernel"], 5)
        self.assertEqual(self.udp(e["TB_HOST6"], 7, 5)["kernel"], 5)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        st = self.daemon.read_stats()["ports"][0]
        self.assertTrue(T.accounting_ok(st), st)
        return st

    def test_nc_echo_frames_and_kernel_share_the_port(self):
        """nc-echo claims UDP port 7 and echoes the peer's datagrams (IPv4 and IPv6); port 9
        stays the kernel's; when nc-echo exits, the kernel answers port 7 again."""
        self.echo_and_kernel(ip=False)

    def test_nc_echo_ip_next_hop_from_kernel(self):
        """nc-echo --ip: the daemon takes the peer's MAC from the host kernel's neighbour table
        (learned through the TAP), and the replies reach the peer."""
        st = self.echo_and_kernel(ip=True)
        self.assertGreater(st["next_hop"]["resolved"], 0)
        self.assertEqual(st["next_hop"]["no_neigh"], 0)

    def test_python_client_asyncio_echo(self):
        """The Python package (ctypes over libnetchannel): its asyncio example claims UDP port
        7 and echoes the peer's datagrams, IPv4 and IPv6, sleeping on the channel's eventfd
        between them; a wrong socket is a NetchannelError with the library's words."""
        e = self.env
        env = T.package_env()
        echo = subprocess.Popen(["ip", "netns", "exec", e["TB_HOST_NS"], "/usr/bin/python3",
                                 os.path.join(T.SRC, "python/examples/nc_echo.py"), "-s",
                                 self.sock, "--dport", "7", "-c", "20"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(echo)
        self.assertEqual(echo.stdout.readline().strip(), "echoing udp port 7")
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            self.assertEqual(self.udp(addr, 7, 10), {"echo": 10, "kernel": 0, "lost": 0,
                                                     "wrong": 0}, addr)
        out, _ = echo.communicate(timeout=30)
        self.assertEqual(echo.returncode, 0, out)
        self.assertIn("20 echoed; daemon: tx=20 tx_spoofed=0 tx_no_neigh=0", out)
        probe = ("import errno, netchannel\n"
                 "try:\n    netchannel.Client('/nonexistent.sock')\n"
                 "except netchannel.NetchannelError as x:\n    print(x.errno == errno.ENOENT, x)\n")
        r = subprocess.run(["/usr/bin/python3", "-c", probe], env=env, capture_output=True,
                           text=True, timeout=30)
        self.assertTrue(r.stdout.startswith("True [Errno 2] connect to /nonexistent.sock: "),
                        r.stdout + r.stderr)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_one_ring_client_sleeps_and_wakes(self):
        """A one-ring client (the Python package) with 70 channels echoes the peer's datagrams
        to three of their ports, each on the channel its ring names; it sleeps on its one
        eventfd between them (the peer waits for each echo), and the workers wake it."""
        e = self.env
        env = T.package_env()
        echo = subprocess.Popen(["ip", "netns", "exec", e["TB_HOST_NS"], "/usr/bin/python3", "-c",
                                 ONE_RING_ECHO, self.sock, "15",
                                 os.path.join(T.SRC, "python/examples")], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.procs.append(echo)
        self.assertEqual(echo.stdout.readline().strip(), "ready 70")
        for port in (7001, 7035, 7070):
            self.assertEqual(self.udp(e["TB_HOST4"], port, 5), {"echo": 5, "kernel": 0, "lost": 0,
                                                                "wrong": 0}, port)
        self.assertEqual(echo.stdout.readline().strip(), "echoed 15 wrong 0")
        woken = sum(self.ncctl(f"show channel or{p}")["counters"]["wakeups"]
                    for p in (7001, 7035, 7070))
        self.assertGreater(woken, 0, "the client slept, and was woken")
        out, _ = echo.communicate("", timeout=30)
        self.assertEqual(echo.returncode, 0, out)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def frag_counters(self):
        port = self.ncctl("show port stats wire0")[0]
        self.assertTrue(T.accounting_ok(port), port)
        return port

    def test_fragmented_datagrams_are_classified_whole(self):
        """3,000-byte UDP datagrams over a 1,500 MTU, IPv4 and IPv6, fragmented by the peer's
        kernel: to a drop channel, dropped (the kernel's socket gets nothing); to a client's
        channel, the client gets each datagram whole; to no channel, the kernel's socket gets
        them (the daemon fragments them again for the TAP) and answers."""
        e = self.env
        size = 3000
        self.bg("HOST", "/usr/bin/python3", "-u", KERNEL_UDP, "5555", "6666", ready="ready")
        self.ncctl("channel create drop5555 proto udp dport 5555 action drop")
        env = T.package_env()
        client = subprocess.Popen(["ip", "netns", "exec", e["TB_HOST_NS"], "/usr/bin/python3",
                                   "-c", CLIENT_BIG, self.sock, "7777", "2", str(size)],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        self.procs.append(client)
        self.assertEqual(client.stdout.readline().strip(), "ready")
        sent = {}
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            r = self.ns("PEER", "/usr/bin/python3", "-c", PEER_BIG, addr, str(size), "5555",
                        "6666", "7777")
            got = json.loads(r.stdout)
            self.assertIsNone(got["5555"]["answer"], f"{addr}: the drop channel let it by")
            self.assertEqual(got["6666"]["answer"], "kernel", f"{addr}: the kernel's socket")
            self.assertIsNone(got["7777"]["answer"], f"{addr}: the client's port")
            sent[addr] = got["7777"]["sha"]
        out, _ = client.communicate(timeout=30)
        self.assertEqual(client.returncode, 0, out)
        lines = out.split("\n")
        self.assertEqual(lines[:2], [f"{14 + 20 + 8 + size} {sent[e['TB_HOST4']]}",
                                     f"{14 + 40 + 8 + size} {sent[e['TB_HOST6']]}"], out)
        drop = self.ncctl("show channel drop5555")["counters"]
        self.assertEqual((drop["hits"], drop["dropped"]), (2, 2), drop)
        port = self.frag_counters()
        # Each of the six datagrams came in 3 fragments and was made whole once.
        self.assertEqual((port["frag_in"], port["frag_datagrams"]), (18, 6), port)
        self.assertGreaterEqual(port["frag_out"], 6, "the kernel's two, in fragments")
        for k in ("table_full", "timeout", "overlap", "too_big", "unsupported"):
            self.assertEqual(port["frag_drop_" + k], 0, k)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def afs_fragments(self, size, want):
        """The peer sends PEER_AFS's fragments; returns (what it sent, what the host's kernel got
        on its TAP, the kernel's answers to the peer)."""
        e = self.env
        mac = self.ns("HOST", "cat", "/sys/class/net/veth0/address").stdout.strip()
        cap = self.bg("HOST", "/usr/bin/python3", "-u", "-c", HOST_TAP_FRAGS, "wire0", str(want),
                      "10", ready="capturing")
        answers = self.bg("PEER", "/usr/bin/python3", "-u", "-c",
                          "import socket, sys\n"
                          "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))\n"
                          "s.bind(('eth0', 0)); s.settimeout(8); print('ready', flush=True)\n"
                          "n = 0\n"
                          "while n < int(sys.argv[1]):\n"
                          "    f = s.recv(65535)\n"
                          "    n += b'kernel:afs' in f or b'kernel:pppp' in f\n"
                          "print('answers', n, flush=True)\n", "5", ready="ready")
        r = self.ns("PEER", "/usr/bin/python3", "-c", PEER_AFS, mac, e["TB_HOST4"], e["TB_HOST6"],
                    e["TB_PEER4"], e["TB_PEER6"], str(size))
        sent = json.loads(r.stdout)
        got = json.loads(cap.stdout.readline())
        line = answers.stdout.readline().strip()
        return sent, got, line

    def test_fragments_reach_the_kernel_as_they_came(self):
        """Fragments as real AFS traffic has them (DF with MF, a TOS, a TTL, IPv4 options, the
        last first, a padded short one; IPv6 with a traffic class and flow label) that no
        channel claims: the host's kernel gets each frame byte for byte, in the order it came,
        and answers every datagram; a channel elsewhere does not change that. On a TAP whose
        MTU is smaller than the fragments, each is cut again with its own TOS, TTL, DF and id."""
        self.bg("HOST", "/usr/bin/python3", "-u", KERNEL_UDP, "6666", ready="ready")
        self.ncctl("channel create other proto udp dport 5555 action drop")
        sent, got, answers = self.afs_fragments(1400, 12)
        self.assertEqual(len(sent), 12)
        self.assertEqual(got, sent, "the kernel's frames are the wire's, byte for byte, in order")
        self.assertEqual(answers, "answers 5", "the kernel reassembled every datagram")
        port = self.frag_counters()
        self.assertEqual((port["frag_in"], port["frag_datagrams"], port["frag_kept"],
                          port["frag_out"], port["frag_recut"]), (12, 5, 12, 12, 0), port)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

        # A TAP of MTU 1000 (exception.host): the fragments of 1,200 bytes are each cut again in
        # two, those of 800 bytes and the padded ones go as they came.
        e = self.env
        with open(self.daemon.config) as f:
            cfg = json.load(f)
        cfg["ports"] = [dict(cfg["ports"][0], exception={"host": {
            "mtu": 1000, "addresses": [e["TB_HOST4"] + "/24", e["TB_HOST6"] + "/64"]}})]
        self.daemon = T.Daemon(cfg, self.w, self.prefix, netns=self.env["TB_HOST_NS"])
        self.daemon.start()
        sent, got, answers = self.afs_fragments(2400, 16)
        self.assertEqual(answers, "answers 5", "the kernel reassembled every datagram")
        self.assertTrue(all(len(bytes.fromhex(f)) - 14 <= 1000 for f in got), "within the MTU")
        kept = [f for f in got if f in sent]
        self.assertEqual(len(got), 16, got)
        self.assertEqual(len(kept), 8, "the three of 800 bytes, IPv4 and IPv6, and the padded two")
        port = self.frag_counters()
        self.assertEqual((port["frag_kept"], port["frag_out"], port["frag_recut"]), (8, 16, 2),
                         "the datagrams of 1,200-byte fragments, IPv4 and IPv6, re-cut")
        v4 = [bytes.fromhex(f) for f in got if f[24:28] == "0800" and f not in sent]
        self.assertEqual(len(v4), 4, "two fragments of 1,200 bytes, each in two")
        for f in v4:
            ihl = (f[14] & 15) * 4
            self.assertEqual((ihl, f[15], f[22], f[20] & 0x40), (32, 0x28, 37, 0x40),
                             "its header length, TOS, TTL and DF kept")
            self.assertEqual(f[14 + 20:14 + 24], bytes.fromhex("94040000"),
                             "router alert, a copied option, kept")
            first = int.from_bytes(f[20:22], "big") & 0x1fff == 0
            self.assertEqual(f[14 + 24], 0x07 if first else 0x01,
                             "record route only in the datagram's first bytes")
        v6 = [bytes.fromhex(f) for f in got if f[24:28] == "86dd" and f not in sent]
        self.assertEqual(len(v6), 4, "two fragments of 1,200 bytes, each in two")
        for f in v6:
            self.assertEqual((int.from_bytes(f[14:18], "big") & 0x0fffffff, f[21],
                              int.from_bytes(f[58:62], "big")), (0x2812345, 37, 0x6100),
                             "its traffic class, flow label, hop limit and fragment id kept")
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_fragment_faults_are_counted_and_bounded(self):
        """Overlapping fragments, a datagram whose last fragment never comes, one past 64 KiB,
        and a flood of first fragments: each given up and counted by reason, the kernel's
        socket gets none of them, the pool's mbufs come back, and ping still works."""
        e = self.env
        self.bg("HOST", "/usr/bin/python3", "-u", KERNEL_UDP, "6666", ready="ready")
        mac = self.ns("HOST", "cat", "/sys/class/net/veth0/address").stdout.strip()
        base = self.ncctl("show mempool")["in_use"]

        def peer(what, *extra):
            return int(self.ns("PEER", "/usr/bin/python3", "-c", PEER_FRAGS, mac, e["TB_HOST4"],
                               e["TB_HOST6"], what, *extra).stdout)

        peer("overlap")
        peer("too_big")
        port = self.frag_counters()
        self.assertEqual((port["frag_drop_overlap"], port["frag_drop_too_big"]), (4, 2), port)
        peer("incomplete")
        # Held no longer than fragments.timeout_ms (2 s by default), and then counted.
        port = T.wait_until(lambda: (lambda p: p["frag_drop_timeout"] >= 2 and p)(
            self.frag_counters()), timeout=2.5, what="the incomplete datagrams timed out")
        self.assertEqual(port["frag_drop_timeout"], 2, port)
        n = peer("flood", "2000")
        port = T.wait_until(lambda: (lambda p: p["frag_drop_table_full"] > 0 and p)(
            self.frag_counters()), what="first fragments finding the table full")
        print(f"a flood of {n} first fragments: {port['frag_drop_table_full']} found the "
              f"table full", file=sys.stderr)
        # Once the flood's held fragments have timed out, every fragment is accounted for.
        gave_up = ("frag_drop_table_full", "frag_drop_timeout", "frag_drop_overlap",
                   "frag_drop_too_big")
        port = T.wait_until(lambda: (lambda p: p["frag_in"] == sum(p[k] for k in gave_up) and p)(
            self.frag_counters()), what="every fragment given up and counted")
        self.assertEqual(port["frag_in"], sum(port[k] for k in gave_up), port)
        self.assertGreater(port["frag_drop_timeout"], 2, "the flood's that found room")
        self.assertEqual(port["frag_datagrams"], 0)
        self.assertLessEqual(self.ncctl("show mempool")["in_use"], base + 64, "the pool came back")
        r = self.ns("PEER", "ping", "-c", "3", "-i", "0.2", "-W", "2", e["TB_HOST4"])
        self.assertIn("3 received", r.stdout)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_first_reply_waits_for_its_neighbour(self):
        """nc-echo --ip's first reply to a peer whose MAC the host's kernel does not know is
        not lost: it waits while the kernel resolves the neighbour (as the kernel's own
        arp_queue would) and reaches the peer, IPv4 and IPv6."""
        e = self.env
        # The peer learns the host's MAC; then the host forgets the peer's.
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            self.ns("PEER", "ping", "-c", "1", "-W", "2", addr)
        self.bg("HOST", ECHO, "-s", self.sock, "--dport", "7", "--ip", ready="echoing udp port 7")
        # IPv6 neighbour discovery waits for the TAP's link-local address to pass DAD.
        deadline = time.time() + 10
        while self.ns("HOST", "ip", "-6", "addr", "show", "dev", "wire0", "tentative").stdout:
            self.assertLess(time.time(), deadline, "wire0's addresses are still tentative")
            time.sleep(0.1)
        for fam in ("-4", "-6"):
            self.ns("HOST", "ip", fam, "neigh", "flush", "dev", "wire0")
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            self.assertEqual(self.udp(addr, 7, 1), {"echo": 1, "kernel": 0, "lost": 0,
                                                    "wrong": 0}, addr)
        cs = self.ncctl("show channel nc-echo-7")["counters"]
        self.assertEqual((cs["tx"], cs["tx_no_neigh"]), (2, 0), cs)
        nh = self.ncctl("show port stats wire0")[0]["next_hop"]
        self.assertGreaterEqual(nh["queued"], 1, nh)
        self.assertEqual((nh["queue_full"], nh["failed"]), (0, 0), nh)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_link_down_and_up(self):
        """The wire losing its carrier (the peer's end set down) is seen within seconds:
        show port info says down, the log says why, the change is counted; and back up,
        the host is reachable again."""
        e = self.env

        def link(want):
            deadline = time.time() + 10
            while time.time() < deadline:
                info = self.ncctl("show port info wire0")[0]
                if info["link"].split(",")[0] == want:
                    return info
                time.sleep(0.2)
            self.fail(f"wire0's link is {info['link']}, not {want}")
        # Changes so far: the link may have come up after the daemon first looked.
        def carrier():
            return self.ns("HOST", "cat", "/sys/class/net/wire0/carrier").stdout.strip()
        c0 = link("up")["link_changes"]
        self.assertEqual(carrier(), "1")
        self.ns("PEER", "ip", "link", "set", "eth0", "down")
        self.assertEqual(link("down")["link_changes"], c0 + 1)
        self.assertIn("port wire0: link down (its kernel interface has no carrier, or is down "
                      "or gone)", self.daemon.output())
        # The TAP follows the wire: no carrier, but still up (its admin state is the host's).
        T.wait_until(lambda: carrier() == "0", what="the TAP's carrier off with the wire's")
        self.assertRegex(self.ns("HOST", "ip", "link", "show", "wire0").stdout,
                         r"<[^>]*\bUP\b[^>]*>.*state DOWN")
        self.ns("PEER", "ip", "link", "set", "eth0", "up")
        self.assertEqual(link("up")["link_changes"], c0 + 2)
        T.wait_until(lambda: carrier() == "1", what="the TAP's carrier on again")
        self.ns("PEER", "ping", "-c", "1", "-W", "5", e["TB_HOST4"])
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        self.assertEqual(self.daemon.read_stats()["ports"][0]["link"],
                         {"up": True, "changes": c0 + 2})

    def start_with_host(self, run):
        """A daemon of its own whose TAP gets the host's configuration (exception.host)."""
        e = self.env
        with open(self.daemon.config) as f:
            cfg = json.load(f)
        cfg["ports"][0]["exception"] = {
            "device": "net_tap_wire0,iface=wire0", "mac": "port",
            "host": {"addresses": [f"{e['TB_HOST4']}/24", f"{e['TB_HOST6']}/64"],
                     "routes": [{"dst": "10.98.0.0/24", "gateway": e["TB_PEER4"],
                                 "metric": 7}],
                     "mtu": 1400}}
        self.daemon = T.Daemon(cfg, self.w, f"{self.prefix}_{run}", netns=e["TB_HOST_NS"])
        self.addCleanup(T.cleanup_prefix, f"{self.prefix}_{run}")
        self.daemon.start()

    def host_configured(self):
        """The TAP is up with the host's MTU, route and addresses: the peer reaches both."""
        e = self.env
        link = self.ns("HOST", "ip", "link", "show", "wire0").stdout
        self.assertIn("mtu 1400", link)
        self.assertRegex(link, r"<[^>]*\bUP\b")
        route = self.ns("HOST", "ip", "route", "show", "10.98.0.0/24").stdout
        self.assertIn(f"via {e['TB_PEER4']} dev wire0", route)
        self.assertIn("metric 7", route)
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            self.ns("PEER", "ping", "-c", "1", "-W", "5", addr)

    def ping_back(self, within):
        """Both of the host's addresses answer the peer within that many seconds; the time."""
        e, t0 = self.env, time.monotonic()
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):
            T.wait_until(lambda: self.ns("PEER", "ping", "-c", "1", "-W", "0.3", addr,
                                         check=False).returncode == 0,
                         timeout=within - (time.monotonic() - t0), interval=0.05,
                         what=f"{addr} answering the peer")
        return time.monotonic() - t0

    def test_admin_config_kept_across_tap_deletion_and_kill_9(self):
        """Without exception.host, what an administrator puts on the TAP by hand (addresses,
        static and boot routes, the MTU) is kept in a state file as it changes, and given back
        when the TAP is deleted and when the daemon is killed with SIGKILL and started again:
        ping answers within 2 s. What the kernel or a manager makes (an address with a
        lifetime, link-local ones, a route of proto ra or kernel) is not kept. With
        exception.host "manager", nothing is restored."""
        e = self.env
        h = lambda *cmd, **kw: self.ns("HOST", *cmd, **kw)  # noqa: E731
        h("ip", "route", "add", "10.98.0.0/24", "via", e["TB_PEER4"], "dev", "wire0", "metric", "7")
        h("ip", "-6", "route", "add", "fd98::/64", "via", e["TB_PEER6"], "dev", "wire0")
        h("ip", "-6", "route", "add", "fd97::/64", "dev", "wire0", "proto", "ra")
        h("ip", "addr", "add", "fd99::77/64", "dev", "wire0", "valid_lft", "300",
          "preferred_lft", "300", "nodad")
        h("ip", "link", "set", "wire0", "mtu", "1400")
        state = os.path.join(self.w, f"host.{self.prefix}.wire0.json")

        def kept():
            try:
                with open(state) as f:
                    j = json.load(f)
            except (OSError, ValueError):
                return None
            return j if j["host"]["mtu"] == 1400 and len(j["host"]["routes"]) == 2 else None
        j = T.wait_until(kept, what="the state file with the admin's changes")
        self.assertEqual(j, {"port": "wire0", "up": True, "host": {
            "mtu": 1400, "addresses": [f"{e['TB_HOST4']}/24", f"{e['TB_HOST6']}/64"],
            "routes": [{"dst": "10.98.0.0/24", "gateway": e["TB_PEER4"], "metric": 7},
                       {"dst": "fd98::/64", "gateway": e["TB_PEER6"], "metric": 1024}]}})

        def restored():
            link = h("ip", "link", "show", "wire0").stdout
            self.assertIn("mtu 1400", link)
            self.assertRegex(link, r"<[^>]*\bUP\b")
            self.assertIn(f"via {e['TB_PEER4']} dev wire0", h("ip", "route", "show",
                                                             "10.98.0.0/24").stdout)
            self.assertIn(f"via {e['TB_PEER6']} dev wire0", h("ip", "-6", "route", "show",
                                                             "fd98::/64").stdout)
            self.assertEqual(h("ip", "-6", "route", "show", "fd97::/64").stdout, "")
            self.assertNotIn("fd99::77", h("ip", "addr", "show", "wire0").stdout)

        # The TAP deleted: made again, and given back what was kept.
        h("ip", "link", "del", "wire0")
        T.wait_until(lambda: self.ncctl("show port stats wire0")[0]["exception"]["remade"] == 1,
                     what="the TAP made again")
        took = self.ping_back(2.0)
        print(f"the host answers again {took:.2f} s after its TAP was made again",
              file=sys.stderr)
        restored()
        self.assertIn(f"port wire0: the host's configuration of its TAP (kept in {state}): "
                      "2 addresses, 2 routes, mtu 1400, up", self.daemon.output())
        # SIGKILL: the TAP goes with the daemon; a new one gives it back.
        self.daemon.kill()
        T.wait_until(lambda: h("ip", "link", "show", "wire0", check=False).returncode != 0,
                     what="the TAP gone with the daemon")
        self.daemon.start()
        took = self.ping_back(2.0)
        print(f"the host answers again {took:.2f} s after netchanneld restarted from SIGKILL",
              file=sys.stderr)
        restored()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        self.assertTrue(os.path.exists(state), "a clean stop keeps the state for the next start")
        # A network manager owns the TAP: nothing restored, the file left alone.
        with open(self.daemon.config) as f:
            cfg = json.load(f)
        cfg["ports"][0]["exception"] = {"host": "manager"}
        self.daemon = T.Daemon(cfg, self.w, self.prefix, netns=e["TB_HOST_NS"])
        self.daemon.start()
        self.assertIn('port wire0: exception.host is "manager": the TAP\'s addresses, routes and '
                      'MTU are left to it, neither kept nor restored', self.daemon.output())
        self.assertNotIn(e["TB_HOST4"], h("ip", "addr", "show", "wire0").stdout)
        h("ip", "addr", "add", "10.99.0.9/24", "dev", "wire0")
        # Kept, it would be written 0.1 s after the change settles: half a second of nothing.
        time.sleep(0.5)
        with open(state) as f:
            self.assertEqual(json.load(f), j)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_host_config_survives_restart(self):
        """exception.host: the daemon gives the TAP it makes the host's addresses, routes and
        MTU, so that the host is reachable through it without anyone re-adding them, after a
        restart too; and keeps nothing of its own (no state file)."""
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        for run in range(2):
            # The TAP goes with the daemon that made it: each run starts from nothing.
            self.start_with_host(run)
            self.assertIn("port wire0: the host's configuration of its TAP (exception.host "
                          "of the config): 2 addresses, 1 routes, mtu 1400, up",
                          self.daemon.output())
            self.host_configured()
            # What the config gives is not kept besides: the admin's changes are not the config's.
            self.ns("HOST", "ip", "addr", "add", "10.99.0.9/24", "dev", "wire0")
            # Kept, it would be written 0.1 s after the change settles: half a second of nothing.
            time.sleep(0.5)
            self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
            self.assertFalse(os.path.exists(os.path.join(
                self.w, f"host.{self.prefix}_{run}.wire0.json")), "nothing kept")
            self.assertNotIn("kept the TAP's configuration", self.daemon.output())

    def test_start_says_harmless_warnings_once(self):
        """What net_tap, libbpf, libxdp and DPDK say at start on a host without TC modules or
        bpffs looks like failures and is not: the log has none of it, but one plain line
        for each condition; with netchanneld.main at debug, the originals are there too."""
        quiet = ("qdisc_create_multiq", "qdisc kind", "libbpf:", "libxdp:", "legacy socket",
                 "rte_ip_frag_table_create", "Disabling rte flow")
        notes = ("net_tap: this kernel has no multiq qdisc, so TAP devices have no rte_flow; "
                 "harmless", "net_af_xdp: no bpffs at /sys/fs/bpf, so libxdp loaded the XDP "
                 "program on its own")
        out = self.daemon.output()
        for word in quiet:
            self.assertNotIn(word, out)
        for note in notes:
            self.assertEqual(out.count(note), 1, out)
        start = out[:out.index("netchanneld: running (pid")]
        self.assertLessEqual(len(start.splitlines()), 6, start)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        with open(self.daemon.config) as f:
            cfg = json.load(f)
        cfg["eal"] = EAL + ["--log-level", "netchanneld.main:debug"]
        self.daemon = T.Daemon(cfg, self.w, f"{self.prefix}_1", netns=self.env["TB_HOST_NS"])
        self.addCleanup(T.cleanup_prefix, f"{self.prefix}_1")
        self.daemon.start()
        out = self.daemon.output()
        for word in ("qdisc_create_multiq", "libxdp: No bpffs found", "libbpf: elf: skipping"):
            self.assertIn(word, out)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_tap_deleted_is_made_again(self):
        """The TAP deleted (ip link del) under the daemon: it notices within seconds, counts
        the misses meanwhile as drop_exc_down, makes the TAP again with the host's
        configuration, says so in the log, and the host is reachable again. Set down by an
        administrator, the TAP is left down (not made again): the misses are dropped as
        drop_exc_down, the event counted, until it is set up again."""
        e = self.env
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        self.start_with_host(0)
        self.host_configured()
        self.ns("HOST", "ip", "link", "del", "wire0")
        T.wait_until(lambda: self.ncctl("show port stats wire0")[0]["exception"]["remade"] == 1,
                     what="the TAP made again")
        self.host_configured()
        self.ns("HOST", "ip", "link", "set", "wire0", "down")
        T.wait_until(lambda: self.ncctl("show port stats wire0")[0]["exception"]["admin_down"],
                     what="the daemon seeing the TAP set down")
        drops = self.ncctl("show port stats wire0")[0]["drop_exc_down"]
        self.ns("PEER", "ping", "-c", "3", "-i", "0.2", "-W", "1", e["TB_HOST4"], check=False)
        exc = self.ncctl("show port stats wire0")[0]
        self.assertGreater(exc["drop_exc_down"], drops, "the misses, dropped and counted")
        self.assertEqual(exc["exception"]["remade"], 1, "left down, not made again")
        self.assertNotRegex(self.ns("HOST", "ip", "link", "show", "wire0").stdout,
                            r"<[^>]*\bUP\b", "the daemon leaves it down")
        self.ns("HOST", "ip", "link", "set", "wire0", "up")
        T.wait_until(lambda: not self.ncctl("show port stats wire0")[0]["exception"]
                     ["admin_down"], what="the daemon seeing the TAP up again")
        self.ns("PEER", "ping", "-c", "1", "-W", "5", e["TB_HOST4"])
        out = self.daemon.output()
        self.assertIn("port wire0: its exception device net_tap_wire0,iface=wire0 is gone: "
                      "making it again", out)
        self.assertIn("port wire0: its exception interface was set down by an administrator: "
                      "misses are dropped (drop_exc_down) until it is up again", out)
        self.assertIn("port wire0: its exception device is back (made again 1 times)", out)
        # Each TAP made again says net_tap's multiq warnings again: kept out, said once.
        self.assertEqual(out.count("net_tap: this kernel has no multiq qdisc"), 1, out)
        self.assertNotIn("qdisc_create_multiq", out)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        port = self.daemon.read_stats()["ports"][0]
        self.assertEqual(port["exception"], {"down": False, "remade": 1, "admin_down": False,
                                             "admin_downs": 1})
        self.assertEqual(port["drop_exc_full"], 0, port)
        self.assertTrue(T.accounting_ok(port), port)

    def test_second_daemon_leaves_the_first_alone(self):
        """A second netchanneld on the same interface fails at start (exit 1), naming the
        first, before it touches the interface: the first keeps its XDP program, and the
        host stays reachable through it. The first's clean exit removes its lock file."""
        e = self.env
        self.ns("PEER", "ping", "-c", "1", "-W", "2", e["TB_HOST4"])
        with open(self.daemon.config) as f:
            cfg = json.load(f)
        cfg["control"]["socket"] = os.path.join(self.w, "second.sock")
        with open(os.path.join(self.w, "second.json"), "w") as f:
            json.dump(cfg, f)
        r = subprocess.run(["ip", "netns", "exec", e["TB_HOST_NS"], T.DAEMON, "-c",
                            os.path.join(self.w, "second.json"), "--", "--file-prefix",
                            self.prefix + "_2"], capture_output=True, text=True, timeout=60)
        self.addCleanup(T.cleanup_prefix, self.prefix + "_2")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f"port wire0: device net_af_xdp0,iface=veth0 is in use by netchanneld pid "
                      f"{self.daemon.proc.pid}", r.stderr)
        rx = self.ncctl("show port stats wire0")[0]["rx"]
        self.ns("PEER", "ping", "-c", "2", "-W", "2", e["TB_HOST4"])
        self.assertGreater(self.ncctl("show port stats wire0")[0]["rx"], rx)
        lock = re.search(r"\((/run/lock/netchanneld/[^)]+\.lock)\)", r.stderr).group(1)
        self.assertTrue(os.path.exists(lock), "the second left the first's lock file")
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        self.assertFalse(os.path.exists(lock), f"{lock} is left after a clean exit")

    def test_nat_tcp_both_ways(self):
        """A peer connects to a NATed address:port on the host and reaches a server on
        another address of the peer's host: a real TCP connection, IPv4 and IPv6, through
        the translation in both directions (the channel made with the CLI, its next hop
        from the kernel's neighbour table); the counters show both directions."""
        self.ns("PEER", "ip", "addr", "add", "10.99.0.5/24", "dev", "eth0")
        self.ns("PEER", "ip", "addr", "add", "fd99::5/64", "dev", "eth0", "nodad")
        for addr, port in (("10.99.0.5", 9000), ("fd99::5", 9001)):
            self.bg("PEER", "/usr/bin/python3", "-c", PEER_TCP_SERVER, addr, str(port),
                    ready="listening")
        # The translation: the host's address and port 8080 to the server; the source
        # becomes the host's, so the server answers through netchanneld.
        for name, vip, target, tport in (("lb4", "10.99.0.1", "10.99.0.5", 9000),
                                         ("lb6", "fd99::1", "fd99::5", 9001)):
            ch = self.ncctl(f"channel create {name} proto tcp dst {vip} dport 8080 action nat "
                            f"dst {target} dport {tport} src {vip} reverse")
            self.assertEqual(ch["action"], "nat")
            self.assertEqual(ch["nat"], {"dst": target, "dport": tport, "src": vip,
                                         "port": "in", "reverse": True})
        for vip, target in (("10.99.0.1", "10.99.0.5"), ("fd99::1", "fd99::5")):
            r = self.ns("PEER", "/usr/bin/python3", "-c", PEER_TCP_CLIENT, vip, "8080", "20",
                        timeout=60)
            out = json.loads(r.stdout)
            # The client sees the NATed address; the server saw the host's.
            self.assertEqual(out["peer"], [vip, 8080])
            self.assertEqual(out["got"], [f"server {target} from {vip}: line {i}"
                                          for i in range(20)])
        for name in ("lb4", "lb6"):
            c = self.ncctl(f"show channel {name}")["counters"]
            # SYN, 20 lines and FIN..., each way; the first SYN may wait for the neighbour.
            self.assertGreaterEqual(c["nat"], 22, c)
            self.assertGreaterEqual(c["nat_reverse"], 22, c)
            self.assertEqual(c["nat_flows"], 1, c)
            self.assertEqual(c["nat_drop_conflict"] + c["nat_drop_table_full"] +
                             c["nat_drop_invalid"] + c["nat_drop_tx"], 0, c)
        nat = self.ncctl("show nat")
        self.assertEqual(nat["used"], 2)
        self.assertEqual(nat["reverse_channels"], 2)
        # Destroying a channel removes its mappings at once.
        self.ncctl("channel destroy lb4")
        nat = self.ncctl("show nat")
        self.assertEqual((nat["used"], nat["gone"]), (1, 1))
        port = self.ncctl("show port stats wire0")[0]
        self.assertTrue(T.accounting_ok(port), port)

    def test_nat_of_fragmented_datagrams(self):
        """3,000-byte UDP datagrams through a NAT channel with reverse, IPv4 and IPv6: each
        arrives in fragments, is translated whole, and leaves in fragments of the port's MTU;
        the server's answer, fragmented too, is translated back and reaches the peer whole."""
        self.ns("PEER", "ip", "addr", "add", "10.99.0.5/24", "dev", "eth0")
        self.ns("PEER", "ip", "addr", "add", "fd99::5/64", "dev", "eth0", "nodad")
        for name, vip, target in (("u4", "10.99.0.1", "10.99.0.5"), ("u6", "fd99::1", "fd99::5")):
            self.bg("PEER", "/usr/bin/python3", "-c", PEER_UDP_SERVER, target, "9002",
                    ready="listening")
            self.ncctl(f"channel create {name} proto udp dst {vip} dport 8081 action nat "
                       f"dst {target} dport 9002 src {vip} reverse")
        for name, vip in (("u4", "10.99.0.1"), ("u6", "fd99::1")):
            got = json.loads(self.ns("PEER", "/usr/bin/python3", "-c", PEER_BIG, vip, "3000",
                                     "8081", "8081").stdout)
            self.assertEqual(got["8081"]["answer"], "server", vip)
            c = self.ncctl(f"show channel {name}")["counters"]
            # Two datagrams each way; the first may have waited for the neighbour.
            self.assertEqual((c["nat"], c["nat_reverse"]), (2, 2), c)
        port = self.frag_counters()
        self.assertEqual((port["frag_in"], port["frag_datagrams"]), (24, 8), port)
        self.assertEqual(port["frag_out"], 24, "every datagram left in 3 fragments")
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def capture(self, *args):
        """ncctl --json capture ARGS, in the background (it ends at its count)."""
        p = subprocess.Popen([NCCTL, "-s", self.sock, "--json", "capture"] + list(args),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        # Running once the daemon lists it: only then is the traffic sent.
        for _ in range(100):
            if p.poll() is not None or len(self.ncctl("show capture")) > 0:
                break
            time.sleep(0.05)
        return p

    def finished(self, p):
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, out + err)
        return json.loads(out.splitlines()[-1])

    def send_udp(self, port, payloads):
        self.ns("PEER", "/usr/bin/python3", "-c",
                "import socket, sys\n"
                "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                "for p in sys.argv[3:]: s.sendto(p.encode(), (sys.argv[1], int(sys.argv[2])))",
                self.env["TB_HOST4"], str(port), *payloads)

    def test_capture_port_and_channel(self):
        """ncctl capture: the daemon writes pcapng itself (net_af_xdp, no secondary process).
        A port capture with a pcap filter holds exactly the datagrams sent to the filtered
        port, byte for byte, with times of now; it sees both directions (the peer's echo
        requests and the kernel's replies, sent through the TAP); a channel capture holds
        that channel's packets and nothing else."""
        from scapy.all import ICMP, UDP, Ether, rdpcap
        e = self.env
        peer_mac = self.ns("PEER", "cat", "/sys/class/net/eth0/address").stdout.strip()
        f1 = os.path.join(self.w, "port.pcapng")
        p = self.capture("port", "wire0", "-c", "10", "-w", f1, "udp", "and", "dst", "port",
                         "5555")
        sent = [f"cap {i}" for i in range(10)]
        self.send_udp(7777, ["not me"] * 3)
        self.send_udp(5555, sent)
        self.ns("PEER", "ping", "-c", "2", "-i", "0.2", e["TB_HOST4"])
        got = self.finished(p)
        self.assertEqual((got["packets"], got["what"], got["filter"]),
                         (10, "port wire0", "udp and dst port 5555"), got)
        pkts = rdpcap(f1)
        self.assertEqual([bytes(x[UDP].payload).decode() for x in pkts], sent)
        self.assertTrue(all(x[UDP].dport == 5555 and x[Ether].src == peer_mac for x in pkts))
        self.assertLess(abs(time.time() - float(pkts[0].time)), 60, "packet times are now's")
        # Both directions: what the port receives, and what it sends (the kernel's replies).
        f2 = os.path.join(self.w, "icmp.pcapng")
        p = self.capture("port", "0", "-c", "4", "-w", f2, "icmp")
        self.ns("PEER", "ping", "-c", "2", "-i", "0.2", e["TB_HOST4"])
        self.assertEqual(self.finished(p)["packets"], 4)
        types = sorted(x[ICMP].type for x in rdpcap(f2))
        self.assertEqual(types, [0, 0, 8, 8], "two echo requests in, two replies out")
        # A channel's packets, and only them.
        self.ncctl("channel create u7 proto udp dport 7")
        f3 = os.path.join(self.w, "chan.pcapng")
        p = self.capture("channel", "u7", "-c", "5", "-w", f3)
        self.send_udp(5555, ["other"] * 5)
        self.send_udp(7, [f"seven {i}" for i in range(5)])
        self.assertEqual(self.finished(p)["packets"], 5)
        self.assertEqual([bytes(x[UDP].payload).decode() for x in rdpcap(f3)],
                         [f"seven {i}" for i in range(5)])
        self.assertEqual(self.ncctl("show capture"), [])
        self.assertIn("capture 0 (channel u7) ended: 5 packets written, 0 lost",
                      self.daemon.output())
        port = self.ncctl("show port stats wire0")[0]
        self.assertTrue(T.accounting_ok(port), port)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_capture_faults_and_refusals(self):
        """What a capture refuses says why (a bad filter, a port that is not there, a fifth
        capture, the local prompt's missing pipe); a reader killed mid-capture ends it at
        once; a reader that stops reading costs copies (counted as lost), not the port's
        traffic, and the daemon still exits at once on SIGTERM."""
        e = self.env

        def refused(*args):
            r = subprocess.run([NCCTL, "-s", self.sock, "capture"] + list(args[:2]) +
                               ["-w", os.path.join(self.w, "no.pcapng")] + list(args[2:]),
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.w, "no.pcapng")))
            return r.stderr

        self.assertIn("filter 'udp port': can't parse filter expression: syntax error",
                      refused("port", "wire0", "udp", "port"))
        self.assertIn("no port 'wire9'", refused("port", "wire9"))
        self.assertIn("no channel 'nope'", refused("channel", "nope"))
        r = subprocess.run([NCCTL, "-s", self.sock, "-c", "capture port wire0"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("run it as 'ncctl capture port|channel NAME", r.stderr)
        self.assertEqual(self.ncctl("show capture"), [], "nothing was started")
        many = [self.capture("port", "wire0", "-c", "1000000", "-w",
                             os.path.join(self.w, f"c{i}.pcapng")) for i in range(4)]
        for _ in range(100):
            if len(self.ncctl("show capture")) == 4:
                break
            time.sleep(0.05)
        self.assertIn("4 captures are running already", refused("port", "wire0"))
        # Readers killed: each capture ends, and its slot is free again.
        for p in many:
            p.kill()
            p.wait()
        for _ in range(100):
            if self.ncctl("show capture") == []:
                break
            time.sleep(0.05)
        self.assertEqual(self.ncctl("show capture"), [])
        r = subprocess.run([NCCTL, "-s", self.sock, "-c", "show capture"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.stdout, "none\n", "an empty list says so")
        # A reader that stops: the pipe fills, copies are lost and counted; ping still works.
        p = self.capture("port", "wire0", "-c", "1000000", "-w", os.path.join(self.w, "s.pcapng"))
        p.send_signal(signal.SIGSTOP)
        self.addCleanup(lambda: p.poll() is None and p.send_signal(signal.SIGCONT))
        self.ns("PEER", "ping", "-f", "-c", "5000", "-s", "1400", e["TB_HOST4"], timeout=60)
        cap = self.ncctl("show capture")[0]
        self.assertGreater(cap["lost"], 0, cap)
        self.assertGreaterEqual(cap["taken"], cap["written"] + cap["lost"], cap)
        r = self.ns("PEER", "ping", "-c", "3", "-i", "0.2", e["TB_HOST4"])
        self.assertIn("3 received", r.stdout)
        t0 = time.monotonic()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        self.assertLess(time.monotonic() - t0, 10)
        self.assertRegex(self.daemon.output(), r"capture 0 \(port wire0\) ended: \d+ packets "
                         r"written, [1-9]\d* lost")
        p.send_signal(signal.SIGCONT)
        p.communicate(timeout=30)

    def test_dumpcap_on_af_xdp(self):
        """dpdk-dumpcap attaches to the daemon on net_af_xdp (a secondary process, rte_pdump)
        and captures the port's frames, both ways, through its own filter, bounded by -c."""
        from scapy.all import ICMP, Ether, rdpcap
        out = os.path.join(self.w, "dumpcap.pcapng")
        t0 = time.monotonic()
        p = subprocess.Popen(["timeout", "-k", "5", "60", "dpdk-dumpcap", "--file-prefix",
                              self.prefix, "-i", "0", "-c", "4", "-f", "icmp", "-w", out],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        # dumpcap says "Capturing on" before its packets flow (it fills a pool of 2,048
        # 256 KiB buffers first): ping until it has its count.
        ping = self.bg("PEER", "ping", "-c", "200", "-i", "0.1", self.env["TB_HOST4"])
        rest = p.communicate(timeout=90)[0]
        print(f"dpdk-dumpcap -c 4: done after {time.monotonic() - t0:.1f} s", file=sys.stderr)
        ping.terminate()
        ping.communicate(timeout=10)
        self.assertEqual(p.returncode, 0, rest)
        pkts = rdpcap(out)
        self.assertGreaterEqual(len(pkts), 4, "-c stops after a burst that reaches it")
        peer_mac = self.ns("PEER", "cat", "/sys/class/net/eth0/address").stdout.strip()
        self.assertEqual({(x[Ether].src == peer_mac, x[ICMP].type) for x in pkts},
                         {(True, 8), (False, 0)}, "the peer's requests and the replies")
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

if __name__ == "__main__":
    unittest.main(verbosity=2)
