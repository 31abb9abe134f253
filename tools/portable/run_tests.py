#!/usr/bin/env python3
"""Runs the build's tests (meson-info/intro-tests.json) where meson is not installed.

  run_tests.py BUILD_DIR --kit DIR [--jobs N] [--deadline SECONDS] [--first NAME,...]
               [--log FILE]

Each test runs as `meson test` would run it: its command, its environment, its timeout, from
the build directory. A command naming a program the machine lacks (a Python of the build
machine, GStreamer's tools) runs this Python or the kit's tool of the same name instead; the
conformance runner gets the kit's ONNX test data. Exit code 77 is a skip. A failure whose output
says the machine lacks something the test needs (a Python module, GStreamer's HEVC decoder) is
listed as NEEDS with what is missing: not run here, never passed. Tests not started before the
deadline are listed as not run, never as passed. Prints one line per test and a
summary; the full output of each test goes to --log.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor


PATH_LISTS = ("LD_LIBRARY_PATH", "PATH", "PYTHONPATH")
# What a failed test's output says the machine lacks (the kit carries neither PyGObject, pycapnp's
# schema imports nor libav's decoders).
MISSING = [(re.compile(r"No module named '([\w.]+)'"), "Python module {0}"),
           (re.compile(r'no element "(h265parse|avdec_h265)"'), "GStreamer element {0}")]


def missing(text):
    for pattern, what in MISSING:
        m = pattern.search(text)
        if m:
            return what.format(*m.groups())
    return None


def resolve(cmd, kit):
    out = []
    for i, a in enumerate(cmd):
        if a.startswith("/") and not os.path.exists(a):
            base = os.path.basename(a)
            if base.startswith("python3"):
                a = sys.executable
            elif os.path.exists(os.path.join(kit, "bin", base)):
                a = os.path.join(kit, "bin", base)
            elif a.rstrip("/").endswith("gstreamer-1.0"):
                a = os.path.join(kit, "gst-plugins")
        out.append(a)
    if os.path.basename(out[0]) == "conformance" and "--data" not in out:
        data = os.path.join(kit, "onnx-testdata", "data")
        if os.path.isdir(data):
            out += ["--data", data]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--kit", required=True)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--deadline", type=float, default=1e9, help="seconds from now")
    ap.add_argument("--first", default="", help="names (or name prefixes) to start first")
    ap.add_argument("--only", default="", help="run only these names (or name prefixes)")
    ap.add_argument("--log", default="tests.log")
    args = ap.parse_args()

    tests = json.load(open(os.path.join(args.build, "meson-info", "intro-tests.json")))
    first = [p for p in args.first.split(",") if p]
    only = [p for p in args.only.split(",") if p]
    if only:
        tests = [t for t in tests if any(t["name"].startswith(p) for p in only)]

    def rank(t):
        for i, p in enumerate(first):
            if t["name"].startswith(p):
                return i
        return len(first)

    tests.sort(key=rank)
    end = time.monotonic() + args.deadline
    lock = threading.Lock()
    log = open(args.log, "w")
    results = {}

    def run(t):
        name = t["name"]
        left = end - time.monotonic()
        if left < 5:
            results[name] = ("NOT RUN", 0.0, "deadline")
            return
        env = dict(os.environ)
        for k, v in t.get("env", {}).items():  # search paths: the test's first, then ours
            env[k] = v + os.pathsep + env[k] if k in PATH_LISTS and env.get(k) else v
        cmd = resolve(t["cmd"], args.kit)
        timeout = min(t.get("timeout") or 30, left)
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, cwd=t.get("workdir") or args.build, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=timeout)
            rc, text = p.returncode, p.stdout.decode(errors="replace")
            state = "SKIP" if rc == 77 else ("PASS" if rc == 0 else "FAIL")
            if t.get("should_fail") and state != "SKIP":
                state = "FAIL" if rc == 0 else "PASS"
            lacks = missing(text) if state == "FAIL" else None
            if lacks:
                state, text = "NEEDS", text + f"\n[run_tests] not run here: needs {lacks}\n"
        except subprocess.TimeoutExpired as e:
            rc, text = None, (e.stdout or b"").decode(errors="replace")
            state = "TIMEOUT" if timeout >= (t.get("timeout") or 30) else "NOT RUN"
        except OSError as e:
            rc, text, state = None, str(e), "FAIL"
        dt = time.monotonic() - t0
        last = [ln for ln in text.strip().splitlines() if ln.strip()][-1:] or [""]
        if state == "NEEDS":
            last = [f"needs {lacks}"]
        results[name] = (state, dt, last[0][:150])
        with lock:
            print(f"{state:8s} {dt:7.1f} s  {name}", flush=True)
            log.write(f"==== {name}: {state} rc={rc} {dt:.1f} s\n$ {' '.join(cmd)}\n{text}\n")
            log.flush()

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(run, tests))

    counts = {}
    for state, _, _ in results.values():
        counts[state] = counts.get(state, 0) + 1
    print("\nsummary: " + ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items())))
    for name, (state, dt, last) in sorted(results.items()):
        if state in ("FAIL", "TIMEOUT", "NEEDS"):
            print(f"  {state} {name}: {last}")
    return 0 if counts.get("FAIL", 0) + counts.get("TIMEOUT", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
