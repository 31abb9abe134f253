#!/usr/bin/env python3
"""Generates the per-class case lists of nn/ops.def as C++ macros at build time.

Usage: gen_op_cases.py ops.def out.h

For each op class (the second column of ops.def) and for the reduction family (ops named
Reduce* or Arg*), out.h defines NN_<GROUP>_OPS, which expands to the group's enumerators joined
by `: case `, so a switch writes `case NN_UNARY_OPS:` and still names every op of the class. A new
op of an existing class then needs no edit of the switches that treat its class alike, and a
switch without `default:` still makes the compiler list every op it misses. ops.def stays the only
list.
"""
import re
import sys

OP = re.compile(r'^\s*OP\((\w+),\s*(\w+)\)')


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    groups = {}
    with open(sys.argv[1], encoding='utf-8') as f:
        for line in f:
            m = OP.match(line)
            if not m:
                continue
            name, cls = m.groups()
            if cls != 'Other':  # too mixed to be treated alike
                groups.setdefault(cls.upper(), []).append(name)
            if name.startswith(('Reduce', 'Arg')):
                groups.setdefault('REDUCE', []).append(name)
    for need in ('UNARY', 'BINARY', 'VARIADIC', 'FUSED', 'REDUCE'):
        if need not in groups:
            sys.exit(f'{sys.argv[1]}: no op of group {need}')
    out = ['// Generated from gst/nn/ops.def by tools/gen_op_cases.py; do not edit.',
           '// NN_<GROUP>_OPS: every op of the group, for `case NN_<GROUP>_OPS:` in a switch.',
           '#pragma once', '']
    for group in sorted(groups):
        names = groups[group]
        out.append(f'#define NN_{group}_OPS \\')
        body = [f'  OpKind::k{names[0]}'] + [f'  case OpKind::k{n}' for n in names[1:]]
        out.append(': \\\n'.join(body))
        out.append('')
    with open(sys.argv[2], 'w', encoding='utf-8') as f:
        f.write('\n'.join(out))


if __name__ == '__main__':
    main()
