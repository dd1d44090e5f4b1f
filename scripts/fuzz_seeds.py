#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Seed corpora for the fuzz targets, in OUT/<target>/:

  packet      every frame of scripts/gen_traffic.py's mixed traffic (valid, malformed, tagged,
              fragments, IPv6 extension headers, jumbo), each after a flags byte (0, then 1 or 4)
  config      every invalid-config case of tests/config and every shipped config
  classbench  the first 60 lines of each shipped ClassBench set
  control     written by seed_control (its path is the --control-seeder argument)
  region      an honest client's steps, a tx descriptor sent, and pseudo-random ones

usage: fuzz_seeds.py OUT --classbench DIR --control-seeder EXE
"""
import argparse
import glob
import os
import shutil
import struct
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def frames(pcap):
    with open(pcap, "rb") as f:
        data = f.read()
    off, out = 24, []
    while off + 16 <= len(data):
        n = struct.unpack("<I", data[off + 8:off + 12])[0]
        out.append(data[off + 16:off + 16 + n])
        off += 16 + n
    return out


TARGETS = ("packet", "config", "classbench", "control", "region")


def region_seeds():
    """fuzz_region's inputs: a geometry byte, then steps (tests/fuzz/fuzz_region.c): 0 deliver
    N, 1 serve the free ring, 2 serve the tx ring, 3 the client writes LEN bytes at OFF (2
    bytes), 4 an honest client's turn, 5 the channel goes."""
    honest = bytes([0]) + bytes([0, 5, 4, 1] * 24 + [5, 4, 1])
    desc = struct.pack("<IIII", 4096, 60, 0, 0)
    tx = bytes([2]) + bytes([3, 0, 192, 16]) + desc + bytes([3, 0, 64, 4, 1, 0, 0, 0, 2])
    out = [("honest", honest), ("tx", tx)]
    rnd = __import__("random").Random(7)
    for i in range(30):
        out.append((f"random-{i:02d}", bytes(rnd.randrange(256)
                                             for _ in range(rnd.randrange(16, 600)))))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--classbench", required=True)
    ap.add_argument("--control-seeder", required=True)
    a = ap.parse_args()
    for t in TARGETS:
        shutil.rmtree(os.path.join(a.out, t), ignore_errors=True)
        os.makedirs(os.path.join(a.out, t))
    tmp = tempfile.mkdtemp(prefix="ncd_seeds_")
    try:
        pcap = os.path.join(tmp, "in.pcap")
        subprocess.run(["/usr/bin/python3", os.path.join(TOP, "scripts/gen_traffic.py"), "--out",
                        pcap, "--manifest", os.path.join(tmp, "m.json"), "--mac",
                        "02:70:63:61:70:00"], check=True)
        for i, fr in enumerate(frames(pcap)):
            with open(os.path.join(a.out, "packet", f"frame-{i:03d}"), "wb") as f:
                f.write(bytes([0 if i % 3 else (1 if i % 2 else 4)]) + fr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cfgs = sorted(glob.glob(os.path.join(TOP, "tests/config/invalid/*/input.json")) +
                  glob.glob(os.path.join(TOP, "config/*.json")))
    for p in cfgs:
        name = os.path.basename(os.path.dirname(p)) if p.endswith("input.json") else \
            os.path.basename(p)
        shutil.copy(p, os.path.join(a.out, "config", name))
    for p in sorted(glob.glob(os.path.join(a.classbench, "*"))):
        if os.path.isfile(p):
            with open(p, "rb") as f:
                head = b"".join(f.readlines()[:60])
            with open(os.path.join(a.out, "classbench", os.path.basename(p)), "wb") as f:
                f.write(head)
    subprocess.run([a.control_seeder, os.path.join(a.out, "control")], check=True)
    for name, data in region_seeds():
        with open(os.path.join(a.out, "region", name), "wb") as f:
            f.write(data)
    n = {t: len(os.listdir(os.path.join(a.out, t))) for t in TARGETS}
    print("fuzz seeds: " + ", ".join(f"{t} {c}" for t, c in n.items()))
    return 0 if all(n.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
