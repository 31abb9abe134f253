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
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
import optest  # noqa: E402


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
    got = optest.replay_accuracy(evaluate, opreplay, drive, models["vision"], models["policy"],
                                 ["--precision", "int8"])
    if got is None:
        return 1
    failures = optest.compare_accuracy(got, want)
    if failures:
        print(f"FAIL: the int8 ({rec['method']}) models' accuracy moved:\n  " +
              "\n  ".join(failures))
        return 1
    compared = [k for k in want if k != "frames" and not k.endswith("_n")]
    print(f"ok: {len(compared)} int8 figures of {drive} within tolerance of the recorded ones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
