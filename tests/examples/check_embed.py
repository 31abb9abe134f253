#!/usr/bin/env python3
"""Runs the embedding example (docs/examples/embed.c) on a drive and checks what it printed:
one "frame <id> desiredCurvature <value>" line per frame opvision evaluated (its closing line
"evaluated N frames, M skipped"), every value finite, frame ids increasing, at least one frame.

  check_embed.py EMBED DRIVE_DIR VISION_MODEL POLICY_MODEL [MAX_FRAMES]
"""

import math
import os
import re
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    embed, drive, vision, policy = sys.argv[1:5]
    max_frames = sys.argv[5] if len(sys.argv) > 5 else "0"
    # The example needs the system's decoder next to our plugin, with a registry of its own next
    # to the build's.
    env = dict(os.environ)
    reg_dir = os.environ.get("OP_BUILD_ROOT", tempfile.gettempdir())
    env["GST_REGISTRY_1_0"] = os.path.join(reg_dir, "tests", "examples", "registry-system.bin")
    os.makedirs(os.path.dirname(env["GST_REGISTRY_1_0"]), exist_ok=True)

    # The sample's calibration (samples/drive/README.md).
    rpy = "0.012,0.021,-0.016"
    proc = subprocess.run([embed, drive, vision, policy, rpy, max_frames], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(proc.stderr[-4000:])
    if proc.returncode != 0:
        print(f"FAIL: embed exited with {proc.returncode}")
        print(proc.stdout[-2000:])
        return 1

    lines = proc.stdout.splitlines()
    frame_re = re.compile(r"^frame (\d+) desiredCurvature (\S+)$")
    summary_re = re.compile(r"^evaluated (\d+) frames, (\d+) skipped$")
    frames, values, evaluated, failures = [], [], None, []
    for line in lines:
        m = frame_re.match(line)
        if m:
            frames.append(int(m.group(1)))
            values.append(float(m.group(2)))
            continue
        m = summary_re.match(line)
        if m:
            evaluated = int(m.group(1))
            continue
        failures.append(f"unexpected line: {line!r}")
    if evaluated is None:
        failures.append("no closing 'evaluated N frames' line")
    elif len(frames) != evaluated:
        failures.append(f"{len(frames)} curvature lines for {evaluated} evaluated frames")
    if not frames:
        failures.append("no frame was printed")
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        failures.append(f"{len(bad)} non-finite curvatures, e.g. {bad[0]}")
    if any(b <= a for a, b in zip(frames, frames[1:])):
        failures.append("frame ids do not increase")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"ok: {len(frames)} frames, curvature {min(values):.6g} .. {max(values):.6g}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
