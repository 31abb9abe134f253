#!/usr/bin/env python3
"""A model quantized by onnxruntime's `quantize_static` (models/qdq/small_conv_qdq.onnx, made by
models/qdq/make_qdq_model.py) runs on our runtime and agrees with onnxruntime's outputs for the
committed input (models/qdq/ort_y.npy and ort_r3.npy, written by the same script).

usage: qdq_vs_onnxruntime.py OPC [--device] [--precision fp32|fp16|int8]

Without --device the reference interpreter runs it (`opc run --reference`), with --device the
OpenCL device (`opc compile` to an .opm file, then `opc run` of that file; exit 77 when there is
no device).

Tolerance. Both outputs are DequantizeLinear(QuantizeLinear(...)) (y of the Gemm, r3 of the last
convolution, 2048 values), so both results lie on each output's grid y_scale * (q - zero_point) and their difference is a whole number of steps.
onnxruntime fuses each DQ → Conv/Gemm → Q into an integer kernel that requantizes with a float32
multiplier (x_scale * w_scale / y_scale); we compute the same sums and divide by the scale. Both
round half to even, so a quantized value can differ only where the exact value lies within
float32 rounding of a tie: then it moves by one step of its tensor. Such a step in an inner
activation changes the next layer's value by at most one step times the largest |weight| of a
channel; over this net's six quantized activations that stays well below one output step unless
the output itself sits near a tie. So the bar is: every output within one step of
onnxruntime's, and the results must also be on the grid (so a float path that skipped the
quantization would fail). The test prints the measured difference in steps.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    from onnx import numpy_helper
except ImportError as e:  # reported as skipped, never as passed
    print(f"SKIP: {e}")
    sys.exit(77)

ROOT = os.environ.get("OP_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
DIR = os.path.join(ROOT, "models", "qdq")

ap = argparse.ArgumentParser()
ap.add_argument("opc")
ap.add_argument("--device", action="store_true")
ap.add_argument("--precision", default="fp32")
a = ap.parse_args()

model = os.path.join(DIR, "small_conv_qdq.onnx")
inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(model).graph.initializer}

work = tempfile.mkdtemp(prefix="nn_qdq_")


def opc(*args):
    r = subprocess.run([a.opc, *args], capture_output=True, text=True)
    if r.returncode != 0:
        if a.device and "no OpenCL" in (r.stderr + r.stdout):
            print("SKIP: no OpenCL device")
            sys.exit(77)
        print(f"FAIL opc {' '.join(args)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        sys.exit(1)


run = ["--input", "x=" + os.path.join(DIR, "input.npy"), "--output-dir", work]
if a.device:
    # Through a compiled-model file, so the int8/uint8/int32 weights, scales and zero points also
    # go through .opm serialization.
    opm = os.path.join(work, "model.opm")
    opc("compile", model, "-o", opm, "--precision", a.precision)
    opc("run", opm, *run)
else:
    opc("run", model, *run, "--reference")
failures = []
for name in ("y", "r3"):
    want = np.load(os.path.join(DIR, f"ort_{name}.npy"))
    got = np.load(os.path.join(work, f"{name}.npy"))
    scale, zp = float(inits[name + "_scale"]), int(inits[name + "_zero_point"])
    if got.shape != want.shape or got.dtype != want.dtype:
        failures.append(f"{name}: {got.dtype}{got.shape}, onnxruntime's {want.dtype}{want.shape}")
        continue
    steps = (got.astype(np.float64) - want) / scale
    grid = got.astype(np.float64) / scale + zp
    off_grid = np.abs(grid - np.round(grid)).max()
    worst = np.abs(steps).max()
    print(f"{'device ' + a.precision if a.device else 'reference'} {name}: max |ours - onnxruntime|"
          f" = {worst:.3f} steps of {scale:.3g}, {int((np.abs(steps) > 0.5).sum())} of "
          f"{steps.size} values differ; off the grid by at most {off_grid:.2e} steps")
    if worst > 1.0 + 1e-3:
        failures.append(f"{name}: a value is {worst:.3f} steps from onnxruntime's (bar: 1)")
    if off_grid > 1e-3:
        failures.append(f"{name}: values are off the quantized grid by {off_grid:.3f} steps")
for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)
