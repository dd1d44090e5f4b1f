#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Clients and daemons of other versions: binaries built against libnetchannel 0.1, a client of
the previous control protocol (4, commit 03b9eb9's) on this daemon, and this libnetchannel on
a daemon of the previous protocol (a stand-in built from its message definitions,
nc_wire_v4.py)."""
import errno
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
import nc_wire as W  # noqa: E402
import nc_wire_v4 as V  # noqa: E402
from test_datapath import EAL  # noqa: E402
from test_tx import echo_of, scapy  # noqa: E402

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

# A client of control protocol 4 (nc_wire_v4.Client): HELLO, its region of one part, a channel
# for udp 5000 that may transmit; ten frames off its ring (their buffers given back), then
# argv[3] (hex) sent, and its counters once the daemon counts it. One line of JSON, then it
# holds the connection until a line comes on stdin.
OLD_CLIENT = """
import json, os, sys, time
sys.path.insert(0, sys.argv[2])
import nc_wire_v4 as V
c = V.Client(sys.argv[1])
st, body, fds = c.hello()
out = {"hello": st, "reply_len": len(body), "fds": len(fds)}
ver, _, _, _, _, _, size = V.HELLO_REPLY.unpack(body)
g = V.Region(fds[0], size)
out.update(version=ver, layout=g.version, size_ok=g.size == size == os.fstat(fds[0]).st_size)
st, body, _ = c.call(V.CREATE, V.CREATE_BODY.pack(b"old", V.udp_rule(5000), 0, 0, 0, 0,
                                                   V.CREATE_F_TX, 0, 0))
cid, _, gen, _, _, _, ring, flags, _, _ = V.CHANNEL.unpack(body)
out.update(create=st, flags=flags)
r, frames, deadline = g.rx_ring(ring), [], time.time() + 10
while len(frames) < 10 and time.time() < deadline:
    d = g.take(r, g.rx_size) if g.u32(r + V.RING_CHANNEL) == cid else None
    if d is None:
        time.sleep(0.01)
        continue
    frames.append(g.frame(d[0], d[1]).hex())
    g.put(g.free_off, g.free_size, (d[0], 0, 0, 0))
out["frames"] = frames
echo = bytes.fromhex(sys.argv[3])
g.m[g.tx_buf_off:g.tx_buf_off + len(echo)] = echo
g.put(g.tx_off, g.tx_size, (g.tx_buf_off, len(echo), cid, 0))
while time.time() < deadline:
    st, body, _ = c.call(V.CHAN_STATS, V.ID.pack(cid))
    stats = V.STATS_BODY.unpack(body)
    if stats[6] >= 1:
        break
    time.sleep(0.02)
out.update(stats_len=len(body), hits=stats[0], tx=stats[6], tx_spoofed=stats[9])
print(json.dumps(out), flush=True)
sys.stdin.readline()
print("destroy", c.call(V.DESTROY, V.ID.pack(cid))[0], flush=True)
"""

# A hostile client of control protocol 4: its region of one part is all writable, so it
# writes random bytes all over it (header, rings, buffers) and punches holes in it, for
# argv[3] seconds, while its channel's packets come; then it says how many holes it punched.
HOSTILE_OLD = """
import ctypes, os, random, sys, time
sys.path.insert(0, sys.argv[2])
import nc_wire_v4 as V
libc = ctypes.CDLL(None, use_errno=True)
c = V.Client(sys.argv[1])
st, body, fds = c.hello()
size = V.HELLO_REPLY.unpack(body)[6]
g = V.Region(fds[0], size)
c.call(V.CREATE, V.CREATE_BODY.pack(b"bad", V.udp_rule(5001), 0, 0, 0, 0, V.CREATE_F_TX, 0, 0))
rnd, holes, end = random.Random(7), 0, time.time() + float(sys.argv[3])
while time.time() < end:
    for _ in range(200):
        off = rnd.randrange(size - 8)
        g.m[off:off + 8] = rnd.randbytes(8)
    off = rnd.randrange(size // 4096) * 4096
    holes += libc.fallocate(fds[0], 3, ctypes.c_long(off), ctypes.c_long(4096)) == 0
print("holes", holes, flush=True)
"""

# This build's Python package (libnetchannel) against a daemon: what HELLO agreed, one frame
# received and sent back prefixed, and the counters. One line of JSON.
NEW_CLIENT = """
import json, netchannel, sys
with netchannel.Client(sys.argv[1]) as c:
    info = c.info()
    ch = c.create("c", 5000, tx=True)
    f = ch.recv(timeout=5)
    ch.send(b"reply:" + f)
    meter = []
    for call in (lambda: c.create("m", 5001, meter={"pps": 10, "burst": 1}),
                 lambda: ch.set_meter({"pps": 10, "burst": 1}),
                 lambda: c.create("g", 5001, shared=True)):
        try:
            call()
        except netchannel.NetchannelError as e:
            meter.append([e.errno, e.reason])
    print(json.dumps({"info": info, "frame": f.hex(), "stats": ch.stats(), "meter": meter}),
          flush=True)
"""


class Compat(T.DaemonCase):
    def setUp(self):
        super().setUp()
        os.chmod(self.w, 0o755)
        self.sock = os.path.join(self.w, "ncd.sock")
        # uid 65534 cannot be relied on to reach the build tree: its copies go here.
        for exe in ("tests/integration/nc_abi01_client", "lib/netchannel/libnetchannel.so.0"):
            shutil.copy(os.path.join(T.BUILD, exe), self.w)

    def start(self, dports):
        """A daemon whose wire brings, for ever, a UDP datagram to each of dports."""
        s = scapy()
        frames = [bytes(s.Ether(src="02:00:00:00:00:02", dst=T.PCAP_MAC) /
                        s.IP(src="203.0.113.1", dst="192.0.2.1") /
                        s.UDP(sport=2000, dport=d) / s.Raw(b"compat")) for d in dports]
        T.write_pcap(os.path.join(self.w, "in.pcap"), frames)
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0",
                          "device": f"net_pcap0,rx_pcap={self.w}/in.pcap,"
                                    f"tx_pcap={self.w}/tx.pcap,infinite_rx=1",
                          "exception": {"device": "net_null1,no-rx=1"}}],
               "workers": [{"lcore": 1}],
               "control": {"socket": self.sock, "group": "nogroup", "mode": "0660",
                           "allow": [{"uid": 0}, {"uid": 65534, "dport": "5000-5001"}]}}
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        self.daemon.start()

    def nobody(self, *args):
        p = subprocess.Popen(NOBODY + [os.path.join(self.w, args[0])] + list(args[1:]),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=dict(os.environ, LD_LIBRARY_PATH=self.w))
        self.procs.append(p)
        return p

    def test_binary_of_0_1(self):
        """A binary linked against 0.1 (its structs, its symbol versions) creates a channel
        with 0.1's rule and options, receives, and reads 0.1's counters: the library reads
        and writes no byte past them (the poison after each is untouched, and not taken for
        0.1's missing NAT pointer)."""
        exe = os.path.join(self.w, "nc_abi01_client")
        dyn = subprocess.run(["objdump", "-T", exe], capture_output=True, text=True,
                             check=True).stdout
        for call in ("nc_channel_create", "nc_channel_stats", "nc_rule_flow"):
            self.assertRegex(dyn, rf"\(NETCHANNEL_0\.1\)\s+{call}\n", call)
        self.start([5000])
        p = self.nobody("nc_abi01_client", self.sock, "5000", "100")
        out = self.finish(p)
        self.assertEqual(p.returncode, 0, out)
        words = out.split("abi01 ", 1)[1].split()
        got = dict(zip(words[::2], words[1::2]))
        self.assertEqual((got["received"], got["guards"]), ("100", "intact"), out)
        self.assertGreaterEqual(int(got["hits"]), 100, out)
        self.assertGreaterEqual(int(got["delivered"]), 100, out)
        self.assertLessEqual(int(got["rx_count"]), 64, out)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_old_client_on_this_daemon(self):
        """A client of control protocol 4, as uid 65534, on this daemon: HELLO agrees on 4,
        its reply is version 4's (120 bytes) with one descriptor, a region of layout 1 (one
        part, writable, no hugepages); its channel delivers, takes its buffers back, and
        transmits what it sends; its counters come as version 4's 128 bytes. show clients
        says which protocol it speaks."""
        s = scapy()
        frame = bytes(s.Ether(src="02:00:00:00:00:02", dst=T.PCAP_MAC) /
                      s.IP(src="203.0.113.1", dst="192.0.2.1") /
                      s.UDP(sport=2000, dport=5000) / s.Raw(b"compat"))
        self.start([5000])
        shutil.copy(V.__file__, self.w)
        p = subprocess.Popen(NOBODY + ["/usr/bin/python3", "-c", OLD_CLIENT, self.sock, self.w,
                                       echo_of(frame).hex()],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        line = p.stdout.readline()
        out = json.loads(line) if line.startswith("{") else self.fail(line + p.stdout.read())
        self.assertEqual({k: out[k] for k in ("hello", "reply_len", "fds", "version", "layout",
                                             "size_ok", "create")},
                         {"hello": 0, "reply_len": 120, "fds": 1, "version": 4, "layout": 1,
                          "size_ok": True, "create": 0}, out)
        self.assertEqual(out["frames"], [frame.hex()] * 10)
        self.assertEqual((out["stats_len"], out["tx"], out["tx_spoofed"]), (128, 1, 0), out)
        self.assertGreaterEqual(out["hits"], 10)
        c = W.Ctl(self.sock)
        self.assertEqual(c.hello(flags=W.HELLO_F_CONTROL)[0], 0)
        old = [cl for cl in c.json_cli("show clients") if cl["pid"] == p.pid]
        c.close()
        self.assertEqual(len(old), 1, old)
        self.assertEqual((old[0]["protocol"], old[0]["build"], old[0]["region"]["client_size"],
                          old[0]["region"]["hugepages"]), (4, "", 0, False), old)
        p.stdin.write("\n")
        p.stdin.flush()
        self.assertEqual(self.finish(p).strip(), "destroy 0")
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        self.assertIn(echo_of(frame), T.read_pcap(os.path.join(self.w, "tx.pcap")))

    def test_hostile_old_client(self):
        """A client of control protocol 4, as uid 65534, writes random bytes all over the
        region of one part it may write (header, rings, buffers) and punches holes in it,
        for 2 s, while its channel's packets come. The daemon runs on, its port's counters
        add up, and an honest client of version 4 gets its frames afterwards."""
        s = scapy()
        frame = bytes(s.Ether(src="02:00:00:00:00:02", dst=T.PCAP_MAC) /
                      s.IP(src="203.0.113.1", dst="192.0.2.1") /
                      s.UDP(sport=2000, dport=5000) / s.Raw(b"compat"))
        self.start([5000, 5001])
        shutil.copy(V.__file__, self.w)
        r = subprocess.run(NOBODY + ["/usr/bin/python3", "-c", HOSTILE_OLD, self.sock, self.w,
                                     "2"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertGreater(int(r.stdout.split()[1]), 0, "holes punched")
        self.assertIsNone(self.daemon.proc.poll(), "the daemon runs on")
        p = subprocess.Popen(NOBODY + ["/usr/bin/python3", "-c", OLD_CLIENT, self.sock, self.w,
                                       echo_of(frame).hex()],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        out = json.loads(p.stdout.readline())
        self.assertEqual(out["frames"], [frame.hex()] * 10)
        p.stdin.write("\n")
        p.stdin.flush()
        self.assertEqual(self.finish(p).strip(), "destroy 0")
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        port = self.daemon.read_stats()["ports"][0]
        self.assertTrue(T.accounting_ok(port), port)

    def test_zero_copy_needs_this_build(self):
        """Zero-copy (a DPDK secondary process) is for a client of the daemon's exact build:
        a version 4 HELLO, which names none, and a version 5 one naming another are refused,
        each reason naming both builds; the daemon's own build is accepted. This library on
        this daemon agrees on version 5 and a region of layout 2."""
        self.start([5000])
        build = W.Ctl(self.sock).daemon_build().decode()
        project = build.split()[1]
        old = V.Client(self.sock)
        st, reason, fds = old.hello(V.HELLO_F_ZEROCOPY)
        old.close()
        self.assertEqual((st, fds), (-errno.EPROTO, []))
        self.assertRegex(reason.decode(), rf"^zero-copy needs the daemon's build \({project} "
                         r"\(\S+\)\); the client's \(protocol 4\) is unsaid$")
        self.assertLess(len(reason), 160, "a library of version 4 keeps 159 bytes")
        c = W.Ctl(self.sock)
        self.assertEqual(c.hello(flags=W.HELLO_F_ZEROCOPY, build=b"netchanneld 0.0.1 (other)")[0],
                         -errno.EPROTO)
        self.assertEqual(c.reason, "zero-copy needs the daemon's exact build: the client is "
                         f'"netchanneld 0.0.1 (other)", the daemon "{build}"')
        c.close()
        c = W.Ctl(self.sock)
        self.assertEqual(c.hello(flags=W.HELLO_F_ZEROCOPY)[0], 0)
        c.close()
        r = subprocess.run(["/usr/bin/python3", "-c",
                            "import json, netchannel, sys\n"
                            "with netchannel.Client(sys.argv[1]) as c:\n"
                            "    print(json.dumps(c.info()))", self.sock],
                           capture_output=True, text=True, timeout=30, env=T.package_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), {
            "control_protocol": 7, "daemon_min_protocol": 4, "daemon_max_protocol": 7,
            "region_layout": 2, "daemon_build": build})
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_this_library_on_old_daemon(self):
        """This libnetchannel on a daemon of control protocol 4 (the stand-in): its HELLO is
        refused (-EINVAL, as that daemon's length check has it), it says version 4's, maps
        the region of one part, receives, transmits, and reads the counters; meters it
        refuses itself (EOPNOTSUPP, with the reason). Zero-copy is
        refused at once, saying why: that daemon cannot say its build."""
        frame = bytes(range(64))
        stats = list(range(1, 15)) + [3, 4, 99]
        old = V.OldDaemon(self.sock, frame, stats)
        old.start()
        self.addCleanup(old.join)
        self.addCleanup(old.stop.set)
        r = subprocess.run(["/usr/bin/python3", "-c", NEW_CLIENT, self.sock],
                           capture_output=True, text=True, timeout=60, env=T.package_env())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["info"], {"control_protocol": 4, "daemon_min_protocol": 4,
                                       "daemon_max_protocol": 4, "region_layout": 1,
                                       "daemon_build": ""})
        self.assertEqual(out["frame"], frame.hex())
        self.assertEqual(out["stats"], dict(zip(W.CHANNEL_STATS_FIELDS, stats)))
        # Meters are version 6's, shared channels 7's: refused here, and that daemon is asked
        # nothing.
        self.assertEqual(out["meter"], [[errno.EOPNOTSUPP, "meters need control protocol 6; "
                                         "the daemon speaks 4"]] * 2 +
                         [[errno.EOPNOTSUPP, "shared channels need control protocol 7; the "
                                             "daemon speaks 4"]])
        self.assertEqual(old.hellos, [W.HELLO_BODY.size, V.HELLO_BODY.size])
        T.wait_until(lambda: old.sent, what="the frame on the stand-in's tx ring")
        self.assertEqual(old.sent, [b"reply:" + frame])
        old.hellos.clear()
        r = subprocess.run([os.path.join(T.BUILD, "tests/integration/nc_client_test"), self.sock,
                            "create", "zc", "5000", "1", "copy"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"nc_connect: protocol error [^\n]*: zero-copy needs the "
                         r"daemon's exact build: the daemon speaks an older control protocol "
                         r"than 5 and does not say its own; this library is \"netchanneld ")
        self.assertEqual(old.hellos, [W.HELLO_BODY.size], "no fallback for zero-copy")


if __name__ == "__main__":
    import unittest
    unittest.main()
