#!/usr/bin/env python3
"""opfleet on a real one-node Slurm cluster and locally, over 6 two-segment routes cut from the
sample drive, one of them with a corrupt segment:

- Slurm: one array task is cancelled (scancel JOB_INDEX) while it runs; that run leaves its
  routes unfinished, and the rerun finishes them while skipping the routes already done.
- The broken route is failed with its segment's error, its good segment still replayed; every
  other route is done.
- The logs of the Slurm and the --local -j 2 replays are equal message by message in every field
  but the measured ones (*ExecutionTime, and frameAge: how many frames entered the pipeline
  while a frame waited), read with pycapnp.
- A rerun skips every done route (their summaries are not rewritten) and retries the failed one.
- The merged report (markdown, CSV, plots) lists every route.

Skips (77) where the cluster cannot run: not root, slurm-wlm/munge missing, or a daemon that does
not start (a container without the privileges slurmd needs).

  check_fleet.py OPFLEET OPREPLAY ROUTE_PY DRIVE_DIR VISION POLICY
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slurm_cluster import Cluster, ClusterError  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from optest import check, failures, tool_env  # noqa: E402

# Routes: the sample drive's GOPs (40 frames each) two by two; "rbad" gets a corrupt segment 1.
ROUTES = {"r0": "0,1", "r1": "1,2", "r2": "2,3", "r3": "3,4", "r4": "4,0", "rbad": "2,3"}


def strip_times(obj):
    """A message as a dict without what is measured (fields named *ExecutionTime, frameAge)."""
    if isinstance(obj, dict):
        return {k: strip_times(v) for k, v in obj.items()
                if not k.endswith("ExecutionTime") and k != "frameAge"}
    if isinstance(obj, list):
        return [strip_times(v) for v in obj]
    return obj


def messages(opfleet_mod, rlog):
    return [strip_times(ev.to_dict()) for ev in opfleet_mod.read_log(rlog)]


def summaries(out):
    res = {}
    for rid in ROUTES:
        p = os.path.join(out, "routes", rid, "summary.json")
        if os.path.isfile(p):
            with open(p) as f:
                res[rid] = json.load(f)
    return res


def main():
    if len(sys.argv) != 7:
        print(__doc__)
        return 2
    opfleet, opreplay, route_py, drive, vision, policy = sys.argv[1:]
    why = Cluster.unavailable()
    if why:
        print(f"SKIP: {why}")
        return 77
    env = tool_env("fleet")
    sys.path.insert(0, os.path.dirname(os.path.abspath(opfleet)))
    import opfleet as opfleet_mod  # its log reader

    work = tempfile.mkdtemp(prefix="opfleet-test-")
    os.chmod(work, 0o755)
    try:
        routes = os.path.join(work, "routes")
        for rid, gops in ROUTES.items():
            subprocess.run([sys.executable, route_py, "--out", routes, "--name", rid, "--from",
                            drive, "--gops", gops], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(routes, "rbad--1", "fcamera.hevc"), "r+b") as f:
            f.write(b"\x12\x34\x56\x78" * 64)  # the start code and parameter sets overwritten
        # One camera keeps the test short on a busy machine; the wide path is opreplay's own test.
        common = ["--opreplay", opreplay, "--vision", vision, "--policy", policy,
                  "--single-camera"]

        def fleet(args, out, **kw):
            return subprocess.Popen([sys.executable, opfleet, routes, out] + args + common,
                                    env=kw.get("env", env), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)

        out_s, out_l = os.path.join(work, "slurm"), os.path.join(work, "local")
        try:
            cluster = Cluster(cpus=min(2, os.cpu_count() or 1))
            cluster.__enter__()
        except (ClusterError, subprocess.CalledProcessError, OSError) as e:
            print(f"SKIP: the one-node Slurm cluster did not start: {e}")
            return 77
        try:
            senv = dict(env, SLURM_CONF=cluster.env["SLURM_CONF"])
            # ---- Slurm, with array task 1 cancelled while it runs.
            t0 = time.monotonic()
            p = fleet(["--slurm", "--shards", "3", "--cpus-per-task", "1", "--poll", "0.5"],
                      out_s, env=senv)
            jobs = os.path.join(out_s, "slurm", "jobs.txt")
            job, cancelled = None, False
            deadline = time.monotonic() + 240
            while p.poll() is None and time.monotonic() < deadline and not cancelled:
                if job is None and os.path.isfile(jobs):
                    job = open(jobs).read().split()[0]
                if job:
                    q = subprocess.run(["squeue", "-h", "-r", "-j", job, "-o", "%i %T"],
                                       env=senv, stdout=subprocess.PIPE, text=True).stdout
                    if f"{job}_1 RUNNING" in q:
                        time.sleep(1.0)  # mid-route: the task has started its first replay
                        subprocess.run(["scancel", f"{job}_1"], env=senv, check=True)
                        cancelled = True
                time.sleep(0.2)
            text, _ = p.communicate(timeout=max(10, deadline - time.monotonic()))
            print(text)
            check(cancelled, f"array task {job}_1 was cancelled while running")
            check(p.returncode == 1, f"the cancelled run exits 1 (got {p.returncode})")
            first = summaries(out_s)
            # Task 1's shard: routes 1 and 4 of the sorted list (r1, r4).
            unfinished = [rid for rid in ("r1", "r4") if first.get(rid, {}).get("status") != "done"]
            check(len(unfinished) >= 1, f"the cancelled task left routes unfinished ({unfinished})")
            check(all(first.get(r, {}).get("status") == "done" for r in ("r0", "r2", "r3")),
                  "the other tasks' good routes are done")

            # ---- The rerun completes them and skips the done ones.
            p = fleet(["--slurm", "--shards", "3", "--cpus-per-task", "1", "--poll", "0.5"],
                      out_s, env=senv)
            text, _ = p.communicate(timeout=300)
            print(text)
            second = summaries(out_s)
            done_before = [r for r, s in first.items() if s["status"] == "done"]
            check(f"{len(done_before)} already done (skipped)" in text,
                  f"the rerun skips the {len(done_before)} done routes")
            check(all(second[r]["finished"] == first[r]["finished"] for r in done_before),
                  "the done routes' results were not rewritten")
            check(all(second.get(r, {}).get("status") == "done" for r in ROUTES if r != "rbad"),
                  "after the rerun every good route is done")
            check(p.returncode == 1, "the rerun exits 1: the broken route failed")
            print(f"slurm runs: {time.monotonic() - t0:.0f} s")
        finally:
            cluster.stop()

        # ---- Locally, two at a time.
        t0 = time.monotonic()
        p = fleet(["--local", "-j", "2"], out_l)
        text, _ = p.communicate(timeout=300)
        print(text)
        print(f"local run: {time.monotonic() - t0:.0f} s")
        local = summaries(out_l)
        check(p.returncode == 1, "the local run exits 1: the broken route failed")

        # ---- The broken route: reported with its error, the rest of it kept.
        for name, res in (("slurm", second), ("local", local)):
            bad = res.get("rbad", {})
            check(bad.get("status") == "failed" and "segment 1" in (bad.get("error") or "") and
                  "not an HEVC byte stream" in (bad.get("error") or ""),
                  f"{name}: rbad failed naming segment 1 and why: {bad.get('error')}")
            check((bad.get("evaluated") or 0) > 0, f"{name}: rbad's good segment 0 was replayed")
            check(all(res.get(r, {}).get("status") == "done" and res[r]["evaluated"] > 60
                      for r in ROUTES if r != "rbad"),
                  f"{name}: the 5 good routes are done with both segments' frames")

        # ---- Same outputs: the logs, message by message.
        for rid in ROUTES:
            a = messages(opfleet_mod, os.path.join(out_s, "routes", rid, "rlog.zst"))
            b = messages(opfleet_mod, os.path.join(out_l, "routes", rid, "rlog.zst"))
            evaluated = local.get(rid, {}).get("evaluated")
            check(len(a) == len(b) and len(a) == 3 * (evaluated or -1),
                  f"{rid}: {len(a)} messages from Slurm, {len(b)} locally, 3 per evaluated frame")
            diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
            check(diff is None, f"{rid}: the logs are equal but for measured times" +
                  ("" if diff is None else f" (first difference at message {diff})"))
        # Frame ids continue over the segment boundary; after the broken segment they show it.
        ids = [m["modelV2"]["frameId"] for m in
               messages(opfleet_mod, os.path.join(out_l, "routes", "r0", "rlog.zst"))
               if "modelV2" in m]
        check(ids == list(range(len(ids))), "r0: frame ids 0, 1, ... across both segments")

        # ---- The manifest: a rerun replays only the failed route.
        p = fleet(["--local", "-j", "2"], out_l)
        text, _ = p.communicate(timeout=300)
        print(text)
        again = summaries(out_l)
        check("5 already done (skipped), 1 to replay" in text, "the rerun skips the 5 done routes")
        check(all(again[r]["finished"] == local[r]["finished"] for r in ROUTES if r != "rbad") and
              again["rbad"]["finished"] > local["rbad"]["finished"] and
              again["rbad"]["attempts"] == local["rbad"]["attempts"] + 1,
              "only the failed route was replayed again")
        with open(os.path.join(out_l, "manifest.json")) as f:
            manifest = json.load(f)["routes"]
        check(sorted(manifest) == sorted(ROUTES) and
              [r for r, v in manifest.items() if v["status"] != "done"] == ["rbad"],
              "the manifest lists every route, only rbad not done")

        # ---- The merged report.
        for out in (out_s, out_l):
            report = open(os.path.join(out, "report.md")).read()
            check("6 routes: 5 done, 1 failed, 0 not finished." in report and
                  all(f"| {r} |" in report for r in ROUTES), f"{out}/report.md lists every route")
            with open(os.path.join(out, "report.csv")) as f:
                rows = f.read().splitlines()
            check(len(rows) == 7, f"{out}/report.csv: a header and 6 rows")
            for plot in ("throughput-per-node", "error-lane_lines_m", "worst-routes"):
                path = os.path.join(out, "plots", plot + ".svg")
                check(os.path.isfile(path) and open(path).read().startswith("<svg"),
                      f"{out}: plots/{plot}.svg")
            acc = os.path.join(out, "routes", "r0", "accuracy.md")
            check(os.path.isfile(acc) and "lane_lines_m" in open(acc).read(),
                  f"{out}: r0 has its accuracy table")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
