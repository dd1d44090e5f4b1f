#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Isolated clients (include/nc_region.h): unprivileged, and unable to hurt the daemon or see
anyone else's packets, whatever they write into their region."""
import errno
import json
import os
import random
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
from test_datapath import EAL  # noqa: E402
from test_tx import echo_of, scapy  # noqa: E402
import nc_wire as W  # noqa: E402
from nc_wire import CLI_F_JSON, Ctl, STATS  # noqa: E402

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

# A client's loop over the lines on stdin (in its with block, on channel ch): for each, receive
# that many frames, then print the UDP source ports of all but the first 300 (JSON: what was
# queued before is at most a ring, 256) and how many came; or "error ERRNO" when a receive fails.
TAKE = """
    for line in sys.stdin:
        sports = []
        try:
            for _ in range(int(line)):
                f = ch.recv(timeout=10)
                if f is None:
                    break
                sports.append(int.from_bytes(f[34:36], "big"))
        except netchannel.NetchannelError as x:
            print("error", x.errno, x, flush=True)
            continue
        print(json.dumps(sorted(set(sports[300:]))), len(sports), flush=True)
"""
# A consumer of a static channel (the Python package).
CONSUMER = """
import json, netchannel, sys
with netchannel.Client(sys.argv[1]) as c:
    ch = c.attach(sys.argv[2])
    print("attached", flush=True)
""" + TAKE

# A member of a shared group (the Python package): creates channel argv[2] for udp port 6100,
# shared if argv[3] is 1, asks for its eventfd and counters, makes channel argv[4] for udp 6101
# if given, and says its id (or why not); then takes frames as CONSUMER does.
GROUP = """
import json, netchannel, sys
with netchannel.Client(sys.argv[1]) as c:
    try:
        ch = c.create(sys.argv[2], 6100, shared=sys.argv[3] == "1")
    except netchannel.NetchannelError as x:
        print("refused", x.errno, x, flush=True)
        sys.exit(0)
    ch.fileno(), ch.stats()            # a member's eventfd and counters, as the maker's
    if len(sys.argv) > 4:             # and a channel of its own, for udp 6101
        own = c.create(sys.argv[4], 6101)
    print("created", ch.id, flush=True)
""" + TAKE

# Clients beyond a shared channel's 16 consumers: attaches until one is refused.
CROWD = """
import netchannel, sys
held = []
try:
    for i in range(int(sys.argv[3])):
        c = netchannel.Client(sys.argv[1])
        held.append((c, c.attach(sys.argv[2])))
    print("all attached", len(held))
except netchannel.NetchannelError as x:
    print("refused after", len(held), x.errno, x)
"""

# A client of udp port 5000 that checks every frame it receives, byte for byte, against the
# datagram of its IP id (whole_payload()), across the buffers a frame comes in.
WHOLE = """
import netchannel, sys
sock, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def whole_payload(ident):
    return bytes((ident * 7 + k) & 0xff for k in range(size))
good = bad = 0
with netchannel.Client(sock) as c:
    ch = c.create("whole", 5000)
    print("ready", flush=True)
    for _ in range(n):
        f = ch.recv(timeout=10)
        if f is None:
            break
        ok = len(f) == 42 + size and f[42:] == whole_payload(int.from_bytes(f[18:20], "big"))
        good, bad = good + ok, bad + (not ok)
print("whole", good, "bad", bad, flush=True)
"""


# A client with a channel (a ring) for each of udp ports 5000 and 5001, taking n frames from
# each in turn: both rings get their packets, whatever else a burst put on the other.
TWO_RINGS = """
import netchannel, sys
n = int(sys.argv[2])
with netchannel.Client(sys.argv[1]) as c:
    chs = [c.create("r5000", 5000), c.create("r5001", 5001)]
    print("ready", flush=True)
    got = [0, 0]
    for _ in range(n):
        fs = [ch.recv(timeout=5) for ch in chs]
        if None in fs:
            break
        for i, f in enumerate(fs):
            got[i] += int.from_bytes(f[36:38], "big") == 5000 + i
print("got", *got, flush=True)
"""


# A Python client that echoes udp port argv[2] and comes back by itself after a restart
# (reconnect=True); a full transmit ring drops the echo (EAGAIN). It stops when its stdin
# closes.
RECONNECTING = """
import errno, netchannel, select, sys
def echo(f):
    ihl = (f[14] & 0xf) * 4
    ip, udp = 14, 14 + ihl
    return (f[6:12] + f[0:6] + f[12:ip + 12] + f[ip + 16:ip + 20] + f[ip + 12:ip + 16] +
            f[ip + 20:udp] + f[udp + 2:udp + 4] + f[udp:udp + 2] + f[udp + 4:])
with netchannel.Client(sys.argv[1], reconnect=True) as c:
    ch = c.create("py", int(sys.argv[2]), tx=True)
    print("echoing", flush=True)
    while not select.select([sys.stdin], [], [], 0)[0]:
        f = ch.recv(timeout=0.2)
        try:
            if f is not None:
                ch.send(echo(f))
        except netchannel.NetchannelError as e:
            if e.errno != errno.EAGAIN:
                raise
"""


# What nc_iso_client's hostile modes may do to their region's descriptors: nothing to the
# daemon's part (read-only, sealed), nothing but punch holes in their own (sealed; a hole reads
# back as zeros).
FD_ATTACKS = ("fds daemon-part write refused map-writable refused mprotect refused "
              "punch refused shrink refused grow refused seal refused "
              "client-part shrink refused grow refused seal refused punch allowed")


def whole_payload(ident, size):
    """The payload WHOLE expects of the datagram of IP id ident."""
    return bytes((ident * 7 + k) & 0xff for k in range(size))


class Isolated(T.DaemonCase):
    def setUp(self):
        super().setUp()
        os.chmod(self.w, 0o755)
        self.sock = os.path.join(self.w, "ncd.sock")
        self.tx = os.path.join(self.w, "tx.pcap")
        self.secret = "s3cr3t-" + secrets.token_hex(8)
        # uid 65534 cannot be relied on to reach the build tree: its copies go here.
        for exe in ("tests/integration/nc_iso_client", "app/examples/nc-echo",
                    "app/examples/nc-dump", "app/examples/nc-tutorial",
                    "lib/netchannel/libnetchannel.so.0", "lib/netchannel/libnetchannel_zc.so.0"):
            shutil.copy(os.path.join(T.BUILD, exe), self.w)

    def start(self, frames, region=None, control=None, mtu=None, **extra):
        T.write_pcap(os.path.join(self.w, "in.pcap"), frames)
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0",
                          "device": f"net_pcap0,rx_pcap={self.w}/in.pcap,tx_pcap={self.tx},"
                                    "infinite_rx=1",
                          "exception": {"device": "net_null1,no-rx=1"}}],
               "workers": [{"lcore": 1}],
               # Who may connect: the socket's group; what they may claim: control.allow.
               "control": {"socket": self.sock, "group": "nogroup", "mode": "0660",
                           "allow": [{"uid": 0}, {"uid": 65534, "dport": "5000-5001"}]},
               "channels": [{"name": "hi", "match": {"proto": "udp", "dport": 6000}}]}
        if region is not None:
            cfg["control"]["region"] = region
        if mtu is not None:
            cfg["ports"][0]["mtu"] = mtu
        cfg["control"].update(control or {})
        cfg.update(extra)
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        self.daemon.start()

    def frames(self, flows, payload):
        s = scapy()
        return [bytes(s.Ether(src="02:00:00:00:00:02", dst=T.PCAP_MAC) /
                      s.IP(src=src, dst="192.0.2.1") / s.UDP(sport=sport, dport=dport) /
                      s.Raw(payload.encode())) for src, sport, dport in flows]

    def nobody(self, *args, stdin=None):
        env = dict(os.environ, LD_LIBRARY_PATH=self.w)
        p = subprocess.Popen(NOBODY + [os.path.join(self.w, args[0])] + list(args[1:]),
                             stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env)
        self.procs.append(p)
        return p

    def clients(self, c):
        status, body = c.cli("show clients", CLI_F_JSON)
        self.assertEqual(status, 0, body)
        return {cl["pid"]: cl for cl in json.loads(body)}

    def region_when(self, c, pid, done, timeout=5):
        """Client pid's region as show clients has it, once done(region) or after timeout."""
        deadline = time.time() + timeout
        region = self.clients(c)[pid]["region"]
        while not done(region) and time.time() < deadline:
            time.sleep(0.05)
            region = self.clients(c)[pid]["region"]
        return region

    def in_use(self, c):
        return c.json(STATS)["mempool"]["in_use"]

    def base_in_use(self, c):
        """mbufs in use once the traffic runs and hi's ring (if any of it is hi's) is full."""
        def settled():
            hi = json.loads(c.cli("show channel hi", CLI_F_JSON)[1])
            rx = c.json(STATS)["ports"][0]["rx"]
            return rx > 0 and (hi["ring_count"] == 1024 or hi["counters"]["hits"] == 0)

        T.wait_until(settled, what="traffic, and hi's ring full")
        return self.in_use(c)

    def test_unprivileged_client_end_to_end(self):
        """uid 65534, through the socket's group and an allow entry: nc-echo echoes frames
        in place; the test client receives by copy, sleeping on the eventfd, and sends back.
        Every echo is on the wire, exactly the received datagram turned round."""
        flows = [("203.0.113.%d" % i, 2000 + i, 5000) for i in range(1, 4)]
        frames = self.frames(flows, "echo me")
        self.start(frames + self.frames([("203.0.113.9", 2009, 7000)], "to the kernel") +
                   self.frames([("203.0.113.8", 2008, 5001)], "dump me"))
        self.assertEqual(oct(os.stat(self.sock).st_mode & 0o777), "0o660")
        self.assertEqual(os.stat(self.sock).st_gid, 65534)
        p = self.nobody("nc-echo", "-s", self.sock, "--dport", "5000", "-c", "300")
        self.wait_line(p, "echoing udp port 5000")
        out = self.finish(p)
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("300 echoed, 0 skipped; daemon: tx=300 tx_spoofed=0", out)
        # nc_recv() / nc_send() as the same user: copies both ways.
        p = self.nobody("nc_iso_client", self.sock, "copy", "5000", "200")
        out = self.finish(p)
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("echoed 200", out)
        # nc-dump, the same user: a line per packet, each of its flow.
        p = self.nobody("nc-dump", "-s", self.sock, "--dport", "5001", "-c", "50")
        out = self.finish(p)
        self.assertEqual(p.returncode, 0, out)
        self.assertEqual(out.count("203.0.113.8.2008 > 192.0.2.1.5001 proto 17 len 49\n"), 50,
                         out)
        self.assertIn("nc-dump: 50 packets", out)
        # Zero-copy needs control.allow's zero_copy, which this user has not.
        shutil.copy(W.__file__, self.w)
        probe = ("import sys; sys.path.insert(0, sys.argv[2]); import nc_wire as W\n"
                 "print(W.Ctl(sys.argv[1]).hello(flags=W.HELLO_F_ZEROCOPY)[0])\n")
        r = subprocess.run(NOBODY + ["/usr/bin/python3", "-c", probe, self.sock, self.w],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.stdout.strip(), str(-errno.EPERM), r.stdout + r.stderr)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        port = self.daemon.read_stats()["ports"][0]
        self.assertEqual(port["client_tx"], 500)
        self.assertTrue(T.accounting_ok(port), port)
        wire = T.read_pcap(self.tx)
        self.assertEqual(len(wire), 500)
        self.assertEqual(set(wire), {echo_of(f) for f in frames})

    def test_clients_through_a_clean_restart(self):
        """A clean stop (SIGTERM) and a new start under three clients, each as uid 65534:
        nc-echo --reconnect, the tutorial's C loop (nc-tutorial, docs/protocol.md's code) and
        a Python client made with reconnect=True. The stop tells them ESHUTDOWN; each waits
        for the new daemon, makes its channel again, and echoes there, without being
        started again."""
        with open(os.path.join(T.SRC, "app/examples/nc_tutorial.c")) as f:
            body = f.read().split("\t/* tutorial: begin */\n")[1].split("\t/* tutorial: end */")[0]
        with open(os.path.join(T.SRC, "docs/protocol.md")) as f:
            doc = f.read()
        self.assertIn("```c\n" + textwrap.dedent(body.expandtabs(8)) + "```", doc,
                      "the tutorial in docs/protocol.md is nc_tutorial.c's")
        frames = self.frames([("203.0.113.%d" % p, 2000 + p, 5000 + p) for p in range(3)],
                             "restart")
        allow = {"allow": [{"uid": 0}, {"uid": 65534, "dport": "5000-5002"}]}
        self.start(frames, control=allow)
        shutil.copytree(os.path.join(T.SRC, "python/netchannel"),
                        os.path.join(self.w, "py", "netchannel"))
        env = T.python_env(dict(os.environ, PYTHONPATH=os.path.join(self.w, "py"),
                                NETCHANNEL_LIB=os.path.join(self.w, "libnetchannel.so.0")),
                           os.path.join(self.w, "libnetchannel.so.0"))
        clients = {
            "nc-echo-5000": self.nobody("nc-echo", "-s", self.sock, "--dport", "5000",
                                        "--reconnect"),
            "tutorial": self.nobody("nc-tutorial", self.sock, "5001"),
            "py": subprocess.Popen(NOBODY + ["/usr/bin/python3", "-c", RECONNECTING,
                                             self.sock, "5002"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, env=env)}
        self.procs.append(clients["py"])
        for p in clients.values():
            self.wait_line(p, "echoing")
        for restart in range(2):
            c = Ctl(self.sock)
            c.hello(flags=W.HELLO_F_CONTROL)

            def tx(name):
                status, body = c.cli(f"show channel {name}", CLI_F_JSON)
                return json.loads(body)["counters"]["tx"] if status == 0 else 0

            try:
                T.wait_until(lambda: all(tx(n) > 0 for n in clients), timeout=20,
                             what="every client echoing on this daemon")
            except AssertionError:
                self.fail(f"restart {restart}: tx {[tx(n) for n in clients]}, running "
                          f"{[p.poll() for p in clients.values()]}; "
                          + "".join(f"\n{n}: {self.output_of(p)}" for n, p in clients.items()))
            c.close()
            if restart == 1:
                break
            self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
            self.assertEqual([p.poll() for p in clients.values()], [None] * 3)
            self.assertIn("the daemon is stopping", self.wait_line(clients["nc-echo-5000"],
                                                                   "echoed"))
            self.start(frames, control=allow)
            self.wait_line(clients["nc-echo-5000"], "echoing udp port 5000 as channel "
                           "nc-echo-5000")
            self.wait_line(clients["tutorial"], "echoing")
        for name, p in clients.items():
            # The Python client stops as finish() closes its stdin; the others on SIGTERM.
            if name != "py":
                p.send_signal(signal.SIGTERM)
            out = self.finish(p)
            self.assertEqual(p.returncode, 0, f"{name}: {out}")
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def output_of(self, p):
        """What a client printed so far (it is killed first if it still runs)."""
        if p.poll() is None:
            p.kill()
        return p.communicate(timeout=10)[0]

    def test_static_channel_attach(self):
        """An isolated client attached to a static channel gets its packets in its region, one
        such client at a time; once it lets go, the next one may attach, and the channel's
        own ring fills again. What waited on that ring goes to the client's region as it
        attaches: the mbufs it held are back in the pool."""
        self.start(self.frames([("203.0.113.3", 2003, 6000)], "static"))
        exe = os.path.join(self.w, "nc_iso_client")
        env = dict(os.environ, LD_LIBRARY_PATH=self.w)
        c = Ctl(self.sock)
        c.hello(flags=W.HELLO_F_CONTROL)
        for _ in range(100):
            if json.loads(c.cli("show channel hi", CLI_F_JSON)[1])["ring_count"] == 1024:
                break
            time.sleep(0.1)
        else:
            self.fail("the channel's own ring never filled")
        held = self.in_use(c)
        first = subprocess.Popen([exe, self.sock, "attach", "hi", "1000"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, env=env)
        self.procs.append(first)
        self.wait_line(first, "attached")
        self.assertEqual(self.wait_line(first, "received"), "received 1000")
        self.assertLessEqual(self.in_use(c), held - 1024 + 64, "the ring's mbufs went back")
        hi = json.loads(c.cli("show channel hi", CLI_F_JSON)[1])
        self.assertTrue(hi.get("region"), hi)
        r = subprocess.run([exe, self.sock, "attach", "hi", "1"], capture_output=True,
                           stdin=subprocess.DEVNULL, text=True, env=env, timeout=30)
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertIn("another client is attached to the channel", r.stdout)
        first.stdin.write("\n")     # it lets go
        first.stdin.flush()
        self.assertEqual(self.wait_line(first, "detach"), "detach 0")
        self.finish(first)
        r = subprocess.run([exe, self.sock, "attach", "hi", "500"], capture_output=True,
                           stdin=subprocess.DEVNULL, text=True, env=env, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("received 500", r.stdout)
        hi = T.wait_until(lambda: (lambda h: h["ring_count"] == 1024 and h)(
            json.loads(c.cli("show channel hi", CLI_F_JSON)[1])), what="hi's own ring full again")
        self.assertNotIn("region", hi)
        c.close()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_nc_dump_attaches_as_an_isolated_client(self):
        """nc-dump --channel, as uid 65534 (whom control.allow names, without zero_copy), on a
        static channel it may attach to: an isolated client, it prints the channel's packets.
        Asked for --zero-copy, it is refused, and told it is zero_copy it lacks."""
        self.start(self.frames([("203.0.113.3", 2003, 6000)], "static"),
                   channels=[{"name": "hi", "match": {"proto": "udp", "dport": 6000},
                              "attach": [{"uid": 65534}]}])
        p = self.nobody("nc-dump", "-s", self.sock, "--channel", "hi", "-c", "3")
        out = self.finish(p)
        self.assertEqual(p.returncode, 0, out)
        self.assertEqual(len([ln for ln in out.splitlines()
                              if re.match(r"^203\.0\.113\.3\.2003 > 192\.0\.2\.1\.6000 proto 17 "
                                          r"len ", ln)]), 3, out)
        p = self.nobody("nc-dump", "-s", self.sock, "--channel", "hi", "--zero-copy", "-c", "1")
        out = self.finish(p)
        self.assertEqual(p.returncode, 1, out)
        self.assertIn("uid 65534 may not be a zero-copy client (a DPDK secondary process in the "
                      "daemon's memory): that takes control.allow's zero_copy; an isolated "
                      "client does not", out)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_static_channel_destroyed_under_its_consumers(self):
        """A static channel has one consumer at a time, isolated or zero-copy (EBUSY for the
        next). Destroyed by the operator, its consumers' next receive fails with ESTALE, and
        neither ever gets a packet of the channels created in its place, with its id."""
        self.start(self.frames([("203.0.113.1", 2001, 9000)], "mark-9000") +
                   self.frames([("203.0.113.2", 2002, 9001)], "mark-9001"))
        c = Ctl(self.sock)
        c.hello(flags=W.HELLO_F_CONTROL)

        def cli(line):
            status, body = c.cli(line, CLI_F_JSON)
            self.assertEqual(status, 0, (line, body))
            return json.loads(body) if body.strip() else None
        ids = {n: cli(f"channel create {n} proto udp dport {p}")["id"]
               for n, p in (("s9000", 9000), ("s9001", 9001))}
        env = dict(os.environ, LD_LIBRARY_PATH=self.w)
        iso = subprocess.Popen([os.path.join(self.w, "nc_iso_client"), self.sock, "follow",
                                "s9000", "mark-9000"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
        self.procs.append(iso)
        self.wait_line(iso, "receiving")
        dump = os.path.join(T.BUILD, "app/examples/nc-dump")
        # A line a packet: to a file, which no pipe's size can stall.
        zc_out = os.path.join(self.w, "nc-dump.out")
        with open(zc_out, "w") as f:
            zc = subprocess.Popen([dump, "-s", self.sock, "--channel", "s9001", "--zero-copy"],
                                  stdout=f, stderr=subprocess.STDOUT)
        self.procs.append(zc)
        deadline = time.time() + 20
        while "> 192.0.2.1.9001" not in open(zc_out).read() and time.time() < deadline:
            time.sleep(0.1)
        # A second consumer of either: refused, whichever model.
        r = subprocess.run([os.path.join(self.w, "nc_iso_client"), self.sock, "attach", "s9001",
                            "1"], capture_output=True, stdin=subprocess.DEVNULL, text=True,
                           env=env, timeout=30)
        self.assertEqual(r.returncode, 2, r.stdout)
        self.assertIn("another client is attached to the channel", r.stdout)
        r = subprocess.run([dump, "-s", self.sock, "--channel", "s9000", "-c", "1"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("another client is attached to the channel", r.stderr)
        # Destroyed, and new channels on the same flows, in one go: ids and rings reused.
        for n in ("s9000", "s9001"):
            cli(f"channel destroy {n}")
        new = {n: cli(f"channel create {n} proto udp dport {p}")["id"]
               for n, p in (("new9000", 9000), ("new9001", 9001))}
        self.assertEqual(sorted(new.values()), sorted(ids.values()), "the ids are reused")
        out = self.finish(iso)
        self.assertEqual(iso.returncode, 0, out)
        m = re.search(r"stale after (\d+) good (\d+) wrong\ndestroy 0", out)
        self.assertTrue(m, out)
        self.assertEqual(m.group(2), "0", out)
        zc.wait(timeout=10)
        out = open(zc_out).read()
        # It ends on its own, not killed by a signal: its rings were kept until it let go.
        self.assertGreaterEqual(zc.returncode, 0, out[-500:])
        self.assertIn("nc-dump: receive: the channel is gone (destroyed by the operator)", out)
        # Nobody took a packet of the new channels: all they delivered is still on their ring.
        T.wait_until(lambda: all(cli(f"show channel {n}")["counters"]["delivered"] > 0
                                 for n in new), what="the new channels delivering")
        for n in new:
            ch = cli(f"show channel {n}")
            self.assertGreater(ch["counters"]["delivered"], 0, ch)
            self.assertEqual(ch["ring_count"], min(ch["counters"]["delivered"], 1024), ch)
        c.close()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def python(self, script, *args, ready, stdin=None):
        """A client (the Python package) on the daemon's socket, once it prints ready."""
        p = subprocess.Popen(["/usr/bin/python3", "-c", script, self.sock] + list(args),
                             stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=T.package_env())
        self.procs.append(p)
        self.wait_line(p, ready)
        return p

    def consumer(self, channel):
        return self.python(CONSUMER, channel, ready="attached", stdin=subprocess.PIPE)

    def take(self, p, n):
        p.stdin.write(f"{n}\n")
        p.stdin.flush()
        line = p.stdout.readline().strip()
        if line.startswith("error"):
            return line
        ports, got = line.rsplit(" ", 1)
        self.assertEqual(int(got), n, line)
        return set(json.loads(ports))

    def test_shared_static_channel(self):
        """A static channel declared "consumers": "shared" takes several isolated consumers:
        each gets whole flows, no flow reaches two, together they get every flow; when one
        leaves, the other gets them all. A zero-copy client and a 17th consumer are refused
        with the reason; destroyed, each consumer's next receive fails with ESTALE."""
        sports = list(range(3000, 3016))
        # Shuffled: a consumer slower than the wire takes what comes first while its ring has
        # room, and in a fixed order that would always be the same flows.
        flows = [("203.0.113.4", sp, 6100) for sp in sports] * 64
        random.Random(7).shuffle(flows)
        self.start(self.frames(flows, "shared"),
                   region={"rx_ring_size": 256, "rx_buffers": 512, "tx_ring_size": 64},
                   channels=[{"name": "sh", "match": {"proto": "udp", "dport": 6100},
                              "consumers": "shared"}])
        a, b = self.consumer("sh"), self.consumer("sh")
        c = Ctl(self.sock)
        c.hello(flags=W.HELLO_F_CONTROL)
        sh = json.loads(c.cli("show channel sh", CLI_F_JSON)[1])
        self.assertEqual(sh["consumers"]["kind"], "shared")
        self.assertEqual(len(sh["consumers"]["attached"]), 2, sh)
        fa, fb = self.take(a, 4000), self.take(b, 4000)
        self.assertTrue(fa and fb, (fa, fb))
        self.assertEqual(fa & fb, set(), "a flow reached both consumers")
        self.assertEqual(fa | fb, set(sports))
        # A zero-copy client cannot take from a shared channel's one ring.
        r = subprocess.run([os.path.join(T.BUILD, "app/examples/nc-dump"), "-s", self.sock,
                            "--channel", "sh", "--zero-copy", "-c", "1"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("channel sh is shared: its consumers are isolated clients, not zero-copy "
                      "ones", r.stderr)
        # Up to 16 consumers: 14 more attach, the next is refused.
        r = subprocess.run(["/usr/bin/python3", "-c", CROWD, self.sock, "sh", "15"],
                           env=T.package_env(),
                           capture_output=True, text=True, timeout=60)
        self.assertIn(f"refused after 14 {errno.EBUSY} ", r.stdout, r.stdout + r.stderr)
        self.assertIn("channel sh is shared by 16 consumers, the most it may be", r.stdout)
        # b leaves: a gets every flow, once the daemon has seen b (and the crowd) go.
        self.finish(b)           # its stdin closes: it lets go and exits

        def attached():
            sh = json.loads(c.cli("show channel sh", CLI_F_JSON)[1])
            return len(sh["consumers"]["attached"])
        T.wait_until(lambda: attached() == 1, timeout=10, what="a, the one consumer left")
        self.assertEqual(self.take(a, 4000), set(sports))
        # Destroyed under its consumer: ESTALE.
        self.assertEqual(c.cli("channel destroy sh", CLI_F_JSON)[0], 0)
        self.assertIn(f"error {errno.ESTALE}", self.take(a, 100000))
        self.finish(a)
        c.close()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        port = self.daemon.read_stats()["ports"][0]
        self.assertTrue(T.accounting_ok(port), port)

    def member(self, name, shared=True, own=None):
        """A client of uid 65534 making channel name for udp 6100 (shared), and channel own
        for 6101 if given, once it says how that went: (the process, its line)."""
        p = subprocess.Popen(NOBODY + ["/usr/bin/python3", "-c", GROUP, self.sock, name,
                                       "1" if shared else "0"] + ([own] if own else []),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=T.package_env())
        self.procs.append(p)
        line = p.stdout.readline().strip()
        while line and not line.startswith(("created", "refused")):
            line = p.stdout.readline().strip()
        return p, line

    def test_shared_group_of_one_user(self):
        """Clients of one user (uid 65534) that each create a channel with the same match and
        priority, shared, share one channel, as sockets with SO_REUSEPORT do: each gets whole
        flows, no flow reaches two, together every flow. Another user's (root's, or another
        unprivileged one's), or one not shared, is refused. When its maker goes, the channel passes to the other, which gets every
        flow; when the last goes, the channel goes."""
        sports = list(range(3000, 3016))
        flows = [("203.0.113.4", sp, 6100) for sp in sports] * 64
        random.Random(7).shuffle(flows)
        self.start(self.frames(flows, "group"),
                   region={"rx_ring_size": 256, "rx_buffers": 512, "tx_ring_size": 64},
                   control={"allow": [{"uid": 0}, {"uid": 65534, "dport": "6100-6101"},
                                      {"uid": 65533, "dport": "6100"}]})
        c = Ctl(self.sock)
        c.hello(flags=W.HELLO_F_CONTROL)

        def show(name):
            status, body = c.cli(f"show channel {name}", CLI_F_JSON)
            return json.loads(body) if status == 0 else None
        a, la = self.member("ga")
        # b has a channel of its own too: the shared one passes to it beside that.
        b, lb = self.member("gb", own="bown")
        self.assertTrue(la.startswith("created "), la)
        self.assertEqual(la, lb, "b joined a's channel")
        ch = show("ga")
        self.assertEqual((ch["owner"]["pid"], len(ch["consumers"]["attached"])), (a.pid, 2), ch)
        self.assertIsNone(show("gb"), "no channel of b's own")
        fa, fb = self.take(a, 4000), self.take(b, 4000)
        self.assertTrue(fa and fb, (fa, fb))
        self.assertEqual(fa & fb, set(), "a flow reached both consumers")
        self.assertEqual(fa | fb, set(sports))
        # Not shared: refused, saying how to join. Another user (root) may not join.
        p, line = self.member("solo", shared=False)
        self.assertTrue(line.startswith(f"refused {errno.EBUSY} "), line)
        self.assertIn(f"channel ga ({la.split()[1]}) has the same rule and priority; it is "
                      "shared: a channel created shared joins it", line)
        r = subprocess.run(["/usr/bin/python3", "-c", GROUP, self.sock, "root", "1"],
                           input="", capture_output=True, text=True, timeout=30,
                           env=T.package_env())
        self.assertTrue(r.stdout.startswith(f"refused {errno.EBUSY} "), r.stdout + r.stderr)
        # Another unprivileged user allowed the port, shared or not: the group is not its to
        # join, nor its flows to take; the group stays as it was.
        for shared in ("1", "0"):
            r = subprocess.run(["setpriv", "--reuid=65533", "--regid=65534", "--clear-groups",
                                "/usr/bin/python3", "-c", GROUP, self.sock, "other", shared],
                               input="", capture_output=True, text=True, timeout=30,
                               env=T.package_env())
            self.assertTrue(r.stdout.startswith(f"refused {errno.EADDRINUSE} "),
                            r.stdout + r.stderr)
            self.assertIn("it would take the flows of a channel of another owner", r.stdout)
        self.assertEqual(len(show("ga")["consumers"]["attached"]), 2)
        # Its maker goes: the channel is b's, with every flow.
        self.finish(a)
        T.wait_until(lambda: (show("ga") or {}).get("owner", {}).get("pid") == b.pid,
                     timeout=10, what="the channel passing to b")
        self.assertEqual(len(show("ga")["consumers"]["attached"]), 1)
        self.assertEqual(show("bown")["owner"]["pid"], b.pid)
        self.assertEqual(self.take(b, 4000), set(sports))
        self.finish(b)
        T.wait_until(lambda: show("ga") is None and show("bown") is None, timeout=10,
                     what="the channels gone with b")
        c.close()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        port = self.daemon.read_stats()["ports"][0]
        self.assertTrue(T.accounting_ok(port), port)

    def python_client(self, script, *args):
        """What a client (the Python package) prints, run to its end once it says "ready"."""
        p = self.python(script, *args, ready="ready")
        out = self.finish(p, timeout=60)
        self.assertEqual(p.returncode, 0, out)
        return out

    def test_many_buffer_frames_arrive_whole(self):
        """Datagrams of 8,872 bytes in 6 fragments each (5 buffers a frame), 32 of them
        completed in a row: a burst puts far more descriptors on the client's ring than it
        has packets. Every frame the client gets is whole, every byte in place."""
        s, size = scapy(), 8872
        firsts, lasts = [], []
        for i in range(32):
            dgram = (s.IP(src="203.0.113.6", dst="192.0.2.1", id=100 + i) /
                     s.UDP(sport=4000 + i, dport=5000) / s.Raw(whole_payload(100 + i, size)))
            frags = [bytes(s.Ether(src="02:00:00:00:00:02", dst=T.PCAP_MAC) / f)
                     for f in s.fragment(dgram, fragsize=1480)]
            self.assertEqual(len(frags), 6)
            firsts += frags[:-1]
            lasts.append(frags[-1])
        self.start(firsts + lasts)
        self.assertIn("whole 2000 bad 0", self.python_client(WHOLE, "2000", str(size)))
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        port = self.daemon.read_stats()["ports"][0]
        self.assertGreaterEqual(port["frag_datagrams"], 2000, port)
        self.assertTrue(T.accounting_ok(port), port)

    def test_rings_of_one_client_in_one_burst(self):
        """One client, a ring for each of two channels, their frames alternating on the wire,
        so that a burst holds packets of both: each channel gets 3,000 of its own, more than
        its ring (1,024 entries) holds."""
        flows = [("203.0.113.7", 4000, 5000), ("203.0.113.7", 4001, 5001)] * 64
        self.start(self.frames(flows, "two rings"))
        self.assertIn("got 3000 3000", self.python_client(TWO_RINGS, "3000"))
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_one_ring_client(self):
        """NC_CONNECT_ONE_RING, as uid 65534: 100 channels (a ring each stops at 64, with the
        reason), all delivered on one ring, each packet naming its channel; the packets of a
        channel destroyed while they waited never come as those of the new channel that gets
        its id; nc_client_recv() names each frame's channel; show clients counts them."""
        n = 100
        flows = [("203.0.113.5", 3000 + i, 5100 + i) for i in range(n + 1)]
        self.start(self.frames(flows, "one ring"),
                   control={"allow": [{"uid": 0}, {"uid": 65534, "dport": "5100-5300"}],
                            "limits": {"channels": 200}})
        c = Ctl(self.sock)
        c.hello(flags=W.HELLO_F_CONTROL)
        p = self.nobody("nc_iso_client", self.sock, "rings", "5100", "70")
        out = self.finish(p)
        self.assertIn("created 64, then: ", out)
        self.assertIn("its region's 64 rx rings are in use, one per channel; a client that "
                      "connects with one ring for all (NC_CONNECT_ONE_RING) has no such limit", out)
        p = self.nobody("nc_iso_client", self.sock, "onering", "5100", str(n))
        self.assertEqual(self.wait_line(p, "ready"), f"ready {n}")
        me = self.clients(c)[p.pid]
        self.assertEqual((me["mode"], me["channel_count"], len(me["channels"])),
                         ("isolated", n, 64), me)
        self.assertEqual(me["region"]["rx_rings"], 1, me)
        m = re.match(r"phase1 got (\d+) wrong (\d+) heard (\d+)", self.wait_line(p, "phase1"))
        self.assertTrue(m)
        self.assertGreater(int(m[1]), 10000)
        self.assertEqual((int(m[2]), int(m[3])), (0, n), m[0])
        m = re.match(r"phase2 same_id (\d) got (\d+) wrong (\d+) again (\d+)",
                     self.wait_line(p, "phase2"))
        self.assertTrue(m)
        # The new channel has the old one's id; none of the old one's packets came as its.
        self.assertEqual((m[1], m[3]), ("1", "0"), m[0])
        self.assertGreater(int(m[4]), 0, m[0])
        self.assertEqual(self.wait_line(p, "phase3"), "phase3 recv_ok 100 nc_recv Operation not "
                         "supported nc_rx_bufs Operation not supported")
        out = self.finish(p)
        self.assertEqual(p.returncode, 0, out)
        # Killed with -9 while its 100 channels stream: they go, and so do their packets.
        base = self.in_use(c)
        p = self.nobody("nc_iso_client", self.sock, "onering", "5100", str(n))
        self.wait_line(p, "ready")
        T.wait_until(lambda: self.clients(c)[p.pid]["region"]["rx_copied"] > 0,
                     what="its channels streaming")
        p.send_signal(signal.SIGKILL)
        p.wait()
        T.wait_until(lambda: p.pid not in self.clients(c), what="the killed client gone")
        self.assert_killed_left_nothing(c, base)

    def assert_killed_left_nothing(self, c, base):
        """A killed client's channels and mbufs are gone; the daemon stops cleanly."""
        channels = json.loads(c.cli("show channel all", CLI_F_JSON)[1])
        self.assertEqual([x["name"] for x in channels], ["hi"])
        self.assertLessEqual(self.in_use(c), base + 32, "no mbuf went with the killed client")
        c.close()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        port = self.daemon.read_stats()["ports"][0]
        self.assertTrue(T.accounting_ok(port), port)

    def test_hostile_client(self):
        """A client that attacks its own region: it finds no one else's packet, cannot resize
        the region, and its garbage is counted and refused; an honest client beside it loses
        nothing that is not counted; killed with -9, it leaves no mbuf behind."""
        self.hostile("hostile")

    def test_hostile_one_ring_client(self):
        """The same attack from a client with one ring for all its channels."""
        self.hostile("hostile-one-ring")

    def test_buffer_returns_checked(self):
        """A client that holds every buffer gives back, in one go, one off by a byte, the
        place just past the rx buffers, one buffer twice, the region's header and one more
        buffer: the two good returns are the daemon's again (and filled again at once by the traffic that
        waited for them), the four bad ones are counted and change nothing."""
        self.returns_checked(None, 2048)

    def test_buffer_returns_checked_jumbo(self):
        """The same with an MTU of 3000: buffers of 3072 bytes, not a power of two."""
        self.returns_checked(3000, 3072)

    def returns_checked(self, mtu, buffer_size):
        self.start(self.frames([("203.0.113.1", 2001, 5000)], "returns"),
                   region={"rx_buffers": 64, "rx_ring_size": 64}, mtu=mtu)
        c = Ctl(self.sock)
        c.hello()
        p = self.nobody("nc_iso_client", self.sock, "returns", "5000", stdin=subprocess.PIPE)
        self.assertEqual(self.wait_line(p, "held"), "held 64 of 64")
        self.wait_line(p, "returned")
        region = self.region_when(c, p.pid, lambda r: r["freed"] + r["bad_free"] >= 6)
        self.assertEqual(region["buffer_size"], buffer_size, region)
        self.assertEqual((region["freed"], region["bad_free"]), (2, 4), region)
        region = self.region_when(c, p.pid, lambda r: r["buffers_held"] == 64)
        self.assertEqual(region["buffers_held"], 64, region)
        self.assertEqual(self.finish(p), "")  # its stdin closed: it lets go
        self.assertEqual(p.returncode, 0)
        c.close()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def assert_honest(self, honest):
        """The honest client beside an attacker received, and what it did not is counted."""
        out = self.finish(honest)
        self.assertEqual(honest.returncode, 0, out)
        m = re.search(r"received (\d+) hits (\d+) delivered (\d+) ring_full (\d+) no_buf (\d+)",
                      out)
        self.assertTrue(m, out)
        got, hits, delivered, ring_full, no_buf = map(int, m.groups())
        self.assertGreater(got, 1000, out)
        # What it did not receive is counted: in its ring (a ring, a burst), or dropped.
        self.assertLessEqual(got, delivered)
        self.assertLessEqual(delivered - got, 512 + 32)
        self.assertLessEqual(abs(hits - (delivered + ring_full + no_buf)), 32, out)

    def test_hostile_churn(self):
        """A uid 65534 client replaces its 120 firewall-shaped channels (each of its own
        priority) without pause, each change a rebuild of the classifier's compiled snapshot:
        every packet it receives is on the channel that the rules in force gave its flow, its
        steady channel hears its flow throughout, an honest client beside it loses nothing
        uncounted, the control socket answers, and the snapshot catches up once it stops; then
        deletes alone (the snapshot's dead answers) are as exact; killed with -9 while
        churning, it leaves no channel and no mbuf behind, and the snapshot goes with its
        rules."""
        rnd = random.Random(7)
        flows = [(f"10.{rnd.randrange(256)}.{rnd.randrange(256)}.{rnd.randrange(1, 255)}",
                  2000 + i, 5100 + i % 64) for i in range(512)]
        self.start(self.frames(flows, "churn") +
                   self.frames([("203.0.113.2", 2002, 5001)] * 64, "honest"),
                   region={"rx_buffers": 2048, "rx_ring_size": 512},
                   control={"allow": [{"uid": 0}, {"uid": 65534, "dport": "5001-5199"}],
                            "limits": {"channels": 200}})
        c = Ctl(self.sock)
        c.hello(flags=W.HELLO_F_CONTROL)

        def classifier():
            t0 = time.monotonic()
            status, body = c.cli("show classifier", CLI_F_JSON)
            self.assertEqual(status, 0, body)
            return json.loads(body), time.monotonic() - t0

        def churner_says(p, want):
            """The churner's line, the control socket asked meanwhile: its slowest answer."""
            slowest = 0
            while True:
                slowest = max(slowest, classifier()[1])
                if select.select([p.stdout], [], [], 0.2)[0]:
                    line = p.stdout.readline()
                    if want in line:
                        return line, slowest
                    self.assertTrue(line, f"no line with {want!r}: {p.wait()}")

        base = self.base_in_use(c)
        honest = self.nobody("nc_iso_client", self.sock, "honest", "5001", "8")
        self.wait_line(honest, "ready")
        churn = self.nobody("nc_iso_client", self.sock, "churn", "5100", "5",
                            stdin=subprocess.PIPE)
        m = re.match(r"ready 121 flows (\d+) wrong (\d+)", self.wait_line(churn, "ready"))
        self.assertTrue(m)
        self.assertGreater(int(m[1]), 100, m[0])
        self.assertEqual(int(m[2]), 0, m[0])
        first = classifier()[0]["snapshot"]
        out, slowest = churner_says(churn, "churned")
        m = re.match(r"churned (\d+) got (\d+) wrong (\d+) keep (\d+) keep_gap_ms (\d+)", out)
        self.assertTrue(m, out)
        ops, got, wrong, keep, gap = map(int, m.groups())
        self.assertEqual(wrong, 0, out)
        self.assertGreater(ops, 500, out)
        self.assertGreater(got, 10000, out)
        self.assertGreater(keep, 1000, out)
        self.assertLess(gap, 500, out)
        self.assertLess(slowest, 0.5, "the control socket kept answering")
        # The snapshot was rebuilt while the rules changed, and catches up once they stop.
        deadline = time.time() + 10
        while True:
            cl = classifier()[0]
            s = cl["snapshot"]
            if (s["state"], s["rules"], s["delta_rules"], s["stale_rules"]) == \
                    ("ready", cl["rules"], 0, 0) or time.time() > deadline:
                break
            time.sleep(0.1)
        # Its 121, hi, and the honest client's while it runs.
        status, body = c.cli("show channel brief", CLI_F_JSON)
        self.assertEqual(status, 0, body)
        live = len(json.loads(body))
        self.assertGreaterEqual(live, 122)
        self.assertEqual(cl["rules"], live, cl)
        self.assertEqual((s["state"], s["rules"], s["delta_rules"], s["stale_rules"],
                          s["failures"]), ("ready", live, 0, 0, 0), cl)
        self.assertGreaterEqual(s["builds"], first["builds"] + 2, (first, s))
        # Deletes alone, against that snapshot: its answers for them are dead ones.
        churn.stdin.write("destroy\n")
        churn.stdin.flush()
        m = re.match(r"destroyed 60 got (\d+) wrong (\d+) silent (\d+)",
                     self.wait_line(churn, "destroyed"))
        self.assertTrue(m)
        self.assertGreater(int(m[1]), 10000, m[0])
        self.assertEqual((int(m[2]), int(m[3])), (0, 0), m[0])
        self.assertEqual(self.finish(churn), "")  # its stdin closed: it disconnects
        self.assertEqual(churn.returncode, 0)
        self.assert_honest(honest)
        # Killed with -9 while churning: its channels, their rules and the snapshot go.
        churn = self.nobody("nc_iso_client", self.sock, "churn", "5100", "30",
                            stdin=subprocess.PIPE)
        self.wait_line(churn, "ready")
        T.wait_until(lambda: classifier()[0]["snapshot"]["state"] != "none",
                     what="the churner's rules in a snapshot")
        churn.send_signal(signal.SIGKILL)
        churn.wait()
        deadline = time.time() + 10
        while classifier()[0]["snapshot"]["state"] != "none" and time.time() < deadline:
            time.sleep(0.1)
        cl = classifier()[0]
        self.assertEqual((cl["rules"], cl["snapshot"]["state"]), (1, "none"), cl)
        self.assert_killed_left_nothing(c, base)

    def hostile(self, mode):
        flows = [("203.0.113.1", 2001, 5000), ("203.0.113.2", 2002, 5001),
                 ("203.0.113.3", 2003, 6000), ("203.0.113.4", 2004, 7000)]
        frames = self.frames(flows[:1], "harmless") + self.frames(flows[1:], self.secret)
        self.start(frames, region={"rx_buffers": 2048, "rx_ring_size": 512})
        c = Ctl(self.sock)
        c.hello()
        base = self.base_in_use(c)
        honest = self.nobody("nc_iso_client", self.sock, "honest", "5001", "8")
        self.wait_line(honest, "ready")
        bad = self.nobody("nc_iso_client", self.sock, mode, "5000", self.secret)
        self.assertEqual(self.wait_line(bad, "fds"), FD_ATTACKS)
        self.assertEqual(self.wait_line(bad, "secret found"), "secret found 0 daemon files opened 0")
        self.wait_line(bad, "attacking")
        # setpriv exec()s the client: its pid is the Popen's. Until every kind of attack counted.
        region = T.wait_until(lambda: (lambda r: all(r[k] > 0 for k in (
            "bad_index", "bad_desc", "bad_free")) and r)(self.clients(c)[bad.pid]["region"]),
            timeout=30, what="each kind of bad write counted")
        self.assertEqual(region["buffers"], 2048, region)
        self.assertEqual(region["rx_rings"], 64 if mode == "hostile" else 1, region)
        for counter in ("bad_index", "bad_desc", "bad_free"):
            self.assertGreater(region[counter], 0, region)
        # "In ring" reads the client's own tail, which it scribbles over: what is shown is
        # never more than a ring holds, and the daemon answers throughout.
        for _ in range(20):
            for ch in json.loads(c.cli("show channel all", CLI_F_JSON)[1]):
                self.assertTrue(0 <= ch["ring_count"] <= 2048, ch)
        bad.send_signal(signal.SIGKILL)
        bad.wait()
        self.assert_honest(honest)
        T.wait_until(lambda: self.in_use(c) <= base + 32,
                     what="no mbuf gone with the killed client")
        self.assertNotIn(bad.pid, self.clients(c))
        c.close()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        port = self.daemon.read_stats()["ports"][0]
        self.assertTrue(T.accounting_ok(port), port)
        # Its spoofed frames (well formed, from the wrong source) were refused, not sent.
        self.assertEqual(port["client_tx"], 0, port)


if __name__ == "__main__":
    unittest.main()
