#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The first thing to run on a new machine.
#
# Today it shows the heart of netchanneld, the classifier, deciding where a
# handful of packets go under a small channel table. Once the daemon lands it
# runs netchanneld on config/demo.json in network namespaces and steers real
# traffic (see README.md, "Status").
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/setup.sh build >/dev/null
ninja -C build >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A channel table in ClassBench form (first line = highest priority):
#   0 dns:  udp to 192.0.2.1:53 from anywhere
#   1 web:  tcp to 192.0.2.1:80 and :443 (a range, 80-443)
#   2 drop: anything from 198.51.100.0/24
#   3 high: udp to 192.0.2.1, ports 1024-65535
cat > "$work/rules" <<'RULES'
@0.0.0.0/0	192.0.2.1/32	0 : 65535	53 : 53	0x11/0xFF
@0.0.0.0/0	192.0.2.1/32	0 : 65535	80 : 443	0x06/0xFF
@198.51.100.0/24	0.0.0.0/0	0 : 65535	0 : 65535	0x00/0x00
@0.0.0.0/0	192.0.2.1/32	0 : 65535	1024 : 65535	0x11/0xFF
RULES
names=(dns web drop high)

ip2int() { local IFS=.; set -- $1; echo $(( ($1 << 24) | ($2 << 16) | ($3 << 8) | $4 )); }
packets=(
	"203.0.113.7 192.0.2.1 40000 53 17"
	"203.0.113.7 192.0.2.1 40000 443 6"
	"198.51.100.9 192.0.2.1 40000 53 17"
	"203.0.113.7 192.0.2.1 5353 5353 17"
	"203.0.113.7 192.0.2.1 40000 22 6"
	"203.0.113.7 192.0.2.2 40000 53 17"
)
for p in "${packets[@]}"; do
	set -- $p
	echo "$(ip2int "$1") $(ip2int "$2") $3 $4 $5"
done > "$work/trace"

build/app/bench/nctrie-bench classify --rules "$work/rules" --trace "$work/trace" --out "$work/out"
echo "netchanneld classifier demo: where each packet goes"
printf '  %-40s %s\n' "packet (src -> dst, proto)" "decision"
i=0
while read -r res; do
	set -- ${packets[$i]}
	proto=$([ "$5" = 6 ] && echo tcp || echo udp)
	if [ "$res" = -1 ]; then
		where="no channel: to the kernel (exception path)"
	else
		where="channel '${names[$res]}'"
	fi
	printf '  %-40s %s\n' "$1:$3 -> $2:$4 $proto" "$where"
	i=$((i + 1))
done < "$work/out"
