#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/bench.sh datapath: netchanneld's per-core packet rate against dpdk-testpmd
io-forward, one forwarding core each, on the same input in the same run.

Input: net_pcap with infinite_rx=1, replaying a generated pcap of 1024 UDP flows from memory.
Cases (median of --runs runs of --seconds each; both sides measured in every run):
  miss             no channel: every packet to the exception device (net_null, no rx)
  deliver-1        one channel takes every packet; nc-dump -q (a client process) empties it
  deliver-1-1500B  the same with 1500-byte frames
testpmd forwards the same input to a net_null port. Output: one JSON object per case with
case, mpps, reference_mpps, ratio, cycles_per_packet (the worker core's cycles, at the CPU's
nominal clock, over its packets) and runs, in bench/results/datapath.jsonl, and a table.
Not yet measured: deliver-1k/10k/100k, churn, latency, tap-exception (see the README).
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
DAEMON = os.path.join(BUILD, "app/netchanneld/netchanneld")
NCCTL = os.path.join(BUILD, "app/ncctl/ncctl")
DUMP = os.path.join(BUILD, "app/examples/nc-dump")
EAL = ["-l", "0-1", "--no-pci", "--log-level", "lib.eal:error", "--no-telemetry"]


def make_pcap(path, size):
    from scapy.all import IP, UDP, Ether, Raw, wrpcap
    pad = size - 14 - 20 - 8
    wrpcap(path, [Ether(dst="02:70:63:61:70:00", src="02:00:00:00:00:01") /
                  IP(src="203.0.113.%d" % (i % 250 + 1), dst="192.0.2.1") /
                  UDP(sport=1000 + i, dport=5000) / Raw(b"x" * pad) for i in range(1024)])


def testpmd(pcap, seconds, prefix):
    """testpmd io-forward, pcap in, net_null out: Rx-pps after a warm-up."""
    script = f"sleep 1.5; echo 'show port stats 0'; sleep {seconds}; echo 'show port stats 0'; echo quit"
    cmd = (f"({script}) | dpdk-testpmd -l 0-1 --no-pci --file-prefix {prefix} "
           f"--vdev net_pcap0,rx_pcap={pcap},infinite_rx=1 --vdev net_null0 -- -i "
           "--forward-mode=io --nb-cores=1 --auto-start")
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True,
                         timeout=seconds + 60).stdout
    subprocess.run(["rm", "-rf", f"/var/run/dpdk/{prefix}"])
    rx = re.findall(r"RX-packets:\s+(\d+)", out)
    if len(rx) < 2:
        raise RuntimeError("testpmd: no stats\n" + out[-2000:])
    return (int(rx[1]) - int(rx[0])) / seconds / 1e6


def ncd_rx(sock):
    out = subprocess.run([NCCTL, "-s", sock, "--json", "-c", "show port stats 0"],
                         capture_output=True, text=True, check=True).stdout
    p = json.loads(out)[0]
    return p["rx"], p


def netchanneld(case, pcap, seconds, work, prefix):
    sock = os.path.join(work, "ncd.sock")
    cfg = {"eal": EAL, "mempool": {"mbufs": 16383, "cache": 256},
           "ports": [{"name": "wire0", "device": f"net_pcap0,rx_pcap={pcap},infinite_rx=1",
                      "exception": {"device": "net_null1,no-rx=1"}}],
           "workers": [{"lcore": 1}], "control": {"socket": sock}}
    if case != "miss":
        cfg["channels"] = [{"name": "all", "match": {"proto": "udp", "dport": 5000},
                            "ring_size": 4096}]
    conf = os.path.join(work, "bench.json")
    with open(conf, "w") as f:
        json.dump(cfg, f)
    log = open(os.path.join(work, "daemon.log"), "w")
    d = subprocess.Popen([DAEMON, "-c", conf, "--", "--file-prefix", prefix], stdout=log,
                         stderr=subprocess.STDOUT)
    client = None
    try:
        for _ in range(100):
            if "netchanneld: running" in open(log.name).read():
                break
            time.sleep(0.1)
        if case != "miss":
            client = subprocess.Popen([DUMP, "-s", sock, "--channel", "all", "-q", "-t",
                                       str(int(seconds + 10))], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        r0, _ = ncd_rx(sock)
        time.sleep(seconds)
        r1, port = ncd_rx(sock)
        return (r1 - r0) / seconds / 1e6, port
    finally:
        if client is not None:
            client.terminate()
            client.wait(20)
        d.terminate()
        d.wait(30)
        subprocess.run(["rm", "-rf", f"/var/run/dpdk/{prefix}"])


def cpu_hz():
    with open("/proc/cpuinfo") as f:
        mhz = re.search(r"cpu MHz\s*:\s*([\d.]+)", f.read())
    return float(mhz.group(1)) * 1e6 if mhz else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--out", default=os.path.join(TOP, "bench/results/datapath.jsonl"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ncd_bench_dp_")
    hz = cpu_hz()
    pcaps = {64: os.path.join(work, "64.pcap"), 1500: os.path.join(work, "1500.pcap")}
    for size, path in pcaps.items():
        make_pcap(path, size)
    results = []
    try:
        for case, size in (("miss", 64), ("deliver-1", 64), ("deliver-1-1500B", 1500)):
            ours, ref = [], []
            for i in range(a.runs):
                print(f"bench: {case} run {i + 1}/{a.runs}", file=sys.stderr)
                ref.append(testpmd(pcaps[size], a.seconds, f"ncdtpm{os.getpid()}"))
                mpps, port = netchanneld(case, pcaps[size], a.seconds, work, f"ncddp{os.getpid()}")
                ours.append(mpps)
            m, r = statistics.median(ours), statistics.median(ref)
            results.append({"case": case, "mpps": round(m, 3), "reference_mpps": round(r, 3),
                            "ratio": round(m / r, 3) if r else None,
                            "cycles_per_packet": round(hz / (m * 1e6), 1) if hz and m else None,
                            "runs": a.runs, "frame_bytes": size,
                            "last_run_port": {k: port[k] for k in ("rx", "delivered", "to_kernel",
                                                                    "drop_ring_full")}})
    finally:
        subprocess.run(["rm", "-rf", work])
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    print(f"{'case':18} {'Mpps':>8} {'testpmd':>8} {'ratio':>6} {'cycles/pkt':>10}")
    for r in results:
        print(f"{r['case']:18} {r['mpps']:>8} {r['reference_mpps']:>8} {r['ratio']:>6} "
              f"{r['cycles_per_packet']:>10}")
    print(f"(written to {a.out})")


if __name__ == "__main__":
    sys.exit(main())
