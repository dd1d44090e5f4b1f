#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The control socket (include/nc_proto.h), spoken from Python, against a running daemon."""
import errno
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
import nc_wire as W  # noqa: E402
from test_datapath import EAL  # noqa: E402

from nc_wire import (MAGIC, CONTROL_PROTOCOL_VERSION, CONTROL_PROTOCOL_MIN,  # noqa: E402
                     HELLO, CREATE, ATTACH, DESTROY, LIST, STATS, CLI, CHAN_STATS, EVENTFD, REQ,
                     ID, NAME, CHANNEL, Ctl, create_body)


def wire_rule(proto=17, dport=None, dport_mask=None, priority=0):
    return W.rule(proto=proto, dport=dport, dport_mask=dport_mask, priority=priority)


class Control(T.DaemonCase):
    def setUp(self):
        super().setUp()
        self.sock = os.path.join(self.w, "ncd.sock")
        from scapy.all import IP, UDP, Ether, Raw
        frames = [bytes(Ether(src="02:00:00:00:00:01", dst=T.PCAP_MAC) /
                        IP(src="203.0.113.1", dst="192.0.2.1") / UDP(sport=1000 + i, dport=port) /
                        Raw(b"x" * 20)) for port in (5000, 6000, 53) for i in range(4)]
        T.write_pcap(os.path.join(self.w, "in.pcap"), frames)

    def start(self, allow=None, control_extra=None, **extra):
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0",
                          "device": f"net_pcap0,rx_pcap={self.w}/in.pcap,infinite_rx=1",
                          "exception": {"device": "net_null1"}}],
               "workers": [{"lcore": 1}], "control": {"socket": self.sock},
               "channels": [{"name": "dns", "match": {"proto": "udp", "dport": 53}},
                            {"name": "hi", "match": {"proto": "udp", "dport": 6000}}]}
        if allow is not None:
            cfg["control"]["allow"] = allow
        cfg["control"].update(control_extra or {})
        cfg.update(extra)
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        self.daemon.start()
        return Ctl(self.sock)

    def stop_ok(self):
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        self.assertFalse(os.path.exists(self.sock), "the socket is removed at exit")

    def test_handshake_and_queries(self):
        c = self.start()
        self.assertEqual(oct(os.stat(self.sock).st_mode & 0o777), "0o660")
        self.assertEqual(c.call(LIST)[0], -errno.EPROTO)          # HELLO comes first
        # No version in common: refused, with both ranges.
        self.assertEqual(c.hello(version=99, min_version=99)[0], -errno.EPROTO)
        self.assertEqual(c.reason, "control protocol: the client speaks versions 99 to 99, "
                         f"this daemon {CONTROL_PROTOCOL_MIN} to {CONTROL_PROTOCOL_VERSION}")
        status, (v, lcore, prefix, pool) = c.hello()
        self.assertEqual(status, 0)
        self.assertEqual((v, prefix, pool), (CONTROL_PROTOCOL_VERSION, self.prefix, "nc_mbuf_0"))
        self.assertGreaterEqual(lcore, 64)
        self.assertEqual(c.hello()[0], -errno.EPROTO)             # only once
        chans = {ch["name"]: ch for ch in c.json(LIST)}
        self.assertEqual(set(chans), {"dns", "hi"})
        self.assertEqual(chans["dns"]["owner"], "config")
        st = c.json(STATS)
        self.assertGreater(st["ports"][0]["rx"], 0)
        self.assertEqual(c.call(CLI)[0], -errno.EINVAL)            # no flags word
        status, body = c.cli("show channel dns", 1)
        self.assertEqual((status, json.loads(body)["name"]), (0, "dns"))
        status, body = c.cli("show nothing")
        self.assertEqual(status, -errno.EINVAL)
        self.assertIn(b"expected one of", body)
        self.assertEqual(c.cli("help", 4)[0], -errno.EINVAL)
        self.assertEqual(c.cli("x" * 1024)[0], -errno.EINVAL)
        # A second connection at the same time gets its own lcore id.
        c2 = Ctl(self.sock)
        self.assertNotEqual(c2.hello()[1][1], lcore)
        c.close()
        c2.close()
        self.stop_ok()

    def baseline(self, c):
        """mbufs in use once the static rings are full: they hold ring_size each, and net_pcap
        holds its replay copies. A burst (32) may be in flight at any moment."""
        T.wait_until(lambda: all(ch["drop_ring_full"] > 0 for ch in c.json(STATS)["channels"]
                                 if ch["name"] in ("dns", "hi")), what="the static rings full")
        return c.json(STATS)["mempool"]["in_use"]

    def test_runtime_channels(self):
        c = self.start()
        c.hello()
        base = self.baseline(c)
        status, (cid, ring) = c.create("c5000", wire_rule(dport=5000), ring_size=64)
        self.assertEqual(status, 0)
        self.assertEqual(ring, f"nc_rx_{cid}")
        # Nobody reads: the ring fills, and what follows is dropped.
        chans = T.wait_until(lambda: (lambda cs: cs["c5000"]["drop_ring_full"] > 0 and cs)(
            {ch["name"]: ch for ch in c.json(STATS)["channels"]}), what="c5000's ring full")
        self.assertGreater(chans["c5000"]["hits"], 0)
        self.assertEqual(chans["c5000"]["delivered"], 64)          # nobody reads: the ring fills
        self.assertGreater(chans["c5000"]["drop_ring_full"], 0)
        other = Ctl(self.sock)
        other.hello()
        self.assertEqual(other.create("dup", wire_rule(dport=5000))[0], -errno.EBUSY)
        self.assertEqual(other.create("c5000", wire_rule(dport=5001))[0], -errno.EEXIST)
        self.assertEqual(other.create("bad", wire_rule(dport=5000, dport_mask=0xf0f0))[0],
                         -errno.EINVAL)
        self.assertEqual(other.create("bad name!", wire_rule(dport=5002))[0], -errno.EINVAL)
        # Transmit: an unknown flag, a port the daemon does not have, a drop channel, a
        # reserved field set: all refused; a good one gets its transmit ring.
        for kw in ({"flags": 2}, {"flags": 1, "port": 1}, {"flags": 1, "action": 1},
                   {"reserved": 1}):
            self.assertEqual(other.create("txbad", wire_rule(dport=5003), **kw)[0],
                             -errno.EINVAL, kw)
        status, (tcid, _) = other.create("txok", wire_rule(dport=5003), flags=1)
        self.assertEqual(status, 0)
        st_status, body = other.call(CHAN_STATS, ID.pack(tcid))
        self.assertEqual((st_status, len(body)), (0, 128))
        self.assertEqual(other.call(CHAN_STATS, ID.pack(cid))[0], -errno.EPERM)
        self.assertEqual(other.call(CHAN_STATS, ID.pack(4000))[0], -errno.ENOENT)
        self.assertEqual(other.call(CHAN_STATS, b"\0" * 3)[0], -errno.EINVAL)
        self.assertEqual(other.call(DESTROY, ID.pack(cid))[0], -errno.EPERM)
        self.assertEqual(other.call(DESTROY, ID.pack(4000))[0], -errno.ENOENT)
        # No eventfd with the reply to a create: one on request, made once, the same each time.
        status, _, fds = other.call_fds(CREATE, create_body("nofd", wire_rule(dport=5004)))
        self.assertEqual((status, fds), (0, []))
        status, body, fds = c.call_fds(EVENTFD, ID.pack(cid))
        self.assertEqual((status, body, len(fds)), (0, b"", 1))
        status, _, again = c.call_fds(EVENTFD, ID.pack(cid))
        self.assertEqual(status, 0)
        self.assertEqual(os.fstat(fds[0]).st_ino, os.fstat(again[0]).st_ino)
        for fd in fds + again:
            os.close(fd)
        self.assertEqual(other.call(EVENTFD, ID.pack(cid))[0], -errno.EPERM)
        self.assertEqual(other.call(EVENTFD, ID.pack(4000))[0], -errno.ENOENT)
        self.assertEqual(other.call(EVENTFD, b"\0" * 3)[0], -errno.EINVAL)
        # Its owner may destroy it; then the name and the rule are free again.
        self.assertEqual(c.call(DESTROY, ID.pack(cid))[0], 0)
        self.assertEqual(other.create("c5000", wire_rule(dport=5000))[0], 0)
        # A connection that goes away takes its channels with it.
        other.close()
        deadline = time.time() + 5
        while time.time() < deadline and "c5000" in {ch["name"] for ch in c.json(LIST)}:
            time.sleep(0.05)
        self.assertNotIn("c5000", {ch["name"] for ch in c.json(LIST)})
        miss0 = c.json(STATS)["ports"][0]["miss"]
        T.wait_until(lambda: c.json(STATS)["ports"][0]["miss"] > miss0, what="its flow missing")
        # The channels' 64-packet rings went back to the pool.
        self.assertLessEqual(c.json(STATS)["mempool"]["in_use"], base + 32)
        c.close()
        self.stop_ok()
        port = self.daemon.read_stats()["ports"][0]
        self.assertTrue(T.accounting_ok(port), port)

    def test_kill_9_client(self):
        c = self.start()
        c.hello()
        base = self.baseline(c)
        code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
                "import test_control as C, time\n"
                f"c = C.Ctl({self.sock!r}); c.hello()\n"
                "assert c.create('doomed', C.wire_rule(dport=5000))[0] == 0\n"
                "print('created', flush=True); time.sleep(60)\n")
        p = subprocess.Popen(["/usr/bin/python3", "-c", code], stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.assertEqual(p.stdout.readline().strip(), "created")
        deadline = time.time() + 5
        while time.time() < deadline:
            doomed = {ch["name"]: ch for ch in c.json(LIST)}.get("doomed")
            if doomed is not None and doomed["ring_count"] == 1024:
                break
            time.sleep(0.05)
        self.assertEqual(doomed["ring_count"], 1024, doomed)
        # Its ring (1024) is full: those mbufs are in use until it dies. Each reading may be
        # off by the burst (32) in flight.
        self.assertGreaterEqual(c.json(STATS)["mempool"]["in_use"], base + 1024 - 64)
        p.send_signal(signal.SIGKILL)
        p.wait()
        deadline = time.time() + 5
        while time.time() < deadline and "doomed" in {ch["name"] for ch in c.json(LIST)}:
            time.sleep(0.05)
        self.assertNotIn("doomed", {ch["name"] for ch in c.json(LIST)})
        self.assertLessEqual(c.json(STATS)["mempool"]["in_use"], base + 32)
        c.close()
        self.stop_ok()

    def test_handshake_timeout(self):
        """Connections that never say HELLO hold an entry for control.hello_timeout_ms at most:
        with all 128 taken, ncctl says the daemon is busy (not gone); once they are closed
        (and counted), it gets in."""
        import socket
        c = self.start(control_extra={"hello_timeout_ms": 1000})
        idle = []
        for _ in range(128):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(self.sock)
            idle.append(s)
        self.addCleanup(lambda: [s.close() for s in idle])
        r = subprocess.run([T.NCCTL, "-s", self.sock, "-c", "show mempool"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("the daemon is busy: 128 connections", r.stderr)
        self.assertNotIn("gone", r.stderr)
        for s in idle:
            s.settimeout(5)         # the first waits out hello_timeout_ms
            self.assertEqual(s.recv(100), b"", "closed by the daemon")
        r = subprocess.run([T.NCCTL, "-s", self.sock, "--json", "-c", "show mempool"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        c.hello()
        ctl = c.json(STATS)["control"]
        self.assertEqual((ctl["hello_timeouts"], ctl["refused"], ctl["connections"]),
                         (128, 1, 1), ctl)
        c.close()
        self.stop_ok()

    def test_reload_on_sighup(self):
        """SIGHUP reloads the config in place: static channels added, removed and changed
        (the unchanged one keeps its id and counters), control.allow and limits swapped; a
        config that changes what needs a restart, or does not load, changes nothing; the
        daemon says READY, RELOADING and STOPPING on $NOTIFY_SOCKET, as systemd expects."""
        import socket
        note = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        note.bind(os.path.join(self.w, "notify"))
        note.settimeout(10)
        self.addCleanup(note.close)
        os.environ["NOTIFY_SOCKET"] = os.path.join(self.w, "notify")
        try:
            c = self.start()
        finally:
            del os.environ["NOTIFY_SOCKET"]
        self.assertEqual(note.recv(100), b"READY=1")
        c.hello()
        before = {ch["name"]: ch for ch in c.json(LIST)}
        with open(self.daemon.config) as f:
            cfg = json.load(f)

        def reload(new, want_ok):
            with open(self.daemon.config, "w") as f:
                f.write(new if isinstance(new, str) else json.dumps(new))
            self.daemon.proc.send_signal(signal.SIGHUP)
            self.assertEqual((note.recv(100), note.recv(100)), (b"RELOADING=1", b"READY=1"))
            return c.json(STATS)["reload"]
        new = json.loads(json.dumps(cfg))
        new["channels"] = [{"name": "dns", "match": {"proto": "udp", "dport": 53}},
                           {"name": "hi", "match": {"proto": "udp", "dport": 6000},
                            "priority": 3},
                           {"name": "web", "match": {"proto": "tcp", "dport": 80}}]
        new["control"]["allow"] = [{"uid": 0}, {"uid": 65534, "dport": "80"}]
        new["control"]["limits"] = {"channels": 3}
        r = reload(new, True)
        self.assertEqual((r["reloads"], r["failures"]), (1, 0), r)
        self.assertTrue(r["last"].endswith(": 1 channels added, 0 removed, 1 changed, 0 refused; "
                                           "2 allow entries"), r)
        after = {ch["name"]: ch for ch in c.json(LIST)}
        self.assertEqual(sorted(after), ["dns", "hi", "web"])
        self.assertEqual(after["dns"]["id"], before["dns"]["id"], "unchanged: the same channel")
        self.assertIn("priority 3", after["hi"]["rule"])
        # The new allow entry is in force: uid 65534 gets past control.allow for port 80 (not
        # EPERM), and is refused only because the operator's web channel has the flow.
        probe = ("import sys; sys.path.insert(0, sys.argv[2]); import nc_wire as W\n"
                 "c = W.Ctl(sys.argv[1]); c.hello()\n"
                 "print(c.create('mine', W.rule(proto=6, dport=80, sport=9))[0])\n")
        shutil.copy(W.__file__, self.w)
        os.chmod(self.w, 0o755)
        os.chmod(self.sock, 0o666)
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "/usr/bin/python3", "-c", probe, self.sock, self.w],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.stdout.strip(), str(-errno.EADDRINUSE), p.stdout + p.stderr)
        # What needs a restart: refused, nothing changes; the same for a broken file.
        worse = json.loads(json.dumps(new))
        worse["ports"][0]["device"] += ",x=1"
        worse["channels"] = worse["channels"][:1]
        r = reload(worse, False)
        self.assertEqual((r["reloads"], r["failures"]), (1, 1), r)
        self.assertIn("ports changed, which needs a restart", r["last"])
        r = reload("{ not json", False)
        self.assertEqual((r["reloads"], r["failures"]), (1, 2), r)
        self.assertEqual(sorted(ch["name"] for ch in c.json(LIST)), ["dns", "hi", "web"])
        self.assertIn("reload: ", self.daemon.output())
        c.close()
        self.stop_ok()
        self.assertEqual(note.recv(100), b"STOPPING=1")

    def test_hostile_hellos(self):
        """HELLOs an unprivileged user shapes to hurt, each on a connection of its own: a
        length between version 4's and 5's, a range upside down, version 0, a build without
        its NUL, a body of 60,000 bytes. Each is refused or taken as the protocol says (the
        unterminated build cut to 127 bytes), and the daemon answers on."""
        self.start()
        os.chmod(self.w, 0o755)
        os.chmod(self.sock, 0o666)
        shutil.copy(W.__file__, self.w)
        probe = ("import os, struct, sys; sys.path.insert(0, sys.argv[2]); import nc_wire as W\n"
                 "ctl = W.HELLO_F_CONTROL\n"
                 "bodies = [b'\\0' * 20,\n"
                 "          W.HELLO_BODY.pack(4, 1, ctl, 5, b''),\n"
                 "          W.HELLO_BODY.pack(0, 1, ctl, 0, b''),\n"
                 "          W.HELLO_BODY.pack(5, 1, ctl, 4, b'A' * 128),\n"
                 "          W.HELLO_BODY.pack(5, 1, ctl, 4, b'B') + b'\\xff' * 59856]\n"
                 "held = []\n"
                 "for b in bodies:\n"
                 "    c = W.Ctl(sys.argv[1]); held.append(c)\n"
                 "    print(c.call(W.HELLO, b)[0], flush=True)\n"
                 "sys.stdin.readline()\n")
        p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              "/usr/bin/python3", "-c", probe, self.sock, self.w],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        got = [int(p.stdout.readline()) for _ in range(5)]
        self.assertEqual(got, [-errno.EINVAL, -errno.EPROTO, -errno.EPROTO, 0, 0])
        c = Ctl(self.sock)
        c.hello(flags=W.HELLO_F_CONTROL)
        builds = sorted(cl["build"] for cl in c.json_cli("show clients")
                        if cl["uid"] == 65534 and cl["hello"])
        self.assertEqual(builds, ["A" * 127, "B"])
        self.assertEqual(c.json_cli("show version")["control_protocol"], CONTROL_PROTOCOL_VERSION)
        c.close()
        p.stdin.close()
        p.wait(timeout=30)
        self.stop_ok()

    def test_reload_by_ncctl(self):
        """ncctl reload answers with what the reload did: channels added, removed and
        changed by name, or the error (exit 1); show reload gives the last one's time and
        result, show config the running config; the log names each channel; a user other
        than root may do neither."""
        self.start()

        def ncctl(*cmd, user=()):
            return subprocess.run(list(user) + [T.NCCTL, "-s", self.sock] + list(cmd),
                                  capture_output=True, text=True, timeout=30)
        with open(self.daemon.config) as f:
            cfg = json.load(f)
        new = json.loads(json.dumps(cfg))
        new["channels"] = [{"name": "hi", "match": {"proto": "udp", "dport": 6000},
                            "priority": 3},
                           {"name": "web", "match": {"proto": "tcp", "dport": 80}}]
        with open(self.daemon.config, "w") as f:
            json.dump(new, f)
        t0 = time.time()
        r = ncctl("--json", "-c", "reload")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = json.loads(r.stdout)
        self.assertEqual(got["last_channels"], {"added": ["web"], "removed": ["dns"],
                                                "changed": ["hi"], "refused": []})
        self.assertEqual((got["reloads"], got["failures"], got["last_ok"]), (1, 0, True))
        self.assertLessEqual(abs(got["last_time_seconds"] - t0), 5)
        self.assertEqual(json.loads(ncctl("--json", "-c", "show reload").stdout), got)
        text = ncctl("-c", "show reload").stdout
        self.assertIn("last_ok: yes\nlast_channels:\n  added:\n    - web\n  removed:\n    - dns\n"
                      "  changed:\n    - hi\n  refused: none\n", text)
        self.assertEqual(json.loads(ncctl("--json", "-c", "show config").stdout), new)
        for line in ("reload: channel dns removed", "reload: channel hi changed",
                     "reload: channel web added"):
            self.assertIn(line, self.daemon.output())
        # What needs a restart: the error, exit 1; the result says it did not apply.
        worse = json.loads(json.dumps(new))
        worse["ports"][0]["device"] += ",x=1"
        with open(self.daemon.config, "w") as f:
            json.dump(worse, f)
        r = ncctl("-c", "reload")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("ports changed, which needs a restart; the running config stays",
                      r.stdout + r.stderr)
        last = json.loads(ncctl("--json", "-c", "show reload").stdout)
        self.assertEqual((last["reloads"], last["failures"], last["last_ok"]), (1, 1, False))
        self.assertEqual(json.loads(ncctl("--json", "-c", "show config").stdout), new)
        # Not root: refused, both.
        os.chmod(self.w, 0o755)
        os.chmod(self.sock, 0o666)
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        for cmd in ("reload", "show config"):
            r = ncctl("-c", cmd, user=nobody)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("root or the daemon's user only", r.stdout + r.stderr)
        self.stop_ok()

    def test_rates(self):
        """show port stats and show channel give rates over the last interval (about a
        second): the port's rx rate is what two readings of its counter a second apart give,
        bits are 8 times the frames' bytes, a channel nobody empties drops at its hit rate,
        and a channel younger than two samples has none yet."""
        c = self.start()
        c.hello()

        def show(line):
            status, body = c.cli(line, W.CLI_F_JSON)
            self.assertEqual(status, 0, body)
            return json.loads(body)
        T.wait_until(lambda: show("show port stats wire0")[0]["rates"] is not None and
                     show("show channel hi")["rates"] is not None, timeout=10,
                     what="two samples, a second apart")
        t0, rx0 = time.time(), show("show port stats wire0")[0]["rx"]
        time.sleep(1)
        t1, p = time.time(), show("show port stats wire0")[0]
        ours = (p["rx"] - rx0) / (t1 - t0)
        r = p["rates"]
        self.assertGreaterEqual(r["interval_s"], 0.9, r)
        self.assertLess(r["interval_s"], 2.5, r)
        self.assertGreater(r["rx_pps"], 0, r)
        self.assertTrue(0.5 < r["rx_pps"] / ours < 2, (r, ours))
        # 62-byte frames (Ethernet, IPv4, UDP, 20 bytes): bits a second are 496 a packet.
        self.assertAlmostEqual(r["nic_rx_bps"] / r["nic_rx_pps"], 62 * 8, delta=8)
        # What the exception device (net_null, which generates 64-byte packets) sends out.
        self.assertGreater(r["nic_tx_pps"], 0, r)
        self.assertAlmostEqual(r["nic_tx_bps"] / r["nic_tx_pps"], 64 * 8, delta=8)
        hi = show("show channel hi")["rates"]
        self.assertEqual(hi["delivered_pps"], 0, hi)    # its ring is full: nobody empties it
        self.assertGreater(hi["hits_pps"], 0, hi)
        self.assertAlmostEqual(hi["drop_pps"] / hi["hits_pps"], 1, delta=0.05)
        self.assertEqual(c.create("young", wire_rule(dport=5000))[0], 0)
        self.assertIsNone(show("show channel young")["rates"])
        text = subprocess.run([T.NCCTL, "-s", self.sock, "-c", "show port stats wire0"],
                              capture_output=True, text=True, check=True).stdout
        self.assertRegex(text, r"\nrates:\n  interval_s: \d\.\d{3}\n  rx_pps: \d+\n")
        c.close()
        self.stop_ok()

    def test_permissions(self):
        """An allow entry's dport bounds the channels its user creates, root too; static
        channels are the operator's, and root attaches to any of them (their "attach" names
        the other users who may)."""
        c = self.start(allow=[{"uid": os.getuid(), "dport": "1024-65535"}])
        c.hello()
        self.assertEqual(c.create("low", wire_rule(dport=53))[0], -errno.EPERM)
        self.assertEqual(c.create("anyport", wire_rule())[0], -errno.EPERM)
        self.assertEqual(c.create("high", wire_rule(dport=5000))[0], 0)
        self.assertEqual(c.call(ATTACH, NAME.pack(b"dns"))[0], 0)
        status, body = c.call(ATTACH, NAME.pack(b"hi"))
        self.assertEqual(status, 0)
        self.assertEqual(CHANNEL.unpack(body)[3].rstrip(b"\0"), b"hi")
        self.assertEqual(c.call(ATTACH, NAME.pack(b"nope"))[0], -errno.ENOENT)
        c.close()
        self.stop_ok()

    def test_garbage_messages(self):
        """10,000 random, truncated, oversized and out-of-order messages: the daemon answers
        or hangs up, keeps running, and serves a well-behaved client correctly."""
        c = self.start()
        rnd = random.Random(11)
        sent = replies = 0
        bad = None
        while sent < 10000:
            if bad is None:
                bad = Ctl(self.sock)
            kind = rnd.randrange(6)
            if kind == 0:
                raw = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40)))
            elif kind == 1:      # a valid header with a lying length
                raw = REQ.pack(MAGIC, rnd.randrange(1, 8), 1, rnd.randrange(1000), 0)
            elif kind == 2:      # an unknown type
                raw = REQ.pack(MAGIC, rnd.randrange(8, 65536), 1, 0, 0)
            elif kind == 3:      # a create before HELLO, or with random fields
                body = bytes(rnd.randrange(256) for _ in range(112))
                raw = REQ.pack(MAGIC, CREATE, 1, len(body), 0) + body
            elif kind == 4:      # oversized
                raw = REQ.pack(MAGIC, STATS, 1, 70000, 0) + b"z" * 70000
            else:                # a truncated request
                raw = REQ.pack(MAGIC, HELLO, 1, 8, 0)[:rnd.randrange(1, 16)]
            try:
                bad.send(0, raw=raw)
                bad.recv()
                replies += 1
            except (ConnectionError, BrokenPipeError, ConnectionResetError):
                bad.close()
                bad = None
            sent += 1
        if bad is not None:
            bad.close()
        self.assertGreater(replies, 1000)
        self.assertIsNone(self.daemon.proc.poll(), "the daemon survives")
        c.hello()
        status, (cid, _) = c.create("after", wire_rule(dport=5000))
        self.assertEqual(status, 0)
        chans = T.wait_until(lambda: (lambda cs: cs.get("after", {}).get("hits", 0) > 0 and cs)(
            {ch["name"]: ch for ch in c.json(STATS)["channels"]}), what="hits on 'after'")
        self.assertEqual(set(chans), {"dns", "hi", "after"})   # garbage created nothing
        c.close()
        self.stop_ok()


    # ---- libnetchannel, through tests/integration/nc_client_test.c ----

    def client(self, *args, timeout=30):
        exe = os.path.join(T.BUILD, "tests/integration/nc_client_test")
        return subprocess.run([exe, self.sock] + [str(a) for a in args], capture_output=True,
                              text=True, timeout=timeout)

    def test_library_create_and_receive(self):
        """A library client creates a channel and receives exactly its flow, by copy and
        zero-copy; when it exits, its channel is gone and the mbufs are back."""
        c = self.start()
        c.hello()
        base = self.baseline(c)
        for mode in ("copy", "zerocopy"):
            r = self.client("create", "lib5000", 5000, 500, mode)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("received 500", r.stdout)
            self.assertNotIn("lib5000", {ch["name"] for ch in c.json(LIST)})
        # Refusals come back as errors with the library's words.
        other = Ctl(self.sock)
        other.hello()
        self.assertEqual(other.create("holder", wire_rule(dport=5000))[0], 0)
        r = self.client("create", "lib5000", 5000, 1, "copy")
        self.assertEqual(r.returncode, 2)
        # The reason names the channel that holds the rule (its owner's, root, may see it).
        self.assertRegex(r.stdout, r"same rule and priority.*: channel holder \(\d+\) has the "
                                   r"same rule and priority")
        other.close()
        T.wait_until(lambda: c.json(STATS)["mempool"]["in_use"] <= base + 32,
                     what="holder's ring back in the pool")
        c.close()
        self.stop_ok()

    def test_library_attach_static(self):
        c = self.start()
        r = self.client("attach", "hi", 6000, 300, "copy")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("received 300", r.stdout)
        # As fast as it can, each burst freed at once: every mbuf is counted back. (The
        # library used to count a freed burst's marks after the enqueue on its free ring,
        # when a worker may already have unmarked and reused them: its count of held mbufs
        # crept up until the quota stopped it.)
        r = self.client("attach", "hi", 6000, 300000, "bulk")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("received 300000 held 0\n", r.stdout)
        r = self.client("attach", "nosuch", 6000, 1, "copy")
        self.assertEqual(r.returncode, 2)
        self.assertIn("No such file or directory", r.stdout)
        # Detaching leaves the static channel in place.
        c.hello()
        self.assertIn("hi", {ch["name"] for ch in c.json(LIST)})
        c.close()
        self.stop_ok()

    def test_many_channels(self):
        """More channels than DPDK has memzones (2560): their rings come from the shared
        heap, clients find them through the directory, and max_channels bounds the config's
        channels and clients' alike."""
        from scapy.all import IP, UDP, Ether, Raw
        n, most, base = 2990, 3000, 10000
        frames = [bytes(Ether(src="02:00:00:00:00:01", dst=T.PCAP_MAC) /
                        IP(src="203.0.113.1", dst="192.0.2.1") /
                        UDP(sport=1000 + i, dport=base + ch) / Raw(b"x" * 20))
                  for ch in (n - 1, 2600) for i in range(4)]
        pcap = os.path.join(self.w, "many.pcap")
        T.write_pcap(pcap, frames)
        chans = [{"name": f"m{i}", "match": {"proto": "udp", "dst": "192.0.2.1",
                                             "dport": base + i}, "ring_size": 64}
                 for i in range(n)]
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64}, "max_channels": most,
               "ports": [{"name": "wire0", "device": f"net_pcap0,rx_pcap={pcap},infinite_rx=1",
                          "exception": {"device": "net_null1"}}],
               "workers": [{"lcore": 1}], "control": {"socket": self.sock}, "channels": chans}
        self.daemon = T.Daemon(cfg, self.w, self.prefix)
        self.daemon.start(timeout=60)
        for name, mode in ((f"m{n - 1}", "copy"), ("m2600", "zerocopy")):
            r = self.client("attach", name, base + int(name[1:]), 300, mode)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("received 300", r.stdout)
        c = Ctl(self.sock)
        c.hello()
        ids = []
        for i in range(most - n):
            status, info = c.create(f"x{i}", wire_rule(dport=20000 + i), ring_size=64)
            self.assertEqual(status, 0, i)
            ids.append(info[0])
        self.assertEqual(sorted(ids), list(range(n, most)))
        self.assertEqual(c.create("over", wire_rule(dport=21000))[0], -errno.ENOSPC)
        # A destroyed channel's id and name are free again.
        self.assertEqual(c.call(DESTROY, ID.pack(ids[0]))[0], 0)
        status, info = c.create("x0", wire_rule(dport=21000), ring_size=64)
        self.assertEqual((status, info[0]), (0, ids[0]))
        self.assertEqual(c.create(f"m{n - 1}", wire_rule(dport=21001))[0], -errno.EEXIST)
        c.close()
        self.stop_ok()
        stats = self.daemon.read_stats()
        got = {ch["name"]: ch for ch in stats["channels"]}
        self.assertEqual(len(got), n, "the client's channels went with it")
        self.assertGreaterEqual(got[f"m{n - 1}"]["delivered"], 300)
        self.assertGreaterEqual(got["m2600"]["delivered"], 300)
        self.assertEqual(got["m0"]["hits"], 0)
        self.assertTrue(T.accounting_ok(stats["ports"][0]), stats["ports"][0])

    def test_library_daemon_dies(self):
        """A client blocked in nc_recv gets an error, not a hang, when the daemon dies."""
        self.start().close()
        exe = os.path.join(T.BUILD, "tests/integration/nc_client_test")
        p = subprocess.Popen([exe, self.sock, "create", "quiet", "7000", "1", "copy", "-1"],
                             stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.assertIn("channel quiet", p.stdout.readline())
        self.daemon.proc.kill()
        self.daemon.proc.wait()
        try:
            out, _ = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            self.fail("the client hung after the daemon died")
        self.assertEqual(p.returncode, 1)
        self.assertIn("the daemon is gone", out)


    def test_library_blocking_wakeup(self):
        """A client blocked in nc_recv() sleeps (no CPU) until the kernel sends it datagrams
        through a net_tap port; the worker's eventfd wakes it."""
        ns = f"ncdwk{os.getpid()}"
        port_mac = "02:00:00:00:00:10"
        T.sh("ip", "netns", "add", ns)
        self.addCleanup(T.sh, "ip", "netns", "del", ns)
        cfg = {"eal": EAL, "mempool": {"mbufs": 8191, "cache": 64},
               "ports": [{"name": "wire0", "device": f"net_tap0,iface=nctap0,mac={port_mac}",
                          "exception": {"device": "none"}}],
               "workers": [{"lcore": 1}], "control": {"socket": self.sock}}
        self.daemon = T.Daemon(cfg, self.w, self.prefix, netns=ns)
        self.daemon.start()
        for cmd in (["ip", "addr", "add", "10.9.0.1/24", "dev", "nctap0"],
                    ["ip", "link", "set", "nctap0", "up"],
                    ["ip", "neigh", "add", "10.9.0.2", "lladdr", port_mac, "dev", "nctap0",
                     "nud", "permanent"]):
            T.sh("ip", "netns", "exec", ns, *cmd)
        exe = os.path.join(T.BUILD, "tests/integration/nc_client_test")
        p = subprocess.Popen([exe, self.sock, "create", "sleeper", "7000", "3", "copy", "20000"],
                             stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.assertIn("channel sleeper", p.stdout.readline())

        def cpu_ticks():
            with open(f"/proc/{p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])      # utime + stime

        t0 = cpu_ticks()
        time.sleep(1.0)
        idle = cpu_ticks() - t0
        self.assertLessEqual(idle, 5, "an idle client must sleep, not spin")
        send = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                "for i in range(3): s.sendto(b'wake %d' % i, ('10.9.0.2', 7000))")
        T.sh("ip", "netns", "exec", ns, "/usr/bin/python3", "-c", send)
        try:
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            self.fail("the client was not woken")
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("received 3", out)
        c = Ctl(self.sock)
        c.hello()
        port = c.json(STATS)["ports"][0]
        c.close()
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        self.assertTrue(T.accounting_ok(port), port)
        st = self.daemon.read_stats()
        self.assertTrue(T.accounting_ok(st["ports"][0]), st["ports"][0])


    def test_nc_dump(self):
        """nc-dump, the example: a flow of its own to a pcap, a static channel summarised."""
        c = self.start()
        exe = os.path.join(T.BUILD, "app/examples/nc-dump")
        out = os.path.join(self.w, "dump.pcap")
        r = subprocess.run([exe, "-s", self.sock, "--dport", "5000", "--dst", "192.0.2.1",
                            "-c", "20", "-w", out], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        frames = T.read_pcap(out)
        self.assertEqual(len(frames), 20)
        for f in frames:
            self.assertEqual(struct.unpack("!H", f[36:38])[0], 5000)
        r = subprocess.run([exe, "-s", self.sock, "--channel", "hi", "-c", "3"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 3)
        for line in lines:
            self.assertRegex(line, r"^203\.0\.113\.1\.\d+ > 192\.0\.2\.1\.6000 proto 17 len ")
        # Its own channel went away with it.
        c.hello()
        self.assertEqual({ch["name"] for ch in c.json(LIST)}, {"dns", "hi"})
        c.close()
        # Count only (-q): zero-copy, nothing printed but the total.
        r = subprocess.run([exe, "-s", self.sock, "--dport", "5000", "-q", "-c", "100"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual((r.returncode, r.stdout), (0, ""), r.stderr)
        self.assertIn("nc-dump: 100 packets", r.stderr)
        # ... polling an empty channel for up to 1 ms before each sleep (-b).
        r = subprocess.run([exe, "-s", self.sock, "--dport", "5000", "-q", "-b", "1000",
                            "-c", "100"], capture_output=True, text=True, timeout=30)
        self.assertEqual((r.returncode, r.stdout), (0, ""), r.stderr)
        self.assertIn("nc-dump: 100 packets", r.stderr)
        # ... reading each frame's first 64 bytes (--touch), in an isolated client's region
        # and as a zero-copy client.
        for mode in ([], ["--zero-copy"]):
            r = subprocess.run([exe, "-s", self.sock, "--dport", "5000", "-q", "--touch",
                                "-c", "100"] + mode, capture_output=True, text=True, timeout=30)
            self.assertEqual((r.returncode, r.stdout), (0, ""), r.stderr)
            self.assertIn("nc-dump: 100 packets", r.stderr)
        for bad in ([], ["--channel", "x", "--dport", "1"], ["--dport", "70000"],
                    ["--dport", "1", "--touch"],
                    ["--dport", "1", "-q", "-w", out], ["--dport", "1", "-b", "10"],
                    ["--dport", "1", "-q", "-b", "-1"], ["--dport", "1", "-q", "-b", "2000000"]):
            self.assertEqual(subprocess.run([exe, "-s", self.sock] + bad,
                                            capture_output=True).returncode, 2)
        r = subprocess.run([exe, "-s", os.path.join(self.w, "nosock"), "--dport", "1"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("connect to", r.stderr)
        # -L: the daemon stamps nothing by default, and nc-dump says so.
        r = subprocess.run([exe, "-s", self.sock, "--dport", "5000", "-q", "-L", "-c", "100"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("the daemon does not stamp packets", r.stderr)
        self.assertEqual(subprocess.run([exe, "-s", self.sock, "--dport", "1", "-L"],
                                        capture_output=True).returncode, 2)
        self.stop_ok()

    def test_nc_dump_latency(self):
        """rx_timestamps: every packet nc-dump -q -L takes carries the TSC of its rx burst."""
        self.start(rx_timestamps=True)
        exe = os.path.join(T.BUILD, "app/examples/nc-dump")
        r = subprocess.run([exe, "-s", self.sock, "--dport", "5000", "-q", "-b", "1000", "-L",
                            "-c", "20000"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"rx to dequeue: median ([\d.]+) us, p99 ([\d.]+) us \((\d+) packets\)",
                      r.stderr)
        self.assertIsNotNone(m, r.stderr)
        median, p99, n = float(m.group(1)), float(m.group(2)), int(m.group(3))
        self.assertEqual(n, 20000)
        # A stamp is the TSC of this run's rx burst, a moment before the dequeue: a stale,
        # foreign or misplaced value would be seconds or years off. Not a speed assertion:
        # at most a full ring's wait, far below the bound.
        self.assertLessEqual(median, p99)
        self.assertLess(p99, 1e6)
        self.stop_ok()


if __name__ == "__main__":
    unittest.main(verbosity=2)
