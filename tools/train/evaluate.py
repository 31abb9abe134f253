#!/usr/bin/env python3
"""The model-accuracy table of a replay: reads the replay's rlog and the drive's ground truth and
prints lane-line, road-edge, lead and plan errors, probability accuracies and std coverage, each
target marked met or MISSED (the table and the targets live in tools/opfleet/opfleet.py, which
also uses them for fleet replays).

  .venv/bin/python3 tools/train/evaluate.py --drive samples/drive --rlog OUT/rlog
  .venv/bin/python3 tools/train/evaluate.py --drive samples/drive --replay OUT \\
      --vision V.onnx --policy P.onnx [--max-frames N]     # runs opreplay first

The true future path (for the plan rows) is computed from the drive's scene, as the training
labels are (tools/train/dataset.py).
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "opfleet"))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import dataset  # noqa: E402
import opfleet  # noqa: E402


def find_rlog(out):
    for name in ("rlog", "rlog.zst"):
        if os.path.isfile(os.path.join(out, name)):
            return os.path.join(out, name)
    raise SystemExit(f"evaluate: no rlog in {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--drive", required=True, help="the drive folder with groundtruth.json")
    ap.add_argument("--rlog", help="a replay's rlog (or rlog.zst)")
    ap.add_argument("--replay", metavar="OUT", help="run opreplay into OUT first")
    ap.add_argument("--vision")
    ap.add_argument("--policy")
    ap.add_argument("--max-frames", type=int)
    ap.add_argument("--opreplay", default=os.path.join(ROOT, "build", "tools", "opreplay", "opreplay"))
    ap.add_argument("--json", help="also write the table as JSON here")
    a = ap.parse_args()
    if bool(a.rlog) == bool(a.replay):
        ap.error("give --rlog or --replay")
    try:
        with open(os.path.join(a.drive, "groundtruth.json")) as f:
            gt = json.load(f)
        gt["drive"]["x_idxs_m"], gt["frames"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"evaluate: {a.drive}/groundtruth.json: not a synthdrive ground truth ({e})")
    if a.replay:
        if not (a.vision and a.policy):
            ap.error("--replay needs --vision and --policy")
        rpy = ",".join(repr(float(v)) for v in gt["drive"]["calibration_rpy"])
        cmd = [a.opreplay, "--out", a.replay, "--vision", a.vision, "--policy", a.policy,
               "--rpy", rpy, "--no-video", a.drive]
        if a.max_frames:
            cmd[1:1] = ["--max-frames", str(a.max_frames)]
        os.makedirs(a.replay, exist_ok=True)
        r = subprocess.run(cmd, capture_output=True, text=True, env=dataset.plugin_env(a.replay))
        if r.returncode != 0:
            raise SystemExit(f"evaluate: opreplay exited {r.returncode}: {r.stderr.strip()}")
        rlog = find_rlog(a.replay)
    else:
        rlog = a.rlog
        if not os.path.isfile(rlog):
            raise SystemExit(f"evaluate: {rlog}: no such file")
    truth = {rec["frame_id"]: rec for rec in gt["frames"]}
    dataset.scene_for(gt["drive"])
    lab = dataset.labels_for(gt, gt["frames"][-1]["t"])
    plan = {rec["frame_id"]: (lab["plan"][k, :, 0].tolist(), lab["plan"][k, :, 1].tolist())
            for k, rec in enumerate(gt["frames"])}
    table = opfleet.model_accuracy(rlog, truth, gt["drive"]["x_idxs_m"], plan)
    print(opfleet.model_accuracy_markdown(f"Accuracy on {os.path.basename(os.path.abspath(a.drive))}",
                                          table), end="")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(table, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
