#!/usr/bin/env python3
"""Training data = what the pipeline feeds the networks, byte for byte.

Builds the training data of the sample drive (all frames unless FRAMES is given) with tools/train/dataset.py, then runs
opwarp itself over the same streams in this process (decode → opwarp → appsink, GStreamer from
Python) and requires every training sample (img and big_img) to equal the element's output tensor
for that frame exactly. Also: a sample's older half (frame t−4) is the newer half of the sample
four frames earlier, and the labels of frame k are the drive's ground truth of frame k.

Exit 0 pass, 1 fail, 77 skip (no OpenCL device or a system plugin missing).
Usage: check_dataset.py DATASET_PY DRIVE [FRAMES]   (environment: the tests' test_env)
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from optest import have_opencl_device, hevc_source, missing_elements, \
    opwarp_outputs  # noqa: E402


def main():
    dataset_py, drive = sys.argv[1], sys.argv[2]
    frames = int(sys.argv[3]) if len(sys.argv) > 3 else None
    if not have_opencl_device():
        print("SKIP: no OpenCL device")
        return 77
    name = missing_elements(("h265parse", "avdec_h265", "videoconvert", "appsink", "filesrc"))
    if name:
        print(f"SKIP: system element {name} unavailable")
        return 77
    if missing_elements(("opwarp",)):
        print("FAIL: opwarp is not registered (GST_PLUGIN_PATH_1_0?)")
        return 1
    truth = json.load(open(os.path.join(drive, "groundtruth.json")))
    frames = frames or truth["drive"]["frame_count"]
    rpy = truth["drive"]["calibration_rpy"]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "data")
        r = subprocess.run([sys.executable, dataset_py, "drive", drive, out, "--frames", str(frames)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL: dataset.py exited {r.returncode}: {r.stdout}{r.stderr}")
            return 1
        status = 0
        for role, cam in (("img", "road"), ("big_img", "wide")):
            data = np.load(os.path.join(out, role + ".npy"))
            if data.shape != (frames, 12, 128, 256) or data.dtype != np.uint8:
                print(f"FAIL: {role}: training inputs {data.dtype} {data.shape}, "
                      f"want uint8 {(frames, 12, 128, 256)}")
                return 1
            stream = os.path.join(drive, truth["drive"]["cameras"][cam]["file"])
            ref = opwarp_outputs(hevc_source(stream), role, rpy, frames)
            if len(ref) != frames:
                print(f"FAIL: {role}: opwarp gave {len(ref)} tensors, want {frames}")
                return 1
            for k in range(frames):
                if data[k].tobytes() != ref[k]:
                    diff = np.frombuffer(ref[k], np.uint8) != data[k].ravel()
                    print(f"FAIL: {role} frame {k}: {int(diff.sum())} bytes differ from opwarp's output")
                    status = 1
            for k in range(4, frames):
                if not np.array_equal(data[k, :6], data[k - 4, 6:]):
                    print(f"FAIL: {role} frame {k}: older half is not frame {k - 4}'s newer half")
                    status = 1
            if status == 0:
                print(f"ok: {role}: {frames} training samples equal opwarp's tensors byte for byte")
        lab = np.load(os.path.join(out, "labels.npz"))
        later_checked = 0
        for k in range(frames):
            f = truth["frames"][k]
            want = np.array(f["lane_lines_y_m"], np.float32)
            if not np.array_equal(lab["lane_lines"][k, :, :, 0], want):
                print(f"FAIL: frame {k}: lane-line labels differ from the ground truth")
                status = 1
            lead = f.get("lead")
            if lead is not None:
                got = lab["lead"][k, 0, 0]
                ref = [lead["distance_m"], lead["y_m"], lead["speed_mps"], lead["accel_mps2"]]
                if not np.allclose(got, ref, atol=1e-3):  # truth rounds to 4 decimals
                    print(f"FAIL: frame {k}: lead label {got} but ground truth {ref}")
                    status = 1
            # The lead's trajectory (times 0, 2, ... 10 s from now) for each offset (0, 2, 4 s: which
            # car is the lead then; the drive has one): the renderer's record of the frame that
            # far ahead, which holds the lead as seen from the car then (a gap, not a position
            # in this frame's coordinates).
            for j in range(3):
                for i, t_lead in enumerate((0.0, 2.0, 4.0, 6.0, 8.0, 10.0)):
                    later = k + int(round(t_lead * truth["drive"]["fps"]))
                    if (i == 0 and j == 0) or later >= len(truth["frames"]):
                        continue
                    rec = truth["frames"][later].get("lead")
                    if rec is None or lab["lead_prob"][k, j] < 0.5:
                        continue
                    got = lab["lead"][k, j, i]
                    ref = [rec["distance_m"], rec["y_m"], rec["speed_mps"], rec["accel_mps2"]]
                    if not np.allclose(got, ref, atol=1e-3):
                        print(f"FAIL: frame {k}: lead label of offset {j}, {t_lead:g} s later, {got} "
                              f"but the ground truth of frame {later} {ref}")
                        status = 1
                    later_checked += 1
            if abs(float(lab["pose"][k, 0]) - f["ego"]["speed_mps"]) > 1e-3:
                print(f"FAIL: frame {k}: pose speed {lab['pose'][k, 0]} vs {f['ego']['speed_mps']}")
                status = 1
        if later_checked == 0:
            print("FAIL: no lead label of a later time was compared (a drive without a lead?)")
            status = 1
        if status == 0:
            print(f"ok: labels of {frames} frames match the drive's ground truth, and "
                  f"{later_checked} later-time lead labels the records of those later frames")
    return status


if __name__ == "__main__":
    sys.exit(main())
