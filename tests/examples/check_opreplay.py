#!/usr/bin/env python3
"""opreplay on a route folder made from the sample drive, with a log whose calibration changes
midway (make_route): the output log holds exactly one modelV2 per evaluated frame, the
calibration switched at the frame the log says, and the video and contact sheet were written.

  check_opreplay.py OPREPLAY MAKE_ROUTE OPLOG DRIVE_DIR VISION POLICY
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from optest import check, failures, tool_env  # noqa: E402

FRAMES = 120         # replayed road frames (the sample has 200)
CHANGE = 100         # the frame from which the log's calibration changes
BEFORE = "0.012,0.021,-0.016"   # the sample's calibration
AFTER = "0.012,0.035,-0.016"


def main():
    if len(sys.argv) != 7:
        print(__doc__)
        return 2
    opreplay, make_route, oplog, drive, vision, policy = sys.argv[1:]
    env = tool_env("examples")

    work = tempfile.mkdtemp(prefix="opreplay-test-")
    try:
        route, out = os.path.join(work, "route"), os.path.join(work, "out")
        os.makedirs(route)
        subprocess.run([make_route, route, drive, "200", str(CHANGE), BEFORE, AFTER], check=True)
        started = time.monotonic()
        proc = subprocess.run([opreplay, route, "--vision", vision, "--policy", policy,
                               "--out", out, "--max-frames", str(FRAMES),
                               "--ground-truth", os.path.join(drive, "groundtruth.json")],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - started
        print(proc.stdout)
        sys.stderr.write(proc.stderr[-3000:])
        check(proc.returncode == 0, f"opreplay exit status {proc.returncode}")
        m = re.search(r"^\s*first message\s+([\d.]+) s after opreplay started$", proc.stdout, re.M)
        first = float(m.group(1)) if m else -1.0
        check(0 < first < wall, f"the first message's time ({first} s) is within the run ({wall:.2f} s)")
        m = re.search(r"^\s*evaluated\s+(\d+)$", proc.stdout, re.M)
        check(m is not None, "the summary says how many frames were evaluated")
        evaluated = int(m.group(1)) if m else -1
        m = re.search(r"^\s*frames in\s+(\d+) road, (\d+) wide$", proc.stdout, re.M)
        check(m is not None and int(m.group(1)) == FRAMES and int(m.group(2)) == FRAMES,
              f"{FRAMES} frames of each camera went in")
        check(0 < evaluated <= FRAMES, f"0 < evaluated ({evaluated}) <= {FRAMES}")
        def applied(frame, rpy):
            """Whether the summary says `rpy` was applied from `frame` (float32 in the log)."""
            want = [float(v) for v in rpy.split(",")]
            for m in re.finditer(rf"frame {frame} \({frame * 50} ms\): rpy = (\S+),(\S+),(\S+)$",
                                 proc.stdout, re.M):
                if all(abs(float(g) - w) < 1e-6 for g, w in zip(m.groups(), want)):
                    return True
            return False
        check(applied(0, BEFORE), "the first calibration is applied from frame 0")
        check(applied(CHANGE, AFTER), f"the changed calibration is applied from frame {CHANGE}")

        rlog = os.path.join(out, "rlog.zst")
        listing = subprocess.run([oplog, "list", rlog], stdout=subprocess.PIPE, text=True)
        check(listing.returncode == 0, f"oplog reads {rlog} completely")
        model_v2 = sum(1 for line in listing.stdout.splitlines() if " modelV2 " in f" {line} ")
        check(model_v2 == evaluated, f"modelV2 messages ({model_v2}) = evaluated frames ({evaluated})")

        video = os.path.join(out, "overlay.mkv")
        check(os.path.isfile(video) and os.path.getsize(video) > 10000, "the overlay video exists")
        png = os.path.join(out, "contact-sheet.png")
        head = open(png, "rb").read(8) if os.path.isfile(png) else b""
        check(head == b"\x89PNG\r\n\x1a\n", "the contact sheet is a PNG")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
