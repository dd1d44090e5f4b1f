#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Print the integration test cases of the given files, one "FILE CLASS.METHOD" a line.

meson runs this at configure time so that each test_* method of a unittest.TestCase subclass
becomes a test of its own, found rather than listed by hand. It reads the files, it does not
import them: a case is a method named test_* of a class derived from unittest.TestCase or
from a class of the same file (or ncd_test.DaemonCase) that is.
"""
import ast
import os
import sys

BASES = {"TestCase", "DaemonCase"}


def cases(path):
    tree = ast.parse(open(path).read(), path)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    testlike = set()
    changed = True
    while changed:
        changed = False
        for c in classes:
            names = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                     for b in c.bases}
            if c.name not in testlike and names & (BASES | testlike):
                testlike.add(c.name)
                changed = True
    for c in classes:
        if c.name not in testlike:
            continue
        for f in c.body:
            if isinstance(f, ast.FunctionDef) and f.name.startswith("test_"):
                yield f"{c.name}.{f.name}"


def main():
    seen = set()
    for path in sys.argv[1:]:
        for case in cases(path):
            name = case.split(".")[-1]
            if name in seen:
                sys.exit(f"list_cases: {path}: {name}: a test of that name exists already")
            seen.add(name)
            print(os.path.basename(path), case)


if __name__ == "__main__":
    main()
