#!/usr/bin/env python3
"""Training data for the driving networks: synthetic drives rendered from seeds, their model inputs
made by the real opwarp element, and labels for the contract's outputs computed from the scene.

  .venv/bin/python3 tools/train/dataset.py build --seeds 101-104 --seconds 2 --out DATA [--raw] [--jobs 2]
  .venv/bin/python3 tools/train/dataset.py drive samples/drive OUT [--frames N]

`build` renders each seed's drive with tools/synthdrive/render.py --seed (skipped when
DATA/drive_SEED already holds it) and then does what `drive` does for each; --jobs N works on N
drives at once (each renderer with cores/N threads). `drive` decodes the drive's HEVC streams
and runs them through opwarp exactly as the pipeline does (filesrc → h265parse → avdec_h265 →
videoconvert → NV12 → opwarp with the drive's calibration), both cameras (img: road camera,
big_img: wide camera). With `build --raw` the drives are rendered as raw NV12 frames
(render.py --raw, no encoder) and opwarp reads them as they are (filesrc → rawvideoparse →
opwarp): no HEVC encode or decode, so also no compression artefacts in the inputs; the raw
frames (3.5 MB per camera frame) are deleted once warped unless --keep-raw. Per drive folder:

  img.npy, big_img.npy   uint8 (N, 12, 128, 256): opwarp's output tensors, frame by frame, bytes
                         unchanged (the element's 5-frame history included)
  labels.npz             float32 arrays, first axis = frame (see LABELS below)
  meta.json              the drive's seed, frame count, calibration, and how it was made

No torch here: the test suite checks the data against opwarp without it (tests/train).
The plugin comes from the build tree: OP_BUILD_ROOT (default ./build)/plugins.
"""

import argparse
import concurrent.futures
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "synthdrive"))
import scene  # noqa: E402
import variety  # noqa: E402

# Bumped whenever a label's definition changes; `build` relabels data made under another version
# (from the drive's groundtruth.json, without rendering or warping again) and train.py refuses it.
# 3: the lead's trajectory at t + LEAD_T_IDXS for every offset, x and y relative to the ego at
# each of those times (1: at t + offset + LEAD_T_IDXS, relative to the ego at t).
LABELS_VERSION = 3
TENSOR_BYTES = 12 * 128 * 256
T_IDXS = [10.0 * (i / 32.0) ** 2 for i in range(33)]
LEAD_T_IDXS = [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
LEAD_T_OFFSETS = [0.0, 2.0, 4.0]
# Labels, all in the calibrated frame (x forward, y right, z down, origin at the camera) at the
# frame's time, openpilot's units (m, m/s, m/s², rad, rad/s):
LABELS = {
    "lane_lines": "(4, 33, 2) y, z of the four lane lines at X_IDXS; NaN where unknown",
    "lane_lines_prob": "(4,) 1 where the line exists",
    "road_edges": "(2, 33, 2) y, z of the road edges at X_IDXS",
    "plan": "(33, 15) ego position, velocity, acceleration, euler, euler rate at T_IDXS",
    "lead": "(3, 6, 4) for offsets 0, 2, 4 s, the car that is the lead at t + offset: its x, y, "
            "v, a at t + LEAD_T_IDXS, x and y relative to the ego car at that time (the gap, as "
            "a radar sees it), v and a the lead's own speed and acceleration",
    "lead_prob": "(3,) 1 where a lead exists at t + offset",
    "pose": "(6,) translation velocity (3), rotation rate (3) of the car now",
    "desire_state": "(8,) one-hot desire now (laneChangeLeft 3 / laneChangeRight 4 during a "
                    "lane change, none 0 otherwise)",
    "desire_pred": "(4, 8) one-hot desire at t + DESIRE_PRED_T",
    "meta": "(55,) the contract's meta layout: engaged, disengage/hard-brake at META_T_IDXS, "
            "gas/brake press and blinkers at 0-10 s",
    "road_transform": "(6,) road frame in the calibrated frame: translation (3, m), rotation "
                      "roll, pitch, yaw (3, rad)",
    "wide_from_device_euler": "(3,) the wide camera's orientation relative to the road camera",
}
# Our convention for desire_pred's four rows: the desire 0, 1, 2 and 3 s ahead.
DESIRE_PRED_T = [0.0, 1.0, 2.0, 3.0]
META_T_IDXS = [2.0, 4.0, 6.0, 8.0, 10.0]
META_PRESS_T = [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def meta_label(t):
    """The 55 meta targets at time t (docs/contract.md, "Parsing the outputs"): the car is always
    engaged with nobody pressing a pedal, so engaged = 1 and disengages, overrides and presses 0;
    hard brake 3/4/5 m/s² at each horizon k is whether the ego decelerates that hard at t + T_k;
    the blinkers are the lane change's at t + 0, 2, ... 10 s."""
    m = np.zeros(55, np.float32)
    m[0] = 1.0
    for k, T in enumerate(META_T_IDXS):
        a = scene.ego_accel(t + T)
        for j, lim in enumerate((3.0, 4.0, 5.0)):
            m[1 + 6 * k + 3 + j] = float(a <= -lim)
    for k, T in enumerate(META_PRESS_T):
        left, right = scene.blinker(t + T)
        m[31 + 4 * k + 2] = float(left)
        m[31 + 4 * k + 3] = float(right)
    return m


def plugin_env(tmp):
    build = os.environ.get("OP_BUILD_ROOT", os.path.join(ROOT, "build"))
    plugins = os.path.join(build, "plugins")
    if not os.path.isfile(os.path.join(plugins, "libgstop.so")):
        raise SystemExit(f"dataset: no opwarp plugin at {plugins} (build first, or set OP_BUILD_ROOT)")
    env = dict(os.environ)
    env["GST_PLUGIN_PATH_1_0"] = plugins
    env.setdefault("GST_REGISTRY_1_0", os.path.join(tmp, "registry.bin"))
    return env


def source_desc(path, camera):
    """The pipeline's source up to NV12 frames: an HEVC stream is parsed and decoded, raw NV12
    frames (.nv12, tightly packed, the camera's size) are only cut into frames."""
    if path.endswith(".nv12"):
        return (f"filesrc location={path} ! rawvideoparse format=nv12 width={camera['width']} "
                f"height={camera['height']} framerate={scene.FPS}/1")
    return (f"filesrc location={path} ! h265parse ! avdec_h265 ! videoconvert ! "
            f"video/x-raw,format=NV12")


def warp_stream(path, camera, role, rpy, out_bin, frames, env):
    """Runs decode → opwarp over one camera's stream; opwarp's tensors go to out_bin as they are."""
    # The whole stream goes through and the first `frames` tensors are kept. A limit inside the
    # pipeline does not cut it cleanly: with `identity eos-after=10` after avdec_h265, the frames
    # that reach opwarp are the stream's 0-8, 10, 13 and 15 (measured), so the last tensors pair
    # frames the stream never pairs. opwarp's tensors for those frames are right.
    desc = (f"{source_desc(path, camera)} ! opwarp model-input={role} "
            f"rpy={','.join(repr(float(v)) for v in rpy)} ! filesink location={out_bin}")
    r = subprocess.run(["gst-launch-1.0", "-q"] + desc.split(), env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"dataset: opwarp pipeline failed for {path} ({role}): {r.stderr.strip()}")
    data = np.fromfile(out_bin, np.uint8)
    if data.size % TENSOR_BYTES:
        raise SystemExit(f"dataset: {out_bin}: {data.size} bytes is not a whole number of tensors")
    os.unlink(out_bin)
    return data.reshape(-1, 12, 128, 256)[:frames]


def scene_for(drive):
    """Installs the drive's scene parameters (the sample's defaults when it has none)."""
    if "scene" in drive:
        variety.apply(drive["scene"])
    # Without a seed the module defaults are the sample's scene: nothing to install.


def labels_for(truth, t_end):
    """Label arrays for every frame record in truth["frames"] (scene already configured)."""
    frames = truth["frames"]
    n = len(frames)
    road = scene.Road(scene.ego_s(t_end + 16.0) + 600.0)
    h = truth["drive"]["camera_height_m"]
    lab = {
        "lane_lines": np.full((n, 4, 33, 2), np.nan, np.float32),
        "lane_lines_prob": np.ones((n, 4), np.float32),
        "road_edges": np.full((n, 2, 33, 2), np.nan, np.float32),
        "plan": np.zeros((n, 33, 15), np.float32),
        "lead": np.zeros((n, 3, 6, 4), np.float32),
        "lead_prob": np.zeros((n, 3), np.float32),
        "pose": np.zeros((n, 6), np.float32),
        "desire_state": np.zeros((n, 8), np.float32),
        "desire_pred": np.zeros((n, 4, 8), np.float32),
        "meta": np.zeros((n, 55), np.float32),
        "road_transform": np.zeros((n, 6), np.float32),
        "wide_from_device_euler": np.zeros((n, 3), np.float32),
    }
    lab["wide_from_device_euler"][:] = truth["drive"].get("wide_from_device_euler", [0.0, 0.0, 0.0])
    dt = 0.01

    def heading(t):
        return scene.Pose(road, t).heading

    for k, f in enumerate(frames):
        t = f["t"]
        for key, name in (("lane_lines", "lane_lines_y_m"), ("road_edges", "road_edges_y_m")):
            y = np.array([[np.nan if v is None else v for v in line] for line in f[name]], np.float32)
            lab[key][k, :, :, 0] = y
            lab[key][k, :, :, 1] = np.where(np.isfinite(y), np.float32(h), np.nan)
        # A line exists where the road has it (openpilot's four around the ego's lane).
        lab["lane_lines_prob"][k] = [0.0 if i is None else 1.0
                                     for i in scene.ego_lines(scene.ego_lane(t))]
        lab["desire_state"][k, scene.desire(t)] = 1.0
        for j, T in enumerate(DESIRE_PRED_T):
            lab["desire_pred"][k, j, scene.desire(t + T)] = 1.0
        lab["meta"][k] = meta_label(t)
        now = scene.Pose(road, t)
        # The road frame (origin on the road under the camera, x along the road, z down) seen
        # from the calibrated frame: the ground is h below, and the road turns by the heading
        # difference; the road is flat (no roll, no pitch).
        lab["road_transform"][k] = [0.0, 0.0, h, 0.0, 0.0, now.road_heading - now.heading]
        for i, T in enumerate(T_IDXS):
            p = scene.Pose(road, t + T)
            x, y = now.to_ego(p.x, p.y)
            rel = p.heading - now.heading
            v, a = scene.ego_speed(t + T), scene.ego_accel(t + T)
            rate = (heading(t + T + dt) - heading(t + T - dt)) / (2 * dt)
            c, s = math.cos(rel), math.sin(rel)
            lat_a = v * rate  # centripetal
            lab["plan"][k, i] = [x, y, 0.0, v * c, v * s, 0.0, a * c - lat_a * s, a * s + lat_a * c,
                                 0.0, 0.0, 0.0, rel, 0.0, 0.0, rate]
        rate_now = (heading(t + dt) - heading(t - dt)) / (2 * dt)
        lab["pose"][k] = [scene.ego_speed(t), 0.0, 0.0, 0.0, 0.0, rate_now]
        if scene.LEAD_PRESENT:
            for j, off in enumerate(LEAD_T_OFFSETS):
                # The lead the model reports is the one in the ego's lane at t + offset: a car
                # cutting in becomes one, a car cutting out (or left by a lane change) stops being.
                if not scene.lead_in_path(t + off):
                    continue
                lab["lead_prob"][k, j] = 1.0
                for i, T in enumerate(LEAD_T_IDXS):
                    # The trajectory of the car that is the lead at t + off, from now on: the
                    # offsets choose which car (the one ahead now, or one that cuts in), not
                    # when its trajectory starts, so that one of the network's two hypotheses
                    # can serve every offset that sees the same car.
                    tf = t + T
                    cx, cy, th = road.at(scene.ego_s(tf) + scene.lead_gap(tf))
                    if scene.LEAD_CUT is not None:
                        o = scene.lead_lateral(tf)
                        cx, cy = cx - math.sin(th) * o, cy + math.cos(th) * o
                    # Relative to the ego car at tf, not to the car now: the gap as a radar
                    # sees it then (the plan, by contrast, is a path from here).
                    x, y = scene.Pose(road, tf).to_ego(cx, cy)
                    lab["lead"][k, j, i] = [x, y, scene.ego_speed(tf) + scene.lead_gap_rate(tf),
                                            scene.ego_accel(tf) + scene.lead_gap_accel(tf)]
    return lab


def build_drive(drive_dir, out, frames=None):
    """Warps and labels one rendered drive into `out` (created); returns the frame count."""
    gt = os.path.join(drive_dir, "groundtruth.json")
    try:
        with open(gt) as f:
            truth = json.load(f)
        drive = truth["drive"]
        drive["cameras"]["road"]["file"], drive["cameras"]["wide"]["file"], truth["frames"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"dataset: {gt}: not a synthdrive ground-truth file ({e})")
    os.makedirs(out, exist_ok=True)
    rpy = drive["calibration_rpy"]
    env = plugin_env(out)
    tensors = {}
    for role, cam in (("img", "road"), ("big_img", "wide")):
        camera = drive["cameras"][cam]
        path = os.path.join(drive_dir, camera["file"])
        tensors[role] = warp_stream(path, camera, role, rpy, os.path.join(out, role + ".bin"),
                                    frames, env)
    n = min(len(tensors["img"]), len(tensors["big_img"]), len(truth["frames"]))
    if frames:
        n = min(n, frames)
    if n == 0:
        raise SystemExit(f"dataset: {drive_dir}: opwarp produced no frames")
    truth["frames"] = truth["frames"][:n]
    scene_for(drive)
    lab = labels_for(truth, truth["frames"][-1]["t"])
    for role in tensors:
        np.save(os.path.join(out, role + ".npy"), tensors[role][:n])
    np.savez(os.path.join(out, "labels.npz"), **lab)
    meta = {"source": os.path.abspath(drive_dir), "frames": n, "labels_version": LABELS_VERSION,
            "frame_ids": [f["frame_id"] for f in truth["frames"]],
            "seed": drive.get("scene_seed"), "calibration_rpy": rpy,
            "inputs": ("opwarp (filesrc ! rawvideoparse ! opwarp): raw NV12 frames"
                       if drive["cameras"]["road"]["file"].endswith(".nv12") else
                       "opwarp (filesrc ! h265parse ! avdec_h265 ! videoconvert ! NV12 ! opwarp)"),
            "labels": LABELS}
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    if os.path.exists(os.path.join(out, "registry.bin")):
        os.unlink(os.path.join(out, "registry.bin"))
    return n


def parse_seeds(text):
    seeds = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            seeds += list(range(int(a), int(b) + 1))
        else:
            seeds.append(int(part))
    return seeds


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="render drives from seeds and make their training data")
    b.add_argument("--seeds", required=True, help="e.g. 101-104 or 101,105")
    b.add_argument("--seconds", type=float, default=2.0)
    b.add_argument("--out", required=True)
    b.add_argument("--raw", action="store_true",
                   help="render raw NV12 frames and warp them as they are (no HEVC encode or "
                        "decode: several times faster, no compression artefacts)")
    b.add_argument("--keep-raw", action="store_true",
                   help="with --raw: keep DATA/drive_SEED/*.nv12 after warping (3.5 MB a frame)")
    b.add_argument("--jobs", type=int, default=1,
                   help="drives rendered and warped at once (default 1; 2 keeps both cores busy)")
    d = sub.add_parser("drive", help="training data of one rendered drive")
    d.add_argument("drive")
    d.add_argument("out")
    d.add_argument("--frames", type=int, help="only the first N frames")
    a = ap.parse_args()

    if a.cmd == "drive":
        start = time.monotonic()
        n = build_drive(a.drive, a.out, a.frames)
        print(f"dataset: {n} frames of {a.drive} in {a.out} ({time.monotonic() - start:.0f} s)")
        return 0
    seeds = parse_seeds(a.seeds)
    if 0 in seeds:
        raise SystemExit("dataset: seed 0 is reserved")
    if a.jobs < 1:
        raise SystemExit(f"dataset: --jobs {a.jobs}: must be at least 1")
    threads = max(1, (os.cpu_count() or 1) // a.jobs)
    start = time.monotonic()
    if a.jobs == 1:
        for seed in seeds:
            print(build_seed(seed, a, threads), flush=True)
    else:
        # Processes, not threads: the scene's parameters are module state (variety.apply).
        with concurrent.futures.ProcessPoolExecutor(a.jobs) as pool:
            jobs = [pool.submit(build_seed, seed, a, threads) for seed in seeds]
            for job in concurrent.futures.as_completed(jobs):
                print(job.result(), flush=True)
    print(f"dataset: {len(seeds)} drives in {a.out} ({time.monotonic() - start:.1f} s, "
          f"{a.jobs} at once)", flush=True)
    return 0


def build_seed(seed, a, threads):
    """Renders (unless already there) and warps one seed's drive; returns the progress line."""
    drive = os.path.join(a.out, f"drive_{seed}")
    data = os.path.join(a.out, f"data_{seed}")
    frames = int(round(a.seconds * scene.FPS))
    if a.raw and not a.keep_raw and _done(data, seed, frames, raw=True):
        if labels_version(data) == LABELS_VERSION:
            return f"dataset: seed {seed}: {frames} frames already in {data}"
        start = time.monotonic()
        relabel(drive, data)
        return (f"dataset: seed {seed}: {frames} frames already in {data}, labels remade "
                f"({time.monotonic() - start:.1f} s)")
    gt = os.path.join(drive, "groundtruth.json")
    fresh = False
    if os.path.exists(gt):
        with open(gt) as f:
            hdr = json.loads(f.readline()[len('{"drive": '):].rstrip(",\n"))
        fresh = (hdr.get("scene_seed") == seed and hdr.get("seconds") == a.seconds and
                 all(os.path.exists(os.path.join(drive, c["file"])) and
                     c["file"].endswith(".nv12") == a.raw for c in hdr["cameras"].values()))
    start = time.monotonic()
    if not fresh:
        cmd = [sys.executable, os.path.join(ROOT, "tools", "synthdrive", "render.py"),
               "--seed", str(seed), "--seconds", str(a.seconds), "--out", drive,
               "--threads", str(threads)] + (["--raw"] if a.raw else [])
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            raise SystemExit(f"dataset: rendering seed {seed} failed")
    t_render = time.monotonic() - start
    n = build_drive(drive, data)
    if a.raw and not a.keep_raw:
        for stem in ("fcamera", "ecamera"):
            os.unlink(os.path.join(drive, stem + ".nv12"))
    return (f"dataset: seed {seed}: {n} frames, render {t_render:.1f} s, "
            f"warp+labels {time.monotonic() - start - t_render:.1f} s")


def labels_version(data):
    """The LABELS_VERSION a data folder's labels were made under (1: before versions existed)."""
    try:
        with open(os.path.join(data, "meta.json")) as f:
            return json.load(f).get("labels_version", 1)
    except (OSError, ValueError):
        return None


def relabel(drive_dir, data):
    """Remakes a data folder's labels from its drive's ground truth (the tensors stay)."""
    gt = os.path.join(drive_dir, "groundtruth.json")
    try:
        with open(gt) as f:
            truth = json.load(f)
        with open(os.path.join(data, "meta.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"dataset: cannot relabel {data}: {e}")
    truth["frames"] = truth["frames"][:meta["frames"]]
    scene_for(truth["drive"])
    np.savez(os.path.join(data, "labels.npz"), **labels_for(truth, truth["frames"][-1]["t"]))
    meta["labels_version"], meta["labels"] = LABELS_VERSION, LABELS
    with open(os.path.join(data, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def _done(data, seed, frames, raw):
    """Whether `data` already holds this seed's training data made the same way."""
    try:
        with open(os.path.join(data, "meta.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    return (meta.get("seed") == seed and meta.get("frames") == frames and
            meta.get("inputs", "").endswith("raw NV12 frames") == raw and
            all(os.path.exists(os.path.join(data, n)) for n in ("img.npy", "big_img.npy",
                                                                  "labels.npz")))


if __name__ == "__main__":
    sys.exit(main())
