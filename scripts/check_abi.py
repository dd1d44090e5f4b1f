#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Hold the installed shared libraries to their reference ABI (abi/*.abi, libabigail's abidw).

    check_abi.py check REFDIR INCLUDE LIB...  compare each LIB with REFDIR/<soname>.abi
    check_abi.py dump REFDIR INCLUDE LIB...   (re)write the references from LIB

The ABI is what the public headers say: those INCLUDE/meson.build installs. A type they only
declare (struct nc_client) is opaque, whatever the library's own definition.

For each library, `check` fails on:
- an ABI change abidiff reports (a type of a call changed, a call or its version removed),
  added calls aside; calls of NETCHANNEL_PRIVATE (between the project's own libraries) and
  NETCHANNEL_EXPERIMENTAL (marked so in the header) are free to change
  (abi/suppressions.abignore);
- a new call in a symbol version the reference already has: new calls get a new version;
- a call of an *_EXPERIMENTAL version that no public header marks NC_EXPERIMENTAL.
An incompatible change passes when the soname moved with it: the library is then another
ABI, whose reference is made with `dump`.

Needs abidw and abidiff (Debian's abigail-tools) and libraries built with debug info.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SUPPRESSIONS = os.path.join(HERE, "..", "abi", "suppressions.abignore")
# abidiff's exit status: bits of what it found (libabigail's abidiff_status).
ABI_ERROR, ABI_USAGE, ABI_CHANGE, ABI_INCOMPATIBLE = 1, 2, 4, 8


def public_headers(include):
    """The headers INCLUDE/meson.build installs: the public ones."""
    text = open(os.path.join(include, "meson.build"), encoding="utf-8").read()
    m = re.search(r"install_headers\(([^)]*)\)", text)
    if m is None:
        sys.exit(f"check_abi: no install_headers() in {include}/meson.build")
    return [os.path.join(include, h) for h in re.findall(r"'([^']+)'", m.group(1))]


def abidw(lib, out, headers):
    """The ABI of lib as the public headers show it, as abidw dumps it (no paths, so that
    dumps compare across trees). abidw knows a header by its name in a directory of them:
    a directory of the public ones only, so that no other header's types count."""
    pub = os.path.join(os.path.dirname(out), "public")
    os.makedirs(pub, exist_ok=True)
    for h in headers:
        shutil.copy(h, pub)
    r = subprocess.run(["abidw", "--no-corpus-path", "--no-comp-dir-path",
                        "--drop-private-types", "--headers-dir", pub, "--out-file", out, lib],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check_abi: abidw {lib}: {r.stderr.strip()}")
    corpus = ET.parse(out).getroot()
    if corpus.find(".//function-decl") is None:
        sys.exit(f"check_abi: {lib} has no debug info: build it with -g")
    return corpus


def symbols(corpus):
    """{(name, version)} of the functions and variables a dump says are exported."""
    return {(s.get("name"), s.get("version") or "")
            for s in corpus.iter("elf-symbol") if s.get("is-defined") == "yes"}


def reference(refdir, soname):
    return os.path.join(refdir, soname.split(".so")[0] + ".abi")


def experimental_marked(headers):
    """The calls the headers declare NC_EXPERIMENTAL."""
    marked = set()
    for h in headers:
        text = open(h, encoding="utf-8").read()
        marked |= set(re.findall(r"NC_EXPERIMENTAL\s+[^;()]*?\b(\w+)\s*\(", text))
    return marked


def check_one(refdir, headers, lib):
    """Problems of lib against its reference, as lines; [] when it holds."""
    with tempfile.TemporaryDirectory() as tmp:
        new = abidw(lib, os.path.join(tmp, "new.abi"), headers)
        soname = new.get("soname") or os.path.basename(lib)
        ref_path = reference(refdir, soname)
        if not os.path.exists(ref_path):
            others = [f for f in os.listdir(refdir) if f.endswith(".abi")]
            return [f"{soname}: no reference {ref_path} (references: {', '.join(others)}): "
                    "make one with scripts/check_abi.py dump"]
        ref = ET.parse(ref_path).getroot()
        if ref.get("soname") != soname:
            print(f"check_abi: {lib}: soname moved from {ref.get('soname')} to {soname}: "
                  "another ABI, free to differ; its reference is made with "
                  "scripts/check_abi.py dump")
            return []
        problems = []
        r = subprocess.run(["abidiff", "--no-added-syms", "--suppressions", SUPPRESSIONS,
                            ref_path, os.path.join(tmp, "new.abi")],
                           capture_output=True, text=True)
        if r.returncode & (ABI_ERROR | ABI_USAGE):
            problems.append(f"{soname}: abidiff failed ({r.returncode}): {r.stderr.strip()}")
        elif r.returncode:
            kind = "incompatible change" if r.returncode & ABI_INCOMPATIBLE else "change"
            problems.append(f"{soname}: an ABI {kind} under the same soname and symbol "
                            f"version:\n{r.stdout.strip()}")
        old_syms, new_syms = symbols(ref), symbols(new)
        old_versions = {v for _, v in old_syms}
        for name, version in sorted(new_syms - old_syms):
            if version in old_versions and not version.endswith(("_PRIVATE", "_EXPERIMENTAL")):
                problems.append(f"{soname}: new call {name} in {version}, a symbol version "
                                "the reference has: new calls get a new version")
        marked = experimental_marked(headers)
        for name, version in sorted(new_syms):
            if version.endswith("_EXPERIMENTAL") and name not in marked:
                problems.append(f"{soname}: {name} is in {version} but no public header "
                                "marks it NC_EXPERIMENTAL")
        return problems


def main(argv):
    if len(argv) >= 4 and argv[1] == "check":
        refdir, headers, libs = argv[2], public_headers(argv[3]), argv[4:]
        problems = [p for lib in libs for p in check_one(refdir, headers, lib)]
        for p in problems:
            print(f"check_abi: {p}")
        print(f"check_abi: {len(libs)} libraries, {len(problems)} problems")
        return 1 if problems else 0
    if len(argv) >= 4 and argv[1] == "dump":
        refdir, headers, libs = argv[2], public_headers(argv[3]), argv[4:]
        for lib in libs:
            with tempfile.TemporaryDirectory() as tmp:
                corpus = abidw(lib, os.path.join(tmp, "new.abi"), headers)
                out = reference(refdir, corpus.get("soname") or os.path.basename(lib))
                os.replace(os.path.join(tmp, "new.abi"), out)
                print(f"check_abi: {out}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
