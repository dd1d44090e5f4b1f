#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Write a pcap of mixed traffic and a manifest describing every frame.

    gen_traffic.py --out IN.pcap --manifest M.json --mac PORT_MAC [--dns-flows N]

The traffic: matching and non-matching flows, IPv4 and IPv6 (with extension
headers), VLAN tagged (one and two tags), fragments, ICMP, ARP, frames for
another host, Ethernet padding, a jumbo frame, and malformed frames
(truncated headers, bad checksums, bad lengths, ihl < 5, bad versions).
Every UDP/TCP payload carries "flow=<name> seq=<n>" so that a receiver can
tell which flow a packet belongs to.

The manifest is a JSON list, one object per frame, in order: its 5-tuple
(family, src, dst, proto, sport, dport, or null where there is none),
whether it is a fragment, its malformed reason (the daemon's counter name) or
null, and whether it is for another host; the last fragment of a datagram
that can be reassembled also has "whole", the frame (hex) it makes. The test
decides from it, on its own, where each frame must go.
"""
import argparse
import json

from pcapfile import write_pcap

from scapy.all import (ARP, ICMP, IP, TCP, UDP, Dot1Q, Ether, ICMPv6EchoRequest, IPv6,
                       IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, Raw, fragment,
                       fragment6)

PEER_MAC = "02:00:00:00:00:01"
OTHER_MAC = "02:00:00:00:00:99"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--mac", required=True, help="the port's MAC")
    ap.add_argument("--dns-flows", type=int, default=20)
    ap.add_argument("--no-jumbo", action="store_true",
                    help="leave out the jumbo frames (net_pcap's infinite_rx cannot take them)")
    a = ap.parse_args()

    frames, meta = [], []
    seq = {}

    def payload(flow):
        seq[flow] = seq.get(flow, 0) + 1
        return Raw(load=f"flow={flow} seq={seq[flow]} ".encode() + b"x" * 16)

    def add(frame, family=None, src=None, dst=None, proto=None, sport=None, dport=None,
            frag=False, malformed=None, other_host=False, raw=None):
        data = raw if raw is not None else bytes(frame)
        frames.append(data)
        meta.append(dict(index=len(meta), family=family, src=src, dst=dst, proto=proto,
                         sport=sport, dport=dport, frag=frag, malformed=malformed,
                         other_host=other_host, length=len(data)))

    eth = Ether(src=PEER_MAC, dst=a.mac)

    def udp4(src, dst, sport, dport, flow, pre=eth):
        f = pre / IP(src=src, dst=dst) / UDP(sport=sport, dport=dport) / payload(flow)
        add(f, 4, src, dst, 17, sport, dport)

    # Matching and non-matching IPv4 UDP.
    for i in range(a.dns_flows):
        udp4(f"203.0.113.{i + 1}", "192.0.2.1", 1024 + i, 53, "dns")
    for i in range(5):
        udp4("203.0.113.50", "192.0.2.1", 2000 + i, 54, "udp54")
    # The drop rule outranks dns.
    for i in range(5):
        udp4("198.51.100.7", "192.0.2.1", 3000 + i, 53, "blocked")
    # VLAN tagged, one and two tags.
    for i in range(3):
        udp4("203.0.113.60", "192.0.2.1", 4000 + i, 53, "dns",
             pre=Ether(src=PEER_MAC, dst=a.mac) / Dot1Q(vlan=10))
        udp4("203.0.113.61", "192.0.2.1", 4100 + i, 53, "dns",
             pre=Ether(src=PEER_MAC, dst=a.mac, type=0x88a8) / Dot1Q(vlan=20) / Dot1Q(vlan=30))
    # IPv6 TCP: 80 and 443 match web6 (80-443), 8080 does not.
    for port in (80, 443, 8080):
        for i in range(5):
            f = eth / IPv6(src="2001:db8::99", dst="2001:db8::1") / \
                TCP(sport=40000 + i, dport=port, flags="S") / payload(f"tcp6_{port}")
            add(f, 6, "2001:db8::99", "2001:db8::1", 6, 40000 + i, port)
    # IPv6 with extension headers before TCP: still matches.
    for i in range(2):
        f = eth / IPv6(src="2001:db8::98", dst="2001:db8::1") / IPv6ExtHdrHopByHop() / \
            IPv6ExtHdrDestOpt() / TCP(sport=41000 + i, dport=80) / payload("tcp6_80")
        add(f, 6, "2001:db8::98", "2001:db8::1", 6, 41000 + i, 80)
    # Fragments that never make a datagram (they overlap; the last never comes): given up.
    f = eth / IP(src="203.0.113.70", dst="192.0.2.1", flags="MF", id=7) / \
        UDP(sport=5000, dport=53) / payload("frag")
    add(f, 4, "203.0.113.70", "192.0.2.1", 17, 5000, 53, frag=True)
    f = eth / IP(src="203.0.113.70", dst="192.0.2.1", frag=3, proto=17, id=7) / Raw(b"y" * 24)
    add(f, 4, "203.0.113.70", "192.0.2.1", 17, None, None, frag=True)
    f = eth / IPv6(src="2001:db8::97", dst="2001:db8::1") / IPv6ExtHdrFragment(m=1, id=9) / \
        TCP(sport=42000, dport=80) / payload("frag6")
    add(f, 6, "2001:db8::97", "2001:db8::1", 6, 42000, 80, frag=True)
    # Datagrams in fragments: reassembled, classified by their ports, delivered whole. The last
    # fragment's entry carries the datagram ("whole": the frame it becomes).
    ip = IP(src="203.0.113.71", dst="192.0.2.1", id=77) / UDP(sport=5001, dport=53) / \
        payload("dns") / Raw(b"f" * 40)
    v6 = IPv6(src="2001:db8::99", dst="2001:db8::1") / TCP(sport=42001, dport=80) / \
        payload("web6") / Raw(b"f" * 40)
    for fam, whole, parts in (
            (4, ip, fragment(ip, fragsize=32)),
            (6, v6, fragment6(IPv6(src=v6.src, dst=v6.dst) / IPv6ExtHdrFragment(id=99, nh=6) /
                              Raw(bytes(v6)[40:]), 80))):
        tup = (fam, whole.src, whole.dst, whole.payload.__class__ is UDP and 17 or 6,
               whole.payload.sport, whole.payload.dport)
        for k, part in enumerate(parts):
            add(eth / part, *tup, frag=True)
        meta[-1]["whole"] = bytes(eth / whole).hex()
    # ICMP and ICMPv6, ARP.
    for i in range(3):
        add(eth / IP(src="203.0.113.80", dst="192.0.2.1") / ICMP(id=1, seq=i), 4,
            "203.0.113.80", "192.0.2.1", 1)
    add(eth / IPv6(src="2001:db8::96", dst="2001:db8::1") / ICMPv6EchoRequest(), 6,
        "2001:db8::96", "2001:db8::1", 58)
    for i in range(2):
        add(Ether(src=PEER_MAC, dst="ff:ff:ff:ff:ff:ff") /
            ARP(op=1, psrc="192.0.2.2", pdst="192.0.2.1", hwsrc=PEER_MAC))
    # For another host: not classified, to the kernel unchanged.
    add(Ether(src=PEER_MAC, dst=OTHER_MAC) / IP(src="203.0.113.90", dst="192.0.2.1") /
        UDP(sport=6000, dport=53) / payload("otherhost"), 4, "203.0.113.90", "192.0.2.1",
        17, 6000, 53, other_host=True)
    # Ethernet padding: delivered trimmed to the IP packet.
    f = eth / IP(src="203.0.113.91", dst="192.0.2.1") / UDP(sport=6100, dport=53) / Raw(b"p")
    add(None, 4, "203.0.113.91", "192.0.2.1", 17, 6100, 53, raw=bytes(f) + b"\0" * 17)
    # A jumbo frame (multi-segment mbufs): delivered to dns; as a miss, too big for the kernel.
    if not a.no_jumbo:
        add(eth / IP(src="203.0.113.92", dst="192.0.2.1") / UDP(sport=6200, dport=53) /
            payload("jumbo") / Raw(b"j" * 8900), 4, "203.0.113.92", "192.0.2.1", 17, 6200, 53)
        add(eth / IP(src="203.0.113.92", dst="192.0.2.1") / UDP(sport=6201, dport=54) /
            payload("jumbo_miss") / Raw(b"j" * 8900), 4, "203.0.113.92", "192.0.2.1", 17, 6201,
            54)

    # Malformed, each built to match dns if it were valid.
    good = bytes(eth / IP(src="203.0.113.100", dst="192.0.2.1") / UDP(sport=7000, dport=53) /
                 payload("malformed"))

    def bad(reason, data):
        add(None, raw=data, malformed=reason)

    def patch(data, off, new):
        return data[:off] + new + data[off + len(new):]

    def fix_csum(data):
        ip = IP(data[14:34])
        ip.chksum = None
        hdr = bytes(IP(bytes(ip)))
        return data[:14] + hdr[:20] + data[34:]

    bad("trunc_l2", good[:10])
    bad("trunc_l3", good[:14 + 12])
    bad("bad_csum", patch(good, 14 + 10, b"\x12\x34"))
    bad("bad_ihl", fix_csum(patch(good, 14, b"\x44")))
    bad("bad_len", fix_csum(patch(good, 14 + 2, (len(good) - 14 + 40).to_bytes(2, "big"))))
    bad("bad_len", fix_csum(patch(good, 14 + 2, (12).to_bytes(2, "big"))))
    bad("bad_version", patch(good, 14, b"\x65"))
    bad("trunc_l4", fix_csum(patch(good, 14 + 2, (22).to_bytes(2, "big"))))
    v6 = bytes(eth / IPv6(src="2001:db8::95", dst="2001:db8::1") / TCP(sport=43000, dport=80) /
               payload("malformed6"))
    bad("bad_len", patch(v6, 14 + 4, (len(v6) - 54 + 100).to_bytes(2, "big")))
    bad("trunc_l3", v6[:14 + 30])
    v6x = bytes(eth / IPv6(src="2001:db8::95", dst="2001:db8::1") / IPv6ExtHdrDestOpt() /
                TCP(sport=43001, dport=80))
    bad("bad_ext", patch(v6x, 14 + 4, (4).to_bytes(2, "big"))[:14 + 40 + 4])

    write_pcap(a.out, frames)
    with open(a.manifest, "w") as f:
        json.dump(meta, f, indent=0)


if __name__ == "__main__":
    main()
