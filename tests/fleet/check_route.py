#!/usr/bin/env python3
"""opreplay on routes of segments cut from the sample drive (one camera, to stay short):

- continuity: a two-segment route (GOPs 0, 1; route.py cuts the drive's log for each) gives the
  same messages as the unsplit drive replayed for as many frames: the model's state, the frame
  ids and the car state carried over the segment boundary;
- reset: in a three-segment route whose segment 1 is corrupt, segment 2's model outputs equal
  those of a route made of that segment alone with the same log (fresh state), and differ from
  those of the same segment inside an intact three-segment route (carried state), so the
  comparison can tell;
  frame ids and log times jump over the broken segment; the summary names the segment and why;
  exit status 3;
- calibration from the segments' logs (make_route writes them): a change in segment 1's log
  applies from its route-wide frame;
- a route folder with no segments, and a folder holding two routes, are refused by name.

  check_route.py OPREPLAY ROUTE_PY OPFLEET MAKE_ROUTE DRIVE_DIR VISION POLICY
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from optest import check, failures, tool_env  # noqa: E402

OUTPUTS = ("position", "orientation", "velocity", "laneLines", "roadEdges", "leadsV3", "action")


def main():
    if len(sys.argv) != 8:
        print(__doc__)
        return 2
    opreplay, route_py, opfleet, make_route, drive, vision, policy = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(opfleet)))
    import opfleet as fleet  # its log reader (pycapnp)
    env = tool_env("fleet")
    rpy = "0.012,0.021,-0.016"
    work = tempfile.mkdtemp(prefix="oproute-test-")

    def make(name, gops):
        subprocess.run([sys.executable, route_py, "--out", os.path.join(work, "routes"),
                        "--name", name, "--from", drive, "--gops", gops], check=True,
                       stdout=subprocess.DEVNULL)
        return os.path.join(work, "routes", name)

    def replay(route, name, *extra, calibration=("--rpy", rpy)):
        out = os.path.join(work, "out", name)
        p = subprocess.run([opreplay, route, "--vision", vision, "--policy", policy, "--out", out,
                            "--no-video", "--single-camera"] + list(calibration) + list(extra),
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        print(p.stdout)
        sys.stderr.write(p.stderr[-2000:])
        msgs = fleet.read_log(os.path.join(out, "rlog.zst")) if p.returncode in (0, 3) else []
        return p, [ev.to_dict() for ev in msgs]

    def model(msgs):
        return [{k: m["modelV2"][k] for k in OUTPUTS if k in m["modelV2"]}
                for m in msgs if "modelV2" in m]

    def strip(m):
        if isinstance(m, dict):
            # What is measured: times, and frames that entered the pipeline meanwhile.
            return {k: strip(v) for k, v in m.items()
                    if not k.endswith("ExecutionTime") and k != "frameAge"}
        if isinstance(m, list):
            return [strip(v) for v in m]
        return m

    try:
        # ---- Continuity over a segment boundary.
        two = make("two", "0,1")
        p, a = replay(two, "two")
        check(p.returncode == 0, f"two segments: exit status {p.returncode}")
        n = sum(1 for m in a if "modelV2" in m)
        p, b = replay(drive, "whole", "--max-frames", str(n))
        check(p.returncode == 0 and n > 60, f"the unsplit drive for {n} frames")
        check(len(a) == len(b) and a and [strip(m) for m in a] == [strip(m) for m in b],
              f"two segments = the unsplit drive, message by message ({len(a)}, {len(b)})")

        # ---- Reset after a broken segment.
        broken = make("broken", "0,1,2")
        with open(os.path.join(work, "routes", "broken--1", "fcamera.hevc"), "r+b") as f:
            f.write(b"\0\0\1\x80\1")  # a NAL header with its forbidden bit
        p, c = replay(broken, "broken")
        check(p.returncode == 3, f"a broken segment: exit status 3 (got {p.returncode})")
        check(re.search(r"^  segment 1 +not replayed: .*broken--1/fcamera.hevc: a NAL unit "
                        r"header at byte 3 has its forbidden bit set$", p.stdout, re.M),
              "the summary names segment 1 and why it was not replayed")
        ids = [m["modelV2"]["frameId"] for m in c if "modelV2" in m]
        seg0 = int(re.search(r"^  segment 0 +(\d+) frames", p.stdout, re.M).group(1))
        check(ids[:seg0] == list(range(seg0)) and len(ids) > seg0 and ids[seg0] > seg0 + 30,
              f"frame ids jump over the broken segment ({ids[seg0 - 1:seg0 + 1]})")
        alone = make("alone", "2")
        # The same log as in the broken route (frame ids from 76 on, not 0): a fresh pipeline
        # whose first logged id is above 1 only warps that frame, as modeld does after a gap.
        shutil.copy(os.path.join(work, "routes", "broken--2", "rlog.zst"),
                    os.path.join(work, "routes", "alone--0", "rlog.zst"))
        p, d = replay(alone, "alone")
        intact = make("intact", "0,1,2")
        p2, e = replay(intact, "intact")
        after = model(c)[seg0:]
        check(len(after) == len(model(d)) and after == model(d),
              f"after the broken segment the model starts afresh ({len(after)} frames = "
              "segment 2 replayed alone)")
        carried = model(e)[-len(after):]
        check(len(carried) == len(after) and carried != after,
              "the same segment inside an intact route gives other outputs (state carried)")

        # ---- Calibration from the segments' logs: segment 1 (from frame seg0) changes the pitch
        # at its own frame 20, i.e. route frame seg0 + 20.
        logs = make("logs", "0,1")
        after_rpy = "0.012,0.035,-0.016"
        for n, (frames, change) in enumerate(((seg0, 1000), (40, 20))):
            tmp = os.path.join(work, f"log{n}")
            os.makedirs(tmp)
            subprocess.run([make_route, tmp, drive, str(frames), str(change), rpy, after_rpy],
                           check=True)
            shutil.copy(os.path.join(tmp, "rlog.zst"), os.path.join(work, "routes", f"logs--{n}"))
        p, _ = replay(logs, "logs", calibration=())
        frame = seg0 + 20
        check(p.returncode == 0 and "2 value(s), from the log" in p.stdout and
              re.search(rf"^ +frame {frame} \({frame * 50} ms\): rpy = 0\.012\d*,0\.035\d*,",
                        p.stdout, re.M),
              f"segment 1's calibration change applies from route frame {frame}")

        # ---- Bad routes are refused by name.
        p, _ = replay(os.path.join(work, "nothing"), "nothing")
        check(p.returncode == 1 and "nothing is not a route" in p.stderr,
              "a path with no route is refused, naming it")
        p, _ = replay(os.path.join(work, "routes"), "mixed")
        check(p.returncode == 1 and "holds segments of" in p.stderr,
              "a folder with several routes is refused")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
