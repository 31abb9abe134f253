#!/usr/bin/env python3
"""The accuracy table of a trained vision/policy pair at fp32, fp16 and int8, side by side, on
held-out drives, all through opreplay (our runtime), plus onnxruntime on the same int8 (QDQ)
models and frames.

  .venv/bin/python3 tools/train/quant_accuracy.py MODELDIR --out OUT [--drive DRIVE ...]
      [--calibration-seeds 201-205] [--calibration-seconds 4] [--calibration-stride 8]
      [--methods minmax,percentile,entropy] [--keep-float-vision N] [--keep-float-policy N]
      [--no-report] [--record DIR]

MODELDIR holds driving_vision*.onnx and driving_policy*.onnx (one of each: models/trained).

1. Calibration drives: synthdrive renders each calibration seed (default 201-205, the first
   training seeds by convention) for --calibration-seconds into OUT/calibration/drive-SEED
   (kept and reused). A calibration drive that is a held-out drive (same folder or same seed)
   is refused: calibration never sees the frames the table is measured on.
2. Calibration data: opreplay --precision fp32 --dump-inputs on each calibration drive with the
   float models; every --calibration-stride-th frame of each drive goes into OUT/calibration/
   frames (links), the folder `opc quantize --calibration` reads.
3. opc quantize of both networks with each --methods entry (--report: the per-layer sensitivity;
   --keep-float-*: that many of the most sensitive layers stay float), into OUT/int8-METHOD/.
4. Replays of every held-out drive: the float models at --precision fp32 and fp16, each
   method's QDQ models at --precision int8 (tools/train/evaluate.py, the accuracy table of
   tools/opfleet), and onnxruntime on the QDQ models over the same frames (opwarp's tensors).
5. The criteria per method and drive: int8 lane-line error at 20 m (median and p90) and lead
   distance error (median) each at most 1.10 x the fp32 figure; onnxruntime on the QDQ models
   within 1 % of ours on every error figure (and within 1 percentage point on every share).

Writes OUT/quant_accuracy.json and OUT/quant_accuracy.md (also printed): the table of the best
method (among those meeting both criteria on every drive, if any, the one whose worst int8/fp32
ratio is the smallest), the criteria for every method, what
stayed in float, the sizes. --record DIR also copies the best method's QDQ models, the figures
the test train-quant-accuracy compares (int8.json) and quant_accuracy.md into DIR.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "opfleet"))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import dataset  # noqa: E402
import evaluate  # noqa: E402
import opfleet  # noqa: E402

RATIO = 1.10  # int8 / fp32 at most, on the figures of CRITERIA
CRITERIA = ("lane_y_20m_p50", "lane_y_20m_p90", "lead_distance_pct_p50")
ORT_REL = 0.01  # onnxruntime vs ours: relative, on error figures
ORT_SHARE = 0.01  # absolute, on shares (accuracies, within-one-std)
LABELS = {
    "lane_y_10m": "lane-line lateral error at 10 m (m)",
    "lane_y_20m": "lane-line lateral error at 20 m (m)",
    "lane_y_40m": "lane-line lateral error at 40 m (m)",
    "edge_y_20m": "road-edge error at 20 m (m)",
    "lead_distance_pct": "lead distance error (% of true)",
    "lead_speed": "lead speed error (m/s)",
    "plan_y_10m": "plan lateral error at 10 m (m)",
    "plan_y_30m": "plan lateral error at 30 m (m)",
    "plan_y_50m": "plan lateral error at 50 m (m)",
    "lane_prob_acc": "lane-line probability accuracy",
    "lead_presence_acc": "lead presence accuracy (lead within 80 m)",
    "lane_within_std": "lane line at 20 m within 1 predicted std",
    "lead_within_std": "lead distance within 1 predicted std",
    "plan_within_std": "plan at 30 m within 1 predicted std",
}


def die(msg):
    raise SystemExit(f"quant_accuracy: {msg}")


def seeds_of(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        try:
            out += list(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            die(f"--calibration-seeds: '{text}' is not a list of seeds like 201-205 or 201,203")
    if not out or min(out) < 1:
        die(f"--calibration-seeds: '{text}': seeds are whole numbers from 1")
    return out


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def one_model(modeldir, kind):
    names = sorted(n for n in os.listdir(modeldir)
                   if n.startswith(f"driving_{kind}") and n.endswith(".onnx"))
    if len(names) != 1:
        die(f"{modeldir}: want one driving_{kind}*.onnx, found {len(names) or 'none'}"
            f"{': ' + ', '.join(names) if names else ''}")
    return os.path.join(modeldir, names[0])


def groundtruth(drive):
    try:
        with open(os.path.join(drive, "groundtruth.json")) as f:
            gt = json.load(f)
        gt["drive"]["x_idxs_m"], gt["frames"]
        return gt
    except (OSError, ValueError, KeyError, TypeError) as e:
        die(f"{drive}/groundtruth.json: not a synthdrive ground truth ({e})")


def run(cmd, log, env=None):
    """Runs cmd (niced by the caller's own niceness), its output into log; dies naming it."""
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    if r.returncode != 0:
        with open(log) as f:
            tail = "".join(f.readlines()[-15:])
        die(f"{os.path.basename(cmd[0])} exited {r.returncode} (log {log}):\n{tail}")


def calibration_frames(a, out, vision, policy, held_out):
    cal = os.path.join(out, "calibration")
    os.makedirs(cal, exist_ok=True)
    held_seeds = {groundtruth(d)["drive"].get("scene", {}).get("seed") for d in held_out}
    held_dirs = {os.path.realpath(d) for d in held_out}
    frames_dir = os.path.join(cal, "frames")
    shutil.rmtree(frames_dir, ignore_errors=True)
    os.makedirs(frames_dir)
    used, k = [], 0
    for seed in seeds_of(a.calibration_seeds):
        if seed in held_seeds:
            die(f"calibration seed {seed} is the seed of a held-out drive")
        drive = os.path.join(cal, f"drive-{seed}")
        if os.path.realpath(drive) in held_dirs:
            die(f"{drive}: a held-out drive cannot calibrate")
        if not os.path.isfile(os.path.join(drive, "groundtruth.json")):
            print(f"quant_accuracy: rendering calibration drive seed {seed} "
                  f"({a.calibration_seconds} s)", flush=True)
            run([sys.executable, os.path.join(ROOT, "tools", "synthdrive", "render.py"),
                 "--seed", str(seed), "--seconds", str(a.calibration_seconds), "--threads", "1",
                 "--out", drive + ".tmp"], os.path.join(cal, f"render-{seed}.log"))
            os.replace(drive + ".tmp", drive)
        dump = os.path.join(cal, f"inputs-{seed}")
        if not os.path.isfile(os.path.join(dump, "done")):
            shutil.rmtree(dump, ignore_errors=True)
            rpy = ",".join(repr(float(v)) for v in groundtruth(drive)["drive"]["calibration_rpy"])
            run([a.opreplay, "--out", os.path.join(cal, f"replay-{seed}"), "--vision", vision,
                 "--policy", policy, "--precision", "fp32", "--rpy", rpy, "--no-video",
                 "--dump-inputs", dump, drive], os.path.join(cal, f"dump-{seed}.log"),
                env=dataset.plugin_env(cal))
            open(os.path.join(dump, "done"), "w").close()
        by_frame = {}
        for name in os.listdir(dump):
            m = re.fullmatch(r"(.+)-(\d+)\.npy", name)
            if m:
                by_frame.setdefault(int(m.group(2)), []).append((m.group(1), name))
        picked = sorted(by_frame)[a.calibration_stride - 1::a.calibration_stride]
        for frame in picked:
            for inp, name in by_frame[frame]:
                os.symlink(os.path.join(dump, name), os.path.join(frames_dir, f"{inp}-{k:06d}.npy"))
            k += 1
        used.append({"seed": seed, "frames": len(by_frame), "picked": len(picked)})
    return frames_dir, used


def quantize(a, model, frames, method, keep_float, out, log):
    cmd = [a.opc, "quantize", model, "--calibration", frames, "--method", method, "-o", out]
    if not a.no_report:
        cmd.append("--report")
    if keep_float:
        cmd += ["--keep-float", str(keep_float)]
    run(cmd, log)
    with open(log) as f:
        text = f.read()
    kept = re.findall(r"^kept in float: (\S+) \((.*)\)$", text, re.M)
    top = re.findall(r"^\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", text, re.M)[:3]
    every = re.search(r"^every layer int8: rel-rms (\S+), max-abs (\S+)", text, re.M)
    mixed = re.search(r"^with those in float: rel-rms (\S+), max-abs (\S+)", text, re.M)
    return {"file": out, "bytes": os.path.getsize(out), "sha256": sha256(out),
            "kept_in_float": [{"layer": n, "why": w} for n, w in kept],
            "most_sensitive": [{"rank": int(r), "layer": n, "op": o, "rel_rms": float(e),
                                "max_abs": float(x)} for r, n, o, e, x in top],
            "simulated_rel_rms_all_int8": float(every.group(1)) if every else None,
            "simulated_rel_rms_mixed": float(mixed.group(1)) if mixed else None}


def ours(a, drive, vision, policy, precision, out):
    j = out + ".json"
    run([sys.executable, os.path.join(ROOT, "tools", "train", "evaluate.py"), "--drive", drive,
         "--replay", out, "--opreplay", a.opreplay, "--vision", vision, "--policy", policy,
         "--precision", precision, "--json", j] +
        (["--max-frames", str(a.max_frames)] if a.max_frames else []), out + ".log")
    with open(j) as f:
        return json.load(f)["ours"]


def onnxruntime(drive, gt, vision, policy, tensors, max_frames):
    truth = {rec["frame_id"]: rec for rec in gt["frames"]}
    dataset.scene_for(gt["drive"])
    lab = dataset.labels_for(gt, gt["frames"][-1]["t"])
    plan = {rec["frame_id"]: (lab["plan"][k, :, 0].tolist(), lab["plan"][k, :, 1].tolist())
            for k, rec in enumerate(gt["frames"])}
    ids = [rec["frame_id"] for rec in gt["frames"]][:max_frames]
    img, big = tensors
    msgs = evaluate.onnxruntime_messages(drive, vision, policy, ids,
                                         (img[:len(ids)], big[:len(ids)]))
    return opfleet.model_accuracy_of(msgs, truth, gt["drive"]["x_idxs_m"], plan)


def is_share(key):
    return key.endswith("_acc") or key.endswith("within_std")


def figures(table):
    return [k for k in sorted(table) if k != "frames" and not k.endswith("_n")]


def judge(fp32, int8, ort):
    """The issue's criteria for one method on one drive."""
    ratios = {k: (int8[k] / fp32[k] if fp32[k] else float("inf")) for k in CRITERIA
              if k in fp32 and k in int8}
    worst_ort, worst_key = 0.0, None
    ort_ok = set(figures(int8)) == set(figures(ort))
    for k in figures(int8):
        if k not in ort:
            continue
        if is_share(k):
            d, ok = abs(int8[k] - ort[k]), abs(int8[k] - ort[k]) <= ORT_SHARE + 1e-12
        else:
            d = abs(int8[k] - ort[k]) / abs(ort[k]) if ort[k] else abs(int8[k])
            ok = d <= ORT_REL
        ort_ok &= ok
        if not is_share(k) and d > worst_ort:
            worst_ort, worst_key = d, k
    shares = {k: abs(int8[k] - ort[k]) for k in figures(int8) if is_share(k) and k in ort}
    return {"ratios": ratios, "ratio_ok": len(ratios) == len(CRITERIA) and
            all(r <= RATIO for r in ratios.values()),
            "worst_ratio": max(ratios.values()) if ratios else float("inf"),
            "ort_ok": ort_ok, "ort_worst_rel": worst_ort, "ort_worst_key": worst_key,
            "ort_worst_share_pp": 100 * max(shares.values()) if shares else 0.0}


def cell(table, key):
    if key not in table:
        return "n/a"
    return f"{100 * table[key]:.1f} %" if is_share(key) else f"{table[key]:.3f}"


def markdown(res):
    best = res["best_method"]
    lines = ["# int8 accuracy: fp32, fp16 and int8 side by side", ""]
    cal = res["calibration"]
    lines.append(f"Calibration: seeds {', '.join(str(c['seed']) for c in cal['drives'])} "
                 f"({cal['seconds']} s each, every {cal['stride']}th frame: {cal['frames']} "
                 f"frames), dumped by opreplay --precision fp32 with the float models.")
    lines.append("")
    for d in res["drives"]:
        t = d["tables"]
        m = d["methods"][best]
        lines += [f"## {d['name']} ({t['fp32']['frames']} frames), int8 = {best}", "",
                  "| quantity | fp32: median | p90 | fp16: median | p90 | int8 ours: median | p90 "
                  "| int8 onnxruntime: median | p90 |", "|---|---|---|---|---|---|---|---|---|"]
        cols = (t["fp32"], t["fp16"], m["ours"], m["onnxruntime"])
        for key, label in LABELS.items():
            if is_share(key):
                lines.append(f"| {label} | " + " | ".join(f"{cell(c, key)} | " for c in cols) + "|")
            else:
                lines.append(f"| {label} | " + " | ".join(
                    f"{cell(c, key + '_p50')} | {cell(c, key + '_p90')}" for c in cols) + " |")
        lines += ["", f"Criteria on {d['name']} (int8 at most {RATIO:.2f} x fp32 on "
                  f"{', '.join(CRITERIA)}; onnxruntime within {100 * ORT_REL:.0f} % of ours on every "
                  f"error figure and {100 * ORT_SHARE:.0f} percentage point on every share):", "",
                  "| method | " + " | ".join(f"{k} int8/fp32" for k in CRITERIA) +
                  " | ratio criterion | worst onnxruntime difference | onnxruntime criterion |",
                  "|---|" + "---|" * (len(CRITERIA) + 3)]
        for meth, mm in d["methods"].items():
            j = mm["judged"]
            lines.append(
                f"| {meth} | " + " | ".join(f"{j['ratios'].get(k, float('nan')):.3f}"
                                            for k in CRITERIA) +
                f" | {'met' if j['ratio_ok'] else 'MISSED'} | {100 * j['ort_worst_rel']:.2f} % "
                f"({j['ort_worst_key']}), shares {j['ort_worst_share_pp']:.1f} pp | "
                f"{'met' if j['ort_ok'] else 'MISSED'} |")
        lines.append("")
    lines += ["## The quantized models", "",
              "| method | network | bytes (float ONNX → QDQ) | kept in float | most sensitive "
              "(rel. RMS alone) | simulated rel. RMS, all int8 |", "|---|---|---|---|---|---|"]
    for meth, q in res["quantized"].items():
        for net in ("vision", "policy"):
            n = q[net]
            kept = ", ".join(k["layer"] for k in n["kept_in_float"]) or "none"
            top = ", ".join(f"{s['layer']} {s['rel_rms']:.2g}" for s in n["most_sensitive"]) or "-"
            sim = n["simulated_rel_rms_all_int8"]
            lines.append(f"| {meth} | {net} | {res['models'][net]['bytes']:,} → {n['bytes']:,} | "
                         f"{kept} | {top} | {sim if sim is not None else '-'} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modeldir")
    ap.add_argument("--out", required=True, help="work and result folder (reused on a rerun)")
    ap.add_argument("--drive", action="append",
                    help="a held-out drive (repeatable; default samples/drive)")
    ap.add_argument("--calibration-seeds", default="201-205")
    ap.add_argument("--calibration-seconds", type=float, default=4.0)
    ap.add_argument("--calibration-stride", type=int, default=8,
                    help="every Nth dumped frame of each calibration drive calibrates")
    ap.add_argument("--methods", default="minmax,percentile,entropy")
    ap.add_argument("--keep-float-vision", type=int, default=0)
    ap.add_argument("--keep-float-policy", type=int, default=0)
    ap.add_argument("--no-report", action="store_true",
                    help="skip opc quantize --report (the sensitivity simulation is the slow part)")
    ap.add_argument("--max-frames", type=int, help="replay only the first N frames of each drive")
    ap.add_argument("--record", metavar="DIR",
                    help="copy the best method's QDQ models and their figures (int8.json) here")
    build = os.environ.get("OP_BUILD_ROOT", os.path.join(ROOT, "build"))
    ap.add_argument("--opreplay", default=os.path.join(build, "tools", "opreplay", "opreplay"))
    ap.add_argument("--opc", default=os.path.join(build, "tools", "opc", "opc"))
    a = ap.parse_args()
    methods = a.methods.split(",")
    for m in methods:
        if m not in ("minmax", "percentile", "entropy"):
            ap.error(f"--methods: '{m}' is not minmax, percentile or entropy")
    if a.calibration_stride < 1:
        ap.error("--calibration-stride is at least 1")
    for tool in (a.opreplay, a.opc):
        if not os.access(tool, os.X_OK):
            die(f"{tool}: not built (meson setup build && ninja -C build, or set OP_BUILD_ROOT)")
    vision, policy = one_model(a.modeldir, "vision"), one_model(a.modeldir, "policy")
    drives = a.drive or [os.path.join(ROOT, "samples", "drive")]
    gts = [groundtruth(d) for d in drives]
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)

    frames, used = calibration_frames(a, out, vision, policy, drives)
    res = {"models": {n: {"file": os.path.abspath(p), "bytes": os.path.getsize(p),
                          "sha256": sha256(p)} for n, p in (("vision", vision), ("policy", policy))},
           "calibration": {"drives": used, "seconds": a.calibration_seconds,
                           "stride": a.calibration_stride, "frames": sum(u["picked"] for u in used)},
           "criteria": {"ratio": RATIO, "figures": list(CRITERIA), "onnxruntime_rel": ORT_REL,
                        "onnxruntime_share": ORT_SHARE},
           "quantized": {}, "drives": []}
    for m in methods:
        d = os.path.join(out, f"int8-{m}")
        os.makedirs(d, exist_ok=True)
        print(f"quant_accuracy: opc quantize --method {m}", flush=True)
        res["quantized"][m] = {
            net: quantize(a, p, frames, m, keep, os.path.join(d, os.path.basename(p)),
                          os.path.join(d, f"{net}.quantize.txt"))
            for net, p, keep in (("vision", vision, a.keep_float_vision),
                                 ("policy", policy, a.keep_float_policy))}
    for drive, gt in zip(drives, gts):
        name = os.path.basename(os.path.abspath(drive))
        rdir = os.path.join(out, f"replay-{name}")
        os.makedirs(rdir, exist_ok=True)
        print(f"quant_accuracy: replaying {drive} at fp32, fp16, int8", flush=True)
        entry = {"drive": os.path.abspath(drive), "name": name,
                 "tables": {p: ours(a, drive, vision, policy, p, os.path.join(rdir, p))
                            for p in ("fp32", "fp16")}, "methods": {}}
        tensors = evaluate.drive_tensors(drive)
        for m in methods:
            q = res["quantized"][m]
            mine = ours(a, drive, q["vision"]["file"], q["policy"]["file"], "int8",
                        os.path.join(rdir, f"int8-{m}"))
            ort = onnxruntime(drive, gt, q["vision"]["file"], q["policy"]["file"], tensors,
                              a.max_frames)
            entry["methods"][m] = {"ours": mine, "onnxruntime": ort,
                                   "judged": judge(entry["tables"]["fp32"], mine, ort)}
        res["drives"].append(entry)
    # Best: one that meets both criteria on every drive, then the smallest worst int8/fp32 ratio.
    res["best_method"] = min(methods, key=lambda m: (
        not all(d["methods"][m]["judged"]["ratio_ok"] and d["methods"][m]["judged"]["ort_ok"]
                for d in res["drives"]),
        max(d["methods"][m]["judged"]["worst_ratio"] for d in res["drives"]), methods.index(m)))
    text = markdown(res)
    print(text, end="")
    with open(os.path.join(out, "quant_accuracy.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "quant_accuracy.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    if a.record:
        best = res["best_method"]
        os.makedirs(a.record, exist_ok=True)
        rec = {"method": best, "source": {n: {"file": os.path.basename(v["file"]),
                                              "sha256": v["sha256"]}
                                          for n, v in res["models"].items()},
               "models": {}, "drives": {}}
        for net in ("vision", "policy"):
            q = res["quantized"][best][net]
            shutil.copyfile(q["file"], os.path.join(a.record, os.path.basename(q["file"])))
            rec["models"][net] = {"file": os.path.basename(q["file"]), "sha256": q["sha256"]}
        for d in res["drives"]:
            rec["drives"][d["name"]] = {"fp32": d["tables"]["fp32"],
                                        "int8": d["methods"][best]["ours"],
                                        "onnxruntime": d["methods"][best]["onnxruntime"]}
        with open(os.path.join(a.record, "int8.json"), "w") as f:
            json.dump(rec, f, indent=1, sort_keys=True)
        with open(os.path.join(a.record, "quant_accuracy.md"), "w") as f:
            f.write(text)
        print(f"quant_accuracy: recorded {best}'s models and figures in {a.record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
