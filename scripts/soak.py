#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/soak.sh [MINUTES]: netchanneld under sustained traffic and faults, bounded in time.

For MINUTES (default 10), all at once:
  - traffic: net_pcap infinite_rx=1 replays 64 UDP flows (flow N to port 20000 + N, "flow=N"
    in its payload) and some frames that are not (ARP, TCP, malformed IPv4);
  - clients (nc_client_test in its soak mode, real processes) create a channel each for one flow's port,
    check every packet they get, and are killed with SIGKILL after 0.2-2 s, at random;
  - channel churn through one ncctl session: operator channels created and destroyed, some
    overlapping the clients' flows at a higher priority;
  - control-socket garbage: random datagrams, bad headers, truncated and oversized requests;
  - a restart at half time (there is no config reload): SIGTERM, the exit checked, a new
    daemon on the same config.
At the end of each daemon's life, with the clients and the churn stopped, it checks and prints:
  - the mempool's in-use count is back to its baseline (at most one burst more);
  - the daemon's RSS did not grow after the warm-up (at most 4 MiB or 5%);
  - no client received a packet its channel's rule does not match (misdelivered = 0);
  - every port's accounting adds up (rx = the sum of the outcomes, from --stats at exit).
Exit code 0 when every check holds.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from eal_prefix import cleanup
import nc_wire as W

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("NCD_BUILD_DIR", os.path.join(TOP, "build"))
DAEMON = os.path.join(BUILD, "app/netchanneld/netchanneld")
NCCTL = os.path.join(BUILD, "app/ncctl/ncctl")
CLIENT = os.path.join(BUILD, "tests/integration/nc_client_test")
BASE, NFLOWS, SLOTS = 20000, 64, 3
EAL = ["-l", "0-1", "--no-pci", "--log-level", "lib.eal:error", "--no-telemetry",
       "--base-virtaddr", "0x200000000000"]
# docs/counters.md's identity: every received packet lands in exactly one.
OUTCOMES = ("delivered", "nat", "dropped_by_rule", "to_kernel", "drop_ring_full",
            "drop_queue_bytes", "drop_no_buf", "drop_exc_full", "drop_exc_down",
            "drop_no_exception", "drop_too_big",
            "drop_nat_invalid", "drop_nat_no_route", "drop_nat_no_neigh", "drop_nat_table_full",
            "drop_nat_conflict", "drop_nat_tx")
MAC = "02:70:63:61:70:00"


def make_pcap(path):
    from scapy.all import ARP, IP, TCP, UDP, Ether, Raw, wrpcap
    eth = Ether(dst=MAC, src="02:00:00:00:00:01")
    pkts = [eth / IP(src=f"203.0.113.{i % 200 + 1}", dst="192.0.2.1") /
            UDP(sport=10000 + i, dport=BASE + i) / Raw(f"flow={i}".encode().ljust(18, b"."))
            for i in range(NFLOWS)]
    pkts += [Ether(dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="192.0.2.2", pdst="192.0.2.1"),
             eth / IP(src="203.0.113.9", dst="192.0.2.1") / TCP(sport=1, dport=BASE + 1),
             Ether(bytes(eth / IP(src="203.0.113.9", dst="192.0.2.1") / UDP(dport=BASE))[:30])]
    wrpcap(path, pkts)


class Soak:
    def __init__(self, minutes, work, rss_check=True):
        self.minutes, self.work, self.rss_check = minutes, work, rss_check
        self.sock = os.path.join(work, "ncd.sock")
        self.prefix = f"ncd_soak_{os.getpid()}"
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.daemon = None
        self.clients = {}          # pid -> Popen
        self.fig = dict(clients_started=0, clients_killed=0, clients_refused=0, ok=0,
                        misdelivered=0, churn_created=0, churn_destroyed=0, garbage_sent=0,
                        restarts=0)
        self.failures = []

    # ---- the daemon ----------------------------------------------------
    def start_daemon(self, life):
        cfg = {"eal": EAL, "mempool": {"mbufs": 16383, "cache": 128},
               "ports": [{"name": "wire0",
                          "device": f"net_pcap0,rx_pcap={self.work}/soak.pcap,infinite_rx=1",
                          "exception": {"device": "none"}}],
               "workers": [{"lcore": 1}],
               "control": {"socket": self.sock, "mbuf_quota": 2048}}
        with open(os.path.join(self.work, "soak.json"), "w") as f:
            json.dump(cfg, f)
        self.stats_path = os.path.join(self.work, f"stats{life}.json")
        self.log = open(os.path.join(self.work, f"daemon{life}.log"), "w")
        self.daemon = subprocess.Popen([DAEMON, "-c", os.path.join(self.work, "soak.json"),
                                        "--stats", self.stats_path, "--", "--file-prefix",
                                        self.prefix], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.daemon.poll() is not None:
                raise RuntimeError("netchanneld exited at start:\n" + self.daemon_log(life))
            if "netchanneld: running" in self.daemon_log(life):
                return
            time.sleep(0.1)
        raise RuntimeError("netchanneld did not start")

    def daemon_log(self, life):
        with open(os.path.join(self.work, f"daemon{life}.log")) as f:
            return f.read()

    def ctl(self, cmd):
        r = subprocess.run([NCCTL, "-s", self.sock, "--json", "-c", cmd], capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"ncctl {cmd}: {r.stdout}{r.stderr}")
        return json.loads(r.stdout)

    def rss_kib(self):
        with open(f"/proc/{self.daemon.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    # ---- the loads -----------------------------------------------------
    def client_slot(self, slot):
        n = 0
        while not self.stop.is_set():
            n += 1
            out = os.path.join(self.work, f"client{slot}.{n}.out")
            with open(out, "w") as f:
                p = subprocess.Popen([CLIENT, self.sock, "create", f"soak{slot}-{n}",
                                      str(BASE + slot), str(BASE), "soak"], stdout=f,
                                     stderr=subprocess.STDOUT)
            with self.lock:
                self.clients[p.pid] = p
                self.fig["clients_started"] += 1
            self.stop.wait(random.uniform(0.2, 2.0))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                with self.lock:
                    self.fig["clients_killed"] += 1
            p.wait()
            with self.lock:
                del self.clients[p.pid]
            self.count_client(out)
            os.unlink(out)

    def count_client(self, out):
        with open(out) as f:
            lines = f.read().splitlines()
        totals = [ln for ln in lines if ln.startswith("ok ")]
        with self.lock:
            if any(ln.startswith("channel ") and ": id " not in ln for ln in lines):
                # The channel of this slot's previous client was still being removed.
                self.fig["clients_refused"] += 1
            if totals:
                w = totals[-1].split()
                self.fig["ok"] += int(w[1])
                self.fig["misdelivered"] += int(w[3])

    def churn(self):
        while not self.stop.is_set():
            p = subprocess.Popen([NCCTL, "-s", self.sock], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
            k = 0
            try:
                while not self.stop.is_set() and p.poll() is None:
                    k += 1
                    rule = (f"proto udp dport {BASE}-{BASE + SLOTS - 1} priority 5" if k % 10 == 0
                            else f"proto udp dport {30000 + k % 1000}")
                    p.stdin.write(f"channel create churn{k} {rule}\nchannel destroy churn{k}\n")
                    p.stdin.flush()
                    with self.lock:
                        self.fig["churn_created"] += 1
                        self.fig["churn_destroyed"] += 1
                    time.sleep(0.01)
            except (BrokenPipeError, OSError):
                pass
            finally:
                try:
                    p.stdin.close()
                except OSError:
                    pass
                p.wait()
            self.stop.wait(0.2)

    def garbage(self):
        rnd = random.Random(7)
        while not self.stop.is_set():
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.connect(self.sock)
                s.settimeout(0.2)
                for _ in range(50):
                    if self.stop.is_set():
                        break
                    kind = rnd.randrange(5)
                    if kind == 0:
                        msg = rnd.randbytes(rnd.randrange(0, 200))
                    elif kind == 1:      # a header that lies about its length
                        msg = W.REQ.pack(W.MAGIC, rnd.randrange(0, 12), 1, rnd.randrange(0, 5000),
                                         0) + rnd.randbytes(8)
                    elif kind == 2:      # HELLO, then a truncated CREATE
                        s.send(W.request(W.HELLO, W.hello_body(), 2))
                        msg = W.request(W.CREATE, rnd.randbytes(20), 3)
                    elif kind == 3:      # oversized
                        msg = rnd.randbytes(70000)
                    else:                # a CLI line of junk
                        line = rnd.randbytes(rnd.randrange(1, 60))
                        msg = W.request(W.CLI, W.CLI_HEAD.pack(0) + line, 4)
                    try:
                        s.send(msg)
                        with self.lock:
                            self.fig["garbage_sent"] += 1
                        s.recv(70000)
                    except socket.timeout:
                        pass
                    time.sleep(0.005)
                s.close()
            except OSError:
                self.stop.wait(0.1)

    # ---- one daemon's life, and the checks -------------------------------
    def life(self, n, seconds):
        self.start_daemon(n)
        time.sleep(1)
        base = self.ctl("show mempool")["in_use"]
        threads = [threading.Thread(target=self.client_slot, args=(s,)) for s in range(SLOTS)]
        threads += [threading.Thread(target=self.churn), threading.Thread(target=self.garbage)]
        for t in threads:
            t.start()
        t0, rss = time.time(), []
        try:
            while time.time() - t0 < seconds:
                time.sleep(min(2, max(0.1, seconds - (time.time() - t0))))
                if self.daemon.poll() is not None:
                    self.failures.append(f"daemon {n} died (exit {self.daemon.returncode})")
                    break
                rss.append((time.time() - t0, self.rss_kib()))
        finally:
            self.stop.set()
            for t in threads:
                t.join(60)
            self.stop.clear()
        if self.daemon.poll() is not None:
            return
        # Dead clients' mbufs come back once their processes are gone: give it 5 s.
        deadline = time.time() + 5
        while True:
            mp = self.ctl("show mempool")
            if mp["in_use"] <= base + 32 or time.time() > deadline:
                break
            time.sleep(0.2)
        warm = [k for t, k in rss if t >= seconds / 4] or [k for _, k in rss]
        growth = (max(warm) - warm[0]) if warm else 0
        print(f"soak: daemon {n}: {seconds:.0f} s; mempool in use {base} at start, "
              f"{mp['in_use']} at the end (reclaimed {mp['reclaimed']}, cache flushed "
              f"{mp['cache_flushed']}); RSS {warm[0] if warm else 0} KiB after warm-up, "
              f"max {max(warm) if warm else 0} KiB (growth {growth} KiB)")
        if mp["in_use"] > base + 32:
            self.failures.append(f"daemon {n}: mempool in use {mp['in_use']}, baseline {base}")
            # What holds them: channels' rings, clients' counts, the port's queues.
            for cmd in ("show channel all", "show clients", "show mempool", "show port info 0"):
                try:
                    print(f"soak: daemon {n}: {cmd}: {json.dumps(self.ctl(cmd))}")
                except RuntimeError as e:
                    print(f"soak: daemon {n}: {cmd}: {e}")
        if self.rss_check and growth > max(4096, warm[0] // 20 if warm else 0):
            self.failures.append(f"daemon {n}: RSS grew by {growth} KiB after warm-up")
        self.daemon.send_signal(signal.SIGTERM)
        try:
            rc = self.daemon.wait(60)
        except subprocess.TimeoutExpired:
            # Where it hangs, for the log: every thread's stack, if gdb is there.
            if shutil.which("gdb"):
                bt = subprocess.run(["gdb", "-p", str(self.daemon.pid), "-batch", "-ex",
                                     "thread apply all bt"], capture_output=True, text=True,
                                    timeout=120)
                print(f"soak: daemon {n} ignored SIGTERM for 60 s; its threads:\n{bt.stdout}")
            self.daemon.kill()
            rc = "killed after 60 s"
        self.log.close()
        # A client SIGKILLed inside its rte_eal_init() can leave a lock of DPDK's shared
        # memory held: the daemon's teardown watchdog then ends it (docs/hardening.md).
        with open(self.log.name) as f:
            for line in f:
                if line.startswith("netchanneld: shutdown: "):
                    print(f"soak: daemon {n}: {line.strip()}")
        if rc != 0:
            self.failures.append(f"daemon {n}: exit {rc}")
            return
        with open(self.stats_path) as f:
            st = json.load(f)
        for port in st["ports"]:
            total = sum(port[k] for k in OUTCOMES)
            print(f"soak: daemon {n}: port {port['name']}: rx {port['rx']}, outcomes {total} "
                  f"(delivered {port['delivered']}, ring full {port['drop_ring_full']}, "
                  f"no exception {port['drop_no_exception']}); bad control messages "
                  f"{st['control']['bad_messages']}")
            if port["rx"] != total:
                self.failures.append(f"daemon {n}: port {port['name']}: rx {port['rx']} != "
                                     f"outcomes {total}")

    def cleanup(self):
        self.stop.set()
        with self.lock:
            procs = list(self.clients.values())
        for p in procs + ([self.daemon] if self.daemon else []):
            if p.poll() is None:
                p.kill()
                p.wait()
        cleanup(self.prefix)
        for f in os.listdir("/dev/hugepages") if os.path.isdir("/dev/hugepages") else []:
            if f.startswith(self.prefix + "map_"):
                os.unlink(os.path.join("/dev/hugepages", f))

    def run(self):
        make_pcap(os.path.join(self.work, "soak.pcap"))
        half = self.minutes * 60 / 2
        for n in (1, 2):
            self.life(n, half)
            if n == 1:
                self.fig["restarts"] += 1
        f = self.fig
        print(f"soak: {self.minutes} min: clients {f['clients_started']} started, "
              f"{f['clients_killed']} killed with SIGKILL, {f['clients_refused']} refused "
              f"(their previous channel still going); packets checked by clients {f['ok']}, "
              f"misdelivered {f['misdelivered']}; churn {f['churn_created']} channels created "
              f"and destroyed; garbage messages {f['garbage_sent']}; restarts {f['restarts']}")
        if f["misdelivered"] != 0:
            self.failures.append(f"{f['misdelivered']} packets misdelivered")
        if f["ok"] == 0:
            self.failures.append("the clients received nothing")
        for x in self.failures:
            print(f"soak: FAILED: {x}")
        print("soak: " + ("every check held" if not self.failures else
                          f"{len(self.failures)} checks failed"))
        return 0 if not self.failures else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("minutes", nargs="?", type=float, default=10)
    ap.add_argument("--no-rss-check", action="store_true",
                    help="print RSS, do not judge it (ASan's allocator holds freed memory)")
    a = ap.parse_args()
    if a.minutes <= 0 or a.minutes > 24 * 60:
        print("soak: MINUTES must be in (0, 1440]", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="ncd_soak_")
    s = Soak(a.minutes, work, rss_check=not a.no_rss_check)

    def on_signal(signum, frame):
        raise SystemExit(1)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        return s.run()
    finally:
        s.cleanup()
        if os.environ.get("NCD_SOAK_KEEP"):
            print(f"soak: work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
