#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/bench.sh testbed: small UDP datagrams into a netchanneld client against the
kernel's own receive path, on the test bed, with the same sender and duration in one run.

Cases (the median of --runs runs of --seconds each):
  kernel-direct     no netchanneld: the host's kernel owns veth0; a recvmmsg socket receives
  kernel-failopen   netchanneld on veth0 in exception mode xdp, a channel claiming another
                    port: its XDP program passes the datagrams to the kernel's socket
                    (runs interleaved with kernel-direct's, a daemon started for each)
  netchanneld-failopen  the same daemon; nc-dump -q claims the port and counts them
  kernel-failopen-down  that daemon killed (-9): its program, with no socket, passes
                    everything to the kernel's socket
  kernel-failopen-adaptive  a new daemon in mode xdp whose worker sleeps when it has nothing
                    to do (workers[].idle adaptive), taking the interface over
  kernel-via-tap    netchanneld owns veth0 (net_af_xdp, exception mode tap); the datagrams
                    miss every channel and a recvmmsg socket receives them through the TAP
  netchanneld       netchanneld owns veth0; nc-dump -q (a libnetchannel client, zero-copy)
                    claims the port and counts them
and ping RTT, direct, in exception mode xdp, and through the TAP. Writes one JSON object per
case to bench/results/testbed.jsonl and prints a table. Bounded: every process stops by
itself.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(TOP, "build")
TESTBED = os.path.join(TOP, "scripts/testbed.sh")
UDPBENCH = os.path.join(BUILD, "app/bench/udpbench")
DAEMON = os.path.join(BUILD, "app/netchanneld/netchanneld")
DUMP = os.path.join(BUILD, "app/examples/nc-dump")
NAME = "ncdbench"
PORT = 9


def nsexec(ns, *cmd):
    return ["ip", "netns", "exec", ns] + list(cmd)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def cpu_of(p):
    """Wait for a child and return its CPU seconds (user + system) and exit code."""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def ping(env, addr):
    out = run(nsexec(env["TB_PEER_NS"], "ping", "-c", "20", "-i", "0.05", "-W", "2", addr)).stdout
    return float(re.search(r"rtt min/avg/max/mdev = [\d.]+/([\d.]+)/", out).group(1))


def send(env, seconds):
    out = run(nsexec(env["TB_PEER_NS"], UDPBENCH, "send", env["TB_HOST4"], str(PORT),
                     str(seconds), "64"), timeout=seconds + 30).stdout
    return json.loads(out)


def kernel_case(env, seconds):
    recv = subprocess.Popen(nsexec(env["TB_HOST_NS"], UDPBENCH, "recv", str(PORT),
                                   str(seconds + 1.5)), stdout=subprocess.PIPE, text=True)
    assert json.loads(recv.stdout.readline())["ready"]
    sent = send(env, seconds)
    res = json.loads(recv.stdout.readline())
    recv.wait(30)
    return sent, res["packets"], res["cpu_seconds"]


def client_case(env, sock, seconds):
    dump = subprocess.Popen(nsexec(env["TB_HOST_NS"], DUMP, "-s", sock, "--dport", str(PORT),
                                   "-q", "-t", str(int(seconds + 2))),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)                        # connected, EAL up, channel created
    sent = send(env, seconds)
    cpu = cpu_of(dump)
    err = dump.stderr.read()
    got = int(re.search(r"nc-dump: (\d+) packets", err).group(1))
    return sent, got, cpu


def start_daemon(env, work, prefix, sock, exception=None, channels=(), idle="poll"):
    """netchanneld on veth0 in the host's namespace, running; its Popen."""
    port = {"name": "wire0", "device": "net_af_xdp0,iface=veth0"}
    if exception is not None:
        port["exception"] = exception
    cfg = {"eal": ["-l", "0-1", "--no-pci", "--log-level", "lib.eal:error", "--no-telemetry"],
           "mempool": {"mbufs": 16383, "cache": 256}, "ports": [port],
           "workers": [{"lcore": 1, "idle": idle}], "control": {"socket": sock},
           "channels": list(channels)}
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(cfg, f)
    log = open(os.path.join(work, "daemon.log"), "w")
    daemon = subprocess.Popen(nsexec(env["TB_HOST_NS"], DAEMON, "-c",
                                     os.path.join(work, "config.json"), "--", "--file-prefix",
                                     prefix), stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        if "netchanneld: running" in open(log.name).read() or daemon.poll() is not None:
            break
        time.sleep(0.1)
    if daemon.poll() is not None:
        raise RuntimeError("netchanneld did not start:\n" + open(log.name).read())
    return daemon


def stop_daemon(daemon):
    daemon.terminate()
    daemon.wait(30)


# Exception mode xdp, with a channel on another port: the program looks every datagram up.
FAILOPEN = {"mode": "xdp"}
CLAIM_OTHER = [{"name": "other", "match": {"proto": "udp", "dport": 7}}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(TOP, "bench/results/testbed.jsonl"))
    a = ap.parse_args()
    env = dict(l.split("=", 1) for l in run([TESTBED, "up", NAME]).stdout.split())
    work = tempfile.mkdtemp(prefix="ncd_bench_tb_")
    sock, prefix = os.path.join(work, "ncd.sock"), f"ncdbench{os.getpid()}"
    daemon = None
    results = []
    try:
        host = env["TB_HOST_NS"]
        # Without netchanneld, and with it in exception mode xdp: the host's address on veth0.
        run(["ip", "-n", host, "addr", "add", env["TB_HOST4"] + "/24", "dev", "veth0"])
        results.append({"case": "ping-direct", "rtt_avg_ms": ping(env, env["TB_HOST4"])})
        runs = {"kernel-direct": [], "kernel-failopen": [], "netchanneld-failopen": [],
                "kernel-failopen-down": [], "kernel-failopen-adaptive": []}
        for i in range(a.runs):
            runs["kernel-direct"].append(kernel_case(env, a.seconds))
            daemon = start_daemon(env, work, prefix, sock, FAILOPEN, CLAIM_OTHER)
            if i == 0:
                results.append({"case": "ping-failopen",
                                "rtt_avg_ms": ping(env, env["TB_HOST4"])})
            runs["kernel-failopen"].append(kernel_case(env, a.seconds))
            runs["netchanneld-failopen"].append(client_case(env, sock, a.seconds))
            # Killed: its program stays and passes everything; the next start takes over.
            daemon.kill()
            daemon.wait(30)
            daemon = None
            runs["kernel-failopen-down"].append(kernel_case(env, a.seconds))
            # The same daemon, its worker asleep when there is nothing to do.
            daemon = start_daemon(env, work, prefix, sock, FAILOPEN, CLAIM_OTHER, "adaptive")
            runs["kernel-failopen-adaptive"].append(kernel_case(env, a.seconds))
            stop_daemon(daemon)
            daemon = None
        run(["ip", "-n", host, "addr", "flush", "dev", "veth0"])
        daemon = start_daemon(env, work, prefix, sock)
        run([TESTBED, "host", NAME])
        results.append({"case": "ping-exception", "rtt_avg_ms": ping(env, env["TB_HOST4"])})
        runs["kernel-via-tap"] = [kernel_case(env, a.seconds) for _ in range(a.runs)]
        runs["netchanneld"] = [client_case(env, sock, a.seconds) for _ in range(a.runs)]
        for case, rs in runs.items():
            rx = statistics.median(r[1] / a.seconds for r in rs)
            results.append({
                "case": case, "runs": len(rs), "seconds": a.seconds, "payload_bytes": 64,
                "sent_pps": round(statistics.median(r[0]["packets"] / a.seconds for r in rs)),
                "rx_pps": round(rx),
                "receiver_cpu_seconds": round(statistics.median(r[2] for r in rs), 3),
                "receiver_cpu_per_mpkt": round(statistics.median(
                    r[2] / max(r[1], 1) * 1e6 for r in rs), 3),
                "runs_rx_pps": [round(r[1] / a.seconds) for r in rs],
            })
        base = next(r for r in results if r["case"] == "kernel-direct")["rx_pps"]
        for r in results:
            if "rx_pps" in r:
                r["ratio_to_kernel_direct"] = round(r["rx_pps"] / base, 3) if base else None
                if r["case"].startswith("netchanneld"):
                    r["note"] = "plus netchanneld's worker, which polls one core whatever the load"
        # Fail-open against the kernel alone, run by run (each pair ran back to back).
        fo = next(r for r in results if r["case"] == "kernel-failopen")
        for case in ("kernel-failopen", "kernel-failopen-down", "kernel-failopen-adaptive"):
            fo = next(r for r in results if r["case"] == case)
            fo["ratio_to_kernel_direct_paired"] = round(statistics.median(
                f[1] / max(k[1], 1) for f, k in zip(runs[case], runs["kernel-direct"])), 3)
            fo["sender_ratio_to_kernel_direct_paired"] = round(statistics.median(
                f[0]["packets"] / max(k[0]["packets"], 1)
                for f, k in zip(runs[case], runs["kernel-direct"])), 3)
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait(30)
        subprocess.run([TESTBED, "down", NAME])
        subprocess.run(["rm", "-rf", work, f"/var/run/dpdk/{prefix}"])
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    print(f"{'case':21} {'sent/s':>10} {'received/s':>11} {'ratio':>6} {'rx CPU s':>9} "
          f"{'CPU s/Mpkt':>10}")
    for r in results:
        if "rx_pps" in r:
            print(f"{r['case']:21} {r['sent_pps']:>10} {r['rx_pps']:>11} "
                  f"{r['ratio_to_kernel_direct']:>6} {r['receiver_cpu_seconds']:>9} "
                  f"{r['receiver_cpu_per_mpkt']:>10}")
    for r in results:
        if "rtt_avg_ms" in r:
            print(f"{r['case']:21} avg rtt {r['rtt_avg_ms']} ms")
    for case in ("kernel-failopen", "kernel-failopen-down", "kernel-failopen-adaptive"):
        fo = next(r for r in results if r["case"] == case)
        print(f"{case} / kernel-direct, run by run (median): received "
              f"{fo['ratio_to_kernel_direct_paired']} (target: at least 0.9), sent "
              f"{fo['sender_ratio_to_kernel_direct_paired']}")
    print(f"(written to {a.out})")


if __name__ == "__main__":
    sys.exit(main())
