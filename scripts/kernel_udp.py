#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""A kernel UDP service for the test bed: on each port given, IPv4 and IPv6, it answers
"kernel:" + the datagram, so that a peer can tell the kernel's answers from nc-echo's.
Prints "ready" once bound; runs until killed."""
import selectors
import socket
import sys

sel = selectors.DefaultSelector()
for fam, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
    for port in map(int, sys.argv[1:]):
        s = socket.socket(fam, socket.SOCK_DGRAM)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((addr, port))
        sel.register(s, selectors.EVENT_READ)
print("ready", flush=True)
while True:
    for key, _ in sel.select():
        data, peer = key.fileobj.recvfrom(65535)
        key.fileobj.sendto(b"kernel:" + data, peer)
