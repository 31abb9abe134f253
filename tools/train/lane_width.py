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

As a check of the inputs themselves, it also measures the width in the image: on the newest
frame's luma plane (half resolution, the medmodel frame: focal 455, centre 128, 23.8) it takes
the row of the road at that distance and, near where each ego line's label projects, the
brightest column (the marking), and compares their separation with the labels' width in
pixels. A slope near 1 there says the inputs show the width the labels give.
"""

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "models"))
sys.path.insert(0, os.path.join(ROOT, "tools", "synthdrive"))
from scene import CAMERA_HEIGHT, X_IDXS  # noqa: E402  (the labels' distances, the camera)

# The model frame's half-resolution luma planes (medmodel: focal 910, centre 256, 47.6 at 512x256).
FOCAL, CX, CY = 455.0, 128.0, 23.8


def marking_separation(plane, d, y1, y2):
    """The columns' distance between the brightest pixels near where lines at lateral offsets y1
    and y2 (openpilot's frame: y to the right) cross the road's row d metres ahead, or None."""
    row = int(round(CY + FOCAL * CAMERA_HEIGHT / d))
    if not 1 <= row < plane.shape[0] - 1:
        return None
    profile = plane[row - 1:row + 2].astype(np.float64).mean(axis=0)
    cols = []
    for y in (y1, y2):
        u = CX + FOCAL * y / d
        lo, hi = int(max(0, u - 8)), int(min(plane.shape[1] - 1, u + 8))
        if hi <= lo:
            return None
        cols.append(lo + int(np.argmax(profile[lo:hi + 1])))
    return cols[1] - cols[0]


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
    pred_w, true_w, seen_px, label_px = [], [], [], []
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
            sep = marking_separation(img[k, 6], a.at, t1, t2)  # frame t's first luma plane
            if sep is not None:
                seen_px.append(sep)
                label_px.append(FOCAL * (t2 - t1) / a.at)
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
    if len(seen_px) > 2:
        seen, want = np.array(seen_px, np.float64), np.array(label_px)
        print(f"in the inputs: the markings' separation at {a.at:g} m against the labels' width in "
              f"pixels over {len(seen)} frames: slope {np.polyfit(want, seen, 1)[0]:.2f}, "
              f"correlation {np.corrcoef(want, seen)[0, 1]:.2f} (labels {want.min():.0f}-"
              f"{want.max():.0f} px, found {seen.min():.0f}-{seen.max():.0f} px)")


if __name__ == "__main__":
    main()
