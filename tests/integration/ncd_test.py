# SPDX-License-Identifier: BSD-3-Clause
"""Helpers of the integration tests: run netchanneld, read pcaps, match rules."""
import ipaddress
import json
import os
import signal
import struct
import subprocess
import shutil
import tempfile
import sys
import time
import unittest

BUILD = os.environ.get("NCD_BUILD_DIR", "build")
SRC = os.environ.get("NCD_SOURCE_DIR", ".")
sys.path.insert(0, os.path.join(SRC, "scripts"))
from eal_prefix import cleanup as cleanup_prefix  # noqa: E402
from pcapfile import read_pcap, write_pcap  # noqa: E402,F401
DAEMON = os.path.join(BUILD, "app/netchanneld/netchanneld")
CONSUMER = os.path.join(BUILD, "tests/integration/nc_consumer")
NCCTL = os.path.join(BUILD, "app/ncctl/ncctl")
GEN = os.path.join(SRC, "scripts/gen_traffic.py")
PCAP_MAC = "02:70:63:61:70:00"   # net_pcap's MAC for the first pcap device of a process


def _terminated(signum, frame):
    """meson's timeout sends SIGTERM: fail the test, so that its cleanups still run."""
    raise SystemExit(f"terminated by signal {signum}")


signal.signal(signal.SIGTERM, _terminated)


class Daemon:
    """netchanneld on a config, with its own --file-prefix; stopped by pid."""

    def __init__(self, config, workdir, prefix, netns=None, args=()):
        self.workdir, self.prefix, self.netns, self.args = workdir, prefix, netns, list(args)
        self.config = os.path.join(workdir, "config.json")
        self.stats = os.path.join(workdir, "stats.json")
        self.log = os.path.join(workdir, "daemon.log")
        # What it keeps of the host's TAP configuration: the test's, not /run/netchanneld's.
        config = dict(config, state_dir=config.get("state_dir", workdir))
        with open(self.config, "w") as f:
            json.dump(config, f, indent=1)
        self.proc = None

    def start(self, timeout=20):
        self.logf = open(self.log, "w")
        cmd = [DAEMON, "-c", self.config, "--stats", self.stats] + self.args + \
            ["--", "--file-prefix", self.prefix]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"netchanneld exited {self.proc.returncode}:\n{self.output()}")
            if "netchanneld: running" in self.output():
                return
            time.sleep(0.1)
        raise AssertionError(f"netchanneld did not start in {timeout}s:\n{self.output()}")

    def output(self):
        with open(self.log) as f:
            return f.read()

    def stop(self, timeout=20):
        """SIGTERM, then the exit code; the counters are in self.stats."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"netchanneld ignored SIGTERM for {timeout}s")
        self.logf.close()
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None:
            self.logf.close()

    def read_stats(self):
        with open(self.stats) as f:
            return json.load(f)


def protected(cmd, protect):
    """cmd, for a DPDK secondary of a daemon that writes the pcap files in protect.

    A secondary process probes the primary's vdevs, and net_pcap re-opens the
    primary's tx_pcap files there, truncating them. The client therefore runs
    in a mount namespace of its own where /dev/null covers those files.
    """
    for path in protect:
        open(path, "a").close()
    if not protect:
        return cmd
    binds = " && ".join(f"mount --bind /dev/null '{p}'" for p in protect)
    return ["unshare", "-m", "sh", "-c", f"{binds} && exec \"$@\"", "sh"] + cmd


def consume(prefix, channel, out, count, timeout_ms=10000, lcore_id=7, protect=()):
    """Run the test consumer (a DPDK secondary) on a static channel."""
    cmd = protected([CONSUMER, "--prefix", prefix, "--channel", channel, "--out", out,
                     "--count", str(count), "--timeout-ms", str(timeout_ms),
                     "--lcore-id", str(lcore_id)], protect)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def generate(workdir, mac=PCAP_MAC, **kw):
    pcap, manifest = os.path.join(workdir, "in.pcap"), os.path.join(workdir, "manifest.json")
    args = ["/usr/bin/python3", GEN, "--out", pcap, "--manifest", manifest, "--mac", mac]
    for k, v in kw.items():
        args += [f"--{k.replace('_', '-')}"] + ([str(v)] if v != "" else [])
    subprocess.run(args, check=True)
    with open(manifest) as f:
        return pcap, json.load(f)


def accounting_ok(port):
    outcomes = ("delivered", "nat", "dropped_by_rule", "to_kernel", "drop_ring_full",
                "drop_queue_bytes", "drop_no_buf", "drop_exc_full", "drop_exc_down",
                "drop_no_exception", "drop_too_big",
                "drop_nat_invalid", "drop_nat_no_route", "drop_nat_no_neigh",
                "drop_nat_table_full", "drop_nat_conflict", "drop_nat_tx", "frag_in",
                "drop_meter", "drop_exc_police")
    # A datagram reassembled from fragments is one more packet to classify.
    return port["rx"] + port["frag_datagrams"] == sum(port[k] for k in outcomes)


# ---- the semantics, independently of the daemon's classifier -------------

PROTOS = {"tcp": 6, "udp": 17, "udplite": 136, "sctp": 132, "icmp": 1, "icmpv6": 58}


def _port_range(v):
    if v is None or v == "any":
        return None
    if isinstance(v, int):
        return (v, v)
    if "-" in v:
        lo, hi = v.split("-")
        return (int(lo), int(hi))
    if "/" in v:
        val, mask = (int(x, 0) for x in v.split("/"))
        lo = val & mask
        return (lo, lo | (~mask & 0xffff))
    return (int(v), int(v))


def rule_matches(match, pkt):
    """Does a config 'match' select a manifest packet? (Malformed and other-host never get here.)"""
    fams = set()
    for key in ("dst", "src"):
        if match.get(key, "any") != "any":
            net = ipaddress.ip_network(match[key], strict=False)
            fams.add(net.version)
            if pkt["family"] != net.version or ipaddress.ip_address(pkt[key]) not in net:
                return False
    fam = {"ipv4": 4, "ipv6": 6}.get(match.get("family"))
    if fam is not None and pkt["family"] != fam:
        return False
    proto = match.get("proto", "any")
    if proto != "any":
        want = PROTOS.get(proto, proto)
        if pkt["proto"] != int(want):
            return False
    noports = pkt["frag"] or pkt["proto"] not in (6, 17, 132, 136)
    for key in ("dport", "sport"):
        rng = _port_range(match.get(key))
        if rng is None:
            continue
        if rng == (0, 65535):
            continue
        if noports or pkt[key] is None or not rng[0] <= pkt[key] <= rng[1]:
            return False
    return True


def arrivals(meta, frames):
    """What the classifier sees, in order, as (manifest entry, frame): every frame that is not
    a fragment, and each datagram reassembled from fragments, where its last fragment comes
    (the manifest's "whole"). Fragments themselves go to no channel and not to the kernel."""
    for pkt, frame in zip(meta, frames):
        if not pkt["frag"]:
            yield pkt, frame
        elif pkt.get("whole"):
            whole = bytes.fromhex(pkt["whole"])
            yield dict(pkt, frag=False, length=len(whole)), whole


def expected_channel(channels, pkt):
    """The channel a packet goes to (highest priority, then the first listed), or None."""
    if pkt["malformed"] or pkt["other_host"] or pkt["family"] is None:
        return None
    best = None
    for ch in channels:
        if rule_matches(ch.get("match", {}), pkt):
            if best is None or ch.get("priority", 0) > best.get("priority", 0):
                best = ch
    return best


def trimmed(frame):
    """A delivered frame: cut after its IP packet."""
    off = 14
    etype = struct.unpack("!H", frame[12:14])[0]
    while etype in (0x8100, 0x88a8):
        etype = struct.unpack("!H", frame[off + 2:off + 4])[0]
        off += 4
    if etype == 0x0800:
        return frame[:off + struct.unpack("!H", frame[off + 2:off + 4])[0]]
    if etype == 0x86dd:
        return frame[:off + 40 + struct.unpack("!H", frame[off + 4:off + 6])[0]]
    return frame


def sh(*cmd):
    subprocess.run(cmd, check=True)


def python_env(env, lib):
    """env for /usr/bin/python3 to load lib (libnetchannel) with ctypes: a library built
    with the sanitizers needs their runtime loaded first, and Python's own allocations are
    not the leaks LeakSanitizer is there for."""
    out = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    runtime = [ln.split("=>")[1].split()[0] for ln in out.splitlines()
               if "=>" in ln and ("libasan" in ln or "libubsan" in ln)]
    if runtime:
        env = dict(env, LD_PRELOAD=":".join(runtime), ASAN_OPTIONS="detect_leaks=0")
    return env


class Sampler:
    """A CLI command's JSON over one control connection kept open, with when it was read: the
    middle of a round trip of about a millisecond. A rate from ncctl's reads would be off by the
    start of a process, which a loaded machine delays by a tenth of a second or more."""

    def __init__(self, sock):
        import nc_wire
        self.ctl = nc_wire.Ctl(sock)
        status = self.ctl.hello(flags=nc_wire.HELLO_F_CONTROL)[0]
        assert status == 0, status

    def read(self, line):
        t0 = time.monotonic()
        out = self.ctl.json_cli(line)
        return out, (t0 + time.monotonic()) / 2

    def close(self):
        self.ctl.close()


def nobody_package(w):
    """Copies of this build's libnetchannel and Python package in w (made readable to all),
    which uid 65534 cannot be relied on to reach in the build tree; returns the env for
    /usr/bin/python3 to import them."""
    os.chmod(w, 0o755)
    lib = os.path.join(w, "libnetchannel.so.0")
    if not os.path.exists(lib):
        shutil.copy(os.path.join(BUILD, "lib/netchannel/libnetchannel.so.0"), lib)
    if not os.path.exists(os.path.join(w, "py", "netchannel")):
        shutil.copytree(os.path.join(SRC, "python/netchannel"), os.path.join(w, "py", "netchannel"))
    return python_env(dict(os.environ, PYTHONPATH=os.path.join(w, "py"), NETCHANNEL_LIB=lib), lib)


def package_env():
    """env for /usr/bin/python3 to import this build's netchannel package (python/), which
    loads the build's libnetchannel."""
    return python_env(dict(os.environ, PYTHONPATH=os.path.join(SRC, "python")),
                      os.path.join(BUILD, "lib/netchannel/libnetchannel.so.0"))


def wait_until(predicate, timeout=10, interval=0.05, what=None):
    """predicate()'s first true value, polled until timeout; AssertionError after it, naming
    what was awaited and the last value seen."""
    deadline = time.time() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.time() >= deadline:
            raise AssertionError(f"waited {timeout}s for {what or predicate.__name__}; "
                                 f"last: {last!r}")
        time.sleep(interval)


def workdir(name):
    return tempfile.mkdtemp(prefix=f"ncd_{name}_")


class DaemonCase(unittest.TestCase):
    """A test with its own work directory and --file-prefix; whatever it started is stopped
    and removed, whatever the outcome."""

    def setUp(self):
        self.w = workdir(self._testMethodName)
        self.prefix = f"ncd_{self._testMethodName}_{os.getpid()}"
        self.daemon = None
        self.procs = []
        self.addCleanup(self.kill_procs)

    def kill_procs(self):
        """The clients a test started (self.procs) and left running: killed, by pid."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def wait_line(self, p, want, timeout=20):
        """The client's first line that contains want (EAL may print before it)."""
        deadline = time.time() + timeout
        seen = []
        while time.time() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            seen.append(line)
            if want in line:
                return line.strip()
        self.fail(f"{p.args}: no line with {want!r}:\n{''.join(seen)}")

    def finish(self, p, timeout=30):
        """The client's output once it exits (killed, and a failure, after timeout)."""
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            self.fail(f"{p.args} did not finish")
        return out

    def assert_receives(self, name, want):
        """A client of static channel name receives exactly the frames want, in order."""
        out = os.path.join(self.w, f"{name}.pcap")
        rc, log = consume(self.prefix, name, out, len(want),
                          protect=[os.path.join(self.w, f) for f in ("tx.pcap", "exc.pcap")])
        self.assertEqual(rc, 0, log)
        got = read_pcap(out)
        self.assertEqual(len(got), len(want), name)
        for i, (g, e) in enumerate(zip(got, want)):
            self.assertEqual(g, e, f"{name}: packet {i} differs")

    def tearDown(self):
        if self.daemon is not None:
            self.daemon.kill()
        cleanup_prefix(self.prefix)
        shutil.rmtree(self.w, ignore_errors=True)
