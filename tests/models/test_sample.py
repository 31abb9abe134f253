#!/usr/bin/env python3
"""The bundled sample drive (samples/drive): it decodes with GStreamer to 200 frames of 1928×1208
per camera, its ground truth has 200 consistent entries, the files are the recorded ones, and the
ground truth agrees with the pixels: projecting the ground-truth lane lines, road edges and lead
car into the decoded frames (with the contract's camera model, written out again here) lands on
paint, on the verge and on the red car.

  test_sample.py [--dir DIR] [--frames N]    defaults: $OP_SOURCE_ROOT/samples/drive, 200
"""

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.environ.get("OP_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
W, H = 1928, 1208
FRAME = W * H * 3 // 2  # I420 as avdec_h265 hands it to a sink without video meta
FOCAL = {"road": 2648.0, "wide": 567.0}
FILES = {"road": "fcamera.hevc", "wide": "ecamera.hevc"}
CHECK_FRAMES = (0, 57, 123, 199)

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def gst_env():
    """The system's GStreamer plugins alone (filesrc, h265parse, avdec_h265), with a registry of
    this check's own."""
    env = dict(os.environ)
    env.pop("GST_PLUGIN_PATH_1_0", None)
    reg_dir = os.environ.get("OP_BUILD_ROOT", tempfile.gettempdir())
    env["GST_REGISTRY_1_0"] = os.path.join(reg_dir, "tests", "models", "registry-system.bin")
    os.makedirs(os.path.dirname(env["GST_REGISTRY_1_0"]), exist_ok=True)
    return env


def decode(path, keep):
    """Decodes an HEVC elementary stream with the issue's pipeline, streaming I420 frames through
    a pipe (no 700 MB temporary file). Returns (frame count, trailing bytes, caps text, frames)."""
    gst = shutil.which("gst-launch-1.0")
    if gst is None:
        print("SKIP: gst-launch-1.0 not found")
        sys.exit(77)
    r, w = os.pipe()
    cmd = [gst, "-v", "filesrc", f"location={path}", "!", "h265parse", "!", "avdec_h265", "!",
           "video/x-raw,format=I420", "!", "fdsink", f"fd={w}"]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, pass_fds=(w,), stdout=log, stderr=subprocess.STDOUT, env=gst_env())
    os.close(w)
    count, tail, frames = 0, 0, {}
    with os.fdopen(r, "rb") as f:
        while True:
            buf = f.read(FRAME)
            if len(buf) < FRAME:
                tail = len(buf)
                break
            if count in keep:
                frames[count] = buf
            count += 1
    proc.wait()
    log.seek(0)
    text = log.read().decode(errors="replace")
    if proc.returncode != 0:
        print(text[-2000:])
    check(proc.returncode == 0, f"{os.path.basename(path)}: gst-launch-1.0 exit {proc.returncode}")
    return count, tail, text, frames


def rot(rpy):
    """Rz(yaw)·Ry(pitch)·Rx(roll), as docs/contract.md states it."""
    r, p, y = rpy
    rx = np.array([[1, 0, 0], [0, math.cos(r), -math.sin(r)], [0, math.sin(r), math.cos(r)]])
    ry = np.array([[math.cos(p), 0, math.sin(p)], [0, 1, 0], [-math.sin(p), 0, math.cos(p)]])
    rz = np.array([[math.cos(y), -math.sin(y), 0], [math.sin(y), math.cos(y), 0], [0, 0, 1]])
    return rz @ ry @ rx


def project(cam, rpy, x, y, z):
    """Calibrated-frame point (x forward, y right, z down, metres) → camera pixel (u, v):
    device = R(rpy)·p, view = V·device, pixel = K·view."""
    d = rot(rpy) @ np.array([x, y, z])
    f = FOCAL[cam]
    return W / 2 + f * d[1] / d[0], H / 2 + f * d[2] / d[0]


def planes(buf):
    y = np.frombuffer(buf, np.uint8, count=W * H).reshape(H, W).astype(int)
    u = np.frombuffer(buf, np.uint8, count=W * H // 4, offset=W * H).reshape(H // 2, W // 2).astype(int)
    v = np.frombuffer(buf, np.uint8, count=W * H // 4, offset=W * H * 5 // 4)
    v = v.reshape(H // 2, W // 2).astype(int)
    return y, u, v


def sample(img, u, v, scale=1):
    """Mean of a 3×3 neighbourhood (compression noise) at pixel (u, v) of a plane of 1/scale size."""
    cu, cv = int(round(u / scale)), int(round(v / scale))
    if not (1 <= cu < img.shape[1] - 1 and 1 <= cv < img.shape[0] - 1):
        return None
    return float(img[cv - 1:cv + 2, cu - 1:cu + 2].mean())


def check_pixels(cam, frame, rec, gt, buf):
    """Ground truth ↔ pixels for one decoded frame."""
    y, u, v = planes(buf)
    rpy, h = gt["drive"]["calibration_rpy"], gt["drive"]["camera_height_m"]
    xs = gt["drive"]["x_idxs_m"]
    # Points near enough that a 15 cm line is several pixels wide in this camera.
    near = [i for i, x in enumerate(xs) if 9.0 <= x <= (45.0 if cam == "road" else 16.0)]
    tag = f"{cam} frame {frame}"
    contrast, verge, lead_v = [], [], None
    for line in (0, 3):  # the solid outer lines (the inner two are dashed)
        inward = 1.0 if line == 0 else -1.0
        for i in near:
            ly = rec["lane_lines_y_m"][line][i]
            pu, pv = project(cam, rpy, xs[i], ly, h)
            qu, qv = project(cam, rpy, xs[i], ly + 0.6 * inward, h)
            a, b = sample(y, pu, pv), sample(y, qu, qv)
            if a is not None and b is not None:
                contrast.append(a - b)
    for edge, outward in ((0, -1.0), (1, 1.0)):
        for i in near:
            ey = rec["road_edges_y_m"][edge][i]
            ou, ov = project(cam, rpy, xs[i], ey + 1.0 * outward, h)
            # Inside: in the outer lane, clear of the line's paint (chroma is half resolution).
            iu, iv = project(cam, rpy, xs[i], ey - 1.6 * outward, h)
            a, b = sample(u, ou, ov, 2), sample(u, iu, iv, 2)
            if a is not None and b is not None:
                verge.append((a, b))
    lead = rec["lead"]
    # The middle of the car's rear between plate (below 0.55 m) and roof line (0.98 m) is body
    # paint over a width of 1.1 m, so a few chroma pixels fit even in the wide camera.
    lu, lv = project(cam, rpy, lead["distance_m"] + 0.05, lead["y_m"], h - 0.77)
    lead_v = sample(v, lu, lv, 2)
    need = 8 if cam == "road" else 2
    # The far-left line is yellow (less luma than white) and cloud shadows vary the asphalt, so
    # the margin is 25 levels; a point off the paint would read about 0.
    check(len(contrast) >= need and min(contrast) > 25,
          f"{tag}: solid lane lines are brighter than the asphalt beside them at the ground-truth "
          f"positions ({len(contrast)} points, least {min(contrast, default=float('nan')):.0f} "
          "luma levels)")
    check(len(verge) >= need // 2 and all(a < 120 and 120 <= b <= 136 for a, b in verge),
          f"{tag}: green verge outside the ground-truth road edges, grey asphalt inside "
          f"({len(verge)} points, U outside/inside {verge[:2]})")
    check(lead_v is not None and lead_v > 150,
          f"{tag}: red lead car at the ground-truth lead position (V = {lead_v})")


def check_truth(gt, frames):
    drive, recs = gt["drive"], gt["frames"]
    check(len(recs) == frames and drive["frame_count"] == frames,
          f"ground truth has {len(recs)} entries")
    check([r["frame_id"] for r in recs] == list(range(frames)), "frame ids 0..N-1 in order")
    sof = [r["timestamp_sof_ns"] for r in recs]
    check(all(b - a == 50_000_000 for a, b in zip(sof, sof[1:])), "start-of-frame every 50 ms (20 fps)")
    check(all(r["timestamp_eof_ns"] > r["timestamp_sof_ns"] for r in recs), "end of frame after start")
    xs = [192.0 * (i / 32) ** 2 for i in range(33)]
    check(np.allclose(drive["x_idxs_m"], xs, atol=1e-3), "x_idxs are the contract's X_IDXS")
    rpy = drive["calibration_rpy"]
    check(len(rpy) == 3 and all(0 < abs(a) < 0.05 for a in rpy),
          f"calibration rpy small and non-zero: {rpy}")
    check(all(r["calibration_rpy"] == rpy for r in recs), "per-frame calibration = the drive's")
    cams = drive["cameras"]
    check(cams["road"]["focal_px"] == 2648.0 and cams["wide"]["focal_px"] == 567.0, "tici focal lengths")
    shapes = all(len(r["lane_lines_y_m"]) == 4 and all(len(l) == 33 for l in r["lane_lines_y_m"])
                 and len(r["road_edges_y_m"]) == 2 and all(len(e) == 33 for e in r["road_edges_y_m"])
                 for r in recs)
    check(shapes, "4 lane lines and 2 road edges of 33 points each")
    # Lane geometry at the first point: ordered left to right, 3.7 m apart, edges outside.
    gaps = np.array([np.diff([l[0] for l in r["lane_lines_y_m"]]) for r in recs])
    check(np.allclose(gaps, 3.7, atol=0.05),
          f"lane lines 3.7 m apart (range {gaps.min():.3f}..{gaps.max():.3f})")
    check(all(r["road_edges_y_m"][0][0] < r["lane_lines_y_m"][0][0] and
              r["road_edges_y_m"][1][0] > r["lane_lines_y_m"][3][0] for r in recs),
          "road edges outside the lines")
    far = [r["lane_lines_y_m"][1][25] for r in recs]
    check(max(far) - min(far) > 1.0,
          f"the road curves: left line at 117 m spans {min(far):.1f}..{max(far):.1f} m")
    dist = [r["lead"]["distance_m"] for r in recs]
    speed = [r["lead"]["speed_mps"] for r in recs]
    ego = [r["ego"]["speed_mps"] for r in recs]
    check(max(dist) - min(dist) > 5 and min(dist) > 5,
          f"lead distance changes: {min(dist):.1f}..{max(dist):.1f} m")
    check(max(speed) - min(speed) > 2, f"lead speed changes: {min(speed):.1f}..{max(speed):.1f} m/s")
    check(min(ego) > 10, f"ego moving: {min(ego):.1f}..{max(ego):.1f} m/s")
    # The lead's relative speed is the rate of its distance (finite differences at 20 fps).
    rate = np.gradient(np.array([r["lead"]["gap_along_road_m"] for r in recs]), 0.05)
    rel = np.array([r["lead"]["rel_speed_mps"] for r in recs])
    check(np.abs(rate[1:-1] - rel[1:-1]).max() < 0.1, "lead relative speed = d(gap)/dt")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(ROOT, "samples", "drive"))
    ap.add_argument("--frames", type=int, default=200)
    a = ap.parse_args()

    with open(os.path.join(a.dir, "groundtruth.json")) as f:
        gt = json.load(f)
    check_truth(gt, a.frames)

    record = os.path.join(a.dir, "SHA256SUMS")
    if a.frames == 200:  # the bundled sample: the files are the recorded ones
        with open(record) as f:
            want = dict(reversed(line.split()) for line in f if line.strip())
        for name in ("fcamera.hevc", "ecamera.hevc", "groundtruth.json", "rlog.zst"):
            with open(os.path.join(a.dir, name), "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
            check(want.get(name) == got, f"{name}: sha256 matches SHA256SUMS")

    keep = {n for n in CHECK_FRAMES if n < a.frames} | {a.frames - 1}
    for cam, name in FILES.items():
        path = os.path.join(a.dir, name)
        size = os.path.getsize(path)
        check(size < 3_000_000, f"{name}: {size:,} bytes (the sample stays small)")
        count, tail, caps, frames = decode(path, keep)
        check(count == a.frames and tail == 0,
              f"{name}: decodes to {count} whole frames (+{tail} bytes)")
        check("width=(int)1928" in caps and "height=(int)1208" in caps, f"{name}: caps say 1928x1208")
        for n in sorted(frames):
            check_pixels(cam, n, gt["frames"][n], gt, frames[n])
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
