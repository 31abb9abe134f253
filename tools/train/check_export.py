#!/usr/bin/env python3
"""Runs exported vision and policy models on real training inputs with our runtime
(`opc run`, once on the reference interpreter and once on the OpenCL device in fp32) and with
onnxruntime, and prints how far apart they are. Exit 1 when any output misses
|ours − onnxruntime| ≤ 1e-3·|onnxruntime| + 1e-3·max|onnxruntime| (the pipeline tests' bound).

  .venv/bin/python3 tools/train/check_export.py MODELS_DIR DATA_DIR [--opc build/tools/opc/opc]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "models"))
from onnx_util import decode_slices  # noqa: E402


def opc_run(opc, model, feeds, tmp, extra):
    args = [opc, "run", model, "--output-dir", os.path.join(tmp, "out")]
    for name, arr in feeds.items():
        path = os.path.join(tmp, name + ".npy")
        np.save(path, arr)
        args += ["--input", f"{name}={path}"]
    r = subprocess.run(args + extra, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"check_export: opc failed on {model}: {r.stderr.strip()}")
    return np.load(os.path.join(tmp, "out", "outputs.npy"))


def compare(label, got, ref):
    scale = float(np.abs(ref).max())
    bound = 1e-3 * np.abs(ref) + 1e-3 * scale
    worst = float((np.abs(got - ref) / (np.abs(ref) + scale)).max())
    ok = bool(np.all(np.abs(got - ref) <= bound))
    print(f"{label}: max |diff| {float(np.abs(got - ref).max()):.3g}, worst relative "
          f"{worst:.2e} ({'within' if ok else 'OUTSIDE'} the bound)")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models")
    ap.add_argument("data", help="one dataset.py drive folder (img.npy, big_img.npy)")
    ap.add_argument("--opc", default=os.path.join(ROOT, "build", "tools", "opc", "opc"))
    ap.add_argument("--frame", type=int, default=-1)
    a = ap.parse_args()
    vision = os.path.join(a.models, "driving_vision_small.onnx")
    policy = os.path.join(a.models, "driving_policy_small.onnx")
    img, big = np.load(os.path.join(a.data, "img.npy")), np.load(os.path.join(a.data, "big_img.npy"))
    k = a.frame % len(img)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sv = ort.InferenceSession(vision, opts, providers=["CPUExecutionProvider"])
    sp = ort.InferenceSession(policy, opts, providers=["CPUExecutionProvider"])
    hs = decode_slices({p.key: p.value for p in onnx.load(vision).metadata_props}["output_slices"])
    hs = hs["hidden_state"]
    # The policy's features: the vision's hidden states of frames k−96, k−92, …, k (zeros before).
    feats = np.zeros((1, 25, 512), np.float32)
    for j in range(25):
        f = k - 96 + 4 * j
        if f >= 0:
            feats[0, j] = sv.run(None, {"img": img[f:f + 1], "big_img": big[f:f + 1]})[0][0, hs]
    vfeeds = {"img": img[k:k + 1], "big_img": big[k:k + 1]}
    pfeeds = {"features_buffer": feats, "desire_pulse": np.zeros((1, 25, 8), np.float32),
              "traffic_convention": np.array([[1.0, 0.0]], np.float32)}
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, sess, feeds in (("vision", vision, sv, vfeeds), ("policy", policy, sp, pfeeds)):
            ref = sess.run(None, feeds)[0]
            for label, extra in (("reference", ["--reference"]), ("device fp32", ["--precision", "fp32"])):
                got = opc_run(a.opc, model, feeds, tmp, extra)
                ok &= compare(f"{name} frame {k}, opc {label} vs onnxruntime", got.reshape(ref.shape), ref)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
