#!/usr/bin/env python3
"""Checks the include graph of the sources against the layers of docs/architecture.md.

Usage: check_includes.py SOURCE_ROOT [--print]

Reads every #include "…" of gst/, plugins/ and tools/ (tests may include anything) and checks:
  - no folder includes a folder of a higher layer (gst/base < gst/cl < gst/nn, gst/drive, gst/op
    < plugins < tools), and gst/op includes neither gst/nn nor gst/drive;
  - no circle between folders (an element folder of plugins/ and plugins/common, a tool, or a
    gst/ library each count as one folder);
  - inside plugins/ no element folder includes another element's folder;
  - inside plugins/ and gst/nn no two files include each other, directly or through a circle.
--print lists the folder graph. Exits 1 naming every violation.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
EXTS = ('.h', '.hpp', '.cpp', '.cc', '.c')
# The layer of each gst/ library; plugins are 3, tools 4.
GST_LAYERS = {'base': 0, 'cl': 1, 'nn': 2, 'drive': 2, 'op': 2}


def folder_of(rel):
    parts = rel.split('/')
    if parts[0] == 'gst':
        return 'gst/' + parts[1]
    if parts[0] in ('plugins', 'tools'):
        return parts[0] + '/' + parts[1] if len(parts) > 2 else parts[0]
    return parts[0]


def layer_of(folder):
    top, _, name = folder.partition('/')
    if top == 'gst':
        return GST_LAYERS.get(name, 2)
    return {'plugins': 3, 'tools': 4}.get(top)


def resolve(root, src, inc):
    """The repository path an include names, or None (system or generated headers)."""
    for base in (os.path.dirname(src), 'gst', 'plugins', ''):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def cycles(graph):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    if len(args) != 1:
        sys.exit(__doc__)
    root = args[0]
    files = {}
    for top in ('gst', 'plugins', 'tools'):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith(EXTS):
                    rel = os.path.relpath(os.path.join(dirpath, name), root)
                    with open(os.path.join(root, rel), encoding='utf-8', errors='replace') as f:
                        files[rel] = [r for r in (resolve(root, rel, i)
                                                  for i in INCLUDE.findall(f.read())) if r]
    if not any(f.startswith('gst/op/') for f in files):
        sys.exit(f'{root}: no gst/op sources; is this the source root?')

    errors = []
    folders, file_graph = {}, {}
    for src, incs in files.items():
        a = folder_of(src)
        for dst in incs:
            if dst == src or not dst.startswith(('gst/', 'plugins/', 'tools/')):
                continue
            b = folder_of(dst)
            file_graph.setdefault(src, set()).add(dst)
            if a == b:
                continue
            folders.setdefault(a, set()).add(b)
            la, lb = layer_of(a), layer_of(b)
            if la is not None and lb is not None and lb > la:
                errors.append(f'{src} reaches up a layer: includes {dst}')
            if a == 'gst/op' and b in ('gst/nn', 'gst/drive'):
                errors.append(f'{src}: gst/op includes {b} ({dst})')
            if (a.startswith('plugins/') and b.startswith('plugins/') and b != 'plugins/common'):
                errors.append(f"{src} includes another element's folder: {dst}")
    for comp in cycles(folders):
        errors.append('folders include each other: ' + ' -> '.join(comp))
    for comp in cycles(file_graph):
        if any(f.startswith(('plugins/', 'gst/nn/')) for f in comp):
            errors.append('files include each other: ' + ', '.join(comp))

    if '--print' in sys.argv:
        for a in sorted(folders):
            print(f'{a} -> {", ".join(sorted(folders[a]))}')
    for e in errors:
        print('error:', e)
    print(f'{len(files)} files, {len(folders)} folders with outgoing includes, '
          f'{sum(len(v) for v in folders.values())} folder arrows, {len(errors)} violations')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
