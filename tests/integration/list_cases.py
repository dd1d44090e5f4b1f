#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Print the integration test cases of the given files, one "FILE CLASS.METHOD" a line.

meson runs this at configure time so that each test_* method of a unittest.TestCase subclass
becomes a test of its own, found rather than listed by hand. It reads the files, it does not
import them: a case is a method named test_* of a class derived from unittest.TestCase, from
ncd_test.DaemonCase, or from a class of any of the files that is one.
"""
import ast
import os
import sys

BASES = {"TestCase", "DaemonCase"}


def classes_of(path):
    return [n for n in ast.parse(open(path).read(), path).body if isinstance(n, ast.ClassDef)]


def testlike(paths):
    """The names of the test classes of every file: a file's may derive from another's."""
    classes = [c for p in paths for c in classes_of(p)]
    found = set()
    changed = True
    while changed:
        changed = False
        for c in classes:
            names = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                     for b in c.bases}
            if c.name not in found and names & (BASES | found):
                found.add(c.name)
                changed = True
    return found


def cases(path, tests):
    for c in classes_of(path):
        if c.name not in tests:
            continue
        for f in c.body:
            if isinstance(f, ast.FunctionDef) and f.name.startswith("test_"):
                yield f"{c.name}.{f.name}"


def main():
    seen = set()
    tests = testlike(sys.argv[1:])
    for path in sys.argv[1:]:
        for case in cases(path, tests):
            name = case.split(".")[-1]
            if name in seen:
                sys.exit(f"list_cases: {path}: {name}: a test of that name exists already")
            seen.add(name)
            print(os.path.basename(path), case)


if __name__ == "__main__":
    main()
