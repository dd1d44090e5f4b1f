#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The test bed: netchanneld on a real link with the Linux kernel as its peer.
#
#   scripts/testbed.sh up   [NAME]   two network namespaces joined by a veth pair
#   scripts/testbed.sh host [NAME]   the host's addresses, on netchanneld's exception TAP
#   scripts/testbed.sh down [NAME]   remove everything `up` made (also after a failure)
#   scripts/testbed.sh env  [NAME]   the names and addresses, as shell variables
#
#   NAME-peer  a host on the wire: eth0, 10.99.0.2/24, fd99::2/64
#   NAME-host  netchanneld's host: veth0 (the wire, which netchanneld takes with
#              net_af_xdp; its XDP program takes the frames from the kernel), and,
#              once netchanneld runs, its exception TAP "wire0" with veth0's MAC, which
#              `host` gives 10.99.0.1/24 and fd99::1/64
#
# NAME defaults to ncdtb. No traffic leaves the namespaces. The peer's eth0 computes
# its checksums itself (tx offload off), as a host's NIC would on a real wire: a veth
# otherwise hands frames over with checksums left for a NIC that is not there.
set -euo pipefail

cmd=${1:-}
name=${2:-ncdtb}
peer=$name-peer
host=$name-host

env_vars() {
	cat <<EOT
TB_PEER_NS=$peer
TB_HOST_NS=$host
TB_WIRE=veth0
TB_TAP=wire0
TB_PEER_IF=eth0
TB_PEER4=10.99.0.2
TB_HOST4=10.99.0.1
TB_PEER6=fd99::2
TB_HOST6=fd99::1
EOT
}

down() {
	ip netns del "$peer" 2>/dev/null || true
	ip netns del "$host" 2>/dev/null || true
}

case "$cmd" in
up)
	down
	trap 'down' ERR
	ip netns add "$peer"
	ip netns add "$host"
	ip link add veth0 netns "$host" type veth peer name eth0 netns "$peer"
	ip -n "$peer" link set lo up
	ip -n "$host" link set lo up
	ip -n "$peer" link set eth0 address 02:99:00:00:00:02
	ip -n "$peer" addr add 10.99.0.2/24 dev eth0
	ip -n "$peer" addr add fd99::2/64 dev eth0 nodad
	ip -n "$peer" link set eth0 up
	ip netns exec "$peer" ethtool -K eth0 tx off >/dev/null
	# The host's side carries no address: the kernel's addresses go on the TAP.
	ip -n "$host" link set veth0 up
	sysctl -q -w net.ipv6.conf.all.disable_ipv6=0 >/dev/null 2>&1 || true
	env_vars
	;;
host)
	# netchanneld creates the TAP at start: wait for it (10 s at most).
	for _ in $(seq 100); do
		ip -n "$host" link show wire0 >/dev/null 2>&1 && break
		sleep 0.1
	done
	ip -n "$host" link show wire0 >/dev/null 2>&1 ||
		{ echo "testbed: no TAP wire0 in $host: is netchanneld running?" >&2; exit 1; }
	ip -n "$host" addr replace 10.99.0.1/24 dev wire0
	ip -n "$host" addr replace fd99::1/64 dev wire0 nodad
	ip -n "$host" link set wire0 up
	;;
down)
	down
	;;
env)
	env_vars
	;;
*)
	echo "usage: $0 up|host|down|env [NAME]" >&2
	exit 2
	;;
esac
