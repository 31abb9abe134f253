#!/usr/bin/env python3
"""opreplay on the sample drive with the log tools/synthdrive/rlog.py writes for it (camera
states, carState.vEgo, liveDelay, liveCalibration): the replay takes frame ids, the car's speed,
the steering delay and the calibration from the log, and every modelV2's desiredCurvature is
non-zero and equal to the curvature computed here from the message's own plan, the speed the
log gives for that frame and the logged delay:

  t_lat = lateralDelay + 0.05 + 0.025,  v = max(vEgo, 1),
  kappa = 2 psi(t_lat) / (v t_lat) - psi_rate(0) / v,
  psi = orientation.z interpolated on T_IDXS = 10 (i/32)^2, psi_rate = orientationRate.z.

  check_replay_car_state.py OPREPLAY RLOG_PY SCHEMA DRIVE_DIR VISION POLICY
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

FRAMES = 40
LATERAL_DELAY = 0.3  # not the command line's (0), so the log's value must have been used

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def read_log(log, path):
    raw = subprocess.run(["zstd", "-d", "-c", path], stdout=subprocess.PIPE, check=True).stdout
    return list(log.Event.read_multiple_bytes(raw))


def interp(x, xs, ys):
    if x <= xs[0]:
        return ys[0]
    for i in range(1, len(xs)):
        if x <= xs[i]:
            f = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
            return ys[i - 1] + f * (ys[i] - ys[i - 1])
    return ys[-1]


def main():
    if len(sys.argv) != 7:
        print(__doc__)
        return 2
    opreplay, rlog_py, schema, drive, vision, policy = sys.argv[1:]
    if shutil.which("zstd") is None:
        print("zstd not installed: skipped")
        return 77
    import capnp
    capnp.remove_import_hook()
    log = capnp.load(schema, imports=["/usr/include", "/usr/local/include"])

    env = dict(os.environ)
    env.pop("GST_PLUGIN_SYSTEM_PATH_1_0", None)  # the decoder comes from the system
    reg_dir = os.path.join(os.environ.get("OP_BUILD_ROOT", tempfile.gettempdir()), "tests", "examples")
    os.makedirs(reg_dir, exist_ok=True)
    env["GST_REGISTRY_1_0"] = os.path.join(reg_dir, "registry-system.bin")

    work = tempfile.mkdtemp(prefix="opreplay-car-")
    try:
        route, out = os.path.join(work, "route"), os.path.join(work, "out")
        os.makedirs(route)
        for name in ("fcamera.hevc", "ecamera.hevc"):
            os.symlink(os.path.join(drive, name), os.path.join(route, name))
        subprocess.run([sys.executable, rlog_py, "--seconds", "10", "--out", route,
                        "--lateral-delay", str(LATERAL_DELAY)], check=True)
        proc = subprocess.run([opreplay, route, "--vision", vision, "--policy", policy,
                               "--out", out, "--max-frames", str(FRAMES), "--no-video",
                               "--rpy", "0,0,0"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        print(proc.stdout)
        sys.stderr.write(proc.stderr[-3000:])
        check(proc.returncode == 0, f"opreplay exit status {proc.returncode}")
        check(re.search(r"^\s*v-ego\s+from the log", proc.stdout, re.M) is not None,
              "the summary says v-ego comes from the log")
        check(re.search(r"^\s*lat-delay\s+from the log", proc.stdout, re.M) is not None,
              "the summary says lat-delay comes from the log")
        check(re.search(r"^\s*frame ids\s+from the log", proc.stdout, re.M) is not None,
              "the summary says the frame ids come from the log")
        check(re.search(r"^\s*calibration\s+1 value\(s\), from the log", proc.stdout, re.M)
              is not None and "rpy = 0.012" in proc.stdout,
              "the calibration comes from the log, not --rpy")

        inp = read_log(log, os.path.join(route, "rlog.zst"))
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

        outp = read_log(log, os.path.join(out, "rlog.zst"))
        models = [e for e in outp if e.which() == "modelV2"]
        check(len(models) == FRAMES, f"{len(models)} modelV2 messages for {FRAMES} frames")
        check([m.modelV2.frameId for m in models] == list(range(FRAMES)),
              "frame ids 0.. from the log's camera states, none skipped")
        check(all(m.valid for m in models), "every modelV2 valid (calibration from the log)")
        t_idxs = [10.0 * (i / 32.0) ** 2 for i in range(33)]
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
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
