#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Idempotent machine setup: build and test dependencies, hugepages, the build
# directory. Safe to run again; does only what is missing.
#
#   scripts/setup.sh [BUILD_DIR [MESON_OPTIONS...]]
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
shift || true

# Build: DPDK 22.11 (libraries, PMDs, testpmd and tools), meson/ninja, jansson,
# Check, libnuma, libpcap (capture filters), libmnl (netlink), libmicrohttpd (nc-exporter),
# libxdp and libbpf (net_af_xdp's messages through the daemon's log). Tests and benchmarks:
# scapy (traffic generator), prometheus (its promtool checks nc-exporter's output),
# gnuplot (charts), iproute2 (namespaces); the test bed's peer: ping, iperf3 (a
# bounded TCP throughput run), ethtool (its veth computes its own checksums), hping3
# (floods of UDP, ICMP and TCP SYNs at the exception path's policer).
# Fuzzing: clang and its libFuzzer runtime (scripts/fuzz.sh, build-fuzz). The ABI check
# (scripts/check_abi.py): abigail-tools (abidw, abidiff). Unmodified applications on the
# preload library (test_preload.py, bench.sh apps): socat, sockperf, knot, kdig, dnsperf, dig,
# nsd. The Debian packages (scripts/test_packages.sh): debhelper, dh-python, lintian.
packages=(
	libdpdk-dev dpdk dpdk-dev meson ninja-build pkg-config gcc libc6-dev libmnl-dev
	libjansson-dev check libnuma-dev libpcap-dev libmicrohttpd-dev libxdp-dev libbpf-dev
	python3 python3-scapy gnuplot-nox iproute2 gawk
	iputils-ping iperf3 ethtool prometheus hping3
	socat sockperf knot knot-dnsutils dnsperf bind9-dnsutils nsd
	clang libclang-rt-14-dev abigail-tools
	build-essential debhelper dh-python lintian
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: missing packages: ${missing[*]} (run as root to install)" >&2
		exit 1
	fi
	echo "setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Hugepages: client processes attach to the daemon's hugepage memory, which a
# --no-huge or --in-memory primary cannot offer. None are reserved at boot here.
if [ "$(id -u)" -eq 0 ]; then
	total=$(awk '/^HugePages_Total/ {print $2}' /proc/meminfo)
	if [ "${total:-0}" -lt 512 ]; then
		echo 512 > /proc/sys/vm/nr_hugepages || echo "setup: could not reserve hugepages" >&2
	fi
	if ! grep -qs ' /dev/hugepages hugetlbfs ' /proc/mounts; then
		mkdir -p /dev/hugepages
		mount -t hugetlbfs nodev /dev/hugepages || echo "setup: could not mount hugetlbfs" >&2
	fi
	echo "setup: hugepages: $(awk '/^HugePages_Total/ {print $2}' /proc/meminfo) reserved," \
	     "$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo) free"
else
	echo "setup: not root: hugepages left as they are" >&2
fi

cd "$top"
if [ -f "$build/build.ninja" ]; then
	[ $# -gt 0 ] && meson configure "$build" "$@"
else
	meson setup "$build" "$@" >/dev/null
fi
echo "setup: build directory $build is configured"
