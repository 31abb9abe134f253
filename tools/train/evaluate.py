#!/usr/bin/env python3
"""The model-accuracy table of a replay: reads the replay's rlog and the drive's ground truth and
prints lane-line, road-edge, lead and plan errors, probability accuracies and std coverage, each
target marked met or MISSED (the table and the targets live in tools/opfleet/opfleet.py, which
also uses them for fleet replays).

  .venv/bin/python3 tools/train/evaluate.py --drive samples/drive --rlog OUT/rlog
  .venv/bin/python3 tools/train/evaluate.py --drive samples/drive --replay OUT \\
      --vision V.onnx --policy P.onnx [--max-frames N]     # runs opreplay first
      [--precision fp32|fp16|int8]                          # opreplay's --precision

With --replay and --onnxruntime, the same networks also run in onnxruntime on the same frames
(opwarp's tensors of the drive, the pipeline's queues, the contract's parse) and both tables are
printed side by side. The true future path (for the plan rows) is computed from the drive's
scene, as the training labels are (tools/train/dataset.py).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from types import SimpleNamespace as NS

import numpy as np

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


X_IDXS = dataset.scene.X_IDXS  # the distances the labels (and the model's lines) are given at


def safe_exp(x):
    return np.exp(np.minimum(x, 11.0))


def sigmoid(x):
    return 1.0 / (1.0 + safe_exp(-x))


def gaussian(raw, n):
    return raw[:n], safe_exp(raw[n:2 * n])


def multi_hypothesis(raw, hyp, n, sel):
    """The contract's pick: per selection column, the most probable hypothesis whole (ties to the
    later one)."""
    rows = raw.reshape(hyp, 2 * n + sel)
    means, stds = [], []
    for c in range(sel):
        logits = rows[:, 2 * n + c]
        best = max(range(hyp), key=lambda h: (logits[h], h))
        means.append(rows[best, :n])
        stds.append(safe_exp(rows[best, n:2 * n]))
    return np.concatenate(means), np.concatenate(stds)


def drive_tensors(drive):
    """opwarp's (img, big_img) tensors of every frame of the drive, as the training data has them."""
    with tempfile.TemporaryDirectory() as tmp:
        dataset.build_drive(drive, tmp)
        return np.load(os.path.join(tmp, "img.npy")), np.load(os.path.join(tmp, "big_img.npy"))


def onnxruntime_messages(drive, vision, policy, frame_ids, tensors=None):
    """modelV2-like records from onnxruntime on opwarp's tensors of the drive (tensors: those of
    drive_tensors(drive), when the caller already has them)."""
    import onnx
    import onnxruntime as ort
    sys.path.insert(0, os.path.join(ROOT, "models"))
    from onnx_util import decode_slices

    def slices(path):
        return decode_slices({p.key: p.value for p in onnx.load(path).metadata_props}["output_slices"])
    vs, ps = slices(vision), slices(policy)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sv = ort.InferenceSession(vision, opts, providers=["CPUExecutionProvider"])
    sp = ort.InferenceSession(policy, opts, providers=["CPUExecutionProvider"])
    img, big = tensors if tensors is not None else drive_tensors(drive)
    queue = np.zeros((100, 512), np.float32)
    out = []
    for k in range(len(img)):
        v = sv.run(None, {"img": img[k:k + 1], "big_img": big[k:k + 1]})[0][0]
        queue[:-1] = queue[1:]
        queue[-1] = v[vs["hidden_state"]]
        p = sp.run(None, {"features_buffer": queue[-97::4][None],
                          "desire_pulse": np.zeros((1, 25, 8), np.float32),
                          "traffic_convention": np.array([[1.0, 0.0]], np.float32)})[0][0]
        out.append(to_message(v, p, vs, ps, frame_ids[k]))
    return out


def to_message(v, p, vs, ps, frame_id):
    """A modelV2-like record (what model_accuracy_of reads) from one frame's vision and policy
    output rows, parsed as the contract parses them; vs, ps: output name -> slice."""
    plan_raw = p[ps["plan"]]
    if plan_raw.size == 4955:
        plan, plan_std = multi_hypothesis(plan_raw, 5, 495, 1)
    else:
        plan, plan_std = gaussian(plan_raw, 495)
    plan, plan_std = plan.reshape(33, 15), plan_std.reshape(33, 15)
    ll, ll_std = gaussian(v[vs["lane_lines"]], 264)
    ll, ll_std = ll.reshape(4, 33, 2), ll_std.reshape(4, 33, 2)
    re, _ = gaussian(v[vs["road_edges"]], 132)
    re = re.reshape(2, 33, 2)
    lead_raw = v[vs["lead"]]
    if lead_raw.size == 102:
        lead, lead_std = multi_hypothesis(lead_raw, 2, 24, 3)
    else:
        lead, lead_std = gaussian(lead_raw, 72)
    lead, lead_std = lead.reshape(3, 6, 4), lead_std.reshape(3, 6, 4)
    lead_prob = sigmoid(v[vs["lead_prob"]])
    return NS(
        frameId=frame_id,
        laneLines=[NS(x=X_IDXS, y=ll[i, :, 0].tolist()) for i in range(4)],
        laneLineProbs=sigmoid(v[vs["lane_lines_prob"]])[1::2].tolist(),
        laneLineStds=[float(ll_std[i, 0, 0]) for i in range(4)],
        roadEdges=[NS(x=X_IDXS, y=re[i, :, 0].tolist()) for i in range(2)],
        leadsV3=[NS(prob=float(lead_prob[i]), x=lead[i, :, 0].tolist(),
                    xStd=lead_std[i, :, 0].tolist(), v=lead[i, :, 2].tolist()) for i in range(3)],
        position=NS(x=plan[:, 0].tolist(), y=plan[:, 1].tolist(), yStd=plan_std[:, 1].tolist()))


def truth_of(gt):
    """The frame records by frame id, and the true future path (x, y at T_IDXS) by frame id, of
    a drive's ground truth (groundtruth.json's content)."""
    truth = {rec["frame_id"]: rec for rec in gt["frames"]}
    dataset.scene_for(gt["drive"])
    lab = dataset.labels_for(gt, gt["frames"][-1]["t"])
    plan = {rec["frame_id"]: (lab["plan"][k, :, 0].tolist(), lab["plan"][k, :, 1].tolist())
            for k, rec in enumerate(gt["frames"])}
    return truth, plan


def side_by_side(title, ours, theirs):
    """Two Markdown tables (same rows) merged: quantity | ours | onnxruntime."""
    a, b = ours.splitlines(), theirs.splitlines()
    lines = [f"# {title}: our runtime (opreplay) | onnxruntime", ""]
    for la, lb in zip(a, b):
        if la.startswith("| quantity"):
            lines.append("| quantity | ours: median | p90 | onnxruntime: median | p90 | target (ours) |")
            lines.append("|---|---|---|---|---|---|")
        elif la.startswith("|---"):
            continue
        elif la.startswith("| "):
            ca, cb = la.strip("|").split("|"), lb.strip("|").split("|")
            lines.append(f"|{ca[0]}|{ca[1]}|{ca[2]}|{cb[1]}|{cb[2]}|{ca[3]}|")
        elif not la.startswith("#") and (la or lines[-1]):
            lines.append(la)
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--drive", required=True, help="the drive folder with groundtruth.json")
    ap.add_argument("--rlog", help="a replay's rlog (or rlog.zst)")
    ap.add_argument("--replay", metavar="OUT", help="run opreplay into OUT first")
    ap.add_argument("--vision")
    ap.add_argument("--policy")
    ap.add_argument("--max-frames", type=int)
    ap.add_argument("--precision", choices=("auto", "fp32", "fp16", "int8"),
                    help="with --replay: opreplay's --precision (default: opreplay's auto)")
    ap.add_argument("--opreplay", default=os.path.join(ROOT, "build", "tools", "opreplay", "opreplay"))
    ap.add_argument("--json", help="also write the table as JSON here")
    ap.add_argument("--onnxruntime", action="store_true",
                    help="with --replay: the same networks in onnxruntime on the same frames, "
                         "side by side")
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
        if a.precision:
            cmd[1:1] = ["--precision", a.precision]
        os.makedirs(a.replay, exist_ok=True)
        r = subprocess.run(cmd, capture_output=True, text=True, env=dataset.plugin_env(a.replay))
        if r.returncode != 0:
            raise SystemExit(f"evaluate: opreplay exited {r.returncode}: {r.stderr.strip()}")
        rlog = find_rlog(a.replay)
    else:
        rlog = a.rlog
        if not os.path.isfile(rlog):
            raise SystemExit(f"evaluate: {rlog}: no such file")
    truth, plan = truth_of(gt)
    title = f"Accuracy on {os.path.basename(os.path.abspath(a.drive))}"
    table = opfleet.model_accuracy(rlog, truth, gt["drive"]["x_idxs_m"], plan)
    ours = opfleet.model_accuracy_markdown(title, table)
    result = {"ours": table}
    if a.onnxruntime:
        if not a.replay:
            ap.error("--onnxruntime needs --replay (and its models)")
        msgs = onnxruntime_messages(a.drive, a.vision, a.policy,
                                    [rec["frame_id"] for rec in gt["frames"]][:a.max_frames])
        result["onnxruntime"] = opfleet.model_accuracy_of(msgs, truth, gt["drive"]["x_idxs_m"], plan)
        print(side_by_side(title, ours,
                           opfleet.model_accuracy_markdown(title, result["onnxruntime"])), end="")
    else:
        print(ours, end="")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
