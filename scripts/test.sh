#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Set up, build and run every test suite: once in the normal build and once in
# the ASan+UBSan build (SANITIZE=0 skips the latter), but the suites "slow" (the
# classifier's cases at scale) and "packages" (the Debian packages, built,
# installed and purged: not defined there) in the normal build only; and, between the two,
# each libFuzzer target for FUZZ_SECONDS (60) in build-fuzz, built with clang
# (FUZZ=0 skips), two at once. The later builds compile while the normal
# build's tests run, with the CPU those leave (SCHED_IDLE: a test's process
# always goes first), so that no one waits for a compiler.
# Ends with one line of totals, "N passed, N failed, N skipped"; exits
# non-zero on any failure.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

builds=(build)
# Named tests (scripts/test.sh NAME...) are the unit and integration ones.
[ "${FUZZ:-1}" = 1 ] && [ $# -eq 0 ] && builds+=(build-fuzz)
[ "${SANITIZE:-1}" = 1 ] && builds+=(build-asan)
fuzz_targets=(tests/fuzz/seeds.stamp tests/fuzz/fuzz_packet tests/fuzz/fuzz_config
	      tests/fuzz/fuzz_control tests/fuzz/fuzz_classbench tests/fuzz/fuzz_region)
declare -A bg=()

# A build's setup options, compiler, ninja targets and meson test arguments.
settings() {
	opts=() cc=${CC:-cc} targets=() suites=()
	if [ "$1" = build-asan ]; then
		opts=(-Dsanitize=true -Dbuildtype=debugoptimized)
		[ "$nargs" -eq 0 ] && suites=(--no-suite slow)
	fi
	if [ "$1" = build-fuzz ]; then
		# Only the fuzz targets: everything else runs in the other builds.
		opts=(-Dfuzz=true -Dfuzz_seconds="${FUZZ_SECONDS:-60}" -Dbuildtype=debugoptimized)
		cc=clang targets=("${fuzz_targets[@]}") suites=(--no-rebuild --suite fuzz)
	fi
}

nargs=$#
passed=0 failed=0 skipped=0 status=0
for b in "${builds[@]}"; do
	settings "$b"
	# Set up and compiled in the background already (or it failed there: they say why here).
	[ -n "${bg[$b]:-}" ] && wait "${bg[$b]}"
	if ! CC=$cc scripts/setup.sh "$b" "${opts[@]}"; then
		echo "test: setup of $b failed" >&2
		exit 1
	fi
	if ! ninja -C "$b" "${targets[@]}"; then
		echo "test: build of $b failed" >&2
		exit 1
	fi
	if [ "$b" = build ]; then
		for later in "${builds[@]:1}"; do
			settings "$later"
			(
				chrt --idle -p 0 "$BASHPID" >/dev/null
				CC=$cc scripts/setup.sh "$later" "${opts[@]}" >/dev/null 2>&1 &&
					exec ninja -C "$later" "${targets[@]}" >/dev/null 2>&1
			) &
			bg[$later]=$!
		done
		settings "$b"
	fi
	echo "== $b: meson test (${suites[*]:-all suites})"
	meson test -C "$b" --print-errorlogs "${suites[@]}" "${@}" || status=1
	log="$b/meson-logs/testlog.json"
	if [ -f "$log" ]; then
		p=$(grep -c '"result": "OK"' "$log")
		f=$(grep -Ec '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log")
		s=$(grep -c '"result": "SKIP"' "$log")
		echo "== $b: $p passed, $f failed, $s skipped"
		passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	else
		status=1
	fi
done
[ "$failed" -gt 0 ] && status=1
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
