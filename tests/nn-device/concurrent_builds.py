#!/usr/bin/env python3
"""Two processes compiling the same model at once, sharing one empty cache: each of the model's
linked programs is linked once between them (the other process waits on the program's lock and
loads the binary stored), and both run the model. Without the lock both built every program, and
PoCL, whose own cache they share, once crashed in one of them while the other wrote the same
program's folder.

Usage: concurrent_builds.py OPC MODEL
"""
import os
import re
import subprocess
import sys
import tempfile

opc, model = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


with tempfile.TemporaryDirectory(prefix="concurrent-builds-") as cache:
    # No helper process: its builds would count as loads from the binary cache.
    env = dict(os.environ, XDG_CACHE_HOME=cache, GST_OP_BUILD_HELPER="0")
    procs = [subprocess.Popen([opc, "profile", model, "--runs", "1", "--top", "1"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=900) for p in procs]
    programs, linked, loaded = [], [], []
    for i, (p, (out, err)) in enumerate(zip(procs, outs)):
        check(p.returncode == 0, f"process {i} ran the model (exit {p.returncode}) {err.strip()[-300:]}")
        m = re.search(r"(\d+) programs [0-9.]+ ms \((\d+) compiled, (\d+) linked, (\d+) from the "
                      r"binary cache", out)
        check(m is not None, f"process {i} reports its programs")
        if m:
            programs.append(int(m.group(1)))
            linked.append(int(m.group(3)))
            loaded.append(int(m.group(4)))
    if len(programs) == 2:
        check(programs[0] == programs[1] and programs[0] > 1,
              f"both have the model's {programs[0]} programs")
        check(sum(linked) == programs[0],
              f"each program linked once between them: {linked[0]} + {linked[1]}")
        check(sum(loaded) == programs[0],
              f"and loaded by the other: {loaded[0]} + {loaded[1]}")

print(f"concurrent builds: {len(failures)} failures")
sys.exit(1 if failures else 0)
