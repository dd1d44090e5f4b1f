#!/usr/bin/env python3
"""netchanneld's XDP program for fail-open net_af_xdp ports (bpf/ncd_xdp.c), on a veth pair
with the real kernel on both sides, attached as a daemon leaves it when it is gone: claims in
its map, and no AF_XDP socket bound. Everything, claimed or not, must still reach the kernel;
the program's counters say which packets it would have given the daemon."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402

OBJ = os.path.join(T.BUILD, "bpf/ncd_xdp.o")
TOOL = os.path.join(T.BUILD, "tests/integration/nc_xdp_claims")
PY = "/usr/bin/python3"

# In the receiving namespace: UDP sockets on the ports given ("6/PORT": IPv6; "6x/PORT": IPv6
# with a destination options header), each counting datagrams (and
# their bytes) until it has the number asked for or 10 s pass; then one JSON line.
RECEIVER = r"""
import json, select, socket, sys, time
want = int(sys.argv[1])
socks = {}
for p in sys.argv[2:]:
    v6 = p.startswith("6")
    s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("fd00:98::1" if v6 else "10.98.0.1", int(p.split("/")[-1])))
    socks[s] = p
got = {p: [0, 0] for p in sys.argv[2:]}
print("ready", flush=True)
end = time.time() + 10
while time.time() < end and any(n < want for n, _ in got.values()):
    r, _, _ = select.select(list(socks), [], [], 0.1)
    for s in r:
        data = s.recv(65535)
        got[socks[s]][0] += 1
        got[socks[s]][1] += len(data)
print(json.dumps(got), flush=True)
"""

SENDER = r"""
import socket, sys
for p in sys.argv[3:]:
    v6 = p.startswith("6")
    s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
    if p.startswith("6x/"):
        # A destination options header (PadN) before UDP: the program walks past it.
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_DSTOPTS, bytes([0, 0, 1, 4, 0, 0, 0, 0]))
    for _ in range(int(sys.argv[1])):
        s.sendto(b"x" * int(sys.argv[2]), ("fd00:98::1" if v6 else "10.98.0.1",
                                           int(p.split("/")[-1])))
"""


class XdpFailOpen(unittest.TestCase):
    def setUp(self):
        self.ns = [f"ncdx{os.getpid()}a", f"ncdx{os.getpid()}b"]
        for n in self.ns:
            subprocess.run(["ip", "netns", "add", n], check=True)
        self.addCleanup(lambda: [subprocess.run(["ip", "netns", "del", n]) for n in self.ns])
        a, b = self.ns
        for cmd in (["ip", "link", "add", "xa", "netns", a, "type", "veth", "peer", "name",
                     "xb", "netns", b],
                    ["ip", "-n", a, "addr", "add", "10.98.0.1/24", "dev", "xa"],
                    ["ip", "-n", b, "addr", "add", "10.98.0.2/24", "dev", "xb"],
                    ["ip", "-n", a, "addr", "add", "fd00:98::1/64", "dev", "xa", "nodad"],
                    ["ip", "-n", b, "addr", "add", "fd00:98::2/64", "dev", "xb", "nodad"],
                    ["ip", "-n", a, "link", "set", "xa", "up"],
                    ["ip", "-n", b, "link", "set", "xb", "up"]):
            subprocess.run(cmd, check=True)
        # Attached as net_af_xdp's xdp_prog= leaves it once its process is gone.
        r = subprocess.run(["ip", "-n", a, "link", "set", "dev", "xa", "xdpgeneric", "obj", OBJ,
                            "sec", "xdp"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def tool(self, *args):
        r = subprocess.run(["ip", "netns", "exec", self.ns[0], TOOL, "xa"] + list(args),
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def stats(self):
        return json.loads(self.tool("stats"))

    def exchange(self, count, size, ports):
        """count datagrams of size bytes to each port, from the peer; what the kernel's
        sockets got, by port."""
        rx = subprocess.Popen(["ip", "netns", "exec", self.ns[0], PY, "-c", RECEIVER,
                               str(count)] + [str(p) for p in ports],
                              stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: rx.poll() is None and rx.kill())
        self.assertEqual(rx.stdout.readline().strip(), "ready")
        subprocess.run(["ip", "netns", "exec", self.ns[1], PY, "-c", SENDER, str(count),
                        str(size)] + [str(p) for p in ports], check=True, timeout=30)
        out = json.loads(rx.stdout.readline())
        rx.wait(15)
        rx.stdout.close()
        return {p if p.startswith("6") else int(p): v for p, v in out.items()}

    def test_claimed_traffic_reaches_the_kernel_without_a_socket(self):
        """UDP to a claimed port and to another, ping, and a datagram in fragments, in IPv4 and
        IPv6: all of it
        reaches the kernel while no socket is bound, the claimed port's and the fragments
        counted as no_socket (what the daemon would have had), the rest as pass. Released,
        the port's packets pass again; an unknown interface or a program that is not
        netchanneld's is said. Taken off as a new daemon takes a dead one's off, it leaves
        the kernel everything."""
        self.tool("claim", "udp", "5000")
        s0 = self.stats()
        got = self.exchange(20, 64, [5000, 5001])
        self.assertEqual(got, {5000: [20, 1280], 5001: [20, 1280]})
        r = subprocess.run(["ip", "netns", "exec", self.ns[1], "ping", "-c", "3", "-i", "0.2",
                            "-W", "2", "10.98.0.1"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout)
        s1 = self.stats()
        self.assertEqual(s1["no_socket"] - s0["no_socket"], 20)
        self.assertEqual(s1["claimed"], 0)
        self.assertGreaterEqual(s1["pass"] - s0["pass"], 20 + 3)
        # A datagram in three fragments, to the unclaimed port: with UDP claimed, fragments
        # are the daemon's to reassemble; without it, the kernel reassembles them.
        got = self.exchange(1, 3000, [5001])
        self.assertEqual(got, {5001: [1, 3000]})
        s2 = self.stats()
        self.assertEqual(s2["no_socket"] - s1["no_socket"], 3)
        # Claimed twice, released once: still claimed; released again: passed.
        self.tool("claim", "udp", "5000")
        self.tool("release", "udp", "5000")
        self.exchange(5, 64, [5000])
        s3 = self.stats()
        self.assertEqual(s3["no_socket"] - s2["no_socket"], 5)
        self.tool("release", "udp", "5000")
        self.assertEqual(self.exchange(5, 64, [5000]), {5000: [5, 320]})
        s4 = self.stats()
        self.assertEqual(s4["no_socket"], s3["no_socket"])
        self.assertGreaterEqual(s4["pass"] - s3["pass"], 5)
        # A range claims its ports, one by one.
        self.tool("claim", "udp", "6000-6002")
        self.exchange(2, 64, [6001])
        self.assertEqual(self.stats()["no_socket"] - s4["no_socket"], 2)
        # IPv6: the claim of either family covers it; an unclaimed port passes.
        self.tool("claim", "udp", "5002")
        self.assertEqual(self.exchange(4, 64, ["6/5002", "6/5003"]),
                         {"6/5002": [4, 256], "6/5003": [4, 256]})
        s5 = self.stats()
        self.assertEqual(s5["no_socket"] - s4["no_socket"], 2 + 4)
        # Past an extension header, the same: the kernel's own (MLD's hop-by-hop) pass.
        self.assertEqual(self.exchange(3, 64, ["6x/5002", "6x/5003"]),
                         {"6x/5002": [3, 192], "6x/5003": [3, 192]})
        s6 = self.stats()
        self.assertEqual(s6["no_socket"] - s5["no_socket"], 3)
        # Errors name what failed.
        r = subprocess.run(["ip", "netns", "exec", self.ns[0], TOOL, "nosuch0", "stats"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("nosuch0", r.stderr)
        r = subprocess.run(["ip", "netns", "exec", self.ns[1], TOOL, "xb", "stats"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("the XDP program's maps on xb", r.stderr)
        # What a new daemon does before its port starts: a dead one's program taken off
        # (net_af_xdp will not replace it), the host online all along; none left, nothing
        # to do.
        self.assertEqual(self.tool("detach").strip(), "detached")
        r = subprocess.run(["ip", "-n", self.ns[0], "link", "show", "xa"], capture_output=True,
                           text=True, check=True)
        self.assertNotIn("xdp", r.stdout)
        self.assertEqual(self.tool("detach").strip(), "none")
        self.assertEqual(self.exchange(3, 64, [5000]), {5000: [3, 192]})


if __name__ == "__main__":
    unittest.main()
