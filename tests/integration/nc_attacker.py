#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""A hostile local user of the control socket (run as uid 65534 by test_limits.py): it takes
all it can, prints one JSON line of what each request got (status, and the daemon's reason),
then holds on to everything until its stdin closes.

    nc_attacker.py SOCKET connect N [hello]   N connections, HELLO on each with "hello"
    nc_attacker.py SOCKET channels N K        N channels over K connections
    nc_attacker.py SOCKET ring SIZE N         N zero-copy channels with rings of SIZE entries
    nc_attacker.py SOCKET eventfds N          N channels, and an eventfd for each
    nc_attacker.py SOCKET claim PORT PRIO     a channel of udp/PORT, any source, at priority PRIO
    nc_attacker.py SOCKET control-deliver PORT N
                                              a control connection (no region): N deliver
                                              channels of udp/PORT, at priorities 0..N-1
    nc_attacker.py SOCKET sink PORT           an isolated client's channel of udp/PORT,
                                              never read
    nc_attacker.py SOCKET named PORT PRIO NAME a channel of udp/PORT called NAME
    nc_attacker.py SOCKET zc-sink PORT SIZE N a zero-copy client's N channels of udp/PORT, rings
                                              of SIZE, never read
    nc_attacker.py SOCKET attach NAME...      an isolated client attaches to each static channel
    nc_attacker.py SOCKET look NAME [ID]      what it sees: CHANNEL_LIST's and STATS' channels,
                                              show clients' uids, show channel NAME's status;
                                              with ID, what DESTROY and CHANNEL_STATS of ID
                                              and of an unused id, and ATTACH of NAME and of
                                              an unused name, answer
"""
import json
import os
import socket
import sys
import time

import nc_wire as W


def unasked(c):
    """A refusal the daemon sent as it accepted the connection, or None."""
    c.s.setblocking(False)
    try:
        data = c.s.recv(4096)
    except BlockingIOError:
        return None
    finally:
        c.s.settimeout(c.timeout)
    if not data:
        return (0, "closed")
    _, _, _, status, _ = W.REP.unpack(data[:W.REP.size])
    return (status, data[W.REP.size:].decode())


def hello(c, flags=0):
    """HELLO's answer: its reply, or the refusal the daemon sent unasked as it accepted. A
    zero-copy HELLO names the daemon's build, which the test passes (NC_ZC_BUILD)."""
    build = os.environ.get("NC_ZC_BUILD", "") if flags & W.HELLO_F_ZEROCOPY else "nc_attacker"
    c.send(W.HELLO, W.hello_body(flags=flags, build=build.encode()))
    status, _, body = c.recv()
    return (status, body.decode() if status < 0 else "")


def create(c, name, ring_size=0):
    """A channel of its own, udp/5000 from a source port no other channel of its user, nor
    of another user running this, has."""
    create.n += 1
    status, body = c.call(W.CREATE, W.create_body(
        name, W.rule(proto=17, dport=5000, sport=1000 + (os.getuid() % 10) * 1000 + create.n),
        ring_size=ring_size))
    return (status, body.decode() if status < 0 else ""), body


create.n = 0


def main():
    path, mode = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    conns, out = [], []
    if mode == "connect":
        # All at once, then HELLO on each: as many as it can before any times out.
        conns = [W.Ctl(path) for _ in range(int(args[0]))]
        for c in conns:
            while True:
                try:
                    c.s
                    break
                except BlockingIOError:    # the listen backlog is full: the daemon accepts
                    c._s.close()
                    c._s = None
                    time.sleep(0.01)
        time.sleep(0.3)
        for c in conns:
            refused = unasked(c)
            if refused is None and len(args) > 1:
                refused = hello(c)
            out.append(refused or (0, ""))
    elif mode == "channels":
        conns = [W.Ctl(path) for _ in range(int(args[1]))]
        for c in conns:
            assert hello(c)[0] == 0
        for i in range(int(args[0])):
            out.append(create(conns[i % len(conns)], f"att{i}")[0])
    elif mode == "ring":
        c = W.Ctl(path)
        conns.append(c)
        out.append(hello(c, W.HELLO_F_ZEROCOPY))
        for i in range(int(args[1])):
            out.append(create(c, f"ring{os.getuid()}-{i}", ring_size=int(args[0]))[0])
    elif mode == "eventfds":
        c = W.Ctl(path)
        conns.append(c)
        assert hello(c)[0] == 0
        for i in range(int(args[0])):
            (status, why), body = create(c, f"efd{i}")
            if status != 0:
                out.append((status, why))
                continue
            cid = W.CHANNEL.unpack(body)[0]
            status, body, fds = c.call_fds(W.EVENTFD, W.ID.pack(cid))
            out.append((status, body.decode() if status < 0 else ""))
    elif mode in ("claim", "control-deliver", "sink", "named"):
        # A channel of udp/PORT: claim, at priority PRIO; sink, never read; named, called
        # NAME (the third argument); control-deliver, N of them (priorities 0..N-1) on a
        # connection that has no region.
        c = W.Ctl(path)
        conns.append(c)
        assert hello(c, W.HELLO_F_CONTROL if mode == "control-deliver" else 0)[0] == 0
        prios = range(int(args[1])) if mode == "control-deliver" else \
            [int(args[1]) if mode in ("claim", "named") else 0]
        for i in prios:
            name = {"control-deliver": f"cd{i}", "named": args[-1]}.get(mode, mode)
            status, body = c.call(W.CREATE, W.create_body(
                name, W.rule(proto=17, dport=int(args[0]), priority=i)))
            out.append((status, body.decode() if status < 0 else ""))
    elif mode == "zc-sink":
        # A zero-copy client's N deliver channels of udp/PORT (priorities 0..N-1), rings of
        # SIZE, never read.
        c = W.Ctl(path)
        conns.append(c)
        out.append(hello(c, W.HELLO_F_ZEROCOPY))
        for i in range(int(args[2])):
            status, body = c.call(W.CREATE, W.create_body(
                f"zc{i}", W.rule(proto=17, dport=int(args[0]), priority=i),
                ring_size=int(args[1])))
            out.append((status, body.decode() if status < 0 else ""))
    elif mode == "attach":
        # An isolated client's ATTACH of each static channel named.
        c = W.Ctl(path)
        conns.append(c)
        assert hello(c)[0] == 0
        for name in args:
            status, body = c.call(W.ATTACH, W.NAME.pack(name.encode()))
            out.append((status, body.decode() if status < 0 else ""))
    elif mode == "look":
        c = W.Ctl(path)
        conns.append(c)
        assert hello(c, W.HELLO_F_CONTROL)[0] == 0
        status, body = c.cli("show clients", W.CLI_F_JSON)
        out = [sorted(ch["name"] for ch in c.json(W.LIST)),
               sorted(ch["name"] for ch in c.json(W.STATS)["channels"]),
               sorted({cl["uid"] for cl in json.loads(body)}),
               c.cli(f"show channel {args[0]}", W.CLI_F_JSON)[0]]
        if len(args) > 1:
            # Probing: another user's channel by id and by name, and ones that do not exist.
            iso = W.Ctl(path)
            conns.append(iso)
            assert hello(iso)[0] == 0
            out.append([[c.call(t, W.ID.pack(i))[0] for t in (W.DESTROY, W.CHAN_STATS)]
                        for i in (int(args[1]), 4000)] +
                       [[iso.call(W.ATTACH, W.NAME.pack(n.encode()))[0]
                         for n in (args[0], "no-such-channel")]])
    print(json.dumps(out), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
