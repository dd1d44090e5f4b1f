#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One libFuzzer run, bounded: run_fuzz.sh TARGET SEEDS REGRESS SECONDS
# The corpus starts from the seeds and the regression inputs, in a directory
# of the build's own. A crash, leak, timeout or broken invariant fails the
# run; its input is kept and printed, to be added to REGRESS as a test.
set -uo pipefail
exe=$1 seeds=$2 regress=$3 secs=$4
name=$(basename "$exe")
work=$(dirname "$exe")/$name.run
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp "$seeds"/* "$work/corpus/"
find "$regress" -maxdepth 1 -type f ! -name '.*' -exec cp {} "$work/corpus/" \;
log=$work/log
"$exe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$work/artifacts/" "$work/corpus" >"$log" 2>&1
rc=$?
# The loaders print what they refuse: show libFuzzer's own lines only.
grep -E '^#[0-9]+.*(DONE|pulse|INITED)|^stat::|^Done' "$log" | tail -8
if [ $rc -ne 0 ]; then
	echo "$name: failed (exit $rc); the end of its log:"
	tail -40 "$log"
	for f in "$work"/artifacts/*; do
		[ -f "$f" ] || continue
		echo "$name: input kept in $f; add it to $regress as a regression test:"
		od -A d -t x1 "$f" | head -20
	done
	exit 1
fi
echo "$name: $secs s, no crash, leak or broken invariant"
