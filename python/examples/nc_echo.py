#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""An asyncio UDP echo on netchanneld: claims udp/PORT and answers each datagram (IPv4 and
IPv6) with itself, as an IP packet the daemon addresses to the kernel's next hop. It sleeps
on the channel's eventfd between packets. Stops after COUNT echoes, or on SIGINT/SIGTERM.

    python3 nc_echo.py [-s SOCKET] --dport 7 [-c COUNT]
"""
import argparse
import asyncio
import os
import signal
import struct

import netchannel


def checksum(data):
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def udp(src, dst, sport, dport, payload, pseudo_tail):
    """A UDP header and payload from src to dst, its checksum over the pseudo-header."""
    head = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0)
    c = checksum(src + dst + pseudo_tail + head + payload) or 0xffff
    return head[:6] + struct.pack("!H", c) + payload


def reply(frame):
    """The echo of a UDP datagram in an Ethernet frame, as an IP packet; None for others."""
    etype = struct.unpack("!H", frame[12:14])[0]
    ip = frame[14:]
    if etype == 0x0800 and len(ip) >= 20 and ip[9] == 17:
        ihl, total = (ip[0] & 0xf) * 4, struct.unpack("!H", ip[2:4])[0]
        src, dst, seg = ip[12:16], ip[16:20], ip[ihl:total]
        sport, dport = struct.unpack("!HH", seg[:4])
        body = udp(dst, src, dport, sport, seg[8:], struct.pack("!BBH", 0, 17, len(seg)))
        head = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 0, 0x4000, 64, 17, 0,
                           dst, src)
        return head[:10] + struct.pack("!H", checksum(head)) + head[12:] + body
    if etype == 0x86dd and len(ip) >= 48 and ip[6] == 17:
        plen = struct.unpack("!H", ip[4:6])[0]
        src, dst, seg = ip[8:24], ip[24:40], ip[40:40 + plen]
        sport, dport = struct.unpack("!HH", seg[:4])
        body = udp(dst, src, dport, sport, seg[8:], struct.pack("!I3xB", len(seg), 17))
        return struct.pack("!IHBB16s16s", 6 << 28, len(body), 17, 64, dst, src) + body
    return None


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-s", "--socket", default=None)
    ap.add_argument("--dport", type=int, required=True)
    ap.add_argument("-c", "--count", type=int, default=0)
    args = ap.parse_args()
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    echoed = 0
    with netchannel.Client(args.socket) as c:
        ch = c.create(f"py-echo-{args.dport}", dport=args.dport, tx=True)

        def drain():
            """Receive without waiting until nothing is left, then arm the eventfd."""
            nonlocal echoed
            while not done.is_set():
                frame = ch.recv(timeout=0)
                if frame is None:
                    if ch.arm():
                        continue            # packets came in meanwhile
                    return
                r = reply(frame)
                if r is not None:
                    ch.send_ip(r)
                    echoed += 1
                    if args.count and echoed >= args.count:
                        done.set()

        def readable():
            try:
                os.read(ch.fileno(), 8)     # the eventfd's count, cleared
            except BlockingIOError:
                pass
            drain()

        loop.add_reader(ch.fileno(), readable)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, done.set)
        print(f"echoing udp port {args.dport}", flush=True)
        drain()
        await done.wait()
        loop.remove_reader(ch.fileno())
        st = ch.stats()
        print(f"{echoed} echoed; daemon: tx={st['tx']} tx_spoofed={st['tx_spoofed']} "
              f"tx_no_neigh={st['tx_no_neigh']}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
