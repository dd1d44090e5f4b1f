#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Hold the daemon's modules to the order in app/netchanneld/layers.

A module may include the headers of, and use the symbols of, only the modules
on lower layers; modules on one layer are peers and use neither each other nor
anything above. Three checks, each over every file of app/netchanneld:

  include  each '#include "module/x.h"' (and "ncd.h") against the order;
  call     the undefined symbols nm lists in each module's static library
           against the symbols each other module's library defines;
  circle   the module graph both give: any circle is a failure.

An 'allow' line of the layers file excuses one arrow still to be removed; the
check fails on an arrow it does not excuse and on an allow line that no longer
matches anything, so the list only shrinks.

Usage: check_layers.py LAYERS SRCDIR MODULE=LIB.a... main=MAIN.o
"""
import collections
import os
import re
import subprocess
import sys


def read_layers(path):
    """The layers file: module -> (level, paths), and the allowed arrows."""
    mods, allow = {}, {}
    level = 0
    for n, raw in enumerate(open(path), 1):
        line = raw.split('#', 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if words[0] == 'layer':
            level += 1
            for w in words[1:]:
                name, _, paths = w.partition('=')
                mods[name] = (level, paths.split(',') if paths else [name + '/'])
        elif words[0] == 'allow' and len(words) == 4 and words[2] in ('include', 'call'):
            allow[(words[1], words[2], words[3])] = n
        else:
            sys.exit(f'{path}:{n}: neither "layer MODULE..." nor '
                     f'"allow FILE include|call WHAT": {raw.strip()}')
    return mods, allow


def module_of(mods, rel):
    """The module a file (a path under SRCDIR) belongs to, or None."""
    best = None
    for name, (_, paths) in mods.items():
        for p in paths:
            if (rel == p or (p.endswith('/') and rel.startswith(p))) and \
                    (best is None or len(p) > best[1]):
                best = (name, len(p))
    return best[0] if best else None


def includes(srcdir, mods):
    """(file, header, from module, to module) for each local include."""
    out = []
    for root, _, files in os.walk(srcdir):
        for f in sorted(files):
            if not f.endswith(('.c', '.h')):
                continue
            rel = os.path.relpath(os.path.join(root, f), srcdir)
            src = module_of(mods, rel)
            for line in open(os.path.join(root, f), errors='replace'):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                hdr = m.group(1)
                # A bare name is a neighbour in the same folder, or one of include/.
                cand = hdr if '/' in hdr else os.path.join(os.path.dirname(rel), hdr)
                if not os.path.exists(os.path.join(srcdir, cand)):
                    if os.path.exists(os.path.join(srcdir, hdr)):
                        cand = hdr
                    else:
                        continue   # include/, lib/ or generated: below every module
                dst = module_of(mods, os.path.normpath(cand))
                out.append((rel, os.path.normpath(cand), src, dst))
    return out


def nm(path):
    """(defined, undefined by object) of an archive or object."""
    res = subprocess.run(['nm', '-A', path], capture_output=True, text=True, check=True)
    defined, undef = set(), collections.defaultdict(set)
    for line in res.stdout.splitlines():
        where, _, rest = line.rpartition(':')
        parts = rest.split()
        # archive:member (meson's archives are thin: members are paths) or object
        obj = os.path.basename(where.rpartition(':')[2] if ':' in where else where)
        if len(parts) == 3 and parts[1] in 'TDBRCGSVW':
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == 'U':
            undef[obj].add(parts[1])
    return defined, undef


def obj_source(obj, mod):
    """meson's object name (channel_channel.c.o, main.c.o) back to a source path."""
    base = obj[:-2] if obj.endswith('.o') else obj
    if base.startswith(mod + '_'):
        return mod + '/' + base[len(mod) + 1:]
    return base


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    layers, srcdir = sys.argv[1], sys.argv[2]
    mods, allow = read_layers(layers)
    libs = dict(a.split('=', 1) for a in sys.argv[3:])
    bad, seen = [], set()
    edges = collections.defaultdict(set)    # module -> modules, with the arrows' names

    def judge(src_file, kind, what, src, dst):
        if src is None or dst is None or src == dst:
            return
        if src not in mods or dst not in mods:
            return
        edges[src].add(dst)
        if mods[dst][0] < mods[src][0]:
            return
        key = (src_file, kind, what)
        seen.add(key)
        if key not in allow:
            where = 'a peer' if mods[dst][0] == mods[src][0] else 'a higher layer'
            bad.append(f'{src_file}: {kind} {what}: {src} uses {dst}, {where}')

    for f, hdr, src, dst in includes(srcdir, mods):
        if src is None:
            bad.append(f'{f}: in no module of {layers}')
            continue
        judge(f, 'include', hdr, src, dst)

    owner = {}
    undefs = {}
    for mod, path in libs.items():
        if mod not in mods:
            sys.exit(f'{path}: module {mod} is not in {layers}')
        defined, undef = nm(path)
        for s in defined:
            owner.setdefault(s, mod)
        undefs[mod] = undef
    for mod in mods:
        if mod not in libs:
            sys.exit(f'{layers}: module {mod} has no library to check (pass {mod}=PATH)')
    for mod, undef in undefs.items():
        for obj, syms in sorted(undef.items()):
            for s in sorted(syms):
                if s in owner:
                    judge(obj_source(obj, mod), 'call', s, mod, owner[s])

    stale = [f'{layers}:{n}: allow {" ".join(k)}: no such arrow any more'
             for k, n in sorted(allow.items(), key=lambda kv: kv[1]) if k not in seen]

    # Circles: strongly connected components of the module graph (Tarjan).
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp, key=lambda m: mods[m][0]))

    for v in sorted(mods):
        if v not in index:
            visit(v)

    for line in bad + stale:
        print('check_layers: ' + line)
    for c in comps:
        print('check_layers: circle among ' + ', '.join(c) +
              (' (through allowed arrows)' if not bad else ''))
    print(f'check_layers: {len(mods)} modules, {len(bad)} arrows against the order, '
          f'{len(stale)} stale allow lines, {len(allow)} allowed, {len(comps)} circles')
    # A circle needs an arrow against the order: an allowed one is debt, not a failure.
    return 1 if bad or stale or (comps and len(allow) == 0) else 0


if __name__ == '__main__':
    sys.exit(main())
