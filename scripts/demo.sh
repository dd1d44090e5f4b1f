#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The first thing to run on a new machine: netchanneld steering a mixed pcap of traffic.
#
# It generates traffic (scripts/gen_traffic.py: DNS to a local address, IPv6 web, a blocked
# network, VLANs, fragments, ICMP, ARP, frames for another host, malformed frames), runs
# netchanneld on config/demo.json with net_pcap ports, lets a real client process (a DPDK
# secondary) take the "dns" channel's packets, stops the daemon with SIGTERM and shows where
# every packet went. Bounded (about 5 s), cleans up after itself, safe to run twice.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/setup.sh build >/dev/null
ninja -C build >/dev/null

work=$(mktemp -d /tmp/netchanneld-demo.XXXXXX)
prefix=ncd-demo-$$
daemon_pid=
cleanup() {
	[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
	rm -rf "$work" "/var/run/dpdk/$prefix"
}
trap cleanup EXIT

/usr/bin/python3 scripts/gen_traffic.py --out "$work/in.pcap" --manifest "$work/manifest.json" \
	--mac 02:70:63:61:70:00
sed "s|@DIR@|$work|g" config/demo.json > "$work/config.json"

echo "== netchanneld on config/demo.json: channels dns (udp 192.0.2.1:53), web6 (tcp [2001:db8::1]:80-443), blocked (198.51.100.0/24, drop)"
build/app/netchanneld/netchanneld -c "$work/config.json" --stats "$work/stats.json" \
	-- --file-prefix "$prefix" > "$work/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 50); do
	grep -q "netchanneld: running" "$work/daemon.log" && break
	kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log"; exit 1; }
	sleep 0.1
done

echo "== a client process (nc-dump, on libnetchannel) takes the dns channel's packets for 2 s"
# net_pcap in a secondary re-opens the daemon's output files: keep them out of its reach.
touch "$work/tx.pcap" "$work/kernel.pcap"
unshare -m sh -c "mount --bind /dev/null '$work/tx.pcap' && mount --bind /dev/null '$work/kernel.pcap' &&
	exec build/app/examples/nc-dump -s /run/netchanneld/demo.sock --channel dns \
	-w '$work/dns.pcap' -t 2" 2>&1 | sed 's/^/   /'

kill -TERM "$daemon_pid"
wait "$daemon_pid" && rc=0 || rc=$?
daemon_pid=
echo "== netchanneld stopped on SIGTERM, exit code $rc"

/usr/bin/python3 - "$work" <<'PY'
import json, sys
from scapy.all import rdpcap
w = sys.argv[1]
st = json.load(open(f"{w}/stats.json"))
p = st["ports"][0]
print(f'   port wire0: {p["rx"]} frames in: {p["delivered"]} delivered to channels, '
      f'{p["dropped_by_rule"]} dropped by rule, {p["to_kernel"]} to the kernel, '
      f'{p["drop_too_big"]} too big for the kernel')
print(f'   (rx = delivered + dropped + to_kernel + drops: '
      f'{p["rx"] == sum(p[k] for k in ("delivered", "dropped_by_rule", "to_kernel", "drop_ring_full", "drop_queue_bytes", "drop_exc_full", "drop_no_exception", "drop_too_big"))})')
why = ", ".join(f"{k} {v}" for k, v in p["reasons"].items() if v)
print(f'   why to the kernel: no channel {p["miss"]}, {why}')
for c in st["channels"]:
    print(f'   channel {c["name"]:8} {c["action"]:7}: hits {c["hits"]:3}, delivered {c["delivered"]:3}, '
          f'dropped {c["dropped"]:3}')
print("== the client's dns packets (first 3):")
for pkt in rdpcap(f"{w}/dns.pcap")[:3]:
    ip, udp = pkt["IP"], pkt["UDP"]
    tag = bytes(udp.payload).split(b" x")[0].decode(errors="replace")
    print(f"    {ip.src}:{udp.sport} -> {ip.dst}:{udp.dport}  \"{tag}\"")
print("== what the kernel got through the exception path (first 6 of "
      f'{len(rdpcap(f"{w}/kernel.pcap"))}):')
for pkt in rdpcap(f"{w}/kernel.pcap")[:6]:
    print("   ", pkt.summary())
PY
