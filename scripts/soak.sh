#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# netchanneld under sustained traffic and faults for MINUTES (default 10), then
# checks: mempool back to baseline, RSS stable, nothing misdelivered, every
# port's accounting adds up (scripts/soak.py says what it does). Bounded: it
# stops by itself, and a watchdog ends it 3 minutes after its time.
#
#   scripts/soak.sh [MINUTES]
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
minutes=${1:-10}
[[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "usage: scripts/soak.sh [MINUTES]" >&2; exit 2; }
scripts/setup.sh build >/dev/null
ninja -C build >/dev/null
limit=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 + 180 }')
exec timeout --signal=TERM --kill-after=30 "$limit" /usr/bin/python3 scripts/soak.py "$minutes"
