#!/usr/bin/env python3
"""The int8 versions of the committed trained models still see the road as recorded: replays a
held-out drive through opreplay --precision int8 (our runtime's integer kernels) with the QDQ
models that tools/train/quant_accuracy.py wrote (--record), builds the accuracy table
(tools/train/evaluate.py, no torch) and compares every figure with the one recorded in int8.json.

  check_quant_accuracy.py EVALUATE OPREPLAY DRIVE TRAINED_DIR INT8_DIR

The QDQ models' sha256 must be the recorded ones, and the float models in TRAINED_DIR must be the
ones they were quantized from (their sha256 recorded as the source): new trained models need new
int8 models and figures (rerun quant_accuracy.py with --record INT8_DIR).

Tolerance as train-trained-accuracy's: an error figure may move by 2 % of the recorded value plus
0.005, a share by 1 percentage point; a figure recorded but missing now (or the reverse) fails.
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    evaluate, opreplay, drive, trained, int8 = sys.argv[1:]
    with open(os.path.join(int8, "int8.json")) as f:
        rec = json.load(f)
    for net, src in sorted(rec["source"].items()):
        path = os.path.join(trained, src["file"])
        got = sha256(path) if os.path.isfile(path) else "missing"
        if got != src["sha256"]:
            print(f"FAIL: {path}: sha256 {got}, but the int8 {net} model was quantized from "
                  f"{src['sha256']}: rerun tools/train/quant_accuracy.py {trained} --out OUT "
                  f"--record {int8}")
            return 1
    models = {}
    for net, m in sorted(rec["models"].items()):
        path = os.path.join(int8, m["file"])
        got = sha256(path)
        if got != m["sha256"]:
            print(f"FAIL: {path}: sha256 {got} is not the recorded {m['sha256']}")
            return 1
        models[net] = path
    name = os.path.basename(os.path.abspath(drive))
    if name not in rec["drives"]:
        print(f"FAIL: {int8}/int8.json records no figures for the drive '{name}'")
        return 1
    want = rec["drives"][name]["int8"]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "table.json")
        cmd = [sys.executable, evaluate, "--drive", drive, "--replay", os.path.join(tmp, "replay"),
               "--opreplay", opreplay, "--vision", models["vision"], "--policy", models["policy"],
               "--precision", "int8", "--json", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(r.stdout, end="")
        if r.returncode != 0:
            print(f"FAIL: evaluate.py exited {r.returncode}: {r.stderr.strip()}")
            return 1
        with open(out) as f:
            got = json.load(f)["ours"]
    failures = []
    if got.get("frames") != want.get("frames"):
        failures.append(f"frames: {got.get('frames')} matched, recorded {want.get('frames')}")
    for key in sorted(set(want) | set(got)):
        if key == "frames" or key.endswith("_n"):
            continue
        if key not in got or key not in want:
            failures.append(f"{key}: {'missing now' if key not in got else 'not recorded'}")
            continue
        share = key.endswith("_acc") or key.endswith("within_std")
        tol = 0.01 if share else 0.02 * abs(want[key]) + 0.005
        ok = abs(got[key] - want[key]) <= tol
        print(f"{'ok  ' if ok else 'FAIL'} {key}: {got[key]:.4f} (recorded {want[key]:.4f}, "
              f"tolerance {tol:.4f})")
        if not ok:
            failures.append(f"{key}: {got[key]:.4f}, recorded {want[key]:.4f} (tolerance {tol:.4f})")
    if failures:
        print(f"FAIL: the int8 ({rec['method']}) models' accuracy moved:\n  " +
              "\n  ".join(failures))
        return 1
    compared = [k for k in want if k != "frames" and not k.endswith("_n")]
    print(f"ok: {len(compared)} int8 figures of {drive} within tolerance of the recorded ones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
