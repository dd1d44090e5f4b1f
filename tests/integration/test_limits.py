#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""control.limits under attack: a hostile uid 65534 takes all it can over the control socket.
Each attack is refused with a distinct errno and a reason naming the limit, and counted; root's
ncctl and an honest client keep working while the attacker holds what it got."""
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
from nc_wire import CLI_F_JSON, Ctl, STATS  # noqa: E402
from test_isolated import NOBODY, Isolated  # noqa: E402

FLOW = ("203.0.113.1", 2001, 5000)
# Another user, in the socket's group (nogroup) as uid 65534 is.
OTHER = ["setpriv", "--reuid=65533", "--regid=65534", "--clear-groups"]


class Limits(Isolated):
    def setUp(self):
        super().setUp()
        for f in (os.path.join(os.path.dirname(os.path.abspath(__file__)), "nc_attacker.py"),
                  W.__file__):
            shutil.copy(f, self.w)

    def attack(self, *args):
        """The attacker's results, once it has them; it holds on until self.release()."""
        p = subprocess.Popen(NOBODY + ["/usr/bin/python3", os.path.join(self.w, "nc_attacker.py"),
                                       self.sock] + [str(a) for a in args],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=self.zc_env())
        self.procs.append(p)
        line = p.stdout.readline()
        try:
            got = json.loads(line)
            return p, got if args[0] == "look" else [tuple(r) for r in got]
        except ValueError:
            self.fail(line + p.stdout.read())

    def zc_env(self):
        """The environment of an attacker: its zero-copy HELLO names the daemon's build, as a
        client of this build would (NC_ZC_BUILD, asked for as root)."""
        return dict(os.environ, NC_ZC_BUILD=W.Ctl(self.sock).daemon_build().decode())

    def as_other(self, *args):
        """nc_attacker.py run to its end as uid 65533: its results, and the run."""
        r = subprocess.run(OTHER + ["/usr/bin/python3", os.path.join(self.w, "nc_attacker.py"),
                                    self.sock] + list(args), capture_output=True, text=True,
                           input="", timeout=30, env=self.zc_env())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout.splitlines()[0]), r

    def attackers(self):
        """show clients' entries of the attacker's connections."""
        status, body = self.root.cli("show clients", CLI_F_JSON)
        self.assertEqual(status, 0, body)
        return [cl for cl in json.loads(body) if cl["uid"] == 65534]

    def release(self, p):
        """The attacker lets go: its connections close, and the daemon takes back its all."""
        p.stdin.close()
        self.assertEqual(p.wait(timeout=30), 0)
        deadline = time.time() + 5
        while time.time() < deadline:
            if not self.attackers():
                return
            time.sleep(0.1)
        self.fail("the attacker's connections are still open")

    def start_as(self, limits, more=(), control=None, **kw):
        """The daemon, with uid 65534 allowed ports 5000-5001 and these limits (and more
        allow entries, and more control keys)."""
        allow = {"uid": 65534, "dport": "5000-5001", "limits": limits}
        allow.update(kw.pop("allow", {}))
        self.start(self.frames([FLOW], "echo me"),
                   control=dict(control or {}, allow=[{"uid": 0}, allow] + list(more)), **kw)
        self.root = Ctl(self.sock)
        self.assertEqual(self.root.hello(flags=W.HELLO_F_CONTROL)[0], 0)
        self.addCleanup(self.root.close)

    def refusals(self):
        return self.root.json(STATS)["control"]

    def root_still_works(self):
        """root's ncctl gets in, and root's honest client echoes what it receives."""
        r = subprocess.run([T.NCCTL, "-s", self.sock, "-c", "show mempool"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        p = subprocess.Popen([os.path.join(T.BUILD, "app/examples/nc-echo"), "-s", self.sock,
                              "--dport", "5000", "-c", "100"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        out = self.finish(p)
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("100 echoed", out)

    def root_creates(self, name):
        """root's ncctl creates a channel, whatever the attacker holds."""
        r = subprocess.run([T.NCCTL, "-s", self.sock, "-c", f"channel create {name} dport 9"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_connections(self):
        """control.limits.connections, per uid: connections past it are refused as they are
        accepted (EDQUOT, with the limit's name), whether or not they would say HELLO."""
        self.start_as({"connections": 4})
        p, got = self.attack("connect", 6, "hello")
        why = "control.limits.connections: uid 65534 would hold 5, over its 4"
        self.assertEqual(got, [(0, "")] * 4 + [(-errno.EDQUOT, why)] * 2)
        mine = self.attackers()
        self.assertEqual(len(mine), 4)
        self.assertEqual(mine[0]["user"]["connections"], 4, mine[0])
        self.assertEqual(mine[0]["user"]["limits"]["connections"], 4, mine[0])
        self.root_still_works()
        ctl = self.refusals()
        self.assertEqual((ctl["limit_refusals"]["connections"], ctl["refused"]), (2, 2), ctl)
        # The daemon's reason reaches a library user's own words too.
        r = subprocess.run(NOBODY + [os.path.join(self.w, "nc-echo"), "-s", self.sock, "--dport",
                                     "5001", "-c", "1"], capture_output=True, text=True,
                           env=dict(os.environ, LD_LIBRARY_PATH=self.w), timeout=30)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(why, r.stderr)
        self.release(p)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_flood_leaves_room_for_root(self):
        """A user allowed every connection takes all it can: the last connections and client
        slots stay free for root (ENOSPC, "the daemon is busy"), and root gets in."""
        small = {"rx_ring_size": 32, "rx_buffers": 64, "tx_ring_size": 32}
        # 128 connections, then a HELLO on each, a region made for each: on a loaded machine
        # that is more than the default second some wait for theirs; not what this tests.
        self.start_as({"connections": 128, "memory_mb": 4096}, region=small,
                      control={"hello_timeout_ms": 10000})
        p, got = self.attack("connect", 128, "hello")
        # root's own control connection holds one of the 128 entries and one of the 64 slots.
        self.assertEqual(got.count((0, "")), 64 - 1 - 4, got)
        self.assertEqual(got.count((-errno.ENOSPC, "the daemon is busy: 60 clients")), 64, got)
        self.assertEqual(got.count((-errno.ENOSPC, "the daemon is busy: 124 connections")), 5,
                         got)
        self.root_still_works()
        ctl = self.refusals()
        self.assertEqual((ctl["reserve_refusals"], ctl["refused"]), (69, 5), ctl)
        self.release(p)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_channels_memory_eventfds(self):
        """control.limits from the user's allow entry, over all of its connections: channels,
        memory (regions), mbufs (a zero-copy client's quota and rings) and eventfds each
        refused past the limit."""
        self.start_as({"connections": 4, "channels": 8, "memory_mb": 24, "eventfds": 2,
                       "mbufs": 3000}, allow={"zero_copy": True})
        p, got = self.attack("channels", 10, 2)
        why = "control.limits.channels: uid 65534 would hold 9, over its 8"
        self.assertEqual(got, [(0, "")] * 8 + [(-errno.EDQUOT, why)] * 2)
        self.root_creates("ops")
        self.release(p)
        # Two regions of 10.6 MiB fit in 24 MiB; a third does not.
        p, got = self.attack("connect", 3, "hello")
        self.assertEqual(got, [(0, "")] * 2 + [(-errno.EDQUOT, "control.limits.memory_mb: "
                                                "uid 65534 would hold 32 MiB, over its 24")])
        self.release(p)
        # A zero-copy client's quota (2047, a quarter of the pool) and a ring of 512 fit in
        # 3000 mbufs; a second ring does not.
        p, got = self.attack("ring", 512, 2)
        self.assertEqual(got, [(0, ""), (0, ""), (-errno.EDQUOT, "control.limits.mbufs: "
                                                   "uid 65534 would hold 3071, over its 3000")])
        self.assertEqual([cl["mbufs_bound"] for cl in self.attackers()], [2559])
        self.release(p)
        # A ring of 2^20 entries could hold the whole pool: it counts as the pool's 8191.
        p, got = self.attack("ring", 1 << 20, 1)
        self.assertEqual(got, [(0, ""), (-errno.EDQUOT, "control.limits.mbufs: uid 65534 would "
                                                      "hold 10238, over its 3000")])
        self.release(p)
        p, got = self.attack("eventfds", 3)
        self.assertEqual(got, [(0, "")] * 2 + [(-errno.EDQUOT, "control.limits.eventfds: "
                                                "uid 65534 would hold 3, over its 2")])
        self.root_still_works()
        self.release(p)
        self.assertEqual(self.refusals()["limit_refusals"],
                         {"connections": 0, "channels": 2, "memory_mb": 1, "eventfds": 1,
                          "mbufs": 2})
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_pool_reserve_is_roots(self):
        """Two users, each within its own control.limits.mbufs, may not together be able to
        hold more than three quarters of the pool (ENOSPC, naming it): the last quarter is
        the kernel's and root's, whose zero-copy client still gets its rings."""
        self.start_as({"mbufs": 4000}, allow={"zero_copy": True},
                      more=[{"uid": 65533, "dport": "5000-5001", "zero_copy": True,
                             "limits": {"mbufs": 8000}}])
        p, got = self.attack("ring", 1024, 2)
        self.assertEqual(got, [(0, ""), (0, ""), (-errno.EDQUOT, "control.limits.mbufs: "
                                                   "uid 65534 would hold 4095, over its 4000")])
        got, r = self.as_other("ring", "1024", "2")
        self.assertEqual(got, [[0, ""], [0, ""], [-errno.ENOSPC, "mempool: users would be able "
                                                  "to hold 7166 of its 8191 mbufs; the last "
                                                  "quarter is the kernel's and root's"]],
                         r.stdout + r.stderr)
        status, users = self.root.cli("show clients", CLI_F_JSON)
        mine = [cl["user"] for cl in json.loads(users) if cl["uid"] == 65534]
        self.assertEqual((mine[0]["mbufs"], mine[0]["limits"]["mbufs"]), (3071, 4000), mine)
        self.root_still_works()
        self.assertGreaterEqual(self.refusals()["reserve_refusals"], 1)
        self.release(p)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_users_see_their_own(self):
        """A user sees only its own clients and channels, and the static channels it may
        attach to, in show clients, show channel, CHANNEL_LIST and STATS; another channel is
        "no channel" for it, by name or by id, whatever it asks of it (ENOENT, as for a
        channel that does not exist). An allow entry with "view": "all" sees everything, as
        root."""
        self.start_as({}, more=[{"uid": 65533, "view": "all"}])
        for line in ("channel create pub dport 5001 attach uid:65534",
                     "channel create ops dport 9"):
            self.assertEqual(self.root.cli(line)[0], 0, line)
        rooted = Ctl(self.sock)
        self.addCleanup(rooted.close)
        rooted.hello()
        status, (rootch, _) = rooted.create("rootch", W.rule(dport=7000))
        self.assertEqual(status, 0)
        p, got = self.attack("channels", 2, 1)
        self.assertEqual(got, [(0, "")] * 2)
        everything = ["att0", "att1", "hi", "ops", "pub", "rootch"]
        q, mine = self.attack("look", "rootch", rootch)
        q.stdin.close()
        q.wait(timeout=30)
        enoent = -errno.ENOENT
        self.assertEqual(mine, [["att0", "att1", "pub"], ["att0", "att1", "pub"], [65534],
                                enoent, [[enoent, enoent], [enoent, enoent], [enoent, enoent]]])
        r = subprocess.run(NOBODY + [T.NCCTL, "-s", self.sock, "-c", "show channel rootch"],
                           capture_output=True, text=True, timeout=30)
        self.assertIn("no channel 'rootch'", r.stdout + r.stderr)
        seen, r = self.as_other("look", "rootch")
        self.assertEqual(seen[:2], [everything, everything], r.stdout + r.stderr)
        self.assertEqual((set(seen[2]) >= {0, 65533, 65534}, seen[3]), (True, 0), seen)
        # root sees everything too.
        self.assertEqual(sorted(ch["name"] for ch in self.root.json(W.LIST)), everything)
        self.release(p)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_no_taking_others_flows(self):
        """A user's channel may not take another user's flows: a rule that overlaps theirs at
        an equal or higher priority is refused (EADDRINUSE, naming the channel and its owner
        only when the user may see it) and nc-echo keeps echoing; its own channels it may shadow, and so may a user whose
        allow entry says "preempt", which the daemon logs with both owners."""
        self.start_as({}, more=[{"uid": 65533, "dport": "5000", "preempt": True}])
        echo = subprocess.Popen([os.path.join(T.BUILD, "app/examples/nc-echo"), "-s",
                                 self.sock, "--dport", "5000"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.procs.append(echo)
        self.wait_line(echo, "echoing udp port 5000")
        p, got = self.attack("claim", 5000, 10)
        self.assertEqual(got, [(-errno.EADDRINUSE, "it would take the flows of a channel of "
                                "another owner (priority 0, this one 10)")])
        self.release(p)
        # The operator's static channel likewise; below its priority a claim takes nothing.
        self.assertEqual(self.root.cli("channel create pub dport 5001 priority 5 "
                                       "attach uid:65534")[0], 0)
        for prio, want in ((5, [(-errno.EADDRINUSE, "it would take the flows of channel pub "
                                 "of the operator (priority 5, this one 5)")]),
                           (4, [(0, "")])):
            p, got = self.attack("claim", 5001, prio)
            self.assertEqual(got, want, prio)
            self.release(p)
        # nc-echo still has its flow.
        def delivered():
            body = self.root.cli("show channel nc-echo-5000", CLI_F_JSON)[1]
            return json.loads(body)["counters"]["delivered"]
        before = delivered()
        T.wait_until(lambda: delivered() > before, what="nc-echo still receiving")
        # A user with preempt takes the flow; the log names both owners.
        got, r = self.as_other("claim", "5000", "10")
        self.assertEqual(got, [[0, ""]], r.stdout + r.stderr)
        self.assertRegex(self.daemon.output(), r"channel claim of uid 65533 \(pid \d+\) takes "
                         r"flows of channel nc-echo-5000 of uid 0 \(pid %d\) \(priority 10 "
                         r"over 0\)" % echo.pid)
        self.assertEqual(self.refusals()["shadow_refusals"], 2)
        echo.terminate()
        self.assertIn("echoed", self.finish(echo))
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())

    def test_channel_reserve(self):
        """The last channels of max_channels are root's: a user within its own limits still
        cannot take them (ENOSPC, naming max_channels), and root's channel create succeeds."""
        self.start_as({}, max_channels=8)
        p, got = self.attack("channels", 8, 1)
        why = "max_channels: 7 of 8 in use, and the last 1 are root's"
        self.assertEqual(got, [(0, "")] * 6 + [(-errno.ENOSPC, why)] * 2)
        self.root_creates("ops")
        self.assertEqual(self.refusals()["reserve_refusals"], 2)
        self.release(p)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.output())


if __name__ == "__main__":
    unittest.main()
