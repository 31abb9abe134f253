#!/usr/bin/env python3
"""Does a vision network see how wide the lane is? On training-format data (dataset.py build:
opwarp's tensors and the scene's labels), runs the vision network in onnxruntime and compares,
at 20 m ahead, the predicted width of the ego lane (lane line 2 minus lane line 1) with the true
one, drive by drive, with the error of each of the two lines.

  .venv/bin/python3 tools/train/lane_width.py --vision MODELS/driving_vision_small.onnx VAL/data_*

A network that sees the width predicts it with a slope near 1 against the truth; one that
predicts the data's mean width whatever the image has a slope near 0, and its lines at 20 m are
off by half the difference on each side (docs/training.md). Frames before the fifth of a drive
(an opwarp history still partly zeros) are left out.
"""

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "models"))
sys.path.insert(0, os.path.join(ROOT, "tools", "synthdrive"))
from scene import X_IDXS  # noqa: E402  (the distances the labels are given at)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vision", required=True)
    ap.add_argument("data", nargs="+", help="folders made by dataset.py build (data_SEED)")
    ap.add_argument("--at", type=float, default=20.0, help="distance ahead in metres (20)")
    a = ap.parse_args()

    import onnx
    import onnxruntime as ort
    from onnx_util import decode_slices
    props = {p.key: p.value for p in onnx.load(a.vision).metadata_props}
    lane = decode_slices(props["output_slices"])["lane_lines"]
    session = ort.InferenceSession(a.vision, providers=["CPUExecutionProvider"])
    pred_w, true_w = [], []
    print(f"| drive | frames | true width (m) | predicted width (m) | line 1 error (m) | "
          f"line 2 error (m) |")
    print("|---|---|---|---|---|---|")
    for d in a.data:
        img, big = np.load(os.path.join(d, "img.npy")), np.load(os.path.join(d, "big_img.npy"))
        truth = np.load(os.path.join(d, "labels.npz"))["lane_lines"]
        rows = []
        for k in range(4, len(img)):
            out = session.run(None, {"img": img[k:k + 1], "big_img": big[k:k + 1]})[0][0]
            y = out[lane][:264].reshape(4, 33, 2)[:, :, 0]
            t = truth[k][:, :, 0]
            if np.isnan(t[1]).any() or np.isnan(t[2]).any():
                continue
            p1, p2 = (np.interp(a.at, X_IDXS, y[i]) for i in (1, 2))
            t1, t2 = (np.interp(a.at, X_IDXS, t[i]) for i in (1, 2))
            rows.append((t2 - t1, p2 - p1, p1 - t1, p2 - t2))
        if not rows:
            continue
        r = np.array(rows)
        true_w += list(r[:, 0])
        pred_w += list(r[:, 1])
        print(f"| {os.path.basename(d.rstrip('/'))} | {len(r)} | {r[:, 0].mean():.2f} | "
              f"{r[:, 1].mean():.2f} | {r[:, 2].mean():+.2f} | {r[:, 3].mean():+.2f} |")
    true_w, pred_w = np.array(true_w), np.array(pred_w)
    slope = np.polyfit(true_w, pred_w, 1)[0]
    print(f"\npredicted against true width over {len(true_w)} frames: slope {slope:.2f}, "
          f"correlation {np.corrcoef(true_w, pred_w)[0, 1]:.2f}; true {true_w.min():.2f}-"
          f"{true_w.max():.2f} m, predicted {pred_w.min():.2f}-{pred_w.max():.2f} m")


if __name__ == "__main__":
    main()
