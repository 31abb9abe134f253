#!/usr/bin/env python3
"""opreplay --realtime with both cameras, on a route folder made from the sample drive
(make_route: fcamera.hevc, ecamera.hevc and a log with a roadCameraState per frame, ids 0.., but
no wideRoadCameraState). The road frames then carry the log's start-of-frame times (the camera's
boot clock, from 1000 s) and the wide frames only their PTS (from 0): the pairing once compared
the two, dropped every wide frame as seconds old, and a live replay stalled after its first frame.

Released far faster than real time, the device falls behind and the warps drop frames. Checks:

- the replay ends (within a time limit) and exits 0;
- frames in = warped + dropped for each camera; the road camera had every frame in, and the wide
  one at most as many (the replay ends with the road camera's last frame: under load the wide
  decoder may still hold a few frames then, which are never fed);
- the cameras drop as pairs: no warped road frame is passed over by the pairing (unpaired 0
  road) and every warped wide frame has a warped road twin (wide warped <= road warped: a road
  frame may still run alone when opvision's live deadline passes before its wide twin arrives;
  a twin that reaches the warp after that is dropped there, one already past it is passed over
  by the pairing and counted as unpaired wide, which is printed, not checked);
- one modelV2 per evaluated frame, each paired with its own wide twin: frameIdExtra (the wide
  warp's count, which counts dropped frames too) equals frameId; on the route with an id offset,
  a road frame that ran alone at a live deadline (frameIdExtra = frameId, as opvision stamps a
  frame without a wide twin) is allowed, at most once per wide twin passed over or dropped late;
- the frame ids missing from the log are the dropped road frames and those after a drop
  (skipped).

Then the same on a route whose road frame ids start at 5 (a camera that started earlier): the
first road frame follows an id gap and is not evaluated, so the networks' first output never
comes from the first pair; the replay must start its clock all the same and end (the ids in the
checks are then offset by 5).

Where the device kept up (no frame dropped) the run checks what it can and exits 77 (skipped),
saying what it could not show.

  check_opreplay_realtime_pairs.py OPREPLAY MAKE_ROUTE SCHEMA DRIVE_DIR VISION POLICY
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from optest import check, exit_status, load_log_schema, numbers, read_models, run_tool, \
    tool_env, unexercised  # noqa: E402

TIMEOUT_S = 800  # a replay that has not ended by then stalled (a cold cache compiles first)


def live_run(name, opreplay, env, route, work, vision, policy, log, frames, rate, video,
             first_id=0):
    print(f"---- {name}: {frames} frames, --realtime={rate}, {'with' if video else 'no'} video")
    out = os.path.join(work, name)
    cmd = [opreplay, route, "--vision", vision, "--policy", policy, "--out", out, "--max-frames",
           str(frames), f"--realtime={rate}"] + ([] if video else ["--no-video"])
    try:
        proc = run_tool(cmd, env, "opreplay", timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        sys.stderr.write((e.stderr or b"")[-3000:].decode(errors="replace")
                         if isinstance(e.stderr, bytes) else (e.stderr or "")[-3000:])
        check(False, f"the replay ended within {TIMEOUT_S} s (it stalled)")
        return
    fed = numbers(proc.stdout, r"^\s*frames in\s+(\d+) road, (\d+) wide$", int)
    warped = numbers(proc.stdout, r"^\s*warped\s+(\d+) road, (\d+) wide$", int)
    dropped = numbers(proc.stdout, r"^\s*dropped\s+(\d+) road, (\d+) wide", int)
    unpaired = numbers(proc.stdout, r"^\s*unpaired\s+(\d+) road, (\d+) wide", int)
    evaluated = numbers(proc.stdout, r"^\s*evaluated\s+(\d+)$", int)
    skipped = numbers(proc.stdout, r"^\s*skipped\s+(\d+)", int)
    check(None not in (fed, warped, dropped, unpaired, evaluated, skipped),
          "the summary gives frames in, warped, dropped and unpaired per camera, evaluated, skipped")
    if None in (fed, warped, dropped, unpaired, evaluated, skipped):
        return
    check(fed[0] == frames and 0 < fed[1] <= frames,
          f"frames in {fed}: {frames} road and at most {frames} wide wanted")
    if fed[1] < frames:
        print(f"info the replay ended with {frames - fed[1]} wide frame(s) still in its decoder")
    for cam in (0, 1):
        which = ("road", "wide")[cam]
        check(warped[cam] + dropped[cam] == fed[cam],
              f"{which}: warped {warped[cam]} + dropped {dropped[cam]} = frames in {fed[cam]}")
    check(unpaired[0] == 0, f"no warped road frame passed over by the pairing ({unpaired[0]})")
    print(f"info {unpaired[1]} warped wide frame(s) passed over by the pairing (their road twin "
          "ran alone at a live deadline)")
    check(warped[1] <= warped[0],
          f"every warped wide frame has a warped road twin (warped {warped[0]} road, "
          f"{warped[1]} wide; dropped {dropped[0]} road, {dropped[1]} wide)")
    if dropped[0] == 0:
        unexercised.append(f"{name}: no frame dropped at {rate}x (the device kept up)")
    models = read_models(log, os.path.join(out, "rlog.zst"))
    ids = [m.frameId for m in models]
    check(len(models) == evaluated[0], f"{len(models)} modelV2 messages, {evaluated[0]} evaluated")
    check(ids == sorted(set(ids)), "frame ids increase")
    # A road frame that ran alone (its live deadline passed before its twin) is stamped with its
    # own id as the wide one, as a single-camera frame is. Its twin was then either passed over by
    # the pairing (unpaired wide) or dropped at its warp as a late twin (the wide drops beyond
    # the road ones), so there are at most that many such messages.
    alone = [m.frameId for m in models if first_id and m.frameIdExtra == m.frameId]
    bad = [(m.frameId, m.frameIdExtra) for m in models
           if m.frameIdExtra + first_id != m.frameId and m.frameId not in alone]
    check(not bad, f"every message pairs a road frame with its wide twin (frameIdExtra + "
          f"{first_id} = frameId) or ran alone (frameIdExtra = frameId; not: {bad[:5]})")
    twins_lost = unpaired[1] + max(0, dropped[1] - dropped[0])
    check(len(alone) <= twins_lost,
          f"{len(alone)} message(s) of a road frame that ran alone {alone[:5]}, at most the "
          f"{twins_lost} wide twins passed over or dropped late")
    missing = len(set(range(first_id, first_id + frames)) - set(ids))
    check(missing == dropped[0] + skipped[0],
          f"frame ids missing from the log ({missing}) = dropped {dropped[0]} + skipped "
          f"{skipped[0]}")


def main():
    if len(sys.argv) != 7:
        print(__doc__)
        return 2
    opreplay, make_route, schema, drive, vision, policy = sys.argv[1:]
    if shutil.which("zstd") is None:
        print("zstd not installed: skipped")
        return 77
    log = load_log_schema(schema)
    env = tool_env()

    work = tempfile.mkdtemp(prefix="opreplay-realtime-pairs-")
    try:
        route = os.path.join(work, "route")
        os.makedirs(route)
        calib = "0.012,0.021,-0.016"
        subprocess.run([make_route, route, drive, "200", "200", calib, calib], check=True)
        live_run("fast", opreplay, env, route, work, vision, policy, log, 60, 50, False)
        late = os.path.join(work, "late")
        os.makedirs(late)
        subprocess.run([make_route, late, drive, "200", "200", calib, calib, "5"], check=True)
        live_run("late", opreplay, env, late, work, vision, policy, log, 40, 50, False, first_id=5)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
