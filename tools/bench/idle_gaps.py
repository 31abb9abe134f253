#!/usr/bin/env python3
"""How a network's run time depends on the idle time before it (not part of the test suite).

A pipeline runs its networks once per frame and the device idles between frames; the benchmark
(run.py) interleaves engines a few runs at a time. Both are unlike a tight loop of runs. This
keeps one op-bench-model process serving (its model loaded), asks it for ROUNDS rounds of RUNS
runs, sleeps PAUSE seconds before each round, and prints the median of every round's first run,
of the other runs, and of all, for each pause: back to back (0) and with gaps.

  tools/bench/idle_gaps.py MODEL [--pauses 0,0.05,0.3] [--rounds 15] [--runs 4] [--engine ort]

--engine ort times onnxruntime instead (tools/bench/peer.py: the model's float32 twin, 2
threads, its default thread spinning), with the same protocol. BUILD=dir picks the build tree
(default build/, already built)."""
import argparse
import json
import os
import statistics
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rounds_after(cmd, pause, rounds, runs):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        json.loads(p.stdout.readline())  # loaded, warmed up
        out = []
        for _ in range(rounds):
            time.sleep(pause)
            p.stdin.write(f"{runs}\n")
            p.stdin.flush()
            out.append(json.loads(p.stdout.readline()))
    finally:
        p.stdin.close()
        p.wait()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--pauses", default="0,0.05,0.3", help="seconds before each round")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--runs", type=int, default=4, help="runs per round (at least 2)")
    ap.add_argument("--engine", choices=("ours", "ort"), default="ours")
    a = ap.parse_args()
    if a.runs < 2 or a.rounds < 1:
        ap.error("--runs must be at least 2 and --rounds at least 1")
    if a.engine == "ort":
        cmd = [os.path.join(ROOT, ".venv", "bin", "python3"),
               os.path.join(ROOT, "tools/bench/peer.py"), "--engine", "ort", "--fp32-twin",
               "--threads", "2", a.model]
    else:
        build = os.environ.get("BUILD", os.path.join(ROOT, "build"))
        exe = os.path.join(build, "tools/bench/op-bench-model")
        if not os.path.exists(exe):
            raise SystemExit(f"no {exe}: build first (ninja -C {build})")
        cmd = [exe, a.model, "--serve", "--warmup", "3"]
    print(f"{a.model} ({a.engine}): {a.rounds} rounds of {a.runs} runs after each pause "
          f"(medians, ms)")
    print("| pause s | first run of a round | the other runs | all |")
    print("|---|---|---|---|")
    for pause in (float(x) for x in a.pauses.split(",")):
        got = rounds_after(cmd, pause, a.rounds, a.runs)
        firsts = [r[0] for r in got]
        others = [x for r in got for x in r[1:]]
        print(f"| {pause:g} | {statistics.median(firsts):.3f} | {statistics.median(others):.3f} "
              f"| {statistics.median(firsts + others):.3f} |")


if __name__ == "__main__":
    main()
