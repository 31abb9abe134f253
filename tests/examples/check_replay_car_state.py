#!/usr/bin/env python3
"""opreplay on the sample drive with the log tools/synthdrive/rlog.py writes for it (camera
states, carState.vEgo, liveDelay, liveCalibration, carParams): the replay takes frame ids, the
car's speed, the steering and longitudinal delays and the calibration from the log, and every
modelV2's desiredCurvature is non-zero and equal to the curvature computed here from the
message's own plan, the speed the log gives for that frame and the logged delay:

  t_lat = lateralDelay + 0.05 + 0.025,  v = max(vEgo, 1),
  kappa = 2 psi(t_lat) / (v t_lat) - psi_rate(0) / v,
  psi = orientation.z interpolated on T_IDXS = 10 (i/32)^2, psi_rate = orientationRate.z;

and every desiredAcceleration equals the acceleration computed here from the plan and the
logged carParams.longitudinalActuatorDelay (the command line gives none), smoothed from 0 over
the frames in order:

  t_long = longitudinalActuatorDelay + 0.3 + 0.05 + 0.025,
  a = 2 (v(t_long) - v(0)) / t_long - a(0)   (velocity.x, acceleration.x on T_IDXS),
  a_k = alpha a + (1 - alpha) a_(k-1),  alpha = 1 - exp(-0.05 / 0.3).

Then the same on a route of two segments cut from the drive with tools/synthdrive/route.py (each
gets its part of the log), whose second segment's log says another steering delay, another
longitudinal delay and a faster car: the frames of the second segment take the speed and the
delays from that segment's log, the frame ids come from both logs, and the summary names both
segments' logs.

  check_replay_car_state.py OPREPLAY RLOG_PY SCHEMA DRIVE_DIR VISION POLICY
"""

import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from optest import check, exit_status, load_log_schema, read_events, run_tool, \
    tool_env  # noqa: E402

FRAMES = 40
LATERAL_DELAY = 0.3  # not the command line's (0), so the log's value must have been used
SEGMENT1_DELAY = 0.5  # segment 1's log of the two-segment route: not segment 0's
SEGMENT1_EXTRA_SPEED = 4.0  # m/s added to segment 1's logged vEgo
LONG_DELAY = 0.4  # carParams: neither the command line's (0) nor rlog.py's default
SEGMENT1_LONG_DELAY = 0.7  # segment 1's carParams of the two-segment route
ALPHA = 1.0 - math.exp(-0.05 / 0.3)
T_IDXS = [10.0 * (i / 32.0) ** 2 for i in range(33)]



def interp(x, xs, ys):
    if x <= xs[0]:
        return ys[0]
    for i in range(1, len(xs)):
        if x <= xs[i]:
            f = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
            return ys[i - 1] + f * (ys[i] - ys[i - 1])
    return ys[-1]


def accelerations(models, delay_of):
    """The desired accelerations of the modelV2 messages in order, from their plans and the
    longitudinal delay `delay_of(model)`, smoothed from 0."""
    out, prev = [], 0.0
    for md in models:
        t_long = delay_of(md) + 0.3 + 0.05 + 0.025
        v = list(md.velocity.x)
        a = 2.0 * (interp(t_long, T_IDXS, v) - v[0]) / t_long - md.acceleration.x[0]
        prev = ALPHA * a + (1.0 - ALPHA) * prev
        out.append(prev)
    return out


def worst_accel(models, delay_of):
    want = accelerations(models, delay_of)
    return max(abs(md.action.desiredAcceleration - w) / max(abs(w), 1e-4)
               for md, w in zip(models, want))


def main():
    if len(sys.argv) != 7:
        print(__doc__)
        return 2
    opreplay, rlog_py, schema, drive, vision, policy = sys.argv[1:]
    if shutil.which("zstd") is None:
        print("zstd not installed: skipped")
        return 77
    log = load_log_schema(schema)
    env = tool_env()

    work = tempfile.mkdtemp(prefix="opreplay-car-")
    try:
        route, out = os.path.join(work, "route"), os.path.join(work, "out")
        os.makedirs(route)
        for name in ("fcamera.hevc", "ecamera.hevc"):
            os.symlink(os.path.join(drive, name), os.path.join(route, name))
        subprocess.run([sys.executable, rlog_py, "--seconds", "10", "--out", route,
                        "--lateral-delay", str(LATERAL_DELAY), "--long-delay", str(LONG_DELAY)],
                       check=True)
        proc = run_tool([opreplay, route, "--vision", vision, "--policy", policy, "--out", out,
                         "--max-frames", str(FRAMES), "--no-video", "--rpy", "0,0,0"], env)
        check(re.search(r"^\s*v-ego\s+from the log", proc.stdout, re.M) is not None,
              "the summary says v-ego comes from the log")
        check(re.search(r"^\s*lat-delay\s+from the log", proc.stdout, re.M) is not None,
              "the summary says lat-delay comes from the log")
        check(re.search(r"^\s*long-delay\s+from the log \(1 messages\)", proc.stdout, re.M)
              is not None, "the summary says long-delay comes from the log's carParams")
        check(re.search(r"^\s*frame ids\s+from the log", proc.stdout, re.M) is not None,
              "the summary says the frame ids come from the log")
        check(re.search(r"^\s*calibration\s+1 value\(s\), from the log", proc.stdout, re.M)
              is not None and "rpy = 0.012" in proc.stdout,
              "the calibration comes from the log, not --rpy")

        inp = read_events(log, os.path.join(route, "rlog.zst"))
        # The speed of each frame: the last carState logged before its roadCameraState.
        v_of_frame, v = {}, None
        for e in inp:
            w = e.which()
            if w == "carState":
                v = e.carState.vEgo
            elif w == "roadCameraState":
                v_of_frame[e.roadCameraState.frameId] = v
        delays = {e.liveDelay.lateralDelay for e in inp if e.which() == "liveDelay"}
        check(len(delays) == 1, f"one logged delay ({sorted(delays)})")
        long_delays = [e.carParams.longitudinalActuatorDelay for e in inp
                       if e.which() == "carParams"]
        check(len(long_delays) == 1 and abs(long_delays[0] - LONG_DELAY) < 1e-6,
              f"the log's carParams says the longitudinal delay ({long_delays})")

        outp = read_events(log, os.path.join(out, "rlog.zst"))
        models = [e for e in outp if e.which() == "modelV2"]
        check(len(models) == FRAMES, f"{len(models)} modelV2 messages for {FRAMES} frames")
        check([m.modelV2.frameId for m in models] == list(range(FRAMES)),
              "frame ids 0.. from the log's camera states, none skipped")
        check(all(m.valid for m in models), "every modelV2 valid (calibration from the log)")
        t_idxs = T_IDXS
        t_lat = LATERAL_DELAY + 0.05 + 0.025
        worst, nonzero = 0.0, 0
        for m in models:
            md = m.modelV2
            speed = max(v_of_frame[md.frameId], 1.0)
            psi = interp(t_lat, t_idxs, list(md.orientation.z))
            want = 2.0 * psi / (speed * t_lat) - md.orientationRate.z[0] / speed
            got = md.action.desiredCurvature
            nonzero += got != 0.0
            err = abs(got - want) / max(abs(want), 1e-4)
            worst = max(worst, err)
        print(f"largest relative difference of desiredCurvature: {worst:.2e}")
        check(nonzero == len(models), f"desiredCurvature non-zero in {nonzero}/{len(models)}")
        check(worst < 1e-4, "desiredCurvature equals the plan, v-ego and delay computation")
        mds = [m.modelV2 for m in models]
        worst = worst_accel(mds, lambda md: long_delays[0])
        print(f"largest relative difference of desiredAcceleration: {worst:.2e}")
        check(all(md.action.desiredAcceleration != 0.0 for md in mds),
              "desiredAcceleration non-zero in every frame")
        check(worst < 1e-4, "desiredAcceleration equals the plan and logged-delay computation")
        # The delay matters: with the command line's 0 the accelerations would differ.
        check(worst_accel(mds, lambda md: 0.0) > 1e-2,
              "desiredAcceleration differs from the one with a longitudinal delay of 0")

        # ---- A route of two segments with logs: segment 1's log has its own delay and speed.
        route_py = os.path.join(os.path.dirname(os.path.abspath(rlog_py)), "route.py")
        routes = os.path.join(work, "routes")
        subprocess.run([sys.executable, route_py, "--out", routes, "--name", "r", "--from", drive,
                        "--gops", "0,1"], check=True, stdout=subprocess.DEVNULL)
        seg1_log = os.path.join(routes, "r--1", "rlog.zst")
        seg1 = []
        for e in read_events(log, seg1_log):
            b = e.as_builder()
            if b.which() == "liveDelay":
                b.liveDelay.lateralDelay = SEGMENT1_DELAY
            elif b.which() == "carState":
                b.carState.vEgo = b.carState.vEgo + SEGMENT1_EXTRA_SPEED
            elif b.which() == "carParams":
                b.carParams.longitudinalActuatorDelay = SEGMENT1_LONG_DELAY
            seg1.append(b.to_bytes())
        subprocess.run(["zstd", "-q", "-f", "-o", seg1_log], input=b"".join(seg1), check=True)
        out2 = os.path.join(work, "out2")
        proc = run_tool([opreplay, os.path.join(routes, "r"), "--vision", vision, "--policy",
                         policy, "--out", out2, "--no-video", "--single-camera"], env,
                        "two segments: opreplay")
        for what in ("v-ego", "lat-delay", "long-delay"):
            check(re.search(rf"^\s*{what}\s+from the logs of segments 0, 1 ", proc.stdout, re.M)
                  is not None, f"the summary says {what} comes from both segments' logs")
        check(re.search(r"^\s*frame ids\s+from the camera states in the logs of segments 0, 1$",
                        proc.stdout, re.M) is not None,
              "the summary says the frame ids come from both segments' logs")
        # Each frame's speed and delay: the last ones logged before its roadCameraState, in the
        # route's order (segment 0's log, then segment 1's).
        state_of_frame, v, delay, seg1_ids = {}, None, None, set()
        long_of_frame, long_delay = {}, None
        for n in (0, 1):
            for e in read_events(log, os.path.join(routes, f"r--{n}", "rlog.zst")):
                w = e.which()
                if w == "carState":
                    v = e.carState.vEgo
                elif w == "liveDelay":
                    delay = e.liveDelay.lateralDelay
                elif w == "carParams":
                    long_delay = e.carParams.longitudinalActuatorDelay
                elif w == "roadCameraState":
                    state_of_frame[e.roadCameraState.frameId] = (v, delay)
                    long_of_frame[e.roadCameraState.frameId] = long_delay
                    if n == 1:
                        seg1_ids.add(e.roadCameraState.frameId)
        models = [e.modelV2 for e in read_events(log, os.path.join(out2, "rlog.zst"))
                  if e.which() == "modelV2"]
        ids = [m.frameId for m in models]
        check(len(models) > 60 and ids == sorted(state_of_frame)[:len(ids)],
              f"frame ids of both segments' camera states, in order ({len(ids)} frames)")
        worst, in_seg1, new_delay = 0.0, 0, 0
        for md in models:
            fv, fd = state_of_frame[md.frameId]
            in_seg1 += md.frameId in seg1_ids
            new_delay += fd == SEGMENT1_DELAY
            t_lat = fd + 0.05 + 0.025
            speed = max(fv, 1.0)
            psi = interp(t_lat, t_idxs, list(md.orientation.z))
            want = 2.0 * psi / (speed * t_lat) - md.orientationRate.z[0] / speed
            worst = max(worst, abs(md.action.desiredCurvature - want) / max(abs(want), 1e-4))
        print(f"two segments: largest relative difference of desiredCurvature: {worst:.2e}, "
              f"{in_seg1} frames of segment 1, {new_delay} with its delay")
        check(in_seg1 > 30 and new_delay > 30,
              "segment 1's frames are replayed and most see its log's delay")
        check(worst < 1e-4, "desiredCurvature of every frame follows its own segment's log "
              "(speed and delay)")
        seg1_long = sum(abs(long_of_frame[md.frameId] - SEGMENT1_LONG_DELAY) < 1e-6
                        for md in models if md.frameId in seg1_ids)
        worst = worst_accel(models, lambda md: long_of_frame[md.frameId])
        print(f"two segments: largest relative difference of desiredAcceleration: {worst:.2e}, "
              f"{seg1_long} frames of segment 1 with its longitudinal delay")
        check(seg1_long == in_seg1, "segment 1's log has its own carParams")
        check(worst < 1e-4, "desiredAcceleration of every frame follows its own segment's "
              "carParams")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
