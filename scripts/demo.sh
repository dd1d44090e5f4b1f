#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The first thing to run on a new machine: netchanneld on a real link, with the Linux
# kernel as its peer, steering one UDP port to a user-space echo server while the host's
# kernel goes on answering everything else.
#
# It builds what it needs, brings up scripts/testbed.sh (a "peer" and a "host" network
# namespace joined by a veth pair), runs netchanneld on its embedded default config (the
# host's veth through net_af_xdp, the kernel behind a TAP), and shows from the peer: ping
# and ping6 and an HTTP fetch answered by the host's kernel, UDP port 7 answered by nc-echo
# (an isolated client process on libnetchannel: copies in and out of its own region), port 9
# by a kernel socket, and port 7 by the kernel again once nc-echo has gone; then the
# counters, with ncctl; then a restart of netchanneld, after which the host's addresses on
# the new TAP come back by themselves. Bounded (well under a minute), tears everything down, safe to run
# twice. With --installed, it runs the installed binaries (/usr/bin: the Debian packages, or
# meson install) rather than building its own.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
if [ "${1:-}" = --installed ]; then
	daemon=/usr/bin/netchanneld ncctl_bin=/usr/bin/ncctl nc_echo=/usr/bin/nc-echo
	for b in "$daemon" "$ncctl_bin" "$nc_echo"; do
		[ -x "$b" ] || { echo "demo: --installed: no $b" >&2; exit 1; }
	done
	# Only what the machine needs (hugepages); no build.
	scripts/setup.sh build >/dev/null
elif [ $# -gt 0 ]; then
	echo "usage: scripts/demo.sh [--installed]" >&2
	exit 2
else
	daemon=build/app/netchanneld/netchanneld ncctl_bin=build/app/ncctl/ncctl
	nc_echo=build/app/examples/nc-echo
	scripts/setup.sh build >/dev/null
	ninja -C build >/dev/null
fi

bed=ncdemo
work=$(mktemp -d /tmp/netchanneld-demo.XXXXXX)
prefix=netchanneld
sock=/run/netchanneld/netchanneld.sock
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	# netchanneld exits on SIGTERM; only then do the namespaces go.
	scripts/testbed.sh down "$bed"
	rm -rf "$work" "/var/run/dpdk/$prefix"
	rm -f /dev/hugepages/${prefix}map_* "/run/netchanneld/host.$prefix.wire0.json"
}
trap cleanup EXIT
[ -S "$sock" ] && ncctl_busy=$("$ncctl_bin" -s "$sock" -c help 2>/dev/null | head -1) &&
	[ -n "$ncctl_busy" ] && { echo "demo: a netchanneld already serves $sock: stop it first" >&2; exit 1; }

eval "$(scripts/testbed.sh up "$bed")"
peer() { ip netns exec "$TB_PEER_NS" "$@"; }
# (Background processes are started with ip netns exec itself, so that $! is their pid.)
ncctl() { "$ncctl_bin" -s "$sock" "$@"; }

echo "== test bed: namespace $TB_PEER_NS ($TB_PEER4, $TB_PEER6) -- veth -- $TB_HOST_NS"
echo "== netchanneld on its embedded default config (netchanneld --default-config):"
echo "   veth0 through net_af_xdp, the kernel behind TAP wire0 ($TB_HOST4, $TB_HOST6)"
start_daemon() {   # netchanneld in the host's namespace, as pids[0]; waits until it runs
	ip netns exec "$TB_HOST_NS" "$daemon" >> "$work/daemon.log" 2>&1 &
	pids[0]=$!
	for _ in $(seq 100); do
		grep -q "netchanneld: running" "$work/daemon.log" && return
		kill -0 "${pids[0]}" 2>/dev/null || { cat "$work/daemon.log"; exit 1; }
		sleep 0.1
	done
	cat "$work/daemon.log"
	exit 1
}
start_daemon
scripts/testbed.sh host "$bed"

# The host's kernel: a UDP service answering "kernel:" + the datagram on ports 7 and 9, and
# a web server.
ip netns exec "$TB_HOST_NS" /usr/bin/python3 -u scripts/kernel_udp.py 7 9 > "$work/kudp.log" 2>&1 &
pids+=($!)
ip netns exec "$TB_HOST_NS" /usr/bin/python3 -m http.server 8000 --bind "$TB_HOST4" \
	--directory "$work" > /dev/null 2>&1 &
pids+=($!)
sleep 0.5

ask() {   # ask PORT N: send N datagrams from the peer, say who answered
	peer /usr/bin/python3 - "$TB_HOST4" "$1" "$2" <<'PY'
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
who = {}
for i in range(n):
    msg = b"hello %d" % i
    s.sendto(msg, (host, port))
    try:
        data = s.recvfrom(2048)[0]
        k = "nc-echo (the datagram itself)" if data == msg else "the kernel (\"kernel:...\")"
    except socket.timeout:
        k = "nobody"
    who[k] = who.get(k, 0) + 1
print(f"   udp {host}:{port}: {n} sent; answered by " + ", ".join(f"{k}: {v}" for k, v in who.items()))
PY
}

echo "== from the peer, through netchanneld's exception path to the host's kernel:"
peer ping -c 3 -i 0.2 "$TB_HOST4" | sed -n 's/^\(.*packets transmitted.*\)$/   ping  '"$TB_HOST4"': \1/p'
peer ping -c 3 -i 0.2 "$TB_HOST6" | sed -n 's/^\(.*packets transmitted.*\)$/   ping6 '"$TB_HOST6"': \1/p'
peer /usr/bin/python3 -c "import urllib.request as u
r = u.urlopen('http://$TB_HOST4:8000/', timeout=5)
print('   tcp   http://$TB_HOST4:8000/: HTTP', r.status, len(r.read()), 'bytes from the kernel\'s web server')"
ask 7 3

echo "== nc-echo claims udp port 7 (a channel of its own, created at run time)"
ip netns exec "$TB_HOST_NS" "$nc_echo" -s "$sock" --dport 7 > "$work/echo.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q echoing "$work/echo.log" && break; sleep 0.1; done
sed 's/^/   /' "$work/echo.log"
ask 7 20
ask 9 5
echo "== ncctl show channel nc-echo-7:"
ncctl -c "show channel nc-echo-7" | grep -E "^(name|rule|owner|  kind|  pid)|^  (hits|delivered|tx|tx_spoofed|tx_dropped):" | sed 's/^/   /'

kill "${pids[-1]}"
wait "${pids[-1]}" 2>/dev/null || true
unset 'pids[-1]'
echo "== nc-echo stopped: its channel is gone, and port 7 is the kernel's again"
ask 7 3
echo "== ncctl show port stats wire0 (every packet in one outcome: rx = delivered + to_kernel + drops):"
ncctl -c "show port stats wire0" | grep -E "^(rx|delivered|to_kernel|miss|kernel_tx|client_tx|drop_ring_full):" | sed 's/^/   /'
echo "== ncctl show mempool:"
ncctl -c "show mempool" | grep -E "^(size|in_use|available):" | sed 's/^/   /'

echo "== netchanneld restarted (SIGTERM, then started again, as systemctl restart does): the TAP"
echo "   is made anew, and the addresses testbed.sh gave it come back by themselves (kept in"
echo "   /run/netchanneld/host.$prefix.wire0.json)"
kill "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
: > "$work/daemon.log"
start_daemon
grep -o "port wire0: the host's configuration of its TAP.*" "$work/daemon.log" | sed 's/^/   /'
peer ping -c 3 -i 0.2 -W 2 "$TB_HOST4" | sed -n 's/^\(.*packets transmitted.*\)$/   ping  '"$TB_HOST4"': \1/p'
peer ping -c 3 -i 0.2 -W 2 "$TB_HOST6" | sed -n 's/^\(.*packets transmitted.*\)$/   ping6 '"$TB_HOST6"': \1/p'
