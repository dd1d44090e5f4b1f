#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/bench.sh apps: the same unmodified application, the same client tool and the same
offered load, in the same run, on the kernel's sockets and on netchanneld's channels
(netchannel-run), on the test bed (scripts/testbed.sh) with the real kernel as the peer.

Cases, each in both modes ("kernel": no daemon, the host's kernel owns veth0; "netchannel":
netchanneld owns veth0 through net_af_xdp in exception mode xdp, the application under
netchannel-run):
  throughput-R   sockperf's server (blocking in recvfrom); sockperf throughput from the peer
                 at R messages a second of 14 bytes (60-byte frames), or at the sender's
                 maximum ("max"); the rate that reached the server's socket or ring, and the
                 host's CPU per packet
  ping-pong      sockperf ping-pong from the peer: median, p99 and mean latency
  dnsperf        knotd (2 UDP threads) serving a zone; dnsperf from the peer at its
                 maximum: queries a second, and the host's CPU per query

CPU is the whole host's: every CPU's time in every mode but idle and iowait, from /proc/stat
(the worker's polling and the kernel's softirq, where net_af_xdp's copy from the veth runs,
included), over the sender's run and a drain of 0.2 s after it, minus the sender process's
own CPU (its rusage); beside it, the same less netchanneld's worker thread's CPU (its
/proc task stat), labelled "but_worker". Pinning, the same in both modes: the application on
CPU 0 and the sender on CPU 1, where the veth's receive softirq runs too; netchanneld's
threads, its worker (lcore 1) included, on CPU 0 with the application (--worker-cpu 1 puts
the worker with the sender instead, which halves what the sender can send). The worker
sleeps when idle (workers[].idle adaptive) unless --idle says otherwise.

Each of --runs runs does every case in both modes, the kernel first (no XDP program on veth0
then); medians over the runs, and the ratio netchannel/kernel of each run's figures. Appends
one JSON object per case and mode to --out (bench/results/apps.jsonl) and prints a table.

With a sender on another host, through a real port (--peer): no test bed. --peer is the
command that runs a program on the sender (ssh root@sender), which has sockperf and dnsperf;
--iface is this host's port, which netchanneld takes with net_af_xdp (a driver with XDP
zero-copy gives the daemon the NIC's frames with no kernel copy) and the kernel has
otherwise; --addr is its address, which the sender aims at; --host-ns the namespace the
port is in (none: this process's). The cases, the modes, the pinning on this host and the
CPU accounting are the same; the sender's CPU is its host's, and what this host spends on
the ssh client is subtracted as the sender's own.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from dns_fixture import KNOT_CONF, ZONE

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(TOP, "build")
TESTBED = os.path.join(TOP, "scripts/testbed.sh")
DAEMON = os.path.join(BUILD, "app/netchanneld/netchanneld")
NCCTL = os.path.join(BUILD, "app/ncctl/ncctl")
RUN = os.path.join(BUILD, "lib/preload/netchannel-run")
NAME = "ncdapps"
SOCKPERF_PORT = 5010
DNS_PORT = 5353
APP_CPU, SENDER_CPU = "0", "1"


def nsexec(ns, *cmd):
    """cmd in network namespace ns; in this process's when ns is None."""
    return (["ip", "netns", "exec", ns] if ns is not None else []) + list(cmd)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def host_cpu():
    """Seconds of CPU the whole host has spent, every CPU, every mode but idle and iowait."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = v[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def cpu_of(p):
    """Wait for child p; its CPU seconds (user + system, its threads included)."""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


class Bed:
    """Where the cases run: the test bed (veth0 in its host namespace, the sender in its peer
    namespace), or, with remote (a.peer), this host's port a.iface and a sender elsewhere."""

    def __init__(self, idle, worker_cpu, remote=None):
        self.testbed = remote is None
        if self.testbed:
            out = run([TESTBED, "up", NAME]).stdout
            self.env = dict(line.split("=", 1) for line in out.split())
            self.host = self.env["TB_HOST_NS"]
            self.peer_cmd = ["ip", "netns", "exec", self.env["TB_PEER_NS"]]
            self.addr = self.env["TB_HOST4"]
            self.iface = "veth0"
            run(nsexec(self.host, "ip", "addr", "add", "10.99.0.1/24", "dev", "veth0"))
        else:
            self.host = remote.host_ns
            self.peer_cmd = shlex.split(remote.peer)
            self.addr = remote.addr
            self.iface = remote.iface
        self.work = tempfile.mkdtemp(prefix="ncd_bench_apps_")
        self.sock = os.path.join(self.work, "ncd.sock")
        self.prefix = f"ncdapps{os.getpid()}"
        self.idle = idle
        self.worker_cpu = worker_cpu
        self.daemon = None

    def down(self):
        self.stop_daemon()
        if self.testbed:
            subprocess.run([TESTBED, "down", NAME], capture_output=True)
        shutil.rmtree(self.work, ignore_errors=True)

    def start_daemon(self):
        cfg = {"eal": ["--lcores", f"0@{APP_CPU},1@{self.worker_cpu}", "--no-pci",
                       "--log-level", "lib.eal:error", "--no-telemetry"],
               "mempool": {"mbufs": 16383, "cache": 256},
               "ports": [{"name": "wire0", "device": f"net_af_xdp0,iface={self.iface}",
                          "exception": {"mode": "xdp"}}],
               "workers": [{"lcore": 1, "idle": self.idle}],
               "control": {"socket": self.sock}}
        conf = os.path.join(self.work, "config.json")
        with open(conf, "w") as f:
            json.dump(cfg, f)
        log = open(os.path.join(self.work, "daemon.log"), "w")
        self.daemon = subprocess.Popen(nsexec(self.host, DAEMON, "-c", conf, "--",
                                              "--file-prefix", self.prefix),
                                       stdout=log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if "netchanneld: running" in open(log.name).read() or self.daemon.poll() is not None:
                break
            time.sleep(0.1)
        if self.daemon.poll() is not None:
            raise RuntimeError("netchanneld did not start:\n" + open(log.name).read())

    def stop_daemon(self):
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.terminate()
            self.daemon.wait(30)
        self.daemon = None
        # The kernel's cases run on the port as a host without netchanneld has it.
        for mode in ("xdpgeneric", "xdpdrv"):
            subprocess.run(nsexec(self.host, "ip", "link", "set", self.iface, mode, "off"),
                           capture_output=True)

    def app(self, cmd, netchannel):
        """cmd on the host, pinned to APP_CPU, under netchannel-run in mode netchannel."""
        pre = [RUN, "-s", self.sock] if netchannel else []
        return subprocess.Popen(nsexec(self.host, "taskset", "-c", APP_CPU, *pre, *cmd),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def sender(self, *cmd):
        return subprocess.Popen(self.peer_cmd + ["taskset", "-c", SENDER_CPU, "timeout", "-k",
                                                 "5", "60", *cmd],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait_bound(self, port, p):
        for _ in range(200):
            if f":{port} " in run(nsexec(self.host, "ss", "-Huln")).stdout:
                return
            if p.poll() is not None:
                raise RuntimeError(f"the application exited: {p.stderr.read()}")
            time.sleep(0.05)
        raise RuntimeError(f"port {port} never bound")

    def received(self, netchannel):
        """Datagrams queued for the application so far: the channels' rings (the port's
        delivered), or the kernel's sockets (Udp InDatagrams)."""
        if netchannel:
            out = run([NCCTL, "-s", self.sock, "--json", "-c", "show port stats wire0"]).stdout
            return json.loads(out)[0]["delivered"]
        snmp = run(nsexec(self.host, "cat", "/proc/net/snmp")).stdout.splitlines()
        rows = [ln.split() for ln in snmp if ln.startswith("Udp:")]
        return int(rows[1][rows[0].index("InDatagrams")])

    def worker_cpu_s(self):
        """The CPU seconds netchanneld's worker thread (DPDK's rte-worker-1) has used, or
        0 with no daemon."""
        if self.daemon is None:
            return 0.0
        task = f"/proc/{self.daemon.pid}/task"
        for tid in os.listdir(task):
            with open(f"{task}/{tid}/comm") as f:
                if f.read().strip() != "rte-worker-1":
                    continue
            with open(f"{task}/{tid}/stat") as f:
                v = f.read().rsplit(")", 1)[1].split()
            return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
        raise RuntimeError("no rte-worker-1 thread in netchanneld")

    def measured(self, cmd):
        """The sender cmd run on the peer: its output, the host's CPU seconds over its run
        and a 0.2 s drain, less its own, and the worker thread's over the same time."""
        c0, w0 = host_cpu(), self.worker_cpu_s()
        p = self.sender(*cmd)
        own = cpu_of(p)
        out = p.stdout.read()
        time.sleep(0.2)
        return out, host_cpu() - c0 - own, self.worker_cpu_s() - w0


def throughput(bed, netchannel, rate, seconds):
    before = bed.received(netchannel)
    out, cpu, worker = bed.measured(["sockperf", "throughput", "-i", bed.addr, "-p", str(SOCKPERF_PORT),
                             "-t", str(seconds), f"--mps={rate}"])
    got = bed.received(netchannel) - before
    m = re.search(r"Total of (\d+) messages sent in ([\d.]+) sec", out)
    if not m:
        raise RuntimeError("sockperf throughput: " + out)
    sent, secs = int(m.group(1)), float(m.group(2))
    return {"offered_pps": sent / secs, "received_pps": got / secs, "received": got,
            "sent": sent, "host_cpu_s": cpu, "worker_cpu_s": worker,
            "cpu_us_per_packet": cpu / got * 1e6 if got else None,
            "cpu_us_per_packet_but_worker": (cpu - worker) / got * 1e6 if got else None}


def ping_pong(bed, seconds):
    out, cpu, worker = bed.measured(["sockperf", "ping-pong", "-i", bed.addr, "-p", str(SOCKPERF_PORT),
                             "-t", str(seconds)])

    def pct(p):
        return float(re.search(rf"percentile {p} =\s+([\d.]+)", out).group(1))
    m = re.search(r"SentMessages=(\d+); ReceivedMessages=(\d+)", out)
    return {"median_us": pct("50.000"), "p99_us": pct("99.000"),
            "mean_us": float(re.search(r"avg-latency=([\d.]+)", out).group(1)),
            "round_trips": int(m.group(2)), "host_cpu_s": cpu, "worker_cpu_s": worker}


def dnsperf(bed, seconds, queries):
    out, cpu, worker = bed.measured(["dnsperf", "-s", bed.addr, "-p", str(DNS_PORT), "-d", queries,
                             "-l", str(seconds)])
    qps = float(re.search(r"Queries per second:\s+([\d.]+)", out).group(1))
    done = int(re.search(r"Queries completed:\s+(\d+)", out).group(1))
    lost = int(re.search(r"Queries lost:\s+(\d+)", out).group(1))
    return {"qps": qps, "completed": done, "lost": lost, "host_cpu_s": cpu,
            "worker_cpu_s": worker, "cpu_us_per_query": cpu / done * 1e6 if done else None,
            "cpu_us_per_query_but_worker": (cpu - worker) / done * 1e6 if done else None}


def mode_run(bed, netchannel, rates, seconds, queries, knot_dir):
    """Every case in one mode: {case: figures}."""
    res = {}
    if netchannel:
        bed.start_daemon()
    try:
        srv = bed.app(["sockperf", "server", "-i", bed.addr, "-p", str(SOCKPERF_PORT)], netchannel)
        bed.wait_bound(SOCKPERF_PORT, srv)
        try:
            for rate in rates:
                res[f"throughput-{rate}"] = throughput(bed, netchannel, rate, seconds)
            res["ping-pong"] = ping_pong(bed, seconds)
        finally:
            srv.terminate()
            srv.wait(10)
        knot = bed.app(["knotd", "-c", os.path.join(knot_dir, "knot.conf")], netchannel)
        bed.wait_bound(DNS_PORT, knot)
        try:
            time.sleep(0.5)                # the zone loaded
            res["dnsperf"] = dnsperf(bed, seconds, queries)
        finally:
            knot.terminate()
            knot.wait(10)
    finally:
        if netchannel:
            bed.stop_daemon()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--rates", default="50000,100000,200000,max")
    ap.add_argument("--idle", default="adaptive", choices=("poll", "adaptive", "interrupt"))
    ap.add_argument("--worker-cpu", default=APP_CPU,
                    help=f"the CPU of netchanneld's worker: the application's ({APP_CPU}, the "
                    f"default) or the sender's ({SENDER_CPU})")
    ap.add_argument("--out", default=os.path.join(TOP, "bench/results/apps.jsonl"))
    ap.add_argument("--peer", help="a sender on another host: the command that runs a "
                    "program there (ssh root@sender); with --iface and --addr, no test bed")
    ap.add_argument("--iface", help="with --peer: this host's port, which netchanneld takes "
                    "with net_af_xdp")
    ap.add_argument("--addr", help="with --peer: the port's IPv4 address, which the sender "
                    "aims at")
    ap.add_argument("--host-ns", help="with --peer: the network namespace the port is in "
                    "(default: this process's)")
    a = ap.parse_args()
    if a.peer is not None and (a.iface is None or a.addr is None):
        ap.error("--peer needs --iface and --addr")
    if a.peer is None and (a.iface or a.addr or a.host_ns):
        ap.error("--iface, --addr and --host-ns go with --peer (the test bed has its own)")
    rates = a.rates.split(",")
    bed = Bed(a.idle, a.worker_cpu, a if a.peer is not None else None)
    knot_dir = os.path.join(bed.work, "knot")
    os.makedirs(os.path.join(knot_dir, "db"))
    with open(os.path.join(knot_dir, "example.test.zone"), "w") as f:
        f.write(ZONE)
    with open(os.path.join(knot_dir, "knot.conf"), "w") as f:
        f.write(KNOT_CONF.format(d=knot_dir, listen=f"{bed.addr}@{DNS_PORT}", user=""))
    queries = os.path.join(bed.work, "queries")
    with open(queries, "w") as f:
        f.write("www.example.test A\nwww.example.test AAAA\nexample.test SOA\n")
    rows = []
    date = time.strftime("%Y-%m-%d")
    try:
        for r in range(a.runs):
            per = {}
            for mode in ("kernel", "netchannel"):
                print(f"bench: run {r + 1} of {a.runs}, {mode}", file=sys.stderr)
                per[mode] = mode_run(bed, mode == "netchannel", rates, a.seconds, queries,
                                     knot_dir)
            for mode, cases in per.items():
                for case, fig in cases.items():
                    rows.append(dict(date=date, run=r + 1, mode=mode, case=case,
                                     seconds=a.seconds, idle=a.idle, worker_cpu=a.worker_cpu,
                                     port=bed.iface, sender=shlex.join(bed.peer_cmd), **fig))
    finally:
        bed.down()
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    report(rows)
    print(f"bench: results appended to {a.out}", file=sys.stderr)


def report(rows):
    """A table: each case's medians in both modes, and the median of the runs' ratios."""
    keys = {"throughput": ("received_pps", "cpu_us_per_packet", "cpu_us_per_packet_but_worker"),
            "ping-pong": ("median_us", "p99_us"),
            "dnsperf": ("qps", "cpu_us_per_query", "cpu_us_per_query_but_worker")}
    cases = []
    for row in rows:
        if row["case"] not in cases:
            cases.append(row["case"])
    print(f'{"case":<18} {"figure":<28} {"kernel":>12} {"netchannel":>12} {"ratio":>8}')
    for case in cases:
        for key in keys[case.split("-")[0] if case.startswith("throughput") else case]:
            k = {r["run"]: r[key] for r in rows if r["case"] == case and r["mode"] == "kernel"}
            n = {r["run"]: r[key] for r in rows
                 if r["case"] == case and r["mode"] == "netchannel"}
            ratios = [n[i] / k[i] for i in k if i in n and k[i] and n[i] is not None]
            km = statistics.median(v for v in k.values() if v is not None)
            nm = statistics.median(v for v in n.values() if v is not None)
            print(f"{case:<18} {key:<28} {km:>12.2f} {nm:>12.2f} "
                  f"{statistics.median(ratios) if ratios else float('nan'):>8.3f}")
    print("ratio: netchannel / kernel, the median of the runs' own ratios; *_but_worker: the "
          "host's CPU less netchanneld's worker thread's (which polls while traffic flows)")


if __name__ == "__main__":
    main()
