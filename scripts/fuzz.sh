#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fuzz one target with libFuzzer for a bounded time:
#
#   scripts/fuzz.sh TARGET [SECONDS]     TARGET: packet, config, control, classbench, region
#   scripts/fuzz.sh all [SECONDS]        each in turn (what CI does, 60 s each)
#
# Builds build-fuzz with clang (-Dfuzz=true: ASan, UBSan, coverage), starts
# from the seed corpora (scripts/fuzz_seeds.py) and tests/fuzz/regress/, and
# fails on any crash, leak, timeout or broken invariant, keeping the input.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
targets=(packet config control classbench region)
target=${1:-}
secs=${2:-60}
case "$target" in
all) ;;
packet|config|control|classbench|region) targets=("$target") ;;
*) echo "usage: scripts/fuzz.sh packet|config|control|classbench|region|all [SECONDS]" >&2; exit 2 ;;
esac
[[ "$secs" =~ ^[0-9]+$ ]] || { echo "fuzz: SECONDS must be a number" >&2; exit 2; }

CC=clang scripts/setup.sh build-fuzz -Dfuzz=true -Dfuzz_seconds="$secs" \
	-Dbuildtype=debugoptimized >/dev/null
if ! out=$(ninja -C build-fuzz tests/fuzz/seeds.stamp "${targets[@]/#/tests/fuzz/fuzz_}" 2>&1); then
	echo "$out" >&2
	echo "fuzz: build failed" >&2
	exit 1
fi
status=0
for t in "${targets[@]}"; do
	echo "== fuzz $t: $secs s"
	tests/fuzz/run_fuzz.sh "build-fuzz/tests/fuzz/fuzz_$t" "build-fuzz/tests/fuzz/seeds/$t" \
		"tests/fuzz/regress/$t" "$secs" || status=1
done
exit $status
