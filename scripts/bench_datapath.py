#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/bench.sh datapath: netchanneld's per-core packet rate against dpdk-testpmd
io-forward, one forwarding core each, on the same input in the same run.

The reference forwards one way, as netchanneld does: net_pcap into a net_null with no-rx=1.
The older reference (a plain net_null, which also generates packets, so that testpmd's core
forwards a second stream back) is measured in the same runs and reported beside it
(reference_twoway_mpps) for continuity.

Input: net_pcap with infinite_rx=1, replaying a generated pcap from memory: 1024 UDP flows to
port 5000, or (churn, latency) 64 flows to ports 19968-20031 whose payloads name their flow.
Cases (median of --runs runs of --seconds each; both sides measured in every run):
  miss             no channel: every packet to the exception device (net_null, no rx)
  deliver-1        one channel takes every packet; nc-dump -q --touch, an isolated client,
                   creates it and empties it: each packet copied into its region, the client
                   reading its first 64 bytes. Measured against memif too (below)
  deliver-1-zc     the same with a zero-copy client (nc-dump -q on a static channel: mbufs)
  deliver-1-1500B  deliver-1 with 1500-byte frames (and -zc: the zero-copy client's)
  deliver-1k       1024 channels, one per flow (exact 5-tuples, like connected sockets); one
                   isolated client with one ring for all (NC_CONNECT_ONE_RING; nc_client_test
                   drain-iso mode) attaches them all and empties its ring
  deliver-1k-zc    the same with a zero-copy client (drain mode) emptying each channel's ring
                   (rings of 64) in turn
  deliver-10k      the same with 10,000 channels and flows (-zc: rings of 32)
  deliver-100k     the same with 100,000 channels and flows (-zc: rings of 32; max_channels
                   100000)
  mark-offload     deliver-1-zc with the offload mock (--mark-mock): its rx callback marks every
                   packet (matching the channel's rte_flow pattern in software, a cost a NIC
                   would not add) and the worker takes the channel from the mark, not the trie
  deliver-1-zc-meter    deliver-1-zc with a meter on the channel far over the rate: every
                   packet coloured green (the meter's cost); ratio_to_deliver_1 is deliver-1-zc's
  deliver-1-zc-metered  the same with the meter at 1 Mpps (burst 10,000): most packets red
                   and dropped before delivery
  deliver-1-meter  deliver-1 with a meter (nc-dump --meter) at 1.2x deliver-1's rate in this
                   run: every packet green (last_run_port.drop_meter 0); ratio_to_deliver_1,
                   and ratio_to_unmetered: each run against deliver-1 run just before it
  deliver-1-metered  deliver-1 with the meter at 1 Mpps (burst 10,000): most packets red
  miss-policed     miss with the exception path's policer on, its other bucket at 1.2x miss's
                   rate in this run: every packet green (drop_exc_police 0); ratio_to_miss,
                   and ratio_to_unmetered: each run against miss run just before it
  churn            one channel takes the 64 flows; its client checks every packet's flow
                   (nc_client_test soak mode); meanwhile an ncctl session creates and destroys
                   operator channels (a tenth of them overlapping the flows at a higher
                   priority). Reported against the same without churn, in the same run, with
                   the churn rate reached and the packets misdelivered
  tap-exception    every packet a miss into a real net_tap (in a network namespace of its own)
                   against testpmd io-forward into the same kind of net_tap, with the same MAC
  nat              one NAT channel takes every packet: destination address and port rewritten
                   (checksums updated incrementally), sent back out of the port to a static
                   next hop (via); also given as a ratio to deliver-1
  nat-reverse      the same with reverse mappings: one per flow (1024), kept fresh by every
                   packet, and every packet looked up as a possible reply
  frag-miss        1024 datagrams of 1,200 bytes, each in two IPv4 fragments, no channel:
                   reassembled, then to the exception device (net_null) as the fragments they
                   came in (the rate is of fragments, frag_in)
  frag-deliver     the same datagrams to one channel (nc-dump -q, an isolated client): each
                   reassembled and copied whole into the client's region
  latency          (not a rate) from channel create to its first packet, while traffic flows:
                   median and p99 over --latency-count creates (nc_client_test latency mode);
                   and from the worker's rx burst to the client's dequeue under deliver-1's
                   load: the config's rx_timestamps, nc-dump -q -L, one run
testpmd forwards the same input to a net_null port (or the net_tap). Output: one JSON object
per case with case, mpps, reference_mpps, ratio, cycles_per_packet (the worker core's cycles,
at the CPU's nominal clock, over its packets) and runs, in bench/results/datapath.jsonl, and
a table. Each row has extra_ns: the worker's ns a packet minus testpmd's on the same input,
what netchanneld adds to the input's own cost. The deliver-N cases also give delivered_mpps
(what reached the rings: the client may fall behind and leave drops) and their ratio to
deliver-1. deliver-1 and deliver-1-1500B are measured in each run against the peer a user
would pick to hand packets to another process: testpmd io-forward from the same net_pcap into
net_memif (server, copy mode, 1,024 descriptors, 2 KiB buffers, one queue pair, bursts of 32,
on the worker's lcore), read by a second testpmd in rxonly (on the client's lcore):
peer_memif_mpps, and ratio_memif (netchanneld's delivered rate over memif's).
A case that cannot run is a row with its error, and the others still run.
NCD_BENCH_DAEMON=PATH measures another build's netchanneld with this tree's cases and clients.
"""
import argparse
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

from eal_prefix import cleanup
from pcapfile import write_pcap

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(TOP, "build")
# NCD_BENCH_DAEMON: another build's netchanneld, measured with this tree's cases and clients
# (a change to the daemon alone, before and after, with the same bench).
DAEMON = os.environ.get("NCD_BENCH_DAEMON", os.path.join(BUILD, "app/netchanneld/netchanneld"))
NCCTL = os.path.join(BUILD, "app/ncctl/ncctl")
DUMP = os.path.join(BUILD, "app/examples/nc-dump")
CLIENT = os.path.join(BUILD, "tests/integration/nc_client_test")
EAL = ["-l", "0-1", "--no-pci", "--log-level", "lib.eal:error", "--no-telemetry"]
MAC = "02:70:63:61:70:00"
FLOW_BASE = 19968                       # 0x4e00: 64 ports under one mask
# The cases measured against testpmd -> net_memif -> testpmd rxonly too (memif_peer()).
MEMIF_CASES = ("deliver-1", "deliver-1-1500B")


def make_pcap(path, size):
    from scapy.all import IP, UDP, Ether, Raw, wrpcap
    pad = size - 14 - 20 - 8
    wrpcap(path, [Ether(dst=MAC, src="02:00:00:00:00:01") /
                  IP(src="203.0.113.%d" % (i % 250 + 1), dst="192.0.2.1") /
                  UDP(sport=1000 + i, dport=5000) / Raw(b"x" * pad) for i in range(1024)])


def make_flow_pcap(path):
    from scapy.all import IP, UDP, Ether, Raw, wrpcap
    wrpcap(path, [Ether(dst=MAC, src="02:00:00:00:00:01") /
                  IP(src="203.0.113.%d" % (i + 1), dst="192.0.2.1") /
                  UDP(sport=1000 + i, dport=FLOW_BASE + i) /
                  Raw(f"flow={i}".encode().ljust(18, b".")) for i in range(64)])


def make_socket_pcap(path, n):
    """n UDP flows of 64-byte frames to 192.0.2.1:5000, flow i from 198.18.0.0 + i, port
    1024 + i % 60000 (written directly: scapy takes minutes for 100,000 frames)."""
    eth = bytes.fromhex(MAC.replace(":", "")) + bytes.fromhex("020000000001") + b"\x08\x00"
    dst = bytes([192, 0, 2, 1])

    def frame(i):
        src = struct.pack(">I", (198 << 24 | 18 << 16) + i)
        ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 50, 0, 0, 64, 17, 0, src, dst))
        csum = sum(struct.unpack(">10H", ip))
        csum = (csum & 0xffff) + (csum >> 16)
        csum = (csum & 0xffff) + (csum >> 16)
        ip[10:12] = struct.pack(">H", ~csum & 0xffff)
        udp = struct.pack(">HHHH", 1024 + i % 60000, 5000, 30, 0)    # checksum 0: none
        return eth + bytes(ip) + udp + b"x" * 22                    # 64 bytes, as make_pcap's
    write_pcap(path, (frame(i) for i in range(n)))


def make_frag_pcap(path):
    """1024 UDP datagrams to 192.0.2.1:5000 of 1,200 bytes, each in two IPv4 fragments of 620
    bytes of IP (634-byte frames), from 1024 sources: frag-miss and frag-deliver."""
    from scapy.all import IP, UDP, Ether, Raw, fragment, wrpcap
    out = []
    for i in range(1024):
        d = IP(src="198.18.%d.%d" % (i >> 8, i & 255), dst="192.0.2.1", id=i) / \
            UDP(sport=1000 + i, dport=5000) / Raw(b"f" * 1192)
        out += [Ether(dst=MAC, src="02:00:00:00:00:01") / f for f in fragment(d, fragsize=600)]
    wrpcap(path, out)


def socket_channels(n, ring_size):
    """One exact 5-tuple channel per flow of make_socket_pcap(n), named ch0 .. ch<n-1>."""
    out = []
    for i in range(n):
        a = (198 << 24 | 18 << 16) + i
        src = f"{a >> 24}.{a >> 16 & 255}.{a >> 8 & 255}.{a & 255}"
        out.append({"name": f"ch{i}", "ring_size": ring_size,
                    "match": {"proto": "udp", "src": src, "dst": "192.0.2.1",
                              "sport": 1024 + i % 60000, "dport": 5000}})
    return out


def testpmd(pcap, seconds, prefix, out="net_null0,no-rx=1", port=0, counter="RX-packets",
            netns=None):
    """testpmd io-forward, pcap in, out: the packet rate of one port's counter after a warm-up."""
    script = (f"sleep 1.5; echo 'show port stats {port}'; sleep {seconds}; "
              f"echo 'show port stats {port}'; echo quit")
    ns = f"ip netns exec {netns} " if netns else ""
    cmd = (f"({script}) | {ns}dpdk-testpmd -l 0-1 --no-pci --file-prefix {prefix} "
           f"--vdev net_pcap0,rx_pcap={pcap},infinite_rx=1 --vdev {out} -- -i "
           "--forward-mode=io --nb-cores=1 --auto-start")
    res = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True,
                         timeout=seconds + 60).stdout
    cleanup(prefix)
    n = re.findall(counter + r":\s+(\d+)", res)
    if len(n) < 2:
        raise RuntimeError("testpmd: no stats\n" + res[-2000:])
    return (int(n[1]) - int(n[0])) / seconds / 1e6


def memif_peer(pcap, seconds, prefix, work):
    """The peer a user would pick to hand packets to another process: testpmd io-forward from
    net_pcap into net_memif (server; copy mode, rsize=10: 1,024 descriptors, 2 KiB buffers,
    one queue pair, bursts of 32), read by a second testpmd in rxonly (client). The forwarder
    polls on lcore 1, as netchanneld's worker does, the reader on lcore 0, where the client
    runs. The rate the reader receives, after a warm-up."""
    sock = os.path.join(work, "memif.sock")
    # A socket in the file system (not the abstract namespace): its appearance says the
    # forwarder is up.
    memif = f"socket={sock},socket-abstract=no,rsize=10,bsize=2048"
    if os.path.exists(sock):
        os.unlink(sock)
    fwd = subprocess.Popen(
        ["dpdk-testpmd", "-l", "0-1", "--no-pci", "--file-prefix", prefix + "f",
         "--vdev", f"net_pcap0,rx_pcap={pcap},infinite_rx=1",
         "--vdev", f"net_memif0,role=server,{memif}", "--", "-i", "--forward-mode=io",
         "--nb-cores=1", "--burst=32", "--auto-start"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(300):
            if os.path.exists(sock) or fwd.poll() is not None:
                break
            time.sleep(0.1)
        if not os.path.exists(sock):
            raise RuntimeError("testpmd with net_memif (server): no socket " + sock)
        script = (f"sleep 1.5; echo 'show port stats 0'; sleep {seconds}; "
                  "echo 'show port stats 0'; echo quit")
        res = subprocess.run(
            ["bash", "-c", f"({script}) | dpdk-testpmd -l 0-1 --main-lcore 1 --no-pci "
             f"--file-prefix {prefix}r --vdev net_memif0,role=client,{memif} -- -i "
             "--forward-mode=rxonly --nb-cores=1 --burst=32 --auto-start"],
            capture_output=True, text=True, timeout=seconds + 60).stdout
    finally:
        try:
            fwd.communicate("quit\n", timeout=60)
        except subprocess.TimeoutExpired:
            fwd.kill()
            fwd.wait()
        cleanup(prefix + "f")
        cleanup(prefix + "r")
    # The two "show port stats" answers: NIC statistics blocks.
    n = re.findall(r"NIC statistics for port 0\s+#+\s+RX-packets:\s+(\d+)", res)
    if len(n) < 2:
        raise RuntimeError("testpmd over memif: no stats\n" + res[-2000:])
    return (int(n[1]) - int(n[0])) / seconds / 1e6


def ncd_port(sock):
    r = subprocess.run([NCCTL, "-s", sock, "--json", "-c", "show port stats 0"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError(f"ncctl show port stats 0: exit {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)[0]


def netchanneld(pcap, seconds, work, prefix, channels=(), args=(), exc="net_null1,no-rx=1",
                client=None, during=None, counter="rx", netns=None, wait_client=False,
                config=None, police=None):
    """One netchanneld run: the rate of a port counter over seconds after a 1.5 s warm-up.
    client: a command line ({sock} replaced) started once the daemon runs; during: a function
    of the socket, run in a thread over the measured window, whose result is returned too."""
    sock = os.path.join(work, "ncd.sock")
    channels = list(channels)
    # net_pcap's infinite_rx keeps a copy of every frame of its pcap in the pool.
    cfg = {"eal": EAL, "mempool": {"mbufs": 16383 + 2 * len(channels), "cache": 256},
           "max_channels": max(4096, len(channels)),
           "ports": [{"name": "wire0", "device": f"net_pcap0,rx_pcap={pcap},infinite_rx=1",
                      "exception": {"device": exc}}],
           "workers": [{"lcore": 1}], "control": {"socket": sock}, "channels": channels}
    if police is not None:
        cfg["ports"][0]["exception"]["police"] = police
    cfg.update(config or {})
    conf = os.path.join(work, "bench.json")
    with open(conf, "w") as f:
        json.dump(cfg, f)
    log = open(os.path.join(work, "daemon.log"), "w")
    ns = ["ip", "netns", "exec", netns] if netns else []
    d = subprocess.Popen(ns + [DAEMON, "-c", conf] + list(args) + ["--", "--file-prefix", prefix],
                         stdout=log, stderr=subprocess.STDOUT)
    cl, result = None, {}
    try:
        for _ in range(1200):
            if "netchanneld: running" in open(log.name).read() or d.poll() is not None:
                break
            time.sleep(0.1)
        if d.poll() is not None or "netchanneld: running" not in open(log.name).read():
            raise RuntimeError(f"netchanneld did not start (exit {d.poll()}):\n"
                               + open(log.name).read()[-1500:])
        if client is not None:
            cl = subprocess.Popen([a.replace("{sock}", sock) for a in client],
                                  stdout=open(os.path.join(work, "client.out"), "w"),
                                  stderr=subprocess.STDOUT)
            # A client that attaches many channels starts measuring once it has them all.
            for _ in range(1200 if len(channels) > 1024 else 0):
                if "attached" in open(os.path.join(work, "client.out")).read():
                    break
                time.sleep(0.1)
        time.sleep(1.5)
        th = None
        if during is not None:
            th = threading.Thread(target=lambda: result.update(during(sock, seconds)))
            th.start()
        try:
            p0 = ncd_port(sock)
            time.sleep(seconds)
            p1 = ncd_port(sock)
        except (RuntimeError, subprocess.SubprocessError) as x:
            # Say what the daemon said, or how it ended.
            raise RuntimeError(f"{x}\ndaemon (exit status {d.poll()}):\n"
                               + open(log.name).read()[-1500:]) from x
        if th is not None:
            th.join()
        if wait_client and cl is not None:
            cl.wait(300)
        result["delivered_mpps"] = (p1["delivered"] - p0["delivered"]) / seconds / 1e6
        return (p1[counter] - p0[counter]) / seconds / 1e6, p1, result
    finally:
        if cl is not None:
            cl.terminate()
            cl.wait(20)
            result["client"] = open(os.path.join(work, "client.out")).read()
        d.terminate()
        d.wait(30)
        cleanup(prefix)


def churn(sock, seconds, rate=1000):
    """Create and destroy operator channels at about rate a second for seconds, through one
    ncctl session; returns the creates and destroys completed a second."""
    p = subprocess.Popen([NCCTL, "-s", sock, "--json"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    done = []
    reader = threading.Thread(target=lambda: done.extend(
        ln for ln in p.stdout if '"destroyed"' in ln))
    reader.start()
    t0, k = time.time(), 0
    while time.time() - t0 < seconds:
        for _ in range(10):
            k += 1
            rule = (f"proto udp dport {FLOW_BASE + k % 64} priority 5" if k % 10 == 0 else
                    f"proto udp dport {30000 + k % 1000}")
            p.stdin.write(f"channel create churn{k} {rule}\nchannel destroy churn{k}\n")
        p.stdin.flush()
        time.sleep(max(0, t0 + k / rate - time.time()))
    elapsed = time.time() - t0
    p.stdin.close()
    p.wait(30)
    reader.join(30)
    return {"churn_per_s": round(len(done) / elapsed)}


def client_totals(out):
    lines = [ln.split() for ln in out.splitlines() if ln.startswith("ok ")]
    return (int(lines[-1][1]), int(lines[-1][3])) if lines else (0, 0)


def cpu_hz():
    with open("/proc/cpuinfo") as f:
        mhz = re.search(r"cpu MHz\s*:\s*([\d.]+)", f.read())
    return float(mhz.group(1)) * 1e6 if mhz else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--latency-count", type=int, default=200)
    ap.add_argument("--out", default=os.path.join(TOP, "bench/results/datapath.jsonl"))
    ap.add_argument("--cases", help="comma-separated: only these cases (and latency if named)")
    ap.add_argument("--idle-ab", metavar="MODE",
                    help="also run netchanneld with workers[].idle MODE (adaptive, interrupt) "
                         "in each run, right after the poll one: ratio_idle_to_poll")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ncd_bench_dp_")
    hz = cpu_hz()
    pid = os.getpid()
    netns = f"ncdbench{pid}"
    pcaps = {64: os.path.join(work, "64.pcap"), 1500: os.path.join(work, "1500.pcap"),
             "flows": os.path.join(work, "flows.pcap")}
    make_pcap(pcaps[64], 64)
    make_pcap(pcaps[1500], 1500)
    make_flow_pcap(pcaps["flows"])
    if not a.cases or {"frag-miss", "frag-deliver"} & set(a.cases.split(",")):
        pcaps["frags"] = os.path.join(work, "frags.pcap")
        make_frag_pcap(pcaps["frags"])
    one = [{"name": "all", "match": {"proto": "udp", "dport": 5000}, "ring_size": 4096}]
    # A meter that passes everything (every packet green), and one far under the rate.
    metered_open = [dict(one[0], meter={"pps": 1000000000, "burst": 1000000})]
    metered_1m = [dict(one[0], meter={"pps": 1000000, "burst": 10000})]
    flows = [{"name": "all", "match": {"proto": "udp", "dport": f"{FLOW_BASE}/0xffc0"},
              "ring_size": 4096}]
    # Busy-polling for up to 1 ms before sleeping: a client that sleeps whenever its ring is
    # empty has the worker write its eventfd about every burst (see docs/protocol.md, nc-dump).
    dump = [DUMP, "-s", "{sock}", "--channel", "all", "--zero-copy", "-q", "-b", "1000", "-t",
            "60"]
    dump_iso = [DUMP, "-s", "{sock}", "--dport", "5000", "-q", "-b", "1000", "-t", "60"]
    # Against memif, the client reads each frame's first 64 bytes, as memif's copy and
    # testpmd's rxonly do with each.
    touch_iso = dump_iso + ["--touch"]
    checker = [CLIENT, "{sock}", "attach", "all", "0", str(FLOW_BASE), "soak"]
    many = {}
    for k, n, ring in (("1k", 1024, 64), ("10k", 10000, 32), ("100k", 100000, 32)):
        many[f"deliver-{k}"] = (n, ring, "drain-iso", k)
        many[f"deliver-{k}-zc"] = (n, ring, "drain", k)
    wanted = a.cases.split(",") if a.cases else list(many)
    for case, (n, _, _, k) in many.items():
        if case in wanted and k not in pcaps:
            # Short, as the other cases': with a longer rx_pcap path (devargs of 76 bytes), the
            # clients' EAL (a secondary) crashed probing net_pcap, in the kvargs parser.
            pcaps[k] = os.path.join(work, f"{k}.pcap")
            make_socket_pcap(pcaps[k], n)

    def measured(case):
        """The median rate of case in this run, which a later case is set against."""
        m = next((x["mpps"] for x in results if x["case"] == case), None)
        if not m:
            raise ValueError(f"needs {case}'s rate from the same run (--cases {case},...)")
        return m * 1e6

    # The metered cases' unmetered twins (deliver-1's and miss's settings).
    UNMETERED = {"deliver-1-meter": {"client": touch_iso}, "miss-policed": {}}

    def metered(case):
        # A meter (or the exception path's policer) at 1.2x the unmetered case's rate: every
        # packet green, so what it costs is the metering alone.
        if case == "deliver-1-meter":
            pps = int(1.2 * measured("deliver-1"))
            return {"client": touch_iso + ["--meter", f"{pps},{max(pps // 10, 1)}"]}
        pps = int(1.2 * measured("miss"))
        return {"police": {"other": {"pps": pps, "burst": max(pps // 10, 1)}}}

    def sockets(case):
        n, ring, mode, _ = many[case]
        return {"channels": socket_channels(n, ring),
                "client": [CLIENT, "{sock}", mode, "ch", str(n)]}
    tap = f"net_tap0,iface=ncdbtap{pid % 10000},mac={MAC}"
    # NAT: the same flows translated and sent back out of the port, to a static next hop;
    # with reverse, each of the 1024 flows also keeps a mapping (and every packet is looked
    # up as a possible reply).
    nat = {"dst": "198.51.100.7", "dport": 5001, "via": "02:00:00:00:00:07"}
    natch = [{"name": "nat", "match": {"family": "ipv4", "proto": "udp", "dport": 5000},
              "action": {"nat": nat}}]
    natrev = [{"name": "nat", "match": {"family": "ipv4", "proto": "udp", "dport": 5000},
               "action": {"nat": dict(nat, reverse=True)}}]
    cases = [
        ("miss", 64, {}),
        ("deliver-1", 64, {"client": touch_iso}),
        ("deliver-1-zc", 64, {"channels": one, "client": dump}),
        ("deliver-1-1500B", 1500, {"client": touch_iso}),
        ("deliver-1-1500B-zc", 1500, {"channels": one, "client": dump}),
        ("deliver-1k", "1k", sockets),
        ("deliver-1k-zc", "1k", sockets),
        ("deliver-10k", "10k", sockets),
        ("deliver-10k-zc", "10k", sockets),
        ("deliver-100k", "100k", sockets),
        ("deliver-100k-zc", "100k", sockets),
        ("mark-offload", 64, {"channels": one, "client": dump, "args": ("--mark-mock",)}),
        ("deliver-1-zc-meter", 64, {"channels": metered_open, "client": dump}),
        ("deliver-1-zc-metered", 64, {"channels": metered_1m, "client": dump}),
        ("deliver-1-meter", 64, metered),
        ("deliver-1-metered", 64, {"client": touch_iso + ["--meter", "1000000,10000"]}),
        ("miss-policed", 64, metered),
        ("churn", "flows", {"channels": flows, "client": checker, "during": churn}),
        ("tap-exception", 64, {"exc": tap, "counter": "to_kernel", "netns": netns}),
        ("nat", 64, {"channels": natch, "counter": "nat"}),
        ("nat-reverse", 64, {"channels": natrev, "counter": "nat"}),
        ("frag-miss", "frags", {"counter": "frag_in"}),
        ("frag-deliver", "frags", {"client": dump_iso, "counter": "frag_in"}),
    ]
    if a.cases:
        cases = [c for c in cases if c[0] in a.cases.split(",")]
    results = []
    subprocess.run(["ip", "netns", "add", netns], check=True)
    try:
        for case, size, kw in cases:
            try:
                ours, ref, ref2, base, extra = [], [], [], [], {}
                if callable(kw):
                    kw = kw(case)
                tp = {"out": tap, "port": 1, "counter": "TX-packets", "netns": netns} \
                    if case == "tap-exception" else {}
                for i in range(a.runs):
                    print(f"bench: {case} run {i + 1}/{a.runs}", file=sys.stderr)
                    ref.append(testpmd(pcaps[size], a.seconds, f"ncdtpm{pid}", **tp))
                    if not tp:
                        ref2.append(testpmd(pcaps[size], a.seconds, f"ncdtpm{pid}",
                                            out="net_null0"))
                    if case in MEMIF_CASES:
                        extra.setdefault("memif", []).append(
                            memif_peer(pcaps[size], a.seconds, f"ncdmif{pid}", work))
                    if case == "churn":
                        # The same without churn, in the same run: the rate churn costs.
                        m0, _, _ = netchanneld(pcaps[size], a.seconds, work, f"ncddp{pid}",
                                               channels=flows, client=checker)
                        base.append(m0)
                    if case in UNMETERED:
                        # The same without the meter, right before: a ratio run by run.
                        m0, _, _ = netchanneld(pcaps[size], a.seconds, work, f"ncddp{pid}",
                                               **UNMETERED[case])
                        base.append(m0)
                    mpps, port, res = netchanneld(pcaps[size], a.seconds, work, f"ncddp{pid}", **kw)
                    ours.append(mpps)
                    if a.idle_ab:
                        im, _, _ = netchanneld(pcaps[size], a.seconds, work, f"ncddp{pid}",
                                               config={"workers": [{"lcore": 1,
                                                                    "idle": a.idle_ab}]}, **kw)
                        extra.setdefault("idle", []).append(im)
                    extra.setdefault("delivered", []).append(res["delivered_mpps"])
                    if mpps == 0:
                        print(f"bench: {case}: no packets; client:\n{res.get('client', '')[-1500:]}"
                              f"\ndaemon:\n{open(os.path.join(work, 'daemon.log')).read()[-1500:]}",
                              file=sys.stderr)
                    if case == "churn":
                        ok, bad = client_totals(res.get("client", ""))
                        extra.setdefault("churn_per_s", []).append(res.get("churn_per_s", 0))
                        extra["checked"] = extra.get("checked", 0) + ok
                        extra["misdelivered"] = extra.get("misdelivered", 0) + bad
                m, r = statistics.median(ours), statistics.median(ref)
                row = {"case": case, "mpps": round(m, 3), "reference_mpps": round(r, 3),
                       "ratio": round(m / r, 3) if r else None,
                       "cycles_per_packet": round(hz / (m * 1e6), 1) if hz and m else None,
                       "runs": a.runs,
                       "frame_bytes": size if isinstance(size, int) else
                       634 if size == "frags" else 64,
                       "last_run_port": {k: port[k] for k in ("rx", "delivered", "to_kernel",
                                                               "drop_ring_full", "drop_exc_full",
                                                               "mark_hits", "mark_ignored",
                                                               "nat", "drop_nat_tx",
                                                               "drop_meter",
                                                               "drop_exc_police")},
                       # Every run, and the best of each side: this machine's noise only ever
                       # slows a run down, so the best runs' ratio is the steadier one.
                       "runs_mpps": [round(x, 3) for x in ours],
                       "runs_reference_mpps": [round(x, 3) for x in ref],
                       "best_ratio": round(max(ours) / max(ref), 3) if max(ref) else None}
                if ref2:
                    r2 = statistics.median(ref2)
                    row.update({"reference_twoway_mpps": round(r2, 3),
                                "ratio_twoway": round(m / r2, 3) if r2 else None})
                # mpps is the worker's rx rate; with a channel, what reached it too (a client
                # that falls behind makes the worker drop at the full ring, which costs less).
                if statistics.median(extra["delivered"]) > 0:
                    dm = statistics.median(extra["delivered"])
                    row["delivered_mpps"] = round(dm, 3)
                    row["delivered_ratio"] = round(dm / r, 3) if r else None
                if case in many:
                    row["channels"] = many[case][0]
                # What netchanneld adds to the input's own cost: its ns a packet over testpmd's.
                if m and r:
                    row["extra_ns"] = round(1e3 / m - 1e3 / r, 1)
                if extra.get("idle"):
                    # Run by run: each pair ran back to back, the machine alike for both.
                    row.update({"idle_mode": a.idle_ab,
                                "idle_mpps": round(statistics.median(extra["idle"]), 3),
                                "runs_idle_mpps": [round(x, 3) for x in extra["idle"]],
                                "ratio_idle_to_poll": round(statistics.median(
                                    x / y for x, y in zip(extra["idle"], ours) if y), 3)})
                if extra.get("memif"):
                    pm = statistics.median(extra["memif"])
                    row["peer_memif_mpps"] = round(pm, 3)
                    row["runs_memif_mpps"] = [round(x, 3) for x in extra["memif"]]
                    # netchanneld's delivered rate over memif's, in the same runs.
                    dm = statistics.median(extra["delivered"])
                    row["ratio_memif"] = round(dm / pm, 3) if pm else None
                if case == "miss-policed":
                    d0 = next((x["mpps"] for x in results if x["case"] == "miss"), None)
                    row["ratio_to_miss"] = round(m / d0, 3) if d0 else None
                    row["police_other_pps"] = kw["police"]["other"]["pps"]
                if case == "deliver-1-meter":
                    row["meter_pps"] = int(kw["client"][-1].split(",")[0])
                if case in UNMETERED:
                    # Each run against its unmetered twin run just before it.
                    row.update({"runs_unmetered_mpps": [round(x, 3) for x in base],
                                "ratio_to_unmetered": round(statistics.median(
                                    x / y for x, y in zip(ours, base) if y), 3)})
                if case in ("nat", "nat-reverse", "deliver-1-zc", "deliver-1-zc-meter",
                            "deliver-1-zc-metered", "deliver-1-meter",
                            "deliver-1-metered") or case in many:
                    # Against deliver-1 of the same mode (isolated, or zero-copy).
                    # (Not `one`: that is deliver-1-zc's channel list, which the latency step uses.)
                    base1 = ("deliver-1-zc" if (case in many and case.endswith("-zc")) or
                             case.startswith("deliver-1-zc-met") else "deliver-1")
                    d1 = next((x["mpps"] for x in results if x["case"] == base1), None)
                    row["ratio_to_deliver_1"] = round(m / d1, 3) if d1 else None
                if case == "churn":
                    b = statistics.median(base)
                    row.update({"mpps_without_churn": round(b, 3),
                                "ratio_to_without_churn": round(m / b, 3) if b else None,
                                "churn_per_s": statistics.median(extra["churn_per_s"]),
                                "packets_checked": extra["checked"],
                                "misdelivered": extra["misdelivered"]})
                results.append(row)
            except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as x:
                # A case that cannot run says why, and the others still run.
                print(f"bench: {case}: could not run: {x}", file=sys.stderr)
                results.append({"case": case, "mpps": None, "error": str(x)[-500:]})
        want_latency = not a.cases or "latency" in a.cases.split(",")
        lat = rxl = None
        res, rres, rx_mpps = {}, {}, 0
        steps = (RuntimeError, OSError, ValueError, subprocess.SubprocessError)
        if want_latency:
            print(f"bench: latency, {a.latency_count} creates", file=sys.stderr)
            try:
                _, _, res = netchanneld(pcaps["flows"], 0.1, work, f"ncddp{pid}",
                                        channels=flows,
                                        client=[CLIENT, "{sock}", "latency", "lat",
                                                str(FLOW_BASE + 7), str(a.latency_count)],
                                        wait_client=True)
            except steps as x:
                print(f"bench: latency: could not run: {x}", file=sys.stderr)
            lat = re.search(r"latency n (\d+) create_median_us (\d+) create_p99_us (\d+) "
                            r"first_median_us (\d+) first_p99_us (\d+)", res.get("client", ""))
            # From rx burst to the client's dequeue: deliver-1 with the workers' TSC stamps
            # (rx_timestamps) and nc-dump -L, for one run.
            print("bench: latency, rx to dequeue under deliver-1", file=sys.stderr)
            try:
                rx_mpps, _, rres = netchanneld(pcaps[64], a.seconds, work, f"ncddp{pid}",
                                               channels=one, client=dump + ["-L"],
                                               config={"rx_timestamps": True})
            except steps as x:
                print(f"bench: latency, rx to dequeue: could not run: {x}", file=sys.stderr)
            rxl = re.search(r"rx to dequeue: median ([\d.]+) us, p99 ([\d.]+) us",
                            rres.get("client", ""))
        if lat:
            n, cm, cp, fm, fp = map(int, lat.groups())
            results.append({"case": "latency", "mpps": None, "reference_mpps": None,
                            "ratio": None, "cycles_per_packet": None, "runs": n,
                            "create_median_us": cm, "create_p99_us": cp,
                            "create_to_first_packet_median_us": fm,
                            "create_to_first_packet_p99_us": fp})
            if rxl:
                results[-1].update({"rx_to_dequeue_median_us": float(rxl.group(1)),
                                    "rx_to_dequeue_p99_us": float(rxl.group(2)),
                                    "rx_to_dequeue_at_mpps": round(rx_mpps, 3)})
            else:
                print("bench: rx to dequeue: no result\n" + rres.get("client", ""),
                      file=sys.stderr)
        elif want_latency:
            print("bench: latency: no result\n" + res.get("client", ""), file=sys.stderr)
    finally:
        subprocess.run(["ip", "netns", "del", netns])
        subprocess.run(["rm", "-rf", work])
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    print(f"{'case':18} {'Mpps':>8} {'testpmd':>8} {'ratio':>6} {'cycles/pkt':>10} "
          f"{'extra ns':>8} {'best ratio':>10} {'delivered':>9} {'ratio':>6} {'memif':>7} "
          f"{'ratio':>6} {'2-way tpmd':>10} {'ratio':>6}")
    for r in results:
        if r.get("error"):
            print(f"{r['case']:18} could not run: {r['error'].splitlines()[0]}")
        if not r["mpps"]:
            continue
        # A figure that could not be had (None, or absent) shows as '-'.
        cols = [(k, w) for k, w in (("mpps", 8), ("reference_mpps", 8), ("ratio", 6),
                                    ("cycles_per_packet", 10), ("extra_ns", 8),
                                    ("best_ratio", 10), ("delivered_mpps", 9),
                                    ("delivered_ratio", 6), ("peer_memif_mpps", 7),
                                    ("ratio_memif", 6), ("reference_twoway_mpps", 10),
                                    ("ratio_twoway", 6))]
        print(f"{r['case']:18} " + " ".join(
            f"{'-' if r.get(k) is None else r[k]:>{w}}" for k, w in cols))
    for r in results:
        if r["case"] == "churn":
            print(f"churn: {r['churn_per_s']} channels/s created and destroyed; "
                  f"{r['mpps']} Mpps against {r['mpps_without_churn']} without "
                  f"({r['ratio_to_without_churn']}); {r['packets_checked']} packets checked, "
                  f"{r['misdelivered']} misdelivered")
        if r["case"] == "latency":
            print(f"latency ({r['runs']} creates): create {r['create_median_us']} us median, "
                  f"{r['create_p99_us']} us p99; create to first packet "
                  f"{r['create_to_first_packet_median_us']} us median, "
                  f"{r['create_to_first_packet_p99_us']} us p99")
            if "rx_to_dequeue_median_us" in r:
                print(f"latency (deliver-1 at {r['rx_to_dequeue_at_mpps']} Mpps): rx burst to "
                      f"client dequeue {r['rx_to_dequeue_median_us']} us median, "
                      f"{r['rx_to_dequeue_p99_us']} us p99")
    print(f"(written to {a.out})")


if __name__ == "__main__":
    sys.exit(main())
