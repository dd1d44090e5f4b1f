#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/bench.sh idle: what a worker that sleeps costs and saves, on the test bed
(net_af_xdp on veth0, exception mode tap), for each of workers[].idle poll, adaptive and
interrupt, one daemon after the other:
  idle CPU     the worker thread's CPU share over --idle-seconds with no traffic
               (/proc/PID/task/TID/stat)
  ping         the RTT of a ping through the exception path after an idle second, --samples
               times: median and p99 (with 20 samples, the largest)
  udp echo     the same for a UDP datagram nc-echo --ip echoes (a client's receive and
               transmit)
and the added p99 of each sleeping mode over poll. Writes bench/results/idle.jsonl.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_testbed import nsexec, start_daemon, stop_daemon

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(TOP, "build")
TESTBED = os.path.join(TOP, "scripts/testbed.sh")
ECHO = os.path.join(BUILD, "app/examples/nc-echo")
NAME = "ncdidle"

# In the peer: SAMPLES times, wait GAP s, then one ICMP echo (ping -c 1) or one UDP datagram
# to port 7, and its round trip in microseconds; one JSON list at the end.
PROBE = r"""
import json, socket, subprocess, sys, time
kind, host, n, gap = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
rtts = []
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
for i in range(n):
    time.sleep(gap)
    if kind == "ping":
        out = subprocess.run(["ping", "-c", "1", "-W", "2", host], capture_output=True,
                             text=True).stdout
        if "time=" in out:
            rtts.append(float(out.split("time=")[1].split()[0]) * 1000)
    else:
        t0 = time.perf_counter()
        s.sendto(b"idle %d" % i, (host, 7))
        try:
            s.recvfrom(2048)
            rtts.append((time.perf_counter() - t0) * 1e6)
        except socket.timeout:
            pass
print(json.dumps(rtts))
"""


def worker_cpu(pid):
    """CPU seconds (user + system) of the daemon's worker thread (EAL names it rte-worker-N)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if not f.read().startswith("rte-worker"):
                continue
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    raise RuntimeError("no rte-worker thread")


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]


def one_mode(env, work, prefix, mode, a):
    sock = os.path.join(work, "ncd.sock")
    d = start_daemon(env, work, prefix, sock, idle=mode)
    echo = None
    try:
        subprocess.run([TESTBED, "host", NAME], check=True, capture_output=True)
        echo = subprocess.Popen(nsexec(env["TB_HOST_NS"], ECHO, "-s", sock, "--dport", "7",
                                       "--ip"), stdout=subprocess.PIPE, text=True)
        echo.stdout.readline()
        time.sleep(2)                      # the new TAP's own ND and MLD settle
        c0, t0 = worker_cpu(d.pid), time.time()
        time.sleep(a.idle_seconds)
        cpu = (worker_cpu(d.pid) - c0) / (time.time() - t0)
        row = {"case": f"idle-{mode}", "idle": mode, "idle_seconds": a.idle_seconds,
               "worker_cpu_share_idle": round(cpu, 4)}
        for kind in ("ping", "udp"):
            out = subprocess.run(nsexec(env["TB_PEER_NS"], "/usr/bin/python3", "-c", PROBE,
                                        kind, env["TB_HOST4"], str(a.samples), str(a.gap)),
                                 capture_output=True, text=True, check=True).stdout
            rtts = json.loads(out)
            row[f"{kind}_samples"] = len(rtts)
            row[f"{kind}_median_us"] = round(statistics.median(rtts), 1) if rtts else None
            row[f"{kind}_p99_us"] = round(p99(rtts), 1) if rtts else None
        return row
    finally:
        if echo is not None:
            echo.terminate()
            echo.wait(10)
        stop_daemon(d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle-seconds", type=float, default=10)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--gap", type=float, default=1.0, help="idle seconds before each probe")
    ap.add_argument("--modes", default="poll,adaptive,interrupt")
    ap.add_argument("--out", default=os.path.join(TOP, "bench/results/idle.jsonl"))
    a = ap.parse_args()
    env = dict(l.split("=", 1) for l in subprocess.run(
        [TESTBED, "up", NAME], check=True, capture_output=True, text=True).stdout.split())
    work = tempfile.mkdtemp(prefix="ncd_bench_idle_")
    prefix = f"ncdidle{os.getpid()}"
    rows = []
    try:
        for mode in a.modes.split(","):
            print(f"bench: idle {mode}", file=sys.stderr)
            rows.append(one_mode(env, work, prefix, mode, a))
    finally:
        subprocess.run([TESTBED, "down", NAME])
        subprocess.run(["rm", "-rf", work, f"/var/run/dpdk/{prefix}"])
    poll = next((r for r in rows if r["idle"] == "poll"), None)
    for r in rows:
        for kind in ("ping", "udp"):
            if poll and r[f"{kind}_p99_us"] is not None and poll[f"{kind}_p99_us"] is not None:
                r[f"{kind}_p99_added_us"] = round(r[f"{kind}_p99_us"] - poll[f"{kind}_p99_us"], 1)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"{'idle':10} {'CPU idle':>9} {'ping med':>9} {'ping p99':>9} {'+p99':>7} "
          f"{'udp med':>8} {'udp p99':>8} {'+p99':>7}   (microseconds)")
    for r in rows:
        print(f"{r['idle']:10} {r['worker_cpu_share_idle']:>9.1%} {r['ping_median_us']:>9} "
              f"{r['ping_p99_us']:>9} {r.get('ping_p99_added_us', '-'):>7} "
              f"{r['udp_median_us']:>8} {r['udp_p99_us']:>8} {r.get('udp_p99_added_us', '-'):>7}")
    print(f"(written to {a.out}; targets: idle CPU at most 5%, added p99 at most 100 us)")


if __name__ == "__main__":
    sys.exit(main())
