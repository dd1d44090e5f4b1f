#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Config checks, as a user meets them.

invalid/<case>/input.json must make netchanneld exit with code 2 and print
exactly "<path><expected>" (expected: the case's file), without starting
anything. Cases named start_* are found only once the device is probed, so the
daemon really starts EAL for them; the others are caught by --check-config and
by a real start alike. "@CASEDIR@" in an input or an expected message stands for
the case's directory.

Every config in config/ passes --check-config where the host has what it names: the test
bed's veth0 (default.json, nat.json) or a host's eth0 (host.json, the installed example), in
a namespace of the test's; nic.json's NIC and
lcores are no CI host's, and its check says so. The host checks (host_check.c) each have a
case.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = os.environ.get("NCD_BUILD_DIR", "build")
SRC = os.environ.get("NCD_SOURCE_DIR", ".")
DAEMON = os.path.join(BUILD, "app/netchanneld/netchanneld")
HERE = os.path.dirname(os.path.abspath(__file__))


def run(args, timeout=60, daemon=True):
    return subprocess.run(([DAEMON] if daemon else []) + args, capture_output=True, text=True,
                          timeout=timeout)


class Configs(unittest.TestCase):
    def test_invalid(self):
        cases = sorted(glob.glob(os.path.join(HERE, "invalid", "*", "input.json")))
        self.assertGreaterEqual(len(cases), 25)
        tmp = tempfile.mkdtemp(prefix="ncd_cfg_")
        self.addCleanup(shutil.rmtree, tmp, True)
        for case in cases:
            d = os.path.dirname(case)
            name = os.path.basename(d)
            with self.subTest(case=name):
                path = os.path.join(tmp, name + ".json")
                with open(case) as f, open(path, "w") as o:
                    o.write(f.read().replace("@CASEDIR@", d))
                with open(os.path.join(d, "expected")) as f:
                    want = path + f.read().rstrip("\n").replace("@CASEDIR@", d)
                prefix = f"ncd_cfg_{os.getpid()}_{name}"
                modes = [["--check-config"]] if not name.startswith("start_") else []
                modes.append(["--", "--in-memory", "--file-prefix", prefix,
                              "--log-level=lib.eal:error"])
                # EAL runs for start_ cases; what it leaves goes, whatever the test's outcome.
                self.addCleanup(subprocess.run, ["rm", "-rf", f"/var/run/dpdk/{prefix}"])
                for mode in modes:
                    r = run(["-c", path] + mode)
                    self.assertEqual(r.returncode, 2, f"{name} {mode[0]}: {r.stderr}")
                    lines = [l for l in r.stderr.splitlines() if l.startswith(path)]
                    self.assertEqual(lines, [want], f"{name} {mode[0]}")
                    self.assertNotIn("running", r.stdout)
                    if not name.startswith("start_"):
                        self.assertFalse(os.path.exists(f"/var/run/dpdk/{prefix}"))

    def netns(self, with_veth0):
        """A network namespace of the test's, with a veth0 and an eth0 or without; its name."""
        ns = f"ncdcfg{os.getpid()}{'v' if with_veth0 else 'n'}"
        subprocess.run(["ip", "netns", "add", ns], check=True)
        self.addCleanup(subprocess.run, ["ip", "netns", "del", ns])
        if with_veth0:
            subprocess.run(["ip", "-n", ns, "link", "add", "veth0", "type", "veth", "peer",
                            "name", "veth1"], check=True)
            # host.json's port, a host's first.
            subprocess.run(["ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer",
                            "name", "eth1"], check=True)
        return ns

    def test_usage(self):
        # Without -c: the embedded default config, which is config/default.json: the test
        # bed's host, whose veth0 is in a namespace of its own.
        ns = self.netns(True)
        r = run(["ip", "netns", "exec", ns, DAEMON, "--check-config"], daemon=False)
        self.assertEqual((r.returncode, r.stdout),
                         (0, "<default config>: ok (1 ports, 1 workers, 0 channels)\n"), r.stderr)
        r = run(["--default-config"])
        with open(os.path.join(SRC, "config/default.json")) as f:
            self.assertEqual((r.returncode, r.stdout), (0, f.read()))
        r = run(["--bogus"])
        self.assertEqual(r.returncode, 2)
        r = run(["-c", "/nonexistent.json", "--check-config"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("/nonexistent.json: unable to open", r.stderr)
        r = run(["--help"])
        self.assertEqual(r.returncode, 0)
        for word in ("--check-config", "--default-config", "--stats", "EAL-ARGS", "Exit codes"):
            self.assertIn(word, r.stdout)

    def test_examples(self):
        examples = sorted(glob.glob(os.path.join(SRC, "config", "*.json")))
        self.assertGreaterEqual(len(examples), 2)
        ns = self.netns(True)
        for path in examples:
            with self.subTest(config=os.path.basename(path)):
                r = run(["ip", "netns", "exec", ns, DAEMON, "-c", path, "--check-config"],
                        daemon=False)
                if os.path.basename(path) != "nic.json":
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertIn(": ok", r.stdout)
                    continue
                # A real NIC's config: on this host, its NIC (and lcore 2 on a 2-CPU host)
                # are named as missing, and nothing else.
                self.assertEqual(r.returncode, 2, r.stderr)
                want = [f"{path}: ports[0].device: no PCI device 0000:01:00.0 on this host "
                        "(/sys/bus/pci/devices/0000:01:00.0)"]
                if os.cpu_count() <= 2:
                    want.append(f"{path}: eal: -l 0-2: lcore 2 is CPU 2, which this host does "
                                f"not have ({os.cpu_count()} CPUs)")
                self.assertEqual([ln for ln in r.stderr.splitlines()
                                  if not ln.startswith(f"{path}: warning:")], want)

    def write(self, cfg):
        path = os.path.join(tempfile.mkdtemp(prefix="ncd_host_"), "config.json")
        self.addCleanup(shutil.rmtree, os.path.dirname(path), True)
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path

    def test_host_checks(self):
        """What a config needs of the host, before EAL starts: an interface missing in this
        network namespace (named), workers' lcores outside EAL's or its main one, more
        hugepages than are free (a warning): each said, the same at a start."""
        base = {"eal": ["-l", "0-1"], "mempool": {"mbufs": 8191, "cache": 64},
                "ports": [{"name": "wire0", "device": "net_af_xdp0,iface=veth0",
                           "exception": {"device": "none"}}],
                "workers": [{"lcore": 1}]}
        path = self.write(base)
        ns = self.netns(False)
        for mode in (["--check-config"], ["--", "--in-memory", "--no-pci"]):
            r = run(["ip", "netns", "exec", ns, DAEMON, "-c", path] + mode, daemon=False)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(f"{path}: ports[0].device: no interface veth0 in network namespace "
                          f"{ns} (net:[", r.stderr)
            self.assertNotIn("running", r.stdout)
        ns = self.netns(True)
        r = run(["ip", "netns", "exec", ns, DAEMON, "-c", path, "--check-config"], daemon=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        # EAL's lcores are CPUs: the first this host lacks is named.
        cpus = os.cpu_count()
        r = run(["ip", "netns", "exec", ns, DAEMON, "-c",
                 self.write(dict(base, eal=["-l", "0-63"])), "--check-config"], daemon=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"eal: -l 0-63: lcore {cpus} is CPU {cpus}, which this host does not "
                      f"have ({cpus} CPUs)", r.stderr)
        big = self.write(dict(base, mempool={"mbufs": 4000000, "cache": 64}))
        r = run(["ip", "netns", "exec", ns, DAEMON, "-c", big, "--check-config"], daemon=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, rf"^{re.escape(big)}: warning: hugepages: the config needs "
                         r"about \d+ MiB \(mempool.mbufs, heap_reserve_mb, EAL\), \d+ MiB are "
                         r"free: the start may fail")


if __name__ == "__main__":
    unittest.main(verbosity=2)
