#!/usr/bin/env python3
"""Renders the synthetic drive: road and wide camera frames (NV12) encoded to HEVC elementary
streams like an openpilot route, plus per-frame ground truth.

  .venv/bin/python3 tools/synthdrive/render.py --seconds 10 --out samples/drive   # the sample
  .venv/bin/python3 tools/synthdrive/render.py --seconds 60 --out /tmp/drive60     # a longer one
  .venv/bin/python3 tools/synthdrive/render.py --seed 101 --seconds 2 --out /tmp/d  # another scene

Writes OUT/fcamera.hevc, OUT/ecamera.hevc, OUT/groundtruth.json (format: samples/drive/README.md),
OUT/rlog.zst (the drive's log, rlog.py) and, with --nv12, the raw frames OUT/fcamera.nv12 / OUT/ecamera.nv12 (tightly packed NV12, one
frame after another). --raw writes only the raw frames and no HEVC (training data: no encoder,
no decoder). --preview N writes OUT/preview_{road,wide}.png of frame N and encodes nothing.
Output is deterministic: the same bytes on every run with the same numpy and x265.

The pixels come from the compiled rasteriser (tools/synthdrive/synthraster.c, built by meson
into BUILD/tools/synthdrive) when it is built, else from raster.py's numpy code; both give the
same bytes (tests/synthdrive checks it). --numpy forces the numpy code.
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import raster  # noqa: E402
import rlog  # noqa: E402
import scene  # noqa: E402
import variety  # noqa: E402

WIDTH, HEIGHT = 1928, 1208  # tici (comma 3/3X) sensor, docs/contract.md
ROAD_FOCAL, WIDE_FOCAL = 2648.0, 567.0
# The camera's known mounting error: small, non-zero, in all three axes (radians).
CALIB_RPY = (0.012, 0.021, -0.016)
# x265 settings fixed for reproducible bytes: no thread pool and one frame thread (threads make
# x265's decisions timing-dependent), fixed GOP without scene cuts, no version SEI.
X265_ARGS = ["--input-res", f"{WIDTH}x{HEIGHT}", "--input-csp", "i420", "--input-depth", "8",
             "--output-depth", "8", "--fps", str(scene.FPS), "--preset", "faster",
             "--keyint", "40", "--min-keyint", "40", "--no-scenecut", "--pools", "none",
             "--frame-threads", "1", "--no-wpp", "--lookahead-slices", "0", "--repeat-headers",
             "--no-info", "--no-progress", "--log-level", "error"]


def nv12_to_i420(frame):
    """x265's raw input is planar: split NV12's interleaved UV rows into U and V planes."""
    ysize = WIDTH * HEIGHT
    uv = np.frombuffer(frame, np.uint8, offset=ysize).reshape(HEIGHT // 2, WIDTH)
    return frame[:ysize] + uv[:, 0::2].tobytes() + uv[:, 1::2].tobytes()


def write_png(path, nv12):
    """An RGB PNG of one NV12 frame (for looking at, so only roughly colour-correct)."""
    y = np.frombuffer(nv12, np.uint8, count=WIDTH * HEIGHT).reshape(HEIGHT, WIDTH).astype(np.float32)
    uv = np.frombuffer(nv12, np.uint8, offset=WIDTH * HEIGHT).reshape(HEIGHT // 2, WIDTH // 2, 2)
    u = np.repeat(np.repeat(uv[:, :, 0], 2, 0), 2, 1).astype(np.float32) - 128
    v = np.repeat(np.repeat(uv[:, :, 1], 2, 0), 2, 1).astype(np.float32) - 128
    yy = (y - 16) * 1.164
    rgb = np.stack([yy + 1.596 * v, yy - 0.392 * u - 0.813 * v, yy + 2.017 * u], axis=-1)
    rgb = np.clip(rgb, 0, 255).astype(np.uint8)
    raw = b"".join(b"\x00" + rgb[r].tobytes() for r in range(HEIGHT))

    def chunk(tag, data):
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", WIDTH, HEIGHT, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


def header(seconds, frames, crf, rpy=CALIB_RPY, params=None):
    """The ground-truth file's description of the drive (see samples/drive/README.md)."""
    def cam(focal):
        return {"width": WIDTH, "height": HEIGHT, "focal_px": focal,
                "intrinsics": [[focal, 0.0, WIDTH / 2.0], [0.0, focal, HEIGHT / 2.0], [0.0, 0.0, 1.0]]}
    return {
        "format": "gst-op synthetic drive ground truth",
        "version": 1,
        "fps": scene.FPS,
        "seconds": seconds,
        "frame_count": frames,
        "cameras": {"road": dict(cam(ROAD_FOCAL), file="fcamera.hevc"),
                    "wide": dict(cam(WIDE_FOCAL), file="ecamera.hevc")},
        "camera_height_m": scene.CAMERA_HEIGHT,
        "calibration_rpy": list(rpy),
        "wide_from_device_euler": [0.0, 0.0, 0.0],
        "x_idxs_m": [round(x, 4) for x in scene.X_IDXS],
        "lane_width_m": scene.LANE_WIDTH,
        "lane_line_offsets_m": list(scene.LANE_LINE_OFFSETS),
        "lane_line_dashed": list(scene.LANE_LINE_DASHED),
        "road_edge_offsets_m": list(scene.ROAD_EDGE_OFFSETS),
        "encoder": "x265 " + " ".join(X265_ARGS + ["--crf", str(crf)]),
    } | ({} if params is None else {"scene_seed": params["seed"], "scene": params,
                                    "lane_line_yellow": list(scene.LANE_LINE_YELLOW),
                                    "lead_present": scene.LEAD_PRESENT,
                                    "lanes": scene.LANES, "ego_lane_start": scene.EGO_LANE,
                                    "lane_line_double": list(scene.LANE_LINE_DOUBLE)})


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--start", type=float, default=0.0,
                    help="drive time of the first frame (s): a later part of the same drive, "
                         "whose frame ids continue from start * 20")
    ap.add_argument("--out", required=True)
    ap.add_argument("--crf", type=float, default=30.0, help="x265 quality (higher = smaller)")
    ap.add_argument("--nv12", action="store_true", help="also keep the raw NV12 frames")
    ap.add_argument("--raw", action="store_true",
                    help="write only the raw NV12 frames (OUT/fcamera.nv12, OUT/ecamera.nv12), no "
                         "HEVC: training data")
    ap.add_argument("--numpy", action="store_true",
                    help="render with raster.py's numpy code even where the compiled rasteriser "
                         "is built (the reference; several times slower)")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads of the compiled rasteriser (default: every core)")
    ap.add_argument("--seed", type=int,
                    help="draw the whole scene (road, lanes, lane change, speeds, lead and its "
                         "cut-in/out, calibration, lighting, glare, shadows, noise) from this seed (tools/synthdrive/variety.py); without it, the "
                         "bundled sample's scene")
    ap.add_argument("--preview", type=int, metavar="N", help="write PNGs of frame N, encode nothing")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    frames = int(round(a.seconds * scene.FPS))
    first = int(round(a.start * scene.FPS))
    params, rpy = None, CALIB_RPY
    if a.seed is not None:
        params = variety.draw(a.seed)
        variety.apply(params)
        rpy = tuple(params["calibration_rpy"])
    road = scene.Road(scene.ego_s(a.start + a.seconds) + 600.0)
    cams = {"road": raster.Camera(WIDTH, HEIGHT, ROAD_FOCAL, rpy, scene.CAMERA_HEIGHT),
            "wide": raster.Camera(WIDTH, HEIGHT, WIDE_FOCAL, rpy, scene.CAMERA_HEIGHT)}
    fast = None if a.numpy else raster.FastRaster.load(threads=a.threads or None)
    if fast is None and not a.numpy:
        print(f"synthdrive: no compiled rasteriser at {raster.library_path()} (build it with "
              "ninja); rendering with numpy", file=sys.stderr)
    renderer = raster.Renderer(road, cams, rpy, fast=fast)
    if params is not None:
        renderer.tex = raster.Textures(a.seed)
        renderer.look = variety.Look(params)

    if a.preview is not None:
        for name, cam in cams.items():
            frame = renderer.render(cam, a.preview / scene.FPS)
            write_png(os.path.join(a.out, f"preview_{name}.png"), frame)
        return 0

    files = {"road": "fcamera", "wide": "ecamera"}
    encoders, raws = {}, {}
    for name, stem in files.items():
        if not a.raw:
            cmd = ["x265"] + X265_ARGS + ["--crf", str(a.crf), "--input", "-",
                                          "--output", os.path.join(a.out, stem + ".hevc")]
            encoders[name] = subprocess.Popen(cmd, stdin=subprocess.PIPE)
        if a.nv12 or a.raw:
            raws[name] = open(os.path.join(a.out, stem + ".nv12"), "wb")

    truth = []
    start = time.monotonic()
    for i in range(first, first + frames):
        t = i / scene.FPS
        for name, cam in cams.items():
            nv12 = renderer.render(cam, t)
            if name in encoders:
                encoders[name].stdin.write(nv12_to_i420(nv12))
            if name in raws:
                raws[name].write(nv12)
        truth.append(scene.ground_truth(road, t, i, rpy, extra=params is not None))
        if (i + 1 - first) % 20 == 0:
            print(f"synthdrive: {i + 1 - first}/{frames} frames, {time.monotonic() - start:.0f} s", flush=True)
    status = 0
    for name, enc in encoders.items():
        enc.stdin.close()
        if enc.wait() != 0:
            print(f"synthdrive: x265 failed for the {name} camera (exit {enc.returncode})",
                  file=sys.stderr)
            status = 1
    for f in raws.values():
        f.close()

    # One frame per line keeps the file readable and diffs small.
    with open(os.path.join(a.out, "groundtruth.json"), "w") as f:
        hdr = header(a.seconds, frames, a.crf, rpy, params)
        if a.raw:  # the cameras' files are the raw frames
            for name, stem in files.items():
                hdr["cameras"][name]["file"] = stem + ".nv12"
            hdr["encoder"] = "none: raw NV12 frames"
        drive = json.dumps(hdr, sort_keys=True)
        f.write('{"drive": ' + drive + ',\n"frames": [\n')
        f.write(",\n".join(json.dumps(r, sort_keys=True) for r in truth))
        f.write("\n]}\n")
    # The route's log: camera frame ids and times, the car's speed, calibration and delay.
    rlog.write_rlog(os.path.join(a.out, "rlog.zst"), frames, CALIB_RPY, first=first)
    print(f"synthdrive: wrote {frames} frames per camera to {a.out} in {time.monotonic() - start:.1f} s "
          f"({'compiled' if fast else 'numpy'} rasteriser{', raw NV12' if a.raw else ''})")
    return status


if __name__ == "__main__":
    sys.exit(main())
