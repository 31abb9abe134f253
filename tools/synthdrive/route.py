#!/usr/bin/env python3
"""Writes synthetic drives as openpilot routes: segment folders NAME--0, NAME--1, ... each holding
fcamera.hevc, ecamera.hevc, the segment's rlog.zst and groundtruth.json (frame ids and times
continue across the route, so a route's ground truth is its segments' records in order, and its
log is its segments' logs in order).

  # render a route: three 60-second segments of one continuous drive (render.py per segment)
  .venv/bin/python3 tools/synthdrive/route.py --out routes --name 2026-11-30--12-00-00 \\
      --segments 3 --segment-seconds 60
  # cut an already rendered drive at its key frames (every 40 frames): segments of GOPs 0 and 1
  .venv/bin/python3 tools/synthdrive/route.py --out routes --name r0 --from samples/drive --gops 0,1

Cutting needs no rendering, so tests make many short routes from the sample drive in seconds. A
cut segment starts with the drive's parameter sets and key frame, as openpilot's segments do, and
gets the part of the drive's rlog.zst (rlog.py's layout) that logs its frames: camera states,
carState, liveCalibration, liveDelay and the car's parameters, renumbered like its ground truth (needs pycapnp and zstd).
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FPS = 20
GOP = 40  # render.py's fixed GOP (x265 --keyint 40 --no-scenecut)


def gop_starts(data):
    """Byte offsets of the start codes of the VPS NAL units: where each GOP begins (x265 repeats
    the parameter sets before every key frame)."""
    starts, i = [], 0
    while True:
        i = data.find(b"\x00\x00\x01", i)
        if i < 0 or i + 3 >= len(data):
            return starts
        if (data[i + 3] >> 1) & 0x3F == 32:
            starts.append(i - 1 if i > 0 and data[i - 1] == 0 else i)
        i += 3


def pictures(data):
    """Pictures in an HEVC byte stream: slices whose first_slice_segment_in_pic_flag is set."""
    n, i = 0, 0
    while True:
        i = data.find(b"\x00\x00\x01", i)
        if i < 0 or i + 5 >= len(data):
            return n
        if (data[i + 3] >> 1) & 0x3F < 32 and data[i + 5] & 0x80:
            n += 1
        i += 3


def write_truth(path, drive, records, first):
    """The segment's ground truth: the drive's header and `records` renumbered so that frame ids
    and times continue the route's (frame `first` is the segment's first)."""
    out = []
    for k, rec in enumerate(records):
        rec = dict(rec)
        fid = first + k
        rec["frame_id"] = fid
        rec["t"] = fid / FPS
        rec["timestamp_sof_ns"] = int(round(fid * 1e9 / FPS))
        rec["timestamp_eof_ns"] = rec["timestamp_sof_ns"] + 20000000
        out.append(rec)
    drive = dict(drive, frame_count=len(out), seconds=len(out) / FPS)
    with open(path, "w") as f:
        f.write('{"drive": ' + json.dumps(drive, sort_keys=True) + ',\n"frames": [\n')
        f.write(",\n".join(json.dumps(r, sort_keys=True) for r in out))
        f.write("\n]}\n")


def read_rlog(path):
    """The events of a drive's rlog.zst (rlog.py's) and the schema."""
    import rlog  # noqa: PLC0415 (pycapnp only when a log is cut)
    log = rlog.load_schema()
    raw = subprocess.run(["zstd", "-d", "-c", path], stdout=subprocess.PIPE, check=True).stdout
    return log, list(log.Event.read_multiple_bytes(raw))


def write_log_part(path, events, cursor, count, first):
    """Writes the events of the drive's frames cursor .. cursor+count-1 to `path` as the log of
    route frames first .. first+count-1: an event belongs to the frame whose period its
    logMonoTime falls in (rlog.py logs each frame's messages within its 50 ms); times and camera
    frame ids move by as many frames as the frame's number does, like the ground truth's."""
    import rlog  # noqa: PLC0415
    period = 1_000_000_000 // FPS
    out = []
    for e in events:
        frame = (e.logMonoTime - rlog.START_NS) // period
        if not cursor <= frame < cursor + count:
            continue
        shift = (first - cursor) * period
        b = e.as_builder()
        b.logMonoTime = e.logMonoTime + shift
        which = b.which()
        if which in ("roadCameraState", "wideRoadCameraState"):
            cam = getattr(b, which)
            cam.frameId = cam.frameId + first - cursor
            cam.timestampSof = cam.timestampSof + shift
            cam.timestampEof = cam.timestampEof + shift
        out.append(b.to_bytes())
    # openpilot logs the car's parameters in every segment (its car process publishes them every
    # 50 s): a part without them starts with the drive's last ones before it.
    before = [e for e in events if e.which() == "carParams"
              and (e.logMonoTime - rlog.START_NS) // period < cursor]
    if before and not any(e.which() == "carParams" for e in events
                          if cursor <= (e.logMonoTime - rlog.START_NS) // period < cursor + count):
        b = before[-1].as_builder()
        b.logMonoTime = rlog.START_NS + first * period + 1
        out.insert(0, b.to_bytes())
    subprocess.run(["zstd", "-q", "-f", "-10", "-o", path], input=b"".join(out), check=True)


def from_drive(a):
    gops = [int(g) for g in a.gops.split(",")]
    streams = {}
    for stem in ("fcamera", "ecamera"):
        path = os.path.join(a.source, stem + ".hevc")
        if not os.path.exists(path):
            continue
        data = open(path, "rb").read()
        starts = gop_starts(data) + [len(data)]
        if len(starts) < 2:
            sys.exit(f"route.py: {path} holds no parameter sets to cut at")
        streams[stem] = (data, starts)
    if "fcamera" not in streams:
        sys.exit(f"route.py: {a.source} has no fcamera.hevc")
    truth = json.load(open(os.path.join(a.source, "groundtruth.json")))
    log_path = os.path.join(a.source, "rlog.zst")
    events = read_rlog(log_path)[1] if os.path.exists(log_path) else None
    ngops = len(streams["fcamera"][1]) - 1
    first = cursor = 0
    for n, g in enumerate(gops):
        if not 0 <= g < ngops:
            sys.exit(f"route.py: GOP {g} is not in {a.source} (it has {ngops})")
        seg = os.path.join(a.out, f"{a.name}--{n}")
        os.makedirs(seg, exist_ok=True)
        for stem, (data, starts) in streams.items():
            with open(os.path.join(seg, stem + ".hevc"), "wb") as f:
                f.write(data[starts[g]:starts[g + 1]])
        # The sample's GOPs are open: the last pictures before a key frame are stored after it,
        # so a GOP's bytes hold a few pictures shown before its key frame. The segment gets as
        # many records as it holds pictures: exact for consecutive GOPs, which decode in
        # display order; after a jump, from the key frame on.
        data, starts = streams["fcamera"]
        count = pictures(data[starts[g]:starts[g + 1]])
        cursor = cursor if n and g == gops[n - 1] + 1 else g * GOP
        write_truth(os.path.join(seg, "groundtruth.json"), truth["drive"],
                    truth["frames"][cursor:cursor + count], first)
        if events is not None:
            write_log_part(os.path.join(seg, "rlog.zst"), events, cursor, count, first)
        cursor += count
        first += count
        print(f"route.py: {seg}: GOP {g} of {a.source}")


def render(a):
    for n in range(a.segments):
        seg = os.path.join(a.out, f"{a.name}--{n}")
        start = a.start + n * a.segment_seconds
        cmd = [sys.executable, os.path.join(HERE, "render.py"), "--out", seg,
               "--seconds", str(a.segment_seconds), "--start", str(start), "--crf", str(a.crf)]
        print("route.py:", " ".join(cmd), flush=True)
        if subprocess.run(cmd).returncode != 0:
            sys.exit(f"route.py: rendering segment {n} failed")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder that gets the segment folders")
    ap.add_argument("--name", required=True, help="the route's name (folders NAME--<n>)")
    ap.add_argument("--segments", type=int, default=2, help="segments to render")
    ap.add_argument("--segment-seconds", type=float, default=60.0)
    ap.add_argument("--start", type=float, default=0.0, help="drive time of the route's start (s)")
    ap.add_argument("--crf", type=float, default=30.0)
    ap.add_argument("--from", dest="source", help="cut this rendered drive instead of rendering")
    ap.add_argument("--gops", default="0,1", help="with --from: the drive's GOPs, one per segment")
    a = ap.parse_args()
    if "--" in a.name and a.name.rsplit("--", 1)[1].isdigit():
        sys.exit(f"route.py: the name {a.name!r} ends like a segment number")
    if a.source:
        from_drive(a)
    else:
        if a.segments < 1 or a.segment_seconds <= 0:
            sys.exit("route.py: --segments and --segment-seconds must be positive")
        render(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
