#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages, as an administrator gets them: built from debian/ by
# dpkg-buildpackage -b -us -uc in a copy of the tree, held to lintian (no error, no warning
# that debian/*.lintian-overrides does not give a reason for), installed on this machine
# with apt, checked, and purged, after which nothing they installed is left.
#
# Checks, installed: netchanneld --version; --check-config on the shipped examples (the
# one in /etc where there is the eth0 it names); the unit is
# enabled, its postinst does not start it, and systemd-analyze verify passes; the demo
# (scripts/demo.sh --installed) on the installed binaries; a C client built with pkg-config
# against libnetchannel-dev (and libnctrie-dev); import netchannel as uid 65534;
# netchannel-run finds its library; and dpkg-gensymbols, with libnetchannel0's symbols
# file, fails on a symbol the library no longer has.
#
# Needs root (apt, dpkg); scripts/setup.sh installs the build tools. Usage:
#   scripts/test_packages.sh [WORKDIR]   (default: a temporary directory, removed after)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-}
keep=1
if [ -z "$work" ]; then
	work=$(mktemp -d /tmp/netchanneld-packages.XXXXXX)
	keep=0
fi
packages=(netchanneld libnetchannel0 libnetchannel-dev libnctrie0 libnctrie-dev
	  python3-netchannel netchannel-preload)
checks=0

say() { echo "test_packages: $*"; }
fail() { echo "test_packages: FAIL: $*" >&2; exit 1; }
ok() { checks=$((checks + 1)); say "ok: $*"; }

installed() { dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q "install ok installed"; }
purge() {
	local here=()
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${Status}\n' "$p" >/dev/null 2>&1 && here+=("$p")
	done
	[ ${#here[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${here[@]}" \
		>"$work/purge.log" 2>&1
}
cleanup() {
	purge || true
	[ "$keep" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

for p in "${packages[@]}"; do
	installed "$p" && fail "$p is installed already: purge it first (this test purges it)"
done

# A copy of the tree as git knows it (tracked and new files, not ignored ones): the build
# writes debian/ and obj-*/ there, and the packages one level up.
say "copying the tree to $work/src"
mkdir -p "$work/src"
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
	xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$work/src"

say "dpkg-buildpackage -b -us -uc (log: $work/build.log)"
if ! (cd "$work/src" && dpkg-buildpackage -b -us -uc -jauto) >"$work/build.log" 2>&1; then
	tail -40 "$work/build.log" >&2
	fail "dpkg-buildpackage"
fi
changes=$(ls "$work"/netchanneld_*.changes)
for p in "${packages[@]}"; do
	ls "$work/${p}_"*.deb >/dev/null 2>&1 || fail "no package $p"
done
ok "built ${#packages[@]} packages"

# lintian: errors and warnings fail; an override must carry its reason (a comment above it).
# Its temporary files (mldbm-*, which it leaves) go in the work directory.
mkdir -p "$work/tmp"
if ! TMPDIR="$work/tmp" lintian --fail-on error,warning --info "$changes" >"$work/lintian.log" 2>&1; then
	cat "$work/lintian.log" >&2
	fail "lintian"
fi
for f in "$top"/debian/*.lintian-overrides; do
	[ -e "$f" ] || continue
	awk -v f="$f" '/^#/ { why = 1; next } /^[^ \t]/ && !why { print f ": an override without a reason: " $0; bad = 1 }
		/^[^ \t#]/ { why = 0 } END { exit bad }' "$f" || fail "lintian overrides without reasons"
done
ok "lintian: no error, no warning ($(grep -c . "$work/lintian.log" || true) lines of information)"

# dpkg-gensymbols at the build's check level: a library without a symbol its symbols file
# lists (here the file lists one more than the library has) is a failure.
lib=$(ls "$work"/src/debian/libnetchannel0/usr/lib/*/libnetchannel.so.0.* | head -1)
sed 's/^ nc_version@NETCHANNEL_0.1 .*/&\n nc_gone@NETCHANNEL_0.1 0.1/' \
	"$top/debian/libnetchannel0.symbols" >"$work/gone.symbols"
grep -q nc_gone "$work/gone.symbols" || fail "could not add a symbol to the symbols file"
if (cd "$work/src" && DPKG_GENSYMBOLS_CHECK_LEVEL=4 dpkg-gensymbols -plibnetchannel0 \
	-Pdebian/libnetchannel0 -e"$lib" -I"$work/gone.symbols" -O"$work/out.symbols") \
	>"$work/gensymbols.log" 2>&1; then
	fail "dpkg-gensymbols passed a library that lost a symbol"
fi
grep -q "nc_gone" "$work/gensymbols.log" || { cat "$work/gensymbols.log" >&2; fail "dpkg-gensymbols' diff"; }
ok "dpkg-gensymbols fails on a symbol the library lost"

say "installing"
debs=()
for p in "${packages[@]}"; do debs+=("$(ls "$work/${p}_"*.deb)"); done
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${debs[@]}" \
	>"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "apt-get install"; }
for p in "${packages[@]}"; do installed "$p" || fail "$p not installed"; done
ok "installed"

version=$(sed -n "s/^\tversion: '\(.*\)',/\1/p" "$top/meson.build")
/usr/bin/netchanneld --version | grep -q "^netchanneld $version " ||
	fail "netchanneld --version: $(/usr/bin/netchanneld --version 2>&1 | head -1)"
ok "netchanneld --version: $version"

# The example in /etc takes a host's eth0: it checks where there is one (a namespace of this
# test's with an eth0), as the examples for no particular host do anywhere.
ex=/etc/netchanneld/netchanneld.json.example
[ ! -e /etc/netchanneld/netchanneld.json ] || fail "a config the unit would run was installed"
ns=ncdpkg$$
ip netns add "$ns"
ip -n "$ns" link add eth0 type veth peer name eth1
ip netns exec "$ns" /usr/bin/netchanneld -c "$ex" --check-config >"$work/check.log" 2>&1 ||
	{ ip netns del "$ns"; cat "$work/check.log" >&2; fail "--check-config $ex"; }
ip netns del "$ns"
grep -qx "$ex: ok (1 ports, 1 workers, 0 channels)" "$work/check.log" ||
	{ cat "$work/check.log" >&2; fail "--check-config $ex"; }
for f in vdev.json; do
	/usr/bin/netchanneld -c "/usr/share/doc/netchanneld/examples/$f" --check-config \
		>"$work/check.log" 2>&1 || { cat "$work/check.log" >&2; fail "--check-config $f"; }
done
ok "--check-config: the examples"

unit=/lib/systemd/system/netchanneld.service
[ -L /etc/systemd/system/multi-user.target.wants/netchanneld.service ] ||
	fail "the unit is not enabled"
grep -q "deb-systemd-invoke.*start" /var/lib/dpkg/info/netchanneld.postinst &&
	fail "the postinst starts the unit"
# Its conditions, as systemd evaluates them: without /etc/netchanneld/netchanneld.json, failed.
conds=$(grep "^Condition" "$unit")
[ "$conds" = "ConditionPathExists=/etc/netchanneld/netchanneld.json" ] ||
	fail "the unit's conditions: $conds"
systemd-analyze condition "$conds" >"$work/cond.log" 2>&1 &&
	{ cat "$work/cond.log" >&2; fail "the unit would start without a config"; }
systemd-analyze verify "$unit" >"$work/verify.log" 2>&1 || { cat "$work/verify.log" >&2; fail "systemd-analyze verify"; }
ok "the unit: enabled, not started, no start without a config, systemd-analyze verify"

# A C client against the -dev packages, with pkg-config; the classifier's too.
cc -o "$work/tutorial" /usr/share/doc/netchanneld/examples/nc_tutorial.c \
	$(pkg-config --cflags --libs libnetchannel) || fail "nc_tutorial.c with libnetchannel"
cc -o "$work/echo" /usr/share/doc/netchanneld/examples/nc_echo.c \
	$(pkg-config --cflags --libs libnetchannel-zc) || fail "nc_echo.c with libnetchannel-zc"
cat >"$work/trie.c" <<'EOF'
#include <stdio.h>
#include <nc_trie.h>
int main(void)
{
	struct nc_trie_port p = { .lo = 80, .hi = 81, .kind = NC_TRIE_PORT_RANGE };
	uint16_t lo, hi;

	nc_trie_port_range(&p, &lo, &hi);
	printf("%s\n", lo == 80 && hi == 81 ? "ok" : "no");
	return 0;
}
EOF
cc -o "$work/trie" "$work/trie.c" $(pkg-config --cflags --libs libnctrie) ||
	fail "a program of libnctrie"
"$work/trie" | grep -qx ok || fail "the libnctrie program"
ok "C clients build with pkg-config against the -dev packages"

setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c \
	'import netchannel; print(netchannel.version())' >"$work/py.log" 2>&1 ||
	{ cat "$work/py.log" >&2; fail "import netchannel as uid 65534"; }
ok "import netchannel (uid 65534): $(cat "$work/py.log")"

out=$(NETCHANNELD_SOCKET=/nonexistent/sock setpriv --reuid=65534 --regid=65534 --clear-groups \
	/usr/bin/netchannel-run -v /bin/true 2>&1) || fail "netchannel-run: $out"
echo "$out" | grep -q "netchannel-preload" || fail "netchannel-run loaded no library: $out"
ok "netchannel-run loads its library"

say "the demo on the installed binaries (log: $work/demo.log)"
"$top/scripts/demo.sh" --installed >"$work/demo.log" 2>&1 || { tail -30 "$work/demo.log" >&2; fail "demo"; }
# nc-echo answered every datagram of port 7, and the host answered pings after the restart.
grep -q "udp .*:7: 20 sent; answered by nc-echo (the datagram itself): 20$" "$work/demo.log" &&
	[ "$(grep -c "3 packets transmitted, 3 received, 0% packet loss" "$work/demo.log")" -ge 4 ] ||
	{ cat "$work/demo.log" >&2; fail "what the demo showed"; }
ok "the demo on the installed binaries"

# Purge: nothing the packages installed stays (files, directories of their own, the unit's
# enablement, the config directory).
files=$(for p in "${packages[@]}"; do dpkg -L "$p"; done | sort -u)
purge || { cat "$work/purge.log" >&2; fail "apt-get purge"; }
for p in "${packages[@]}"; do
	dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qv "^not-installed$" &&
		fail "$p not purged"
done
left=()
while IFS= read -r f; do
	[ -n "$f" ] && [ "$f" != / ] && [ "$f" != /. ] || continue
	# Directories that others own too (/usr/bin, /lib/systemd/system, /lib -> usr/lib) stay.
	if [ -d "$f" ]; then
		dpkg -S "$f" >/dev/null 2>&1 || left+=("$f")
	elif [ -e "$f" ] || [ -L "$f" ]; then
		left+=("$f")
	fi
done <<<"$files"
for f in /etc/netchanneld /etc/systemd/system/multi-user.target.wants/netchanneld.service \
	 /var/lib/systemd/deb-systemd-helper-enabled/netchanneld.service.dsh-also \
	 /var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/netchanneld.service; do
	[ -e "$f" ] || [ -L "$f" ] && left+=("$f")
done
[ ${#left[@]} -eq 0 ] || fail "left after purge: ${left[*]}"
ok "purged: nothing left"
say "$checks checks passed"
