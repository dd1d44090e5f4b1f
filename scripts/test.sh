#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Set up, build and run every test suite: once in the normal build and once in
# the ASan+UBSan build (SANITIZE=0 skips the latter). Ends with one line of
# totals, "N passed, N failed, N skipped"; exits non-zero on any failure.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

builds=(build)
[ "${SANITIZE:-1}" = 1 ] && builds+=(build-asan)

passed=0 failed=0 skipped=0 status=0
for b in "${builds[@]}"; do
	opts=()
	[ "$b" = build-asan ] && opts=(-Dsanitize=true -Dbuildtype=debugoptimized)
	if ! scripts/setup.sh "$b" "${opts[@]}"; then
		echo "test: setup of $b failed" >&2
		exit 1
	fi
	if ! ninja -C "$b"; then
		echo "test: build of $b failed" >&2
		exit 1
	fi
	echo "== $b: meson test (all suites)"
	meson test -C "$b" --print-errorlogs "${@}" || status=1
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
