#!/usr/bin/env python3
"""opfleet: model replay over many routes, on this machine or on a Slurm cluster.

  opfleet [--local] [-j N] [model options] ROUTES OUT
  opfleet --slurm [--shards S] [--cpus-per-task C] [--gpus-per-task G] [--partition P]
          [--time T] [model options] ROUTES OUT
  opfleet --plan-only [--shards S] ... ROUTES OUT     (then: opfleet task PLAN I, for each I)
  opfleet --report-only ... ROUTES OUT

ROUTES is a folder of routes (segment folders <route>--<n>, grouped by route; a subfolder that
holds fcamera.hevc is a route of its own) or a text file with one route per line (a path as
opreplay takes it). Every route is replayed by opreplay; OUT gets, per route,
routes/<route>/rlog.zst, summary.json (frames, drops, speed, errors), opreplay.txt (its output)
and, where the route has ground truth (groundtruth.json in its segments), accuracy.json and
accuracy.md; then report.md, report.csv and plots/*.svg over all routes, and manifest.json.

A route's summary.json is written last and atomically: it is what marks the route done or failed.
A rerun skips the routes already done and replays the failed ones and those never finished (a
killed worker, a cancelled Slurm task). A route that opreplay replays only in part (a missing or
broken segment, exit status 3) is failed with the segments' errors; its log holds the rest.

--local runs N opreplay processes here (default 1). --slurm writes OUT/slurm/task.sh and submits
one `sbatch --array=0-(S-1)` job; array task i replays every S-th route (i, i+S, ...) with
--retries attempts each and writes to OUT, which must be on a file system every node sees.
opfleet then polls squeue until the job has left the queue and merges. A progress line on stderr
shows routes done / failed / running / left and the rate. The exit status is 0 when every route
is done, 1 when one failed or was not finished, 2 for bad arguments. See docs/fleet.md.
"""

import argparse
import concurrent.futures
import csv
import json
import math
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(os.path.dirname(HERE))
SEGMENT = re.compile(r"^(.+)--(\d{1,6})$")


def log(msg):
    print(f"opfleet: {msg}", file=sys.stderr, flush=True)


# ---- Routes ---------------------------------------------------------------------------------

def find_routes(spec):
    """[(route id, path for opreplay)], sorted by id. A folder: its routes; a file: one path per
    line (blank lines and # comments skipped)."""
    paths = []
    if os.path.isdir(spec):
        names = sorted(os.listdir(spec))
        seen = set()
        for name in names:
            full = os.path.join(spec, name)
            if not os.path.isdir(full):
                continue
            m = SEGMENT.match(name)
            if m:
                if m.group(1) not in seen:
                    seen.add(m.group(1))
                    paths.append(os.path.join(spec, m.group(1)))
            elif os.path.isfile(os.path.join(full, "fcamera.hevc")):
                paths.append(full)
    elif os.path.isfile(spec):
        base = os.path.dirname(os.path.abspath(spec))
        with open(spec) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    paths.append(line if os.path.isabs(line) else os.path.join(base, line))
    else:
        raise SystemExit(f"opfleet: {spec}: no such folder or route list")
    routes, ids = [], set()
    for p in paths:
        rid = os.path.basename(os.path.normpath(p)) or "route"
        rid = re.sub(r"[^A-Za-z0-9._|-]", "_", rid)
        base, k = rid, 1
        while rid in ids:
            k += 1
            rid = f"{base}~{k}"
        ids.add(rid)
        routes.append((rid, os.path.abspath(p)))
    return sorted(routes)


def segment_dirs(path):
    """The segment folders of a route path, in order (the folder itself for a route folder)."""
    if os.path.isfile(os.path.join(path, "fcamera.hevc")):
        return [path]
    parent, name = os.path.dirname(path), os.path.basename(path)
    found = {}
    for d in (path, parent):
        if not os.path.isdir(d):
            continue
        for entry in os.listdir(d):
            m = SEGMENT.match(entry)
            if m and (d == path or m.group(1) == name):
                found[int(m.group(2))] = os.path.join(d, entry)
        if found:
            break
    return [found[n] for n in sorted(found)]


def ground_truth(path):
    """The route's ground-truth records by frame id, and the drive header; (None, None) when no
    segment has groundtruth.json."""
    frames, drive = {}, None
    for seg in segment_dirs(path):
        gt = os.path.join(seg, "groundtruth.json")
        if not os.path.isfile(gt):
            continue
        try:
            with open(gt) as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue  # a broken segment's truth: its frames were not replayed either
        drive = drive or data.get("drive")
        for rec in data.get("frames", []):
            frames[rec["frame_id"]] = rec
    return (frames, drive) if frames else (None, None)


# ---- Logs -----------------------------------------------------------------------------------

_schema = None


def schema():
    global _schema
    if _schema is None:
        import capnp  # pycapnp, from the project's venv
        capnp.remove_import_hook()
        _schema = capnp.load(os.path.join(SOURCE_ROOT, "schemas", "log.capnp"),
                             imports=["/usr/include", "/usr/local/include"])
    return _schema


def read_log(path):
    """The events of a log (.zst through the zstd tool, else plain) as pycapnp readers."""
    if path.endswith(".zst"):
        data = subprocess.run(["zstd", "-dcq", path], check=True, capture_output=True).stdout
    else:
        with open(path, "rb") as f:
            data = f.read()
    return list(schema().Event.read_multiple_bytes(data, traversal_limit_in_words=2**40))


# ---- Replaying one route --------------------------------------------------------------------

def parse_summary(text):
    """The numbers of opreplay's summary."""
    def num(pattern, cast=int):
        m = re.search(pattern, text, re.M)
        return cast(m.group(1)) if m else None
    segments = []
    for m in re.finditer(r"^  segment (\d+)\s+(.*)$", text, re.M):
        rest = m.group(2)
        bad = rest.startswith("not replayed: ")
        segments.append({"number": int(m.group(1)),
                         "frames": None if bad else int(rest.split()[0]),
                         "error": rest[len("not replayed: "):] if bad else None})
    return {
        "frames_in": num(r"^  frames in\s+(\d+) road"),
        "evaluated": num(r"^  evaluated\s+(\d+)"),
        "skipped": num(r"^  skipped\s+(\d+)"),
        "out_of_sync": num(r"^  out-of-sync\s+(\d+)"),
        "messages": num(r"^  messages\s+(\d+)"),
        "fps": num(r"^  speed\s+([\d.]+) frames/s", float),
        "segments": segments,
    }


def accuracy(rlog, truth):
    """Per-frame errors of the modelV2 messages against the ground truth, and their table."""
    errs = {"lane_lines_m": [], "road_edges_m": [], "lead_distance_m": [], "speed_mps": []}
    matched = 0
    for ev in read_log(rlog):
        if ev.which() != "modelV2":
            continue
        m = ev.modelV2
        rec = truth.get(m.frameId)
        if rec is None:
            continue
        matched += 1

        def line_error(pred, want):
            e = [abs(p - w) for p, w in zip(pred.y, want) if w is not None]
            return sum(e) / len(e) if e else None
        for key, preds, wants in (("lane_lines_m", m.laneLines, rec["lane_lines_y_m"]),
                                  ("road_edges_m", m.roadEdges, rec["road_edges_y_m"])):
            per = [line_error(p, w) for p, w in zip(preds, wants)]
            per = [v for v in per if v is not None]
            if per:
                errs[key].append(sum(per) / len(per))
        if len(m.leadsV3) and len(m.leadsV3[0].x) and rec.get("lead"):
            errs["lead_distance_m"].append(abs(m.leadsV3[0].x[0] - rec["lead"]["distance_m"]))
        if len(m.velocity.x) and rec.get("ego"):
            errs["speed_mps"].append(abs(m.velocity.x[0] - rec["ego"]["speed_mps"]))
    table = {"frames": matched}
    for key, v in errs.items():
        if v:
            s = sorted(v)
            table[key] = {"mean": sum(s) / len(s), "p50": s[len(s) // 2],
                          "p90": s[min(len(s) - 1, int(math.ceil(0.9 * len(s))) - 1)],
                          "max": s[-1]}
    return table


# The model-accuracy table (tools/train/evaluate.py prints it): quantities, and the targets a
# trained model must meet on held-out drives (None: reported, no target).
MODEL_TARGETS = {
    "lane_y_20m_p50": ("<=", 0.20), "lane_y_20m_p90": ("<=", 0.50),
    "lead_presence_acc": (">=", 0.95), "lead_distance_pct_p50": ("<=", 5.0),
    "plan_y_30m_p50": ("<=", 0.30),
}


def _pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(math.ceil(q * len(s))) - 1))] if s else None


def _interp(x, xs, ys):
    """y at x on a polyline given by increasing xs (None outside)."""
    for i in range(1, len(xs)):
        if xs[i - 1] <= x <= xs[i]:
            if ys[i] is None or ys[i - 1] is None:
                return None
            f = (x - xs[i - 1]) / (xs[i] - xs[i - 1]) if xs[i] > xs[i - 1] else 0.0
            return ys[i - 1] + f * (ys[i] - ys[i - 1])
    return None


def model_accuracy(rlog, truth, x_idxs, plan_truth=None):
    """The model-accuracy table of a replay: every modelV2 message against the ground-truth frame
    of the same frame id. plan_truth: {frame_id: (xs, ys)} of the true future path in the frame's
    calibrated frame (the drive file does not hold it; tools/train computes it from the scene).
    Errors are absolute; `*_within_std` is the share of errors no larger than the predicted std
    (for lane lines the std of laneLineStds, which is the line's std at its first point)."""
    return model_accuracy_of((ev.modelV2 for ev in read_log(rlog) if ev.which() == "modelV2"),
                             truth, x_idxs, plan_truth)


def model_accuracy_of(messages, truth, x_idxs, plan_truth=None):
    """model_accuracy over modelV2 messages, or any objects with the same fields (tools/train
    builds them from onnxruntime's outputs to compare the runtimes on the same frames)."""
    e = {k: [] for k in ("lane_y_10m", "lane_y_20m", "lane_y_40m", "edge_y_20m", "plan_y_10m",
                         "plan_y_30m", "plan_y_50m", "lead_distance_pct", "lead_speed")}
    hits = {"lane_prob": [], "lead_presence": [], "lane_within_std": [], "lead_within_std": [],
            "plan_within_std": []}
    matched = 0
    for m in messages:
        rec = truth.get(m.frameId)
        if rec is None:
            continue
        matched += 1
        for k, line in enumerate(m.laneLines):
            want = rec["lane_lines_y_m"][k]
            hits["lane_prob"].append((m.laneLineProbs[k] > 0.5) == any(v is not None for v in want))
            for dist in (10, 20, 40):
                p, w = _interp(dist, list(line.x), list(line.y)), _interp(dist, x_idxs, want)
                if p is not None and w is not None:
                    e[f"lane_y_{dist}m"].append(abs(p - w))
                    if dist == 20 and len(m.laneLineStds) > k:
                        hits["lane_within_std"].append(abs(p - w) <= m.laneLineStds[k])
        for k, edge in enumerate(m.roadEdges):
            p = _interp(20, list(edge.x), list(edge.y))
            w = _interp(20, x_idxs, rec["road_edges_y_m"][k])
            if p is not None and w is not None:
                e["edge_y_20m"].append(abs(p - w))
        lead = rec.get("lead")
        # A lead outside the ego's lane (drives with cut-ins and lane changes say so) is no lead.
        true_present = lead is not None and lead.get("in_path", True) and lead["distance_m"] <= 80.0
        if len(m.leadsV3):
            l0 = m.leadsV3[0]
            hits["lead_presence"].append((l0.prob > 0.5) == true_present)
            if true_present and len(l0.x):
                err = abs(l0.x[0] - lead["distance_m"])
                e["lead_distance_pct"].append(100.0 * err / lead["distance_m"])
                e["lead_speed"].append(abs(l0.v[0] - lead["speed_mps"]))
                if len(l0.xStd):
                    hits["lead_within_std"].append(err <= l0.xStd[0])
        if plan_truth is not None and m.frameId in plan_truth and len(m.position.x):
            xs, ys = plan_truth[m.frameId]
            px, py = list(m.position.x), list(m.position.y)
            for dist in (10, 30, 50):
                p, w = _interp(dist, px, py), _interp(dist, xs, ys)
                if p is not None and w is not None:
                    e[f"plan_y_{dist}m"].append(abs(p - w))
                    if dist == 30 and len(m.position.yStd):
                        i = min(range(len(px)), key=lambda j: abs(px[j] - dist))
                        hits["plan_within_std"].append(abs(p - w) <= m.position.yStd[i])
    table = {"frames": matched}
    for k, v in e.items():
        if v:
            table[f"{k}_p50"], table[f"{k}_p90"], table[f"{k}_n"] = _pct(v, 0.5), _pct(v, 0.9), len(v)
    for k, v in hits.items():
        if v:
            table[f"{k}_acc" if not k.endswith("within_std") else k] = sum(v) / len(v)
    return table


def model_accuracy_markdown(title, table):
    """The table as Markdown, each target marked met or MISSED with the measured figure."""
    names = {
        "lane_y_10m": "lane-line lateral error at 10 m (m)", "lane_y_20m": "lane-line lateral error at 20 m (m)",
        "lane_y_40m": "lane-line lateral error at 40 m (m)", "edge_y_20m": "road-edge error at 20 m (m)",
        "lead_distance_pct": "lead distance error (% of true)", "lead_speed": "lead speed error (m/s)",
        "plan_y_10m": "plan lateral error at 10 m (m)", "plan_y_30m": "plan lateral error at 30 m (m)",
        "plan_y_50m": "plan lateral error at 50 m (m)",
    }
    lines = [f"# {title}", "", f"{table['frames']} modelV2 messages matched to ground-truth frames.",
             "", "| quantity | median | p90 | target |", "|---|---|---|---|"]

    def verdict(key):
        if key not in MODEL_TARGETS or key not in table:
            return ""
        op, lim = MODEL_TARGETS[key]
        ok = table[key] <= lim if op == "<=" else table[key] >= lim
        shown = f"{100 * lim:.0f} %" if key.endswith("_acc") else f"{lim}"
        return f"{op} {shown}: {'met' if ok else 'MISSED'}"
    for k, label in names.items():
        if f"{k}_p50" in table:
            tgt = "; ".join(v for v in (verdict(f"{k}_p50"), verdict(f"{k}_p90")) if v)
            lines.append(f"| {label} | {table[f'{k}_p50']:.3f} | {table[f'{k}_p90']:.3f} | {tgt} |")
        else:
            lines.append(f"| {label} | n/a | n/a | |")
    for k, label in (("lane_prob_acc", "lane-line probability accuracy"),
                     ("lead_presence_acc", "lead presence accuracy (lead within 80 m)"),
                     ("lane_within_std", "lane line at 20 m within 1 predicted std"),
                     ("lead_within_std", "lead distance within 1 predicted std"),
                     ("plan_within_std", "plan at 30 m within 1 predicted std (≈ 0.68 if calibrated)")):
        val = f"{100 * table[k]:.1f} %" if k in table else "n/a"
        lines.append(f"| {label} | {val} | | {verdict(k)} |")
    return "\n".join(lines) + "\n"


def accuracy_markdown(route, table):
    lines = [f"# Accuracy of {route}", "",
             f"{table['frames']} modelV2 messages matched to ground-truth frames by frame id.", "",
             "| quantity | mean | p50 | p90 | max |", "|---|---|---|---|---|"]
    for key in ("lane_lines_m", "road_edges_m", "lead_distance_m", "speed_mps"):
        if key in table:
            t = table[key]
            lines.append(f"| {key} | {t['mean']:.3f} | {t['p50']:.3f} | {t['p90']:.3f} | "
                         f"{t['max']:.3f} |")
    return "\n".join(lines) + "\n"


def write_json(path, obj):
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def replay_route(cfg, rid, path, worker, retries):
    """Replays one route into OUT/routes/RID (attempts up to `retries` times while opreplay fails
    outright; a partial replay, exit 3, is not retried: it would fail the same way)."""
    out = os.path.join(cfg["out"], "routes", rid)
    os.makedirs(out, exist_ok=True)
    summary_path = os.path.join(out, "summary.json")
    previous = {}
    if os.path.isfile(summary_path):
        with open(summary_path) as f:
            previous = json.load(f)
    truth, drive = ground_truth(path)
    cmd = [cfg["opreplay"], path, "--out", out, "--no-video"] + cfg["model_args"]
    if truth is None or not any(os.path.isfile(os.path.join(s, n)) for s in segment_dirs(path)
                                for n in ("rlog", "rlog.zst", "rlog.bz2")):
        # Without a log the calibration comes from the ground truth's description, if any.
        if drive and drive.get("calibration_rpy") and "--rpy" not in cfg["model_args"]:
            cmd += ["--rpy", ",".join(repr(float(v)) for v in drive["calibration_rpy"])]
    started = time.time()
    for attempt in range(1, retries + 1):
        t0 = time.monotonic()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace")
        secs = time.monotonic() - t0
        if proc.returncode in (0, 3):
            break
    with open(os.path.join(out, "opreplay.txt"), "w") as f:
        f.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n" + proc.stdout)
    s = parse_summary(proc.stdout)
    errors = [f"segment {seg['number']}: {seg['error']}" for seg in s["segments"] if seg["error"]]
    if proc.returncode not in (0, 3):
        tail = [ln for ln in proc.stdout.splitlines() if ln.startswith("opreplay: ") and
                not re.match(r"opreplay: \d+ frames in", ln)]
        errors.append(f"opreplay exit status {proc.returncode}" +
                      (f": {tail[-1][len('opreplay: '):]}" if tail else ""))
    summary = dict(s, route=rid, path=path, exit=proc.returncode,
                   status="done" if proc.returncode == 0 else "failed",
                   error="; ".join(errors) or None, seconds=round(secs, 3),
                   attempts=previous.get("attempts", 0) + attempt,
                   host=socket.gethostname(), worker=worker,
                   started=round(started, 3), finished=round(time.time(), 3))
    rlog = os.path.join(out, "rlog.zst")
    summary["accuracy"] = None
    if truth is not None and os.path.isfile(rlog) and proc.returncode in (0, 3):
        try:
            table = accuracy(rlog, truth)
            summary["accuracy"] = table
            write_json(os.path.join(out, "accuracy.json"), table)
            with open(os.path.join(out, "accuracy.md"), "w") as f:
                f.write(accuracy_markdown(rid, table))
        except Exception as e:  # a log that cannot be read is this route's error, not ours
            summary["status"] = "failed"
            summary["error"] = (summary["error"] + "; " if summary["error"] else "") + \
                f"cannot read {rlog}: {e}"
    write_json(summary_path, summary)  # last: it marks the route finished
    return summary


def load_summary(out, rid):
    p = os.path.join(out, "routes", rid, "summary.json")
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# ---- Progress -------------------------------------------------------------------------------

class Progress:
    def __init__(self, total, done_before):
        self.total, self.done_before = total, done_before
        self.start = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def show(self, done, failed, running, force=False):
        now = time.monotonic()
        if not force and now - self.last < (0.5 if self.tty else 5.0):
            return
        self.last = now
        new = done + failed - self.done_before
        hours = (now - self.start) / 3600
        rate = new / hours if hours > 0 else 0.0
        left = self.total - done - failed - running
        line = (f"opfleet: {done}/{self.total} done, {failed} failed, {running} running, "
                f"{left} waiting, {rate:.0f} routes/h")
        sys.stderr.write(("\r" + line + "   ") if self.tty else line + "\n")
        if force and self.tty:
            sys.stderr.write("\n")
        sys.stderr.flush()


def counts(cfg, routes):
    done = failed = 0
    for rid, _ in routes:
        s = load_summary(cfg["out"], rid)
        if s:
            done += s["status"] == "done"
            failed += s["status"] == "failed"
    return done, failed


# ---- Backends -------------------------------------------------------------------------------

def run_local(cfg, todo, routes, jobs):
    done, failed = counts(cfg, routes)
    progress = Progress(len(routes), done + failed)
    lock = threading.Lock()
    running = [0]

    def one(item):
        rid, path = item
        with lock:
            running[0] += 1
        try:
            return replay_route(cfg, rid, path, "local", cfg["retries"])
        finally:
            with lock:
                running[0] -= 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(one, item) for item in todo]
        pending = set(futures)
        while pending:
            finished, pending = concurrent.futures.wait(pending, timeout=0.5)
            for f in finished:
                f.result()
            d, fl = counts(cfg, routes)
            progress.show(d, fl, running[0])
    d, fl = counts(cfg, routes)
    progress.show(d, fl, 0, force=True)


def slurm_plan(cfg, todo, shards):
    plan = {"routes": [list(r) for r in todo], "shards": shards, "cfg": cfg}
    os.makedirs(os.path.join(cfg["out"], "slurm"), exist_ok=True)
    plan_path = os.path.join(cfg["out"], "slurm", "plan.json")
    write_json(plan_path, plan)
    return plan_path


def run_slurm(cfg, todo, routes, a):
    shards = max(1, min(a.shards or len(todo), len(todo)))
    plan_path = slurm_plan(cfg, todo, shards)
    slurm_dir = os.path.dirname(plan_path)
    script = os.path.join(slurm_dir, "task.sh")
    python = sys.executable
    with open(script, "w") as f:
        f.write("#!/bin/sh\n# One array task of an opfleet run: its shard of the routes.\n")
        f.write(f"exec {shlex.quote(python)} {shlex.quote(os.path.abspath(__file__))} "
                f"task {shlex.quote(plan_path)} \"$SLURM_ARRAY_TASK_ID\"\n")
    os.chmod(script, 0o755)
    cmd = ["sbatch", "--parsable", f"--array=0-{shards - 1}", "--job-name", a.job_name,
           f"--cpus-per-task={a.cpus_per_task}", "--output",
           os.path.join(slurm_dir, "task-%A_%a.out"), "--chdir", cfg["out"]]
    if a.gpus_per_task:
        cmd.append(f"--gpus-per-task={a.gpus_per_task}")
    if a.partition:
        cmd += ["--partition", a.partition]
    if a.time:
        cmd += ["--time", a.time]
    cmd += a.sbatch_arg + [script]
    for tool in ("sbatch", "squeue"):
        if not shutil.which(tool):
            log(f"--slurm: no {tool} on PATH (Slurm's client tools: Debian's slurm-client)")
            return False
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        log(f"sbatch failed (exit {proc.returncode}): {proc.stderr.strip()}")
        return False
    job = proc.stdout.strip().split(";")[0]
    with open(os.path.join(slurm_dir, "jobs.txt"), "a") as f:
        f.write(f"{job} {shards}\n")
    log(f"submitted Slurm job {job}: {shards} array tasks over {len(todo)} routes")
    done, failed = counts(cfg, routes)
    progress = Progress(len(routes), done + failed)
    while True:
        q = subprocess.run(["squeue", "-h", "-r", "-j", job, "-o", "%i %T"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        states = [ln.split()[1] for ln in q.stdout.splitlines() if len(ln.split()) == 2]
        if q.returncode != 0 and "Invalid job id" not in q.stderr:
            log(f"squeue failed: {q.stderr.strip()}")
        done, failed = counts(cfg, routes)
        running = sum(1 for s in states if s in ("RUNNING", "COMPLETING"))
        # A running task replays one route at a time.
        progress.show(done, failed, running)
        if not states and (q.returncode == 0 or "Invalid job id" in q.stderr):
            break
        time.sleep(a.poll)
    done, failed = counts(cfg, routes)
    progress.show(done, failed, 0, force=True)
    return True


def task_main(plan_path, index):
    """One Slurm array task: the routes i, i + S, ... of the plan, skipping finished ones."""
    with open(plan_path) as f:
        plan = json.load(f)
    cfg, shards, index = plan["cfg"], plan["shards"], int(index)
    worker = f"slurm job {os.environ.get('SLURM_ARRAY_JOB_ID', '?')} task {index}"
    status = 0
    for rid, path in plan["routes"][index::shards]:
        s = load_summary(cfg["out"], rid)
        if s and s["status"] == "done":
            continue
        s = replay_route(cfg, rid, path, worker, cfg["retries"])
        print(f"{rid}: {s['status']}" + (f" ({s['error']})" if s["error"] else ""), flush=True)
        status = status or (s["status"] != "done")
    return status


# ---- Report ---------------------------------------------------------------------------------

def svg_bars(title, labels, values, unit, path):
    """A horizontal bar chart as SVG (no plotting library needed)."""
    w, bar, left = 640, 18, 220
    h = 40 + bar * len(labels) + 20
    top = max(values) if values and max(values) > 0 else 1.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="10" y="20" font-size="14">{esc(title)}</text>']
    for i, (label, v) in enumerate(zip(labels, values)):
        y = 35 + i * bar
        length = (w - left - 90) * (v / top)
        out.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{esc(label)}</text>')
        out.append(f'<rect x="{left}" y="{y + 2}" width="{length:.1f}" height="{bar - 4}" '
                   'fill="#4878a8"/>')
        out.append(f'<text x="{left + length + 4:.1f}" y="{y + 13}">{v:.3g} {esc(unit)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def svg_histogram(title, values, unit, path, bins=10):
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if hi <= lo:
        hi = lo + 1e-9
    counts_ = [0] * bins
    for v in values:
        counts_[min(bins - 1, int((v - lo) / (hi - lo) * bins))] += 1
    labels = [f"{lo + (hi - lo) * i / bins:.3g}-{lo + (hi - lo) * (i + 1) / bins:.3g} {unit}"
              for i in range(bins)]
    svg_bars(title, labels, counts_, "routes", path)


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_report(cfg, routes, wall):
    out = cfg["out"]
    rows = []
    for rid, path in routes:
        s = load_summary(out, rid)
        rows.append(s or {"route": rid, "path": path, "status": "not finished", "error": None})
    manifest = {"routes": {r["route"]: {"path": r["path"], "status": r["status"],
                                        "error": r.get("error"), "attempts": r.get("attempts", 0),
                                        "exit": r.get("exit")} for r in rows}}
    write_json(os.path.join(out, "manifest.json"), manifest)

    keys = ["route", "status", "exit", "attempts", "frames_in", "evaluated", "skipped",
            "out_of_sync", "messages", "fps", "seconds", "host", "worker", "lane_lines_m",
            "road_edges_m", "lead_distance_m", "speed_mps", "error"]
    with open(os.path.join(out, "report.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(keys)
        for r in rows:
            acc = r.get("accuracy") or {}
            wr.writerow([r.get(k) for k in keys[:12]] +
                        [f"{acc[k]['mean']:.4f}" if k in acc else "" for k in keys[12:17]] +
                        [r.get("error") or ""])

    plots = os.path.join(out, "plots")
    os.makedirs(plots, exist_ok=True)
    finished = [r for r in rows if r.get("seconds")]
    hosts = {}
    for r in finished:
        h = hosts.setdefault(r["host"], [0, 0.0, 0])
        h[0] += 1
        h[1] += r["seconds"]
        h[2] += r.get("frames_in") or 0
    host_names = sorted(hosts)
    svg_bars("Replay throughput per node (frames per second of replay time)", host_names,
             [hosts[h][2] / hosts[h][1] if hosts[h][1] else 0 for h in host_names], "frames/s",
             os.path.join(plots, "throughput-per-node.svg"))
    with_acc = [r for r in rows if r.get("accuracy") and "lane_lines_m" in r["accuracy"]]
    for key, unit in (("lane_lines_m", "m"), ("lead_distance_m", "m"), ("speed_mps", "m/s")):
        vals = [r["accuracy"][key]["mean"] for r in with_acc if key in r["accuracy"]]
        svg_histogram(f"Mean {key} error across routes", vals, unit,
                      os.path.join(plots, f"error-{key}.svg"))
    worst = sorted(with_acc, key=lambda r: -r["accuracy"]["lane_lines_m"]["mean"])[:10]
    svg_bars("Worst routes by mean lane-line error", [r["route"] for r in worst],
             [r["accuracy"]["lane_lines_m"]["mean"] for r in worst], "m",
             os.path.join(plots, "worst-routes.svg"))

    n_done = sum(r["status"] == "done" for r in rows)
    n_failed = sum(r["status"] == "failed" for r in rows)
    n_left = len(rows) - n_done - n_failed
    md = ["# Fleet replay report", "",
          f"{len(rows)} routes: {n_done} done, {n_failed} failed, {n_left} not finished.",
          f"Models: `{' '.join(cfg['model_args'])}`.", ""]
    if wall and finished:
        md.append(f"This run: {len(finished)} routes replayed in {wall:.0f} s wall time "
                  f"({3600 * len(finished) / wall:.0f} routes/h over the whole run).")
        md.append("")
    md += ["## Routes", "",
           "| route | status | frames | evaluated | skipped | fps | node | lane lines (m) | "
           "lead (m) | error |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        acc = r.get("accuracy") or {}
        md.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r["route"], r["status"], r.get("frames_in", ""), r.get("evaluated", ""),
            r.get("skipped", ""), r.get("fps", ""), r.get("host", ""),
            f"{acc['lane_lines_m']['mean']:.3f}" if "lane_lines_m" in acc else "",
            f"{acc['lead_distance_m']['mean']:.3f}" if "lead_distance_m" in acc else "",
            (r.get("error") or "").replace("|", "\\|")))
    md += ["", "## Throughput per node", "", "| node | routes | frames | replay time (s) | "
           "frames/s |", "|---|---|---|---|---|"]
    for h in host_names:
        n, secs, frames = hosts[h]
        md.append(f"| {h} | {n} | {frames} | {secs:.1f} | {frames / secs if secs else 0:.1f} |")
    md += ["", "![throughput per node](plots/throughput-per-node.svg)", ""]
    if with_acc:
        md += ["## Errors across routes", "",
               "![lane lines](plots/error-lane_lines_m.svg) "
               "![lead](plots/error-lead_distance_m.svg) ![speed](plots/error-speed_mps.svg)", "",
               "## Worst routes", "", "| route | lane lines (m) | road edges (m) | lead (m) |",
               "|---|---|---|---|"]
        for r in worst:
            acc = r["accuracy"]
            md.append(f"| {r['route']} | {acc['lane_lines_m']['mean']:.3f} | "
                      f"{acc.get('road_edges_m', {}).get('mean', float('nan')):.3f} | "
                      f"{acc.get('lead_distance_m', {}).get('mean', float('nan')):.3f} |")
        md += ["", "![worst routes](plots/worst-routes.svg)", ""]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    return n_done, n_failed, n_left


# ---- Main -----------------------------------------------------------------------------------

def main(argv):
    if len(argv) >= 1 and argv[0] == "task":
        if len(argv) != 3:
            log("usage: opfleet task PLAN INDEX")
            return 2
        return task_main(argv[1], argv[2])
    ap = argparse.ArgumentParser(prog="opfleet", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("routes", help="a folder of routes or a file listing them")
    ap.add_argument("out", help="output folder (shared by every node with --slurm)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--local", action="store_true", help="replay on this machine (default)")
    mode.add_argument("--slurm", action="store_true", help="one sbatch --array job")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="--local: routes at once")
    ap.add_argument("--retries", type=int, default=2,
                    help="attempts per route while opreplay fails outright (default 2)")
    ap.add_argument("--shards", type=int, default=0,
                    help="--slurm: array tasks (default: one per route)")
    ap.add_argument("--cpus-per-task", type=int, default=2)
    ap.add_argument("--gpus-per-task", type=int, default=0)
    ap.add_argument("--partition")
    ap.add_argument("--time", help="--slurm: time limit per array task (sbatch --time)")
    ap.add_argument("--job-name", default="opfleet")
    ap.add_argument("--sbatch-arg", action="append", default=[],
                    help="--slurm: one more sbatch argument (repeatable)")
    ap.add_argument("--poll", type=float, default=2.0, help="--slurm: seconds between polls")
    ap.add_argument("--plan-only", action="store_true",
                    help="write OUT/slurm/plan.json for another scheduler's tasks (opfleet task "
                         "PLAN INDEX) and stop; --shards sets their number")
    ap.add_argument("--report-only", action="store_true",
                    help="replay nothing: merge what OUT holds into the report")
    ap.add_argument("--opreplay", default=None, help="the opreplay binary")
    ap.add_argument("--vision")
    ap.add_argument("--policy")
    ap.add_argument("--supercombo")
    ap.add_argument("--device")
    ap.add_argument("--precision")
    ap.add_argument("--single-camera", action="store_true")
    a = ap.parse_args(argv)
    if a.jobs < 1 or a.retries < 1 or a.shards < 0 or a.cpus_per_task < 1:
        ap.error("-j, --retries and --cpus-per-task must be positive")
    if not a.supercombo and not (a.vision and a.policy):
        ap.error("give --vision and --policy, or --supercombo")
    opreplay = a.opreplay or os.path.join(SOURCE_ROOT, "build", "tools", "opreplay", "opreplay")
    if not (os.path.isfile(opreplay) and os.access(opreplay, os.X_OK)):
        ap.error(f"--opreplay: {opreplay} is not an executable")
    model_args = []
    for opt in ("vision", "policy", "supercombo"):
        v = getattr(a, opt)
        if v:
            if not os.path.isfile(v):
                ap.error(f"--{opt}: {v}: no such file")
            model_args += [f"--{opt}", os.path.abspath(v)]
    for opt in ("device", "precision"):
        if getattr(a, opt):
            model_args += [f"--{opt}", getattr(a, opt)]
    if a.single_camera:
        model_args.append("--single-camera")

    routes = find_routes(a.routes)
    if not routes:
        log(f"{a.routes}: no routes")
        return 1
    out = os.path.abspath(a.out)
    os.makedirs(os.path.join(out, "routes"), exist_ok=True)
    cfg = {"out": out, "opreplay": os.path.abspath(opreplay), "model_args": model_args,
           "retries": a.retries}
    todo, skipped = [], 0
    for rid, path in routes:
        s = load_summary(out, rid)
        if s and s["status"] == "done":
            skipped += 1
        else:
            todo.append((rid, path))
    log(f"{len(routes)} routes: {skipped} already done (skipped), {len(todo)} to replay")
    start = time.monotonic()
    if a.plan_only:
        shards = max(1, min(a.shards or len(todo), len(todo) or 1))
        plan = slurm_plan(cfg, todo, shards)
        log(f"wrote {plan}: run `{sys.executable} {os.path.abspath(__file__)} task {plan} I` "
            f"for I = 0 .. {shards - 1}, then `opfleet --report-only` with the same arguments")
        return 0
    if a.report_only:
        todo = []
    if todo:
        if a.slurm:
            if not run_slurm(cfg, todo, routes, a):
                return 1
        else:
            run_local(cfg, todo, routes, a.jobs)
    wall = time.monotonic() - start
    done, failed, left = write_report(cfg, routes, wall if todo else 0)
    for rid, _ in routes:
        s = load_summary(out, rid)
        if s and s["status"] == "failed":
            log(f"{rid}: failed: {s['error']}")
        elif not s:
            log(f"{rid}: not finished")
    log(f"{done} done, {failed} failed, {left} not finished; report in {out}/report.md")
    return 0 if done == len(routes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
