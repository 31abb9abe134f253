#!/usr/bin/env python3
"""Training data from raw NV12 frames = what opwarp makes of those frames, byte for byte.

Renders a short seeded drive as raw frames (render.py --raw: no HEVC), builds its training data
with `dataset.py build --raw --keep-raw`, then runs opwarp itself over the same raw frames in this
process (filesrc → rawvideoparse → opwarp → appsink, GStreamer from Python) and requires every
training sample (img and big_img) to equal the element's output tensor for that frame exactly;
also that the raw files hold one tightly packed NV12 frame per frame and that a second build
reuses the data instead of rendering again.

Exit 0 pass, 1 fail, 77 skip (no OpenCL device or a system plugin missing).
Usage: check_raw_dataset.py SOURCE_ROOT   (environment: the tests' test_env)
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from optest import have_opencl_device, missing_elements, nv12_source, \
    opwarp_outputs  # noqa: E402

SEED, SECONDS = 111, 0.4  # 8 frames: more than opwarp's 5-frame history


def main():
    root = sys.argv[1]
    if not have_opencl_device():
        print("SKIP: no OpenCL device")
        return 77
    name = missing_elements(("rawvideoparse", "appsink", "filesrc"))
    if name:
        print(f"SKIP: system element {name} unavailable")
        return 77
    if missing_elements(("opwarp",)):
        print("FAIL: opwarp is not registered (GST_PLUGIN_PATH_1_0?)")
        return 1
    dataset = os.path.join(root, "tools", "train", "dataset.py")
    frames = int(round(SECONDS * 20))
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, dataset, "build", "--seeds", str(SEED), "--seconds", str(SECONDS),
               "--out", tmp, "--raw", "--keep-raw"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL: dataset.py build --raw exited {r.returncode}: {r.stdout}{r.stderr}")
            return 1
        print(r.stdout.strip())
        drive, out = os.path.join(tmp, f"drive_{SEED}"), os.path.join(tmp, f"data_{SEED}")
        truth = json.load(open(os.path.join(drive, "groundtruth.json")))
        rpy = truth["drive"]["calibration_rpy"]
        status = 0
        for role, cam in (("img", "road"), ("big_img", "wide")):
            c = truth["drive"]["cameras"][cam]
            raw = os.path.join(drive, c["file"])
            size = c["width"] * c["height"] * 3 // 2
            if not raw.endswith(".nv12") or os.path.getsize(raw) != frames * size:
                print(f"FAIL: {cam}: {raw} is not {frames} raw NV12 frames of {size} bytes")
                return 1
            data = np.load(os.path.join(out, role + ".npy"))
            if data.shape != (frames, 12, 128, 256) or data.dtype != np.uint8:
                print(f"FAIL: {role}: training inputs {data.dtype} {data.shape}, "
                      f"want uint8 {(frames, 12, 128, 256)}")
                return 1
            ref = opwarp_outputs(nv12_source(raw, c["width"], c["height"]), role, rpy)
            if len(ref) != frames:
                print(f"FAIL: {role}: opwarp gave {len(ref)} tensors, want {frames}")
                return 1
            bad = [k for k in range(frames) if data[k].tobytes() != ref[k]]
            for k in bad:
                diff = np.frombuffer(ref[k], np.uint8) != data[k].ravel()
                print(f"FAIL: {role} frame {k}: {int(diff.sum())} bytes differ from opwarp's output")
            if bad:
                status = 1
            elif len(set(ref)) != frames:
                print(f"FAIL: {role}: opwarp's tensors repeat (frames not told apart)")
                status = 1
            else:
                print(f"ok: {role}: {frames} training samples from raw frames equal opwarp's "
                      "tensors byte for byte")
        # Without --keep-raw the raw frames go once warped, the data is the same, and a rebuild
        # reuses it.
        out2 = os.path.join(tmp, "again")
        cmd = cmd[:cmd.index("--out")] + ["--out", out2, "--raw"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or os.path.exists(os.path.join(out2, f"drive_{SEED}", "fcamera.nv12")):
            print(f"FAIL: a build without --keep-raw left the raw frames or failed: {r.stdout}{r.stderr}")
            return 1
        for role in ("img", "big_img"):
            if not np.array_equal(np.load(os.path.join(out2, f"data_{SEED}", role + ".npy")),
                                  np.load(os.path.join(out, role + ".npy"))):
                print(f"FAIL: {role}: a second render of seed {SEED} gave other training inputs")
                status = 1
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or "already in" not in r.stdout:
            print(f"FAIL: a second build did not reuse the data: {r.stdout}{r.stderr}")
            status = 1
        elif status == 0:
            print("ok: raw frames deleted once warped; a second build reuses the data")
    return status


if __name__ == "__main__":
    sys.exit(main())
