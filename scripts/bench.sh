#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Benchmarks, always side by side with the reference in the same run.
#
#   scripts/bench.sh classifier [--quick]
#       nctrie, rte_acl and a linear scan (nctrie-bench perf) on the shipped
#       ClassBench sets (1k and 10k), on sets generated in their shape with
#       seed 7 (nctrie-bench gen-rules: acl-s7_10k, fw-s7_10k, ipc-s7_10k),
#       on acl1_1k and the 10k sets in IPv6 (-v6: nctrie-bench perf --ipv6),
#       and on socket:10000 and socket:100000 (there with rte_hash too: an exact
#       5-tuple table and a listening one, looked up in bulk), three runs of them
#       all (about 17 minutes); medians, and the median of the runs' ratios. Prints each
#       target of lib/trie/README.md with its verdict.
#       Writes bench/results/classifier.jsonl (one object per run, classifier
#       and burst), bench/results/classifier.png (ns/packet at burst 32, log
#       scale) and prints a table with the ratios to rte_acl.
#       --quick: five workloads, one run; --report: table and chart of the
#       last results, without running anything.
#
#   scripts/bench.sh testbed [--quick]
#       On scripts/testbed.sh: 64-byte UDP datagrams from the peer (udpbench,
#       sendmmsg) into a kernel recvmmsg socket without netchanneld, with
#       netchanneld in exception mode xdp (running, and killed), behind its
#       exception TAP, and into nc-dump -q on a channel in either mode; the
#       rates, the receivers' CPU time, the ratios to the kernel alone, and ping
#       RTT (scripts/bench_testbed.py). Writes bench/results/testbed.jsonl.
#       3 runs of 3 s each; --quick: 1 of 1 s.
#
#   scripts/bench.sh idle [--quick]
#       On scripts/testbed.sh, for workers[].idle poll, adaptive and interrupt:
#       the worker thread's CPU share over 10 s without traffic, and the RTT of a
#       ping through the exception path and of nc-echo's UDP echo after each idle
#       second (20 each: median, p99, and p99 over poll's). Writes
#       bench/results/idle.jsonl (scripts/bench_idle.py). --quick: 3 s, 5 each.
#
#   scripts/bench.sh apps [--quick] [--peer CMD --iface IFACE --addr ADDR [--host-ns NS]]
#       On scripts/testbed.sh, the same unmodified applications on the kernel's
#       sockets and under netchannel-run (the preload library) in the same run:
#       sockperf throughput at 50k, 100k and 200k messages a second and the
#       sender's maximum (received rate, and the whole host's CPU per packet from
#       /proc/stat less the sender's own), sockperf ping-pong (median and p99
#       latency), and dnsperf against knotd (queries a second, CPU per query).
#       Appends to bench/results/apps.jsonl and draws bench/results/apps.png
#       (scripts/bench_apps.py). 3 runs of 2 s each; --quick: 1 of 1 s. With
#       --peer, a sender on another host through this host's port IFACE (ADDR),
#       no test bed: --peer 'ssh root@sender' --iface eth1 --addr 192.0.2.1.
#
#   scripts/bench.sh datapath-idle [RUNS]
#       miss and deliver-1 (scripts/bench_datapath.py) with workers[].idle adaptive
#       right after poll in each run: ratio_idle_to_poll, run by run. Writes
#       bench/results/idle-datapath.jsonl. RUNS: 5.
#
#   scripts/bench.sh datapath [--quick]
#       netchanneld's rate with one worker against dpdk-testpmd io-forward with
#       one core forwarding one way (into net_null with no-rx=1; the two-way
#       testpmd of a plain net_null beside it), the same net_pcap infinite_rx
#       input, in the same run: cases miss, deliver-1 (an isolated nc-dump -q
#       -b 1000 creates and empties the channel), deliver-1-zc (a zero-copy
#       one), deliver-1-1500B and -zc, deliver-1k, deliver-10k, deliver-100k
#       (1024, 10,000 and 100,000 exact 5-tuple channels, one flow each, one
#       isolated client with one ring for all draining them) and their -zc
#       twins (one zero-copy client draining every channel's ring),
#       mark-offload (deliver-1-zc with the offload mock marking every packet),
#       churn (1,000 channels/s created and destroyed, misdeliveries counted),
#       tap-exception (misses into a real net_tap), nat and nat-reverse (a NAT
#       channel translating every packet back out), and the latency from
#       channel create to its first packet and from rx burst to client dequeue
#       (scripts/bench_datapath.py).
#       Writes bench/results/datapath.jsonl. 5 runs of 2 s each (over 40
#       minutes: 100,000 attaches a run); --quick: 1 of 1 s (about 10).
#
#   scripts/bench.sh datapath-ab REV [RUNS [CASES]]
#       The datapath before and after a change, interleaved: REV (a commit) is
#       built in a worktree of its own, and each of RUNS rounds (3) runs
#       bench_datapath.py once from REV's tree and once from this one, each case
#       for 2 s against testpmd in the same run. CASES (comma-separated) limits
#       the cases; the default is every case but the latency ones. Writes
#       bench/results/ab-REV.jsonl (each row with "tree": "before" or "after")
#       and prints each case's median ratio to testpmd, before and after, and
#       their quotient.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
mode=${1:-}
quick=${2:-}
out=bench/results
cb=${NC_CLASSBENCH_DIR:-$top/tests/data/classbench}

usage() { echo "usage: scripts/bench.sh classifier [--quick|--report] | testbed [--quick] | apps [--quick] [--peer CMD --iface IFACE --addr ADDR] | idle [--quick] | datapath [--quick] | datapath-idle [RUNS] | datapath-ab REV [RUNS [CASES]]" >&2; exit 2; }

classifier() {
	local bench=build/app/bench/nctrie-bench json=$out/classifier.jsonl
	[ "$quick" = --report ] && { report "$json"; return; }
	local updates=10000 packets=262144 runs=3
	local -a workloads=(acl1_1k fw1_1k ipc1_1k acl1_10k fw1_10k ipc1_10k
			    acl-s7_10k fw-s7_10k ipc-s7_10k acl1_1k-v6 acl1_10k-v6 fw1_10k-v6
			    ipc1_10k-v6 socket:10000 socket:100000)
	if [ "$quick" = --quick ]; then
		updates=2000 packets=65536 runs=1
		workloads=(acl1_1k fw1_10k acl-s7_10k acl1_1k-v6 socket:10000)
	fi
	mkdir -p "$out"
	# Sets the classifier was not tuned on: each family's shape, other addresses.
	local gen
	gen=$(mktemp -d)
	trap 'rm -rf "$gen"' RETURN
	for f in acl fw ipc; do
		"$bench" gen-rules --like "$cb/${f}1_10k" --count 10000 --seed 7 --out "$gen/$f-s7_10k"
	done
	: > "$json.tmp"
	# Every workload once a run: each run meets this machine at another moment.
	for run in $(seq "$runs"); do
		for w in "${workloads[@]}"; do
			local src=(--rules "$cb/$w")
			[[ $w == socket:* ]] && src=(--synthetic "$w")
			[[ $w == *-s7_* ]] && src=(--rules "$gen/$w")
			# The same set in IPv6 (nctrie-bench perf --ipv6: 2001:db8::/32 and the IPv4 bits).
			[[ $w == *-v6 ]] && src=(--rules "$cb/${w%-v6}" --ipv6)
			echo "bench: $w (run $run of $runs)" >&2
			"$bench" perf "${src[@]}" --packets "$packets" --updates "$updates" --json |
				sed "s/^{/{\"run\": $run, /" >> "$json.tmp"
		done
	done
	mv "$json.tmp" "$json"
	report "$json"
}

# Table and chart of a results file.
report() {
	local json=$1

	# Table and chart data: burst 32, ratios to rte_acl in the same run; over several runs,
	# the median of each figure and of the runs' ratios, the worst update p99.
	python3 - "$json" "$out/classifier.dat" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
runs = {}
for r in rows:
    runs.setdefault(r["workload"], {}).setdefault(r["classifier"], {}).setdefault(
        r["burst"], []).append(r)
nruns = max(len(x) for c in runs.values() for b in c.values() for x in b.values())
ratio = {}
for w, c in runs.items():
    for b in c.get("nctrie", {}):
        if b in c.get("rte_acl", {}):
            ratio[(w, b)] = statistics.median(
                a["lookup_ns"] / n["lookup_ns"] for n, a in zip(c["nctrie"][b], c["rte_acl"][b]))
def merged(rs):
    m = dict(rs[0])
    for k in ("lookup_ns", "update_median_ns", "build_ms"):
        m[k] = statistics.median(r[k] for r in rs)
    m["update_p99_ns"] = max(r["update_p99_ns"] for r in rs)
    m["mismatches"] = sum(r["mismatches"] for r in rs)
    m["snapshot_ms"] = statistics.median(r.get("snapshot_ms", 0) for r in rs)
    # The field order nctrie's snapshot picked (each run picks its own).
    m["layout"] = "/".join(sorted({r.get("layout", "").removeprefix("proto,") for r in rs})) or "-"
    return m
by = {w: {cl: {b: merged(rs) for b, rs in bs.items()} for cl, bs in c.items()}
      for w, c in runs.items()}
order = list(dict.fromkeys(r["workload"] for r in rows))
if nruns > 1:
    print(f"median of {nruns} runs; ratio: the median of the runs' ratios; p99: the worst run's")
print(f'{"workload":<14} {"rules":>7} {"burst":>5} {"nctrie ns":>10} {"rte_acl ns":>10} {"acl/nctrie":>10}'
      f' {"nc upd med/p99 ns":>18} {"acl rebuild ms":>14} {"nc B/rule":>9} {"acl B/rule":>10} {"mism":>5}'
      f' {"nc compile ms":>13}  nc snapshot reads')
with open(sys.argv[2], "w") as dat:
    for w in order:
        c = by[w]
        nc, acl = c["nctrie"], c["rte_acl"]
        for b in sorted(nc):
            n, a = nc[b], acl[b]
            print(f'{w:<14} {n["rules"]:>7} {b:>5} {n["lookup_ns"]:>10.1f} {a["lookup_ns"]:>10.1f}'
                  f' {ratio[(w, b)]:>9.2f}x'
                  f' {n["update_median_ns"]:>8.0f}/{n["update_p99_ns"]:<9.0f}'
                  f' {a["update_median_ns"] / 1e6:>14.1f} {n["memory_bytes"] / n["rules"]:>9.1f}'
                  f' {a["memory_bytes"] / a["rules"]:>10.1f} {n["mismatches"] + a["mismatches"]:>5}'
                  f' {n["snapshot_ms"]:>13.0f}  {n["layout"]}')
        lin = c.get("linear", {}).get(32, {}).get("lookup_ns", "NaN")
        dat.write(f'{w} {nc[32]["lookup_ns"]} {acl[32]["lookup_ns"]} {lin}\n')
    print("rte_acl variant:", ", ".join(sorted({r["variant"] for r in rows if r["classifier"] == "rte_acl"})))
# rte_hash: only the socket workloads have its shape (exact 5-tuples and listening ports).
for w in order:
    h = by[w].get("rte_hash", {})
    for b in sorted(h):
        n = by[w]["nctrie"][b]
        print(f'rte_hash {w:<14} burst {b:>2}: {h[b]["lookup_ns"]:.1f} ns, nctrie '
              f'{n["lookup_ns"]:.1f} ns ({n["lookup_ns"] / h[b]["lookup_ns"]:.2f}x rte_hash\'s);'
              f' update median {h[b]["update_median_ns"]:.0f} ns, nctrie\'s '
              f'{n["update_median_ns"]:.0f} ns; {h[b]["memory_bytes"] / h[b]["rules"]:.0f} B/rule')

# The classifier's targets (lib/trie/README.md), each with its verdict and distance.
def verdict(ok):
    return "met" if ok else "NOT met"
print("targets (burst 32" + (f", median of {nruns} runs" if nruns > 1 else ", this run") + "):")
for w in order:
    if 32 not in by[w].get("nctrie", {}) or 32 not in by[w].get("rte_acl", {}):
        continue
    n, a = by[w]["nctrie"][32], by[w]["rte_acl"][32]
    want = {"socket:100000": 4, "socket:10000": 2}.get(w, 1)
    print(f'  {w} lookup >= {want}x rte_acl: {ratio[(w, 32)]:.2f}x, {verdict(ratio[(w, 32)] >= want)}')
    if w == "socket:100000":
        print(f'  {w} lookup <= 25 ns: {n["lookup_ns"]:.1f} ns, {verdict(n["lookup_ns"] <= 25)}')
    if n.get("updates"):
        print(f'  {w} update median <= 2 us, p99 <= 20 us (a reader running): '
              f'{n["update_median_ns"]:.0f} ns, {n["update_p99_ns"]:.0f} ns, '
              f'{verdict(n["update_median_ns"] <= 2000 and n["update_p99_ns"] <= 20000)}')
    h = by[w].get("rte_hash", {}).get(32)
    if h and w == "socket:100000":
        q = n["lookup_ns"] / h["lookup_ns"]
        print(f'  {w} lookup <= 1.2x rte_hash\'s ns: {n["lookup_ns"]:.1f} ns against '
              f'{h["lookup_ns"]:.1f}, {q:.2f}x, {verdict(q <= 1.2)}')
        print(f'  {w} update median < 1 us: {n["update_median_ns"]:.0f} ns, '
              f'{verdict(n["update_median_ns"] < 1000)}')
    mem = (n["memory_bytes"] / n["rules"]) / (a["memory_bytes"] / a["rules"])
    print(f'  {w} memory <= 1.5x rte_acl\'s a rule: {n["memory_bytes"] / n["rules"]:.0f} B against '
          f'{a["memory_bytes"] / a["rules"]:.0f}, {mem:.2f}x, {verdict(mem <= 1.5)}')
bad = sum(r["mismatches"] for r in rows)
print(f'  mismatches 0 everywhere: {bad}, {verdict(bad == 0)}')
PY
	if command -v gnuplot >/dev/null; then
		gnuplot <<GP
set terminal pngcairo size 1000,500 noenhanced
set output "$out/classifier.png"
set title "Lookup cost at burst 32 (lower is better), same run"
set ylabel "ns/packet (log scale)"
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set xtics rotate by -30
set datafile missing "NaN"
plot "$out/classifier.dat" using 2:xtic(1) title "nctrie", '' using 3 title "rte_acl", '' using 4 title "linear scan"
GP
		echo "bench: chart in $out/classifier.png" >&2
	fi
	rm -f "$out/classifier.dat"
	echo "bench: results in $json" >&2
}

# bench/results/datapath.png: each case's rate against testpmd's in the same run.
datapath_chart() {
	command -v gnuplot >/dev/null || return 0
	/usr/bin/python3 - "$out/datapath.jsonl" >"$out/datapath.dat" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["mpps"] is not None:
        print(r["case"], r["mpps"], r["reference_mpps"])
PY
	gnuplot <<GP
set terminal pngcairo size 1000,500 noenhanced
set output "$out/datapath.png"
set title "One core, 64-byte packets unless named (higher is better), same run"
set ylabel "Mpps (log scale)"
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key below
set xtics rotate by -30
plot "$out/datapath.dat" using 2:xtic(1) title "netchanneld, 1 worker", '' using 3 title "dpdk-testpmd io-forward one way, 1 core"
GP
	rm -f "$out/datapath.dat"
	echo "bench: chart in $out/datapath.png" >&2
}

# bench/results/apps.png: CPU per packet against the rate received, on the kernel's sockets and
# on channels, sockperf's throughput runs of the last date in apps.jsonl.
apps_chart() {
	command -v gnuplot >/dev/null || return 0
	/usr/bin/python3 - "$out/apps.jsonl" >"$out/apps.dat" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
last = max(r["date"] for r in rows)
for mode in ("kernel", "netchannel"):
    pts = sorted((r["received_pps"] / 1e3, r["cpu_us_per_packet"]) for r in rows
                 if r["date"] == last and r["mode"] == mode and r["case"].startswith("throughput")
                 and r["cpu_us_per_packet"] is not None)
    for x, y in pts:
        print(x, y)
    print()
    print()
PY
	gnuplot <<GP
set terminal pngcairo size 1000,500 noenhanced
set output "$out/apps.png"
set title "sockperf throughput, 60-byte frames: the whole host's CPU per packet (lower is better)"
set xlabel "received, thousand packets a second"
set ylabel "CPU microseconds per packet"
set key top right
plot "$out/apps.dat" index 0 with points pt 7 title "kernel sockets", '' index 1 with points pt 5 title "netchannel-run (preload library)"
GP
	rm -f "$out/apps.dat"
	echo "bench: chart in $out/apps.png" >&2
}

# Before (REV) and after (this tree), interleaved round by round.
datapath_ab() {
	local rev=$1 runs=${2:-3} cases=${3:-} wt json
	[ -n "$rev" ] || usage
	rev=$(git rev-parse --short "$rev")
	wt=$(mktemp -d /tmp/ncd_ab_XXXXXX)
	json=$out/ab-$rev.jsonl
	trap 'git worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"' RETURN
	git worktree add --detach "$wt" "$rev" >/dev/null
	(cd "$wt" && scripts/setup.sh build >/dev/null && ninja -C build >/dev/null)
	scripts/setup.sh build >/dev/null
	ninja -C build >/dev/null
	[ -n "$cases" ] || cases=miss,deliver-1,deliver-1-zc,deliver-1-1500B,deliver-1-1500B-zc,deliver-1k,deliver-1k-zc,deliver-10k,deliver-10k-zc,deliver-100k,deliver-100k-zc,mark-offload,churn,tap-exception,nat,nat-reverse,frag-miss,frag-deliver
	mkdir -p "$out"
	: > "$json"
	for run in $(seq "$runs"); do
		for tree in before after; do
			local dir=$top
			[ "$tree" = before ] && dir=$wt
			echo "bench: round $run of $runs, $tree ($([ "$tree" = before ] && echo "$rev" || git rev-parse --short HEAD))" >&2
			/usr/bin/python3 "$dir/scripts/bench_datapath.py" --runs 1 --seconds 2 \
				--cases "$cases" --out "$wt/one.jsonl"
			sed "s/^{/{\"tree\": \"$tree\", \"round\": $run, /" "$wt/one.jsonl" >> "$json"
		done
	done
	/usr/bin/python3 - "$json" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    if r.get("ratio") is not None:
        by.setdefault(r["case"], {}).setdefault(r["tree"], []).append(r["ratio"])
print(f'{"case":<20} {"before":>8} {"after":>8} {"after/before":>12}   (median ratio to testpmd, same run)')
for case, t in by.items():
    if "before" in t and "after" in t:
        b, a = statistics.median(t["before"]), statistics.median(t["after"])
        print(f"{case:<20} {b:>8.3f} {a:>8.3f} {a / b:>11.3f}x   before {t['before']} after {t['after']}")
PY
	echo "bench: results in $json" >&2
}

case "$mode" in
datapath-ab)
	datapath_ab "${2:-}" "${3:-}" "${4:-}"
	;;
classifier)
	scripts/setup.sh build >/dev/null
	ninja -C build >/dev/null
	classifier
	;;
datapath|testbed)
	scripts/setup.sh build >/dev/null
	ninja -C build >/dev/null
	if [ "$quick" = --quick ]; then
		/usr/bin/python3 "scripts/bench_$mode.py" --runs 1 --seconds 1 \
			$([ "$mode" = datapath ] && echo --latency-count 50)
	else
		/usr/bin/python3 "scripts/bench_$mode.py"
	fi
	[ "$mode" = datapath ] && datapath_chart
	;;
apps)
	scripts/setup.sh build >/dev/null
	ninja -C build >/dev/null
	if [ "$quick" = --quick ]; then
		/usr/bin/python3 scripts/bench_apps.py --runs 1 --seconds 1 \
			--out /tmp/netchanneld-apps-quick.jsonl "${@:3}"
	else
		/usr/bin/python3 scripts/bench_apps.py "${@:2}"
		apps_chart
	fi
	;;
idle)
	scripts/setup.sh build >/dev/null
	ninja -C build >/dev/null
	if [ "$quick" = --quick ]; then
		/usr/bin/python3 scripts/bench_idle.py --idle-seconds 3 --samples 5 \
			--out /tmp/netchanneld-idle-quick.jsonl
	else
		/usr/bin/python3 scripts/bench_idle.py
	fi
	;;
datapath-idle)
	# deliver-1 and miss with workers[].idle adaptive against poll, in the same runs.
	scripts/setup.sh build >/dev/null
	ninja -C build >/dev/null
	/usr/bin/python3 scripts/bench_datapath.py --runs "${2:-5}" --cases miss,deliver-1 \
		--idle-ab adaptive --out "$out/idle-datapath.jsonl"
	;;
*)
	usage
	;;
esac
