#!/usr/bin/env python3
"""Writes the log (rlog.zst) of a synthetic drive, as openpilot logs a route: per camera frame a
roadCameraState and a wideRoadCameraState (frame id, start/end-of-frame times) and a carState
(vEgo), and at 4 Hz liveCalibration (rpyCalib, height) and liveDelay (lateralDelay), after one
carParams (longitudinalActuatorDelay) at the start of each log, all in the schema of
schemas/log.capnp. A replay of the drive then takes the camera frame ids, the car's speed, the
steering and longitudinal delays and the calibration from the log.

  .venv/bin/python3 tools/synthdrive/rlog.py --seconds 10 --out samples/drive

render.py calls write_rlog() for the drives it renders. Needs pycapnp and the zstd tool; the
output is deterministic.
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scene  # noqa: E402

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schemas",
                      "log.capnp")
CALIB_RPY = (0.012, 0.021, -0.016)  # render.py's camera mounting error
LATERAL_DELAY = 0.2  # s, the steering delay the log reports
LONG_DELAY = 0.25  # s, the car's longitudinal actuator delay (carParams)
START_NS = 1_000_000_000  # logMonoTime of the first frame's start
EXPOSURE_NS = 20_000_000  # start to end of a frame
WIDE_OFFSET_NS = 1_000_000  # the wide camera starts its frames 1 ms after the road camera


def load_schema():
    import capnp  # noqa: PLC0415 (only this module needs it)
    capnp.remove_import_hook()
    # "/capnp/c++.capnp" resolves under the system include folder (libcapnp-dev).
    return capnp.load(os.path.abspath(SCHEMA), imports=["/usr/include", "/usr/local/include"])


def events(log, frames, calib_rpy=CALIB_RPY, lateral_delay=LATERAL_DELAY, first=0,
           long_delay=LONG_DELAY):
    """The drive's Events in logMonoTime order (a list of (logMonoTime, builder)): frames `first`
    .. first + frames - 1 of the drive (render.py --start), so that a route's segments continue
    each other's frame ids and times."""
    out = []
    period = 1_000_000_000 // scene.FPS
    # The car's parameters open every segment's log, as openpilot's car process publishes them
    # when it starts and then every 50 s.
    e = log.Event.new_message(logMonoTime=START_NS + first * period + 1)
    e.init("carParams").longitudinalActuatorDelay = long_delay
    out.append(e)
    for i in range(first, first + frames):
        t = i / scene.FPS
        sof = START_NS + i * period
        for name, offset in (("roadCameraState", 0), ("wideRoadCameraState", WIDE_OFFSET_NS)):
            e = log.Event.new_message(logMonoTime=sof + offset + EXPOSURE_NS)
            cam = e.init(name)
            cam.frameId = i
            cam.timestampSof = sof + offset
            cam.timestampEof = sof + offset + EXPOSURE_NS
            out.append(e)
        # Logged just before the frame's camera state: the frame's speed is the latest one.
        e = log.Event.new_message(logMonoTime=sof + EXPOSURE_NS - 1)
        e.init("carState").vEgo = scene.ego_speed(t)
        out.append(e)
        if (i - first) % (scene.FPS // 4) == 0:  # 4 Hz, the first one with the first frame
            e = log.Event.new_message(logMonoTime=sof + 2)
            cal = e.init("liveCalibration")
            cal.rpyCalib = list(calib_rpy)
            cal.height = [scene.CAMERA_HEIGHT]
            cal.calStatus = "calibrated"
            cal.validBlocks = 20
            out.append(e)
            e = log.Event.new_message(logMonoTime=sof + 3)
            d = e.init("liveDelay")
            d.lateralDelay = lateral_delay
            d.status = "estimated"
            out.append(e)
    out.sort(key=lambda e: e.logMonoTime)
    return out


def write_rlog(path, frames, calib_rpy=CALIB_RPY, lateral_delay=LATERAL_DELAY, first=0,
               long_delay=LONG_DELAY):
    """Writes `frames` frames' worth of log, from frame `first` on, to `path` (zstd, level 10,
    like openpilot's)."""
    log = load_schema()
    raw = b"".join(e.to_bytes()
                   for e in events(log, frames, calib_rpy, lateral_delay, first, long_delay))
    subprocess.run(["zstd", "-q", "-f", "-10", "-o", path], input=raw, check=True)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--out", required=True, help="the drive's folder (rlog.zst goes there)")
    ap.add_argument("--lateral-delay", type=float, default=LATERAL_DELAY)
    ap.add_argument("--long-delay", type=float, default=LONG_DELAY,
                    help="carParams.longitudinalActuatorDelay (s)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    frames = int(round(a.seconds * scene.FPS))
    path = write_rlog(os.path.join(a.out, "rlog.zst"), frames, lateral_delay=a.lateral_delay,
                      long_delay=a.long_delay)
    print(f"synthdrive: wrote the log of {frames} frames to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
