#!/usr/bin/env python3
"""The committed trained models still see the road as recorded: replays a held-out drive through
opreplay (our runtime, the drive's calibration) with the trained vision and policy models, builds
the accuracy table (tools/train/evaluate.py, no torch), and compares every figure with the one
recorded in the models' card data (models/trained/accuracy.json, written when the models were
made, from the same replay). The models' sha256 must be the ones models/trained/trained.sha256
(and the card) records, so the figures are known to belong to these files.

  check_trained_accuracy.py EVALUATE OPREPLAY DRIVE MODELS_DIR

Tolerance: an error figure (m, m/s or % of the distance) may move by 2 % of the recorded value
plus 0.005; a share (probability and presence accuracies, within-one-std shares) by 1 percentage
point. The figures come from hundreds of lines and frames, so a changed model, a changed parse
or a runtime that computes differently moves them by more; float rounding between devices does
not. A figure recorded but missing now (or the reverse) is a failure too.
"""

import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
import optest  # noqa: E402


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    evaluate, opreplay, drive, models = sys.argv[1:]
    with open(os.path.join(models, "accuracy.json")) as f:
        recorded = json.load(f)
    want = recorded["ours"]
    vision = os.path.join(models, "driving_vision_small.onnx")
    policy = os.path.join(models, "driving_policy_small.onnx")
    with open(os.path.join(models, "trained.sha256")) as f:
        sums = dict(reversed(line.split()) for line in f if line.strip())
    for path in (vision, policy):
        with open(path, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        if sums.get(os.path.basename(path)) != got:
            print(f"FAIL: {path}: sha256 {got} is not the one trained.sha256 records "
                  f"({sums.get(os.path.basename(path))})")
            return 1
    got = optest.replay_accuracy(evaluate, opreplay, drive, vision, policy)
    if got is None:
        return 1
    failures = optest.compare_accuracy(got, want)
    if failures:
        print("FAIL: the trained models' accuracy moved:\n  " + "\n  ".join(failures))
        return 1
    print(f"ok: {len(want) - 1} figures of {drive} within tolerance of the recorded ones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
