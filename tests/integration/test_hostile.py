#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""A hostile local user on the test bed: uid 65534, allowed UDP ports 7-8 only, attacks the
daemon while the real kernel is the peer, beside an honest client (nc-echo, uid 65534 too, on
port 8). Each attack is refused or bounded. The attacks on the pool run under a flood from
the peer, during which ping loses nothing, TCP to the host's kernel works, the honest client
echoes every datagram and the pool stays within its baseline plus 10%; after every attack,
ping and the honest client still work and the pool is back at its baseline."""
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncd_test as T  # noqa: E402
import nc_wire as W  # noqa: E402
from test_datapath import EAL  # noqa: E402
from test_isolated import FD_ATTACKS, NOBODY  # noqa: E402
from test_tx import scapy  # noqa: E402

TESTBED = os.path.join(T.SRC, "scripts/testbed.sh")
POOL = 8191

# The peer floods host:port with UDP for at most secs seconds and n datagrams, 200 at a time
# and at most 20,000 a second: many times what the pool and any ring hold, but not so fast
# that the veth's AF_XDP ring overflows while a worker shares its core with the test (the
# kernel would drop ping and the honest client's datagrams there, before the daemon).
PEER_FLOOD = """
import socket, sys, time
host, port, secs, n = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
start, sent, msg = time.time(), 0, b"f" * 64
while sent < n and time.time() < start + secs:
    for _ in range(200):
        try:
            s.sendto(msg, (host, port))
            sent += 1
        except OSError:
            pass
    time.sleep(max(0.0, start + sent / 20000 - time.time()))
print(sent)
"""


class HostileBed(T.DaemonCase):
    """The test bed with a daemon whose control socket uid 65534 may open."""

    # Tests whose daemon's control section differs: what they change.
    CONTROL = {
        # uid 65534 a zero-copy client, its mbufs bounded to 10% of the pool.
        "test_zero_copy_rings_bounded": {
            "mbuf_quota": 256,
            "allow": [{"uid": 0}, {"uid": 65534, "dport": "7-8", "zero_copy": True,
                                   "limits": {"mbufs": POOL // 10}}]},
    }

    def setUp(self):
        super().setUp()
        os.chmod(self.w, 0o755)
        self.name = f"hb{os.getpid()}"
        self.sock = os.path.join(self.w, "ncd.sock")
        out = subprocess.run([TESTBED, "up", self.name], capture_output=True, text=True)
        self.addCleanup(subprocess.run, [TESTBED, "down", self.name])
        self.assertEqual(out.returncode, 0, out.stderr)
        self.env = dict(line.split("=", 1) for line in out.stdout.split())
        # uid 65534 cannot be relied on to reach the build tree: its copies go here.
        for f in (os.path.join(os.path.dirname(os.path.abspath(__file__)), "nc_attacker.py"),
                  W.__file__, os.path.join(T.BUILD, "app/examples/nc-echo"),
                  os.path.join(T.BUILD, "lib/netchannel/libnetchannel.so.0"),
                  os.path.join(T.BUILD, "lib/netchannel/libnetchannel_zc.so.0")):
            shutil.copy(f, self.w)
        cfg = {"eal": EAL, "mempool": {"mbufs": POOL, "cache": 64},
               "ports": [{"name": "wire0", "device": "net_af_xdp0,iface=veth0"}],
               "workers": [{"lcore": 1}],
               "control": {"socket": self.sock, "group": "nogroup", "mode": "0660",
                           "allow": [{"uid": 0}, {"uid": 65534, "dport": "7-8"}]}}
        cfg["control"].update(self.CONTROL.get(self._testMethodName, {}))
        self.daemon = T.Daemon(cfg, self.w, self.prefix, netns=self.env["TB_HOST_NS"])
        self.daemon.start()
        r = subprocess.run([TESTBED, "host", self.name], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        # Every attack runs beside an honest client, and leaves the pool as it found it.
        self.echo = self.honest()
        self.baseline = self.in_use()

    def ns(self, side, *cmd, timeout=30, check=True, user=()):
        r = subprocess.run(["ip", "netns", "exec", self.env[f"TB_{side}_NS"]] + list(user) +
                           list(cmd), capture_output=True, text=True, timeout=timeout)
        if check:
            self.assertEqual(r.returncode, 0, f"{cmd}: {r.stdout}{r.stderr}")
        return r

    def bg(self, side, *cmd, user=(), stdin=None, env=None):
        """cmd in a namespace, running on; its copies of the libraries are in self.w."""
        p = subprocess.Popen(["ip", "netns", "exec", self.env[f"TB_{side}_NS"]] + list(user) +
                             list(cmd), stdin=stdin, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             env=dict(os.environ, LD_LIBRARY_PATH=self.w, **(env or {})))
        self.procs.append(p)
        return p

    def package_client(self, script, *args):
        """script (Python, importing netchannel) as uid 65534 in the host's namespace, with its
        own copies of the package and of libnetchannel; running on, stdin a pipe."""
        pkg = os.path.join(self.w, "netchannel")
        if not os.path.isdir(pkg):
            shutil.copytree(os.path.join(T.SRC, "python/netchannel"), pkg)
        lib = os.path.join(self.w, "libnetchannel.so.0")
        env = T.python_env(dict(os.environ, PYTHONPATH=self.w, LD_LIBRARY_PATH=self.w,
                                NETCHANNEL_LIB=lib), lib)
        p = subprocess.Popen(["ip", "netns", "exec", self.env["TB_HOST_NS"]] + NOBODY +
                             ["/usr/bin/python3", "-c", script] + list(args), env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        return p

    def ncctl(self, cmd):
        r = subprocess.run([T.NCCTL, "-s", self.sock, "--json", "-c", cmd], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout)

    def in_use(self):
        return self.ncctl("show mempool")["in_use"]

    def attack(self, *args):
        """nc_attacker.py as uid 65534: what it got, and the process, which holds on to it
        all until its stdin closes."""
        # Its zero-copy HELLO names the daemon's build, as a client of this build would.
        p = self.bg("HOST", "/usr/bin/python3", os.path.join(self.w, "nc_attacker.py"),
                    self.sock, *[str(a) for a in args], user=NOBODY, stdin=subprocess.PIPE,
                    env={"NC_ZC_BUILD": W.Ctl(self.sock).daemon_build().decode()})
        line = p.stdout.readline()
        try:
            got = json.loads(line)
            return (got if args[0] == "look" else [tuple(r) for r in got]), p
        except ValueError:
            self.fail(line + p.stdout.read())

    def honest(self):
        """nc-echo as uid 65534 on UDP port 8, echoing."""
        p = self.bg("HOST", os.path.join(self.w, "nc-echo"), "-s", self.sock, "--dport", "8",
                    user=NOBODY)
        self.wait_line(p, "echoing udp port 8")
        return p

    def under_flood(self, port, secs=4.0):
        """A flood of the host's port from the peer, and meanwhile: ping (all answered), TCP to
        the host's kernel (an HTTP fetch), the honest client's echoes (all back), and the pool
        (sampled). Returns the samples."""
        e = self.env
        http = self.bg("HOST", "/usr/bin/python3", "-u", "-m", "http.server", "8000", "--bind",
                       e["TB_HOST4"])
        self.wait_line(http, "Serving HTTP")
        flood = self.bg("PEER", "/usr/bin/python3", "-c", PEER_FLOOD, e["TB_HOST4"], str(port),
                        str(secs), "2000000")
        samples, stop = [], threading.Event()

        def sample():
            while not stop.is_set():
                samples.append(self.in_use())
                time.sleep(0.2)
        t = threading.Thread(target=sample)
        t.start()
        try:
            ping = self.ns("PEER", "ping", "-c", "20", "-i", "0.15", "-W", "2", e["TB_HOST4"],
                           check=False)
            echo = self.ns("PEER", "/usr/bin/python3", "-c", PEER_UDP, e["TB_HOST4"], "8", "10")
            fetch = self.ns("PEER", "/usr/bin/python3", "-c",
                            "import sys, urllib.request as u; "
                            "print(len(u.urlopen(sys.argv[1], timeout=5).read()))",
                            f"http://{e['TB_HOST4']}:8000/", check=False)
        finally:
            stop.set()
            t.join()
        out, _ = flood.communicate(timeout=secs + 30)
        self.assertGreater(int(out), 2 * POOL, "the flood sent more than the pool holds")
        self.assertIn("20 packets transmitted, 20 received, 0% packet loss", ping.stdout,
                      ping.stdout + ping.stderr)
        self.assertEqual(json.loads(echo.stdout), {"echo": 10, "lost": 0}, "the honest client")
        self.assertEqual(fetch.returncode, 0, fetch.stdout + fetch.stderr)
        self.assertGreater(int(fetch.stdout), 0, "TCP to the host's kernel")
        http.kill()
        http.wait()
        return samples

    def assert_pool_bounded(self, samples):
        self.assertTrue(samples, "the pool was sampled during the attack")
        self.assertLessEqual(max(samples), self.baseline + POOL // 10,
                             f"in_use during the attack (baseline {self.baseline}): {samples}")

    def assert_pool_back(self):
        """The pool's in_use back at its baseline, within one burst (32), as the soak and the
        other suites judge it: a PMD frees what it sent when it next sends, so a burst of the
        kernel's last ARP probes may still be in a tx queue."""
        T.wait_until(lambda: self.in_use() <= self.baseline + 32, timeout=10,
                     what=f"the pool's in_use back at its baseline {self.baseline} (within 32; "
                          f"{self.in_use()} when the wait began)")

    def finish_ok(self):
        """After an attack: ping and the honest client still work, the pool is back at its
        baseline, and the daemon stops cleanly."""
        e = self.env
        r = self.ns("PEER", "ping", "-c", "5", "-i", "0.2", "-W", "2", e["TB_HOST4"], check=False)
        self.assertIn("5 packets transmitted, 5 received, 0% packet loss", r.stdout,
                      r.stdout + r.stderr)
        echo = self.ns("PEER", "/usr/bin/python3", "-c", PEER_UDP, e["TB_HOST4"], "8", "5")
        self.assertEqual(json.loads(echo.stdout), {"echo": 5, "lost": 0}, "the honest client")
        self.assert_pool_back()
        self.echo.send_signal(signal.SIGTERM)
        self.assertEqual(self.echo.wait(timeout=10), 0)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def release(self, p):
        p.stdin.close()
        self.assertEqual(p.wait(timeout=30), 0, p.stdout.read())

    def test_control_connection_owns_no_deliver_channel(self):
        """A control connection (no region, no reader) asks for eight deliver channels of its
        port: each is refused with EINVAL and the reason, and a flood of the port leaves the
        pool, ping and the honest client alone."""
        got, p = self.attack("control-deliver", 7, 8)
        for status, why in got:
            self.assertEqual(status, -22, why)
            self.assertIn("may not own a deliver channel", why)
        self.assert_pool_bounded(self.under_flood(7))
        self.release(p)
        self.finish_ok()

    def test_zero_copy_rings_bounded(self):
        """uid 65534, allowed zero-copy with control.limits.mbufs at a tenth of the pool, asks
        for three rings of 256 its client never reads: its quota (256) and two rings fit, the
        third is refused (EDQUOT); the flood fills what it has, and the pool stays within its
        baseline plus 10%."""
        got, p = self.attack("zc-sink", 7, 256, 3)
        self.assertEqual(got, [(0, ""), (0, ""), (0, ""), (-errno.EDQUOT, "control.limits.mbufs: "
                               f"uid 65534 would hold 1024, over its {POOL // 10}")])
        self.assert_pool_bounded(self.under_flood(7))
        self.assertEqual([cl["mbufs_bound"] for cl in self.ncctl("show clients")
                          if cl["uid"] == 65534 and cl["mode"] == "zero-copy"], [768])
        self.release(p)
        self.finish_ok()

    def test_next_hop_waits_bounded_per_client(self):
        """uid 65534 sends IP packets to 100 on-link addresses no host answers ARP for: the
        daemon keeps at most 32 of one client's packets waiting for a neighbour (the rest are
        dropped, tx_no_neigh), and shows how many in show clients."""
        p = self.package_client(NEIGHBOURLESS, self.sock, self.env["TB_HOST4"])
        self.wait_line(p, "sent 100")

        def waiting():
            return [cl["next_hop_waiting"] for cl in self.ncctl("show clients")
                    if cl["uid"] == 65534]
        seen = T.wait_until(lambda: [n for n in waiting() if n > 0], what="packets waiting")
        self.assertLessEqual(max(seen), 32, seen)
        T.wait_until(lambda: self.ncctl("show channel far")["counters"]["tx_no_neigh"] >= 68,
                     timeout=10, what="the rest dropped as unresolved")
        p.stdin.close()
        self.assertEqual(p.wait(timeout=30), 0, p.stdout.read())
        self.finish_ok()

    def test_other_users_channels_look_like_none(self):
        """root's client has a channel of port 7 (uid 65534's port): uid 65534 asking DESTROY
        and CHANNEL_STATS of its id, and ATTACH of its name, gets ENOENT, as for an id and a
        name nobody has; a claim of its flows is refused without naming it; and a channel of
        its own by the same name is made (names are each user's own), which root's ncctl
        tells apart from root's."""
        root = W.Ctl(self.sock)
        self.addCleanup(root.close)
        self.assertEqual(root.hello(flags=0)[0], 0)
        status, (rid, _) = root.create("rootseven", W.rule(proto=17, dport=7))
        self.assertEqual(status, 0)
        got, p = self.attack("look", "rootseven", rid)
        enoent = -errno.ENOENT
        # It sees its own (the honest client's) and nothing of root's.
        self.assertEqual(got, [["nc-echo-8"], ["nc-echo-8"], [65534], enoent,
                               [[enoent, enoent], [enoent, enoent], [enoent, enoent]]])
        self.release(p)
        got, p = self.attack("claim", 7, 0)
        self.assertEqual(got, [(-errno.EADDRINUSE, "it would take the flows of a channel of "
                                                   "another owner (priority 0, this one 0)")])
        self.release(p)
        got, p = self.attack("named", 8, 1, "rootseven")
        self.assertEqual(got, [(0, "")], "a name another user has is free for this one")
        self.assertEqual(self.ncctl("show channel rootseven")["id"], rid, "root's own first")
        mine = [ch for ch in self.ncctl("show channel all") if ch["name"] == "rootseven"]
        self.assertEqual(sorted(ch["owner"]["uid"] for ch in mine), [0, 65534])
        self.release(p)
        self.finish_ok()

    def test_unread_channel_holds_no_mbuf(self):
        """An isolated client's channel that is never read: the flood fills its region and
        the rest is dropped and counted; the daemon holds no mbuf for it."""
        got, p = self.attack("sink", 7)
        self.assertEqual(got, [(0, "")])
        self.assert_pool_bounded(self.under_flood(7))
        ch = self.ncctl("show channel sink")["counters"]
        self.assertGreater(ch["drop_no_buf"] + ch["drop_ring_full"], 0, ch)
        self.release(p)
        self.finish_ok()

    def test_region_holes_with_hugepages_exhausted(self):
        """A client whose region is on hugepages empties the hugepage pool, then tries every
        way to make the daemon fault through its region's descriptors: the daemon's part is
        read-only and sealed, so it can neither write, map writable, punch a hole, resize nor
        seal it; its own part it may punch holes in (the daemon reads zeros there), and it
        does, at random, while it scribbles on the rest and the peer floods its port. The
        daemon runs on, and ping and the honest client lose nothing."""
        shutil.copy(os.path.join(T.BUILD, "tests/integration/nc_iso_client"), self.w)
        bad = self.bg("HOST", os.path.join(self.w, "nc_iso_client"), self.sock, "hostile-go", "7",
                      "no-secret-here", user=NOBODY, stdin=subprocess.PIPE)
        self.wait_line(bad, "connected")
        region = [cl for cl in self.ncctl("show clients") if cl["pid"] == bad.pid][0]["region"]
        self.assertTrue(region["hugepages"], f"the attacker's region is on hugepages: {region}")
        hog = self.bg("HOST", "/usr/bin/python3", "-c", HOG, user=NOBODY, stdin=subprocess.PIPE)
        self.assertGreater(int(self.wait_line(hog, "held").split()[1]), 0)
        self.assertEqual(hugepages_available(), 0, "the hugepage pool is empty")
        bad.stdin.write("go\n")
        bad.stdin.flush()
        self.assertEqual(self.wait_line(bad, "fds"), FD_ATTACKS)
        self.wait_line(bad, "attacking")
        self.assert_pool_bounded(self.under_flood(7))
        self.assertIsNone(self.daemon.proc.poll(), self.daemon.output())
        region = [cl for cl in self.ncctl("show clients") if cl["pid"] == bad.pid][0]["region"]
        self.assertGreater(region["bad_desc"] + region["bad_index"] + region["bad_free"], 0, region)
        bad.kill()
        bad.wait()
        hog.stdin.close()
        self.assertEqual(hog.wait(timeout=30), 0)
        self.finish_ok()

    def test_client_sends_only_as_the_host(self):
        """Channels of port 7 for 0.0.0.0/1, 128.0.0.0/1, ::/1 and 8000::/1 (each a half of the
        Internet) send from 8.8.8.8, from the peer's own address, from the host's port 53 and
        from addresses of the prefix the host does not have: all refused and counted by
        reason. The wire carries only the host's own replies from port 7."""
        e = self.env
        for addr in (e["TB_HOST4"], e["TB_HOST6"]):   # the host's kernel learns the peer's MAC
            self.ns("PEER", "ping", "-c", "1", "-W", "2", addr)
        # Up to 3 frames in 3 s: the 2 replies, and any third the daemon should have refused
        # (the client sends all of its frames at once).
        sniff = self.bg("PEER", "/usr/bin/python3", "-c", SNIFF, "3", "3")
        self.wait_line(sniff, "sniffing")
        spoof = self.package_client(SPOOF, self.sock, e["TB_HOST4"], e["TB_PEER4"],
                                    e["TB_HOST6"], e["TB_PEER6"])
        self.wait_line(spoof, "sent")
        wire = json.loads(self.finish(sniff).splitlines()[-1])
        self.assertEqual(wire, sorted([[e["TB_HOST4"], 7], [e["TB_HOST6"], 7]]))

        def spoofed(name):
            cs = self.ncctl(f"show channel {name}")["counters"]
            return {k: cs[k] for k in ("tx", "tx_spoofed_addr", "tx_spoofed_flow")}
        self.assertEqual(spoofed("lo4"), {"tx": 1, "tx_spoofed_addr": 2, "tx_spoofed_flow": 1})
        self.assertEqual(spoofed("hi4"), {"tx": 0, "tx_spoofed_addr": 1, "tx_spoofed_flow": 0})
        self.assertEqual(spoofed("lo6"), {"tx": 0, "tx_spoofed_addr": 1, "tx_spoofed_flow": 0})
        self.assertEqual(spoofed("hi6"), {"tx": 1, "tx_spoofed_addr": 1, "tx_spoofed_flow": 1})
        spoof.stdin.close()
        self.assertEqual(spoof.wait(timeout=30), 0, spoof.stdout.read())
        self.finish_ok()

    def test_connection_flood_leaves_the_log_short(self):
        """uid 65534 opens and closes connections as fast as it can for 5 s, with and without
        HELLO, holding 20 at a time (over its 16): each kind of line about it is logged a few
        times a second and the rest counted, so the log grows by at most 300 lines."""
        before = len(self.daemon.output().splitlines())
        r = self.ns("HOST", "/usr/bin/python3", "-c", CONN_FLOOD, self.w, self.sock, "5",
                    user=NOBODY)
        self.assertGreater(int(r.stdout), 1000, "the flood's connections")
        T.wait_until(lambda: not [cl for cl in self.ncctl("show clients")
                                  if cl["uid"] == 65534 and cl["pid"] != self.echo.pid],
                     what="the flood's connections closed")
        T.wait_until(lambda: "suppressed" in self.daemon.output(), timeout=5,
                     what="the count of suppressed lines")
        grown = self.daemon.output().splitlines()[before:]
        self.assertLessEqual(len(grown), 300, "\n".join(grown[:50]))
        self.finish_ok()

    def test_source_routes_and_oversize_frames_refused(self):
        """From the host's own address and port: an IPv4 packet with a loose source route,
        an IPv6 one with routing header 0, and a frame over the port's MTU. libnetchannel
        refuses the oversize frame (EMSGSIZE); put on the tx ring by hand it is dropped and
        counted (tx_too_big), and so are the source-routed ones (tx_source_route). Only the
        honest datagram reaches the wire."""
        e = self.env
        s = scapy()
        mac = self.ns("HOST", "cat", "/sys/class/net/veth0/address").stdout.strip()
        peer_mac = self.ns("PEER", "cat", "/sys/class/net/eth0/address").stdout.strip()

        def frame(sport, ip, payload=b"x"):
            return bytes(s.Ether(src=mac, dst=peer_mac) / ip / s.UDP(sport=sport, dport=4000) /
                         s.Raw(payload)).hex()
        lsrr = frame(7, s.IP(src=e["TB_HOST4"], dst=e["TB_PEER4"],
                             options=[s.IPOption_LSRR(routers=[e["TB_PEER4"]])]))
        rh0 = frame(7, s.IPv6(src=e["TB_HOST6"], dst=e["TB_PEER6"]) /
                    s.IPv6ExtHdrRouting(type=0, addresses=[e["TB_PEER6"]]))
        big = frame(7, s.IP(src=e["TB_HOST4"], dst=e["TB_PEER4"]), b"b" * 1600)
        good = frame(7, s.IP(src=e["TB_HOST4"], dst=e["TB_PEER4"]), b"good")
        shutil.copy(os.path.join(T.BUILD, "tests/integration/nc_iso_client"), self.w)
        sniff = self.bg("PEER", "/usr/bin/python3", "-c", SNIFF, "6", "10")
        self.wait_line(sniff, "sniffing")
        p = self.bg("HOST", os.path.join(self.w, "nc_iso_client"), self.sock, "frames", "7",
                    lsrr, rh0, big, good, user=NOBODY, stdin=subprocess.PIPE)
        results = self.wait_line(p, "results").split()[1:]
        self.assertEqual(results, [str(len(lsrr) // 2), str(len(rh0) // 2), "-90",
                                   str(len(good) // 2)], "nc_send(): the big one EMSGSIZE")

        def counters(name):
            cs = self.ncctl(f"show channel {name}")["counters"]
            return {k: cs[k] for k in ("tx", "tx_source_route", "tx_too_big")}
        want = {"tx": 1, "tx_source_route": 2, "tx_too_big": 0}
        T.wait_until(lambda: counters("frames") == want, what=f"frames' counters {want}")
        p.stdin.close()
        self.assertEqual(p.wait(timeout=30), 0, p.stdout.read())
        # Port 7 again, the frame put on the tx ring by hand: libnetchannel's check bypassed.
        raw = self.bg("HOST", os.path.join(self.w, "nc_iso_client"), self.sock, "raw-frames",
                      "7", big, user=NOBODY, stdin=subprocess.PIPE)
        self.wait_line(raw, "queued 1")
        want = {"tx": 0, "tx_source_route": 0, "tx_too_big": 1}
        T.wait_until(lambda: counters("rawframes") == want, what=f"rawframes' counters {want}")
        wire = json.loads(self.finish(sniff).splitlines()[-1])
        self.assertEqual(wire, [[e["TB_HOST4"], 7]], "only the honest datagram on the wire")
        raw.stdin.close()
        self.assertEqual(raw.wait(timeout=30), 0, raw.stdout.read())
        self.finish_ok()

    def test_static_channels_name_who_attaches(self):
        """A static channel of port 7, which uid 65534's allow entry covers: without an
        "attach" entry for it, it is no channel to that user (ENOENT), and the operator's own
        consumer gets it; one that names uid 65534 lets it attach."""
        self.ncctl("channel create ops7 proto udp dport 7")
        self.ncctl("channel create pub7 proto udp dport 7 priority 1 attach uid:65534 "
                   "attach gid:4242")
        got, p = self.attack("attach", "ops7", "pub7")
        self.assertEqual(got, [(-errno.ENOENT, ""), (0, "")])
        self.assertEqual(self.ncctl("show channel pub7")["attach"], [{"uid": 65534},
                                                                     {"gid": 4242}])
        root = W.Ctl(self.sock)
        self.addCleanup(root.close)
        self.assertEqual(root.hello(flags=0)[0], 0)
        self.assertEqual(root.call(W.ATTACH, W.NAME.pack(b"ops7"))[0], 0, "the operator's")
        self.release(p)
        self.finish_ok()

    def test_exporter_under_slow_and_bad_clients(self):
        """uid 65534 holds 64 slowloris connections to nc-exporter from 64 addresses (each
        sends its request a byte every 0.5 s), then sends malformed requests; every scrape
        meanwhile answers in full within 1 s, and the bad requests get a 4xx or a close."""
        exporter = self.bg("HOST", os.path.join(T.BUILD, "app/exporter/nc-exporter"), "-s",
                           self.sock, "-l", "127.0.0.1:9487")
        self.wait_line(exporter, "serving")
        slow = self.bg("HOST", "/usr/bin/python3", "-c", SLOWLORIS, "64", "5", user=NOBODY)
        self.assertEqual(self.wait_line(slow, "slow"), "slow 64")
        took = json.loads(self.ns("HOST", "/usr/bin/python3", "-c", SCRAPE, "8").stdout)
        self.assertEqual(len(took), 8)
        self.assertLess(max(took), 1.0, f"scrape times under 64 slow clients: {took}")
        out = self.finish(slow)
        self.assertIn("still open 64", out, "the slow clients were at it all along")
        bad = self.ns("HOST", "/usr/bin/python3", "-c", BAD_HTTP, user=NOBODY).stdout
        for line in bad.splitlines():
            what, answer = line.split(": ", 1)
            self.assertTrue(answer == "closed" or answer.split()[1][0] == "4", line)
        took = json.loads(self.ns("HOST", "/usr/bin/python3", "-c", SCRAPE, "2").stdout)
        self.assertLess(max(took), 1.0, took)
        self.assertIsNone(exporter.poll(), "nc-exporter still runs")
        exporter.send_signal(signal.SIGTERM)
        self.assertEqual(exporter.wait(timeout=10), 0)
        self.finish_ok()


# n slowloris connections to nc-exporter (127.0.0.1:9487), each from an address of its own
# (127.0.0.2 on), each sending its request a byte every 0.5 s for secs seconds.
SLOWLORIS = """
import socket, sys, time
n, secs = int(sys.argv[1]), float(sys.argv[2])
conns = []
for i in range(n):
    s = socket.socket()
    s.bind(("127.0.0.%d" % (2 + i), 0))
    s.connect(("127.0.0.1", 9487))
    s.send(b"GET /metrics HTTP/1.1\\r\\nHost: x\\r\\n")
    conns.append(s)
print("slow", len(conns), flush=True)
end, k, alive = time.time() + secs, 0, set(conns)
while time.time() < end:
    for s in list(alive):
        try:
            s.send(b"X-Slow-%d: %d\\r\\n" % (k, k))
        except OSError:
            alive.discard(s)
    k += 1
    time.sleep(0.5)
print("still open", len(alive), flush=True)
"""

# n scrapes of nc-exporter, each whole (netchanneld up, the port's counters, a final newline):
# how long each took, as JSON.
SCRAPE = """
import json, sys, time, urllib.request
took = []
for _ in range(int(sys.argv[1])):
    t = time.time()
    with urllib.request.urlopen("http://127.0.0.1:9487/metrics", timeout=5) as r:
        body = r.read().decode()
    took.append(time.time() - t)
    assert "\\nnetchannel_up 1\\n" in body and 'netchannel_port_rx_total{port="wire0"}' in body \\
        and body.endswith("\\n"), body[-200:]
print(json.dumps(took))
"""

# Malformed HTTP to nc-exporter: each request and what came back (its status line, or closed).
BAD_HTTP = """
import socket
reqs = {"garbage": b"\\x00\\xff\\x13garbage\\r\\n\\r\\n",
        "no version": b"GET /metrics\\r\\n\\r\\n",
        "unknown method": b"BREW /metrics HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n",
        "huge header": b"GET /metrics HTTP/1.1\\r\\nHost: x\\r\\nX-Big: " + b"a" * 100000 +
                       b"\\r\\n\\r\\n",
        "body on GET": b"GET /metrics HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: -5\\r\\n\\r\\n"}
for what, req in reqs.items():
    s = socket.create_connection(("127.0.0.1", 9487), timeout=10)
    try:
        s.sendall(req)
        line = s.recv(4096).split(b"\\r\\n")[0].decode(errors="replace")
    except OSError:
        line = ""
    print("%s: %s" % (what, line or "closed"))
    s.close()
"""

# uid 65534 opens and closes connections for secs seconds: HELLO on every other one, 20 open at
# a time (its limit is 16, so some are refused). Prints how many it opened.
CONN_FLOOD = """
import sys, time
sys.path.insert(0, sys.argv[1])
import nc_wire as W
path, secs = sys.argv[2], float(sys.argv[3])
held, n, end = [], 0, time.time() + secs
while time.time() < end:
    c = W.Ctl(path, timeout=1)
    try:
        if n % 2:
            c.send(W.HELLO, W.hello_body(flags=W.HELLO_F_CONTROL))
        held.append(c)
        c.s
    except OSError:
        pass
    n += 1
    if len(held) > 20:
        held.pop(0).close()
for c in held:
    c.close()
print(n)
"""

# The start of the package clients' scripts: udp() builds what they send.
UDP_PACKET = """
import socket, struct, sys
import netchannel

def csum(b):
    b += b"\\0" * (len(b) & 1)
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    return ~(s + (s >> 16)) & 0xffff

def udp(src, dst, sport, payload):
    # An IP packet (IPv4 or IPv6, as src is) of a UDP datagram to port 4000, checksums right.
    fam = socket.AF_INET6 if ":" in src else socket.AF_INET
    s, d = socket.inet_pton(fam, src), socket.inet_pton(fam, dst)
    u = struct.pack("!HHHH", sport, 4000, 8 + len(payload), 0) + payload
    if fam == socket.AF_INET:
        h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(u), 1, 0, 64, 17, 0, s, d)
        return h[:10] + struct.pack("!H", csum(h)) + h[12:] + u
    c = csum(s + d + struct.pack("!IxxxB", len(u), 17) + u) or 0xffff
    u = u[:6] + struct.pack("!H", c) + u[8:]
    return struct.pack("!IHBB16s16s", 0x60000000, len(u), 17, 64, s, d) + u
"""

# uid 65534 with the Python package: channels of udp port 7 for each half of the IPv4 and
# IPv6 address spaces, and from them, IP packets to the peer's port 4000 from forged sources
# and ports, and one honest reply from the host's address for each family.
SPOOF = UDP_PACKET + """
sock, host4, peer4, host6, peer6 = sys.argv[1:6]
with netchannel.Client(sock) as c:
    ch = {n: c.create(n, 7, dst=d, tx=True) for n, d in
          (("lo4", "0.0.0.0/1"), ("hi4", "128.0.0.0/1"), ("lo6", "::/1"), ("hi6", "8000::/1"))}
    for name, src, dst, sport in (
            ("lo4", "8.8.8.8", peer4, 7), ("lo4", peer4, peer4, 7), ("lo4", host4, peer4, 53),
            ("hi4", "200.1.1.1", peer4, 7), ("lo4", host4, peer4, 7),
            ("lo6", "2001:4860::8888", peer6, 7), ("hi6", peer6, peer6, 7),
            ("hi6", host6, peer6, 53), ("hi6", host6, peer6, 7)):
        ch[name].send_ip(udp(src, dst, sport, b"from " + src.encode()))
    print("sent", flush=True)
    sys.stdin.read()
"""

# The peer's eth0, watched: the sources and source ports of the UDP datagrams to port 4000 that
# reach the wire within secs seconds (or once n have), as JSON.
SNIFF = """
import json, socket, struct, sys, time
secs, n = float(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind(("eth0", 0))
s.settimeout(0.2)
print("sniffing", flush=True)
seen, end = [], time.time() + secs
while time.time() < end and len(seen) < n:
    try:
        f = s.recv(2048)
    except socket.timeout:
        continue
    t = struct.unpack("!H", f[12:14])[0]
    if t == 0x0800 and f[23] == 17 and struct.unpack("!H", f[36:38])[0] == 4000:
        seen.append([socket.inet_ntop(socket.AF_INET, f[26:30]),
                     struct.unpack("!H", f[34:36])[0]])
    elif t == 0x86dd and f[20] == 17 and struct.unpack("!H", f[56:58])[0] == 4000:
        seen.append([socket.inet_ntop(socket.AF_INET6, f[22:38]),
                     struct.unpack("!H", f[54:56])[0]])
print(json.dumps(sorted(seen)), flush=True)
"""
# uid 65534 takes every free 2 MiB hugepage it can (as any user may, with MAP_HUGETLB), says
# how many, and holds them until its stdin closes.
HOG = """
import mmap, sys
MAP_HUGETLB, MAP_POPULATE = 0x40000, 0x8000
held = []
while True:
    try:
        held.append(mmap.mmap(-1, 2 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS |
                              MAP_HUGETLB | MAP_POPULATE))
    except OSError:
        break
print("held", len(held), flush=True)
sys.stdin.read()
"""


def hugepages_available():
    """2 MiB hugepages free and promised to no mapping."""
    def read(name):
        with open(f"/sys/kernel/mm/hugepages/hugepages-2048kB/{name}") as f:
            return int(f.read())
    return read("free_hugepages") - read("resv_hugepages")

# uid 65534 with the Python package: from the host's address and port 7, one UDP packet to each
# of 100 on-link addresses (10.99.0.50 on) that no host has.
NEIGHBOURLESS = UDP_PACKET + """
sock, host4 = sys.argv[1:3]
with netchannel.Client(sock) as c:
    ch = c.create("far", 7, tx=True)
    for i in range(100):
        ch.send_ip(udp(host4, "10.99.0.%d" % (50 + i), 7, b"far!"))
    print("sent", 100, flush=True)
    sys.stdin.read()
"""


# The peer's side of an echo exchange: how many of n datagrams came back whole.
PEER_UDP = """
import json, socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2.0)
got = {"echo": 0, "lost": 0}
for i in range(n):
    msg = b"honest %d" % i
    s.sendto(msg, (host, port))
    try:
        while s.recvfrom(2048)[0] != msg:
            pass
        got["echo"] += 1
    except socket.timeout:
        got["lost"] += 1
print(json.dumps(got))
"""


if __name__ == "__main__":
    unittest.main()
