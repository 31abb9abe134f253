#!/usr/bin/env python3
"""The quantized float steps between convolutions (DequantizeLinear → the tanh form of GELU →
QuantizeLinear, and DequantizeLinear → QuantizeLinear to another scale), which the compiler
folds into tables of the QLinearConv before them, on a small net quantized by `opc quantize
--quantize-outputs` (the form of our full-size models): ours against onnxruntime on the same
QDQ model, and, with --device, the device against the reference interpreter.

usage: qdq_lookup.py OPC [--device]

The float net (fixed seeds): Conv 3→8 3×3 stride 2 → GELU (tanh form, as PyTorch exports it)
→ depthwise Conv 8 3×3 → Conv 8→12 1×1 → GELU → y [1, 12, 8, 16]; calibrated on 4 random
inputs, run on a fifth; y then quantized too (the test adds its QuantizeLinear →
DequantizeLinear, output yd).

A second net adds a residual: the depthwise convolution's output plus the first GELU's
(r2 = c2 + g1, then the 1x1 convolution and GELU). The first GELU's value is then read by the
Add as well as quantized, and the depthwise convolution's by the Add alone, so both of those
convolutions keep a float table that is only their DequantizeLinear, which the kernels compute
as (q - zero point) * scale instead of looking it up (quant.cl's NN_DQ_OUT); the same bars hold.

Bars. The device computes the integer sums and the requantization exactly as the reference
does, and the tables are the reference's own values: device and reference agree on every
value. onnxruntime evaluates the float steps in float32 with its own tanh, so a quantized
value near a rounding tie may move by one step, and the next layers carry that on: every
output within 2 steps of onnxruntime's and at most 2 % of them differing (the test prints the
measured figures). The results must lie on y's quantized grid.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # reported as skipped, never as passed
    print(f"SKIP: {e}")
    sys.exit(77)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from ort_exact import uint8_weights_twin  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("opc")
ap.add_argument("--device", action="store_true")
a = ap.parse_args()
root = tempfile.mkdtemp(prefix="nn_qdq_lookup_")
SHAPE = [1, 3, 16, 32]


def opc(*args):
    r = subprocess.run([a.opc, *args], capture_output=True, text=True)
    if r.returncode != 0:
        if a.device and "no OpenCL" in (r.stderr + r.stdout):
            print("SKIP: no OpenCL device")
            sys.exit(77)
        print(f"FAIL opc {' '.join(args)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        sys.exit(1)
    return r.stdout


def gelu(x, out, nodes, consts):
    """x * 0.5 * (1 + tanh(0.7978845608 * (x + 0.044715 * x^3))), one ONNX node per step."""
    def c(v):
        name = f"{out}_c{len(consts)}"
        consts.append(numpy_helper.from_array(np.array(v, np.float32), name))
        return name
    steps = [("Mul", [x, x]), ("Mul", [x, "@"]), ("Mul", [c(0.044715), "@"]), ("Add", [x, "@"]),
             ("Mul", [c(0.7978845608), "@"]), ("Tanh", ["@"]), ("Add", [c(1.0), "@"]),
             ("Mul", [x, "@"]), ("Mul", [c(0.5), "@"])]
    prev = None
    for i, (op, ins) in enumerate(steps):
        name = out if i == len(steps) - 1 else f"{out}_{i}"
        nodes.append(helper.make_node(op, [prev if v == "@" else v for v in ins], [name]))
        prev = name


rng = np.random.default_rng(11)


def w(name, shape):
    return numpy_helper.from_array(
        rng.normal(0, 1.5 / np.sqrt(np.prod(shape[1:])), size=shape).astype(np.float32), name)


def check(variant, residual):
    """Builds, quantizes and runs one net; appends what fails to `failures`."""
    inits = [w("w1", [8, 3, 3, 3]), w("w2", [8, 1, 3, 3]), w("w3", [12, 8, 1, 1]),
             numpy_helper.from_array(rng.normal(0, 0.1, size=[8]).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.normal(0, 0.1, size=[12]).astype(np.float32), "b3")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1])]
    gelu("c1", "g1", nodes, inits)
    nodes.append(helper.make_node("Conv", ["g1", "w2"], ["c2"], group=8, pads=[1, 1, 1, 1]))
    if residual:
        nodes.append(helper.make_node("Add", ["c2", "g1"], ["r2"]))
    nodes.append(helper.make_node("Conv", ["r2" if residual else "c2", "w3", "b3"], ["c3"]))
    gelu("c3", "y", nodes, inits)
    g = helper.make_graph(nodes, "qdq_lookup",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12, 8, 16])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="gst-op")
    m.ir_version = 8
    onnx.checker.check_model(m)
    work = os.path.join(root, variant)
    os.makedirs(work)
    fmodel, qmodel = os.path.join(work, "float.onnx"), os.path.join(work, "qdq.onnx")
    onnx.save(m, fmodel)
    cal = os.path.join(work, "cal")
    os.makedirs(cal)
    for i in range(4):
        np.save(os.path.join(cal, f"x-{i:06d}.npy"), rng.normal(0, 1, size=SHAPE).astype(np.float32))
    x = rng.normal(0, 1, size=SHAPE).astype(np.float32)
    np.save(os.path.join(work, "x.npy"), x)
    opc("quantize", fmodel, "--calibration", cal, "--method", "minmax", "--quantize-outputs",
        "-o", qmodel)
    # opc quantize leaves graph outputs in float: quantize y too (on its range for this input), so
    # that the last GELU also ends in a QuantizeLinear and the output lies on a grid.
    fy = ort.InferenceSession(fmodel, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    lo, hi = min(float(fy.min()), 0.0), max(float(fy.max()), 0.0)
    q = onnx.load(qmodel)
    q.graph.initializer.extend([
        numpy_helper.from_array(np.array((hi - lo) / 255, np.float32), "y_scale"),
        numpy_helper.from_array(np.array(round(-lo / ((hi - lo) / 255)), np.uint8), "y_zero_point")])
    q.graph.node.extend([
        helper.make_node("QuantizeLinear", ["y", "y_scale", "y_zero_point"], ["y_q"]),
        helper.make_node("DequantizeLinear", ["y_q", "y_scale", "y_zero_point"], ["yd"])])
    del q.graph.output[:]
    q.graph.output.append(helper.make_tensor_value_info("yd", TensorProto.FLOAT, [1, 12, 8, 16]))
    onnx.save(q, qmodel)

    # The fold is there: the float steps leave no ElementwiseChain (GELU's fused form) behind.
    info = opc("info", qmodel)
    fused = [ln for ln in info.splitlines() if "(fused)" in ln]
    print("fused ops:", "; ".join(ln.strip() for ln in fused))
    if not residual and (any("ElementwiseChain" in ln for ln in fused) or
                         not any("QLinearConv" in ln for ln in fused)):
        failures.append("the quantized GELU steps were not folded into the QLinearConv")

    # onnxruntime runs the uint8-weight twin: its int8-weight products saturate on x86 without VNNI.
    twin, _ = uint8_weights_twin(onnx.load(qmodel))
    want = ort.InferenceSession(twin.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    qinits = {t.name: numpy_helper.to_array(t) for t in onnx.load(qmodel).graph.initializer}
    scale, zp = float(qinits["y_scale"]), int(qinits["y_zero_point"])


    def run(out, *args):
        os.makedirs(out, exist_ok=True)
        opc("run", *args, "--input", "x=" + os.path.join(work, "x.npy"), "--output-dir", out)
        return np.load(os.path.join(out, "yd.npy"))


    ref = run(os.path.join(work, "ref"), qmodel, "--reference")
    results = [("reference", ref)]
    if a.device:
        opm = os.path.join(work, "model.opm")
        opc("compile", qmodel, "-o", opm, "--precision", "int8")
        # The residual net's DequantizeLinear-only tables are computed, not looked up: their
        # kernels' sources (kept in the compiled model) define LUT_DQ.
        computed = open(opm, "rb").read().count(b"#define LUT_DQ 1")
        print(f"kernels computing a DequantizeLinear table: {computed}")
        if residual and computed < 2:
            failures.append(f"{computed} kernels compute a DequantizeLinear table, 2 expected "
                            "(the first and the depthwise convolution)")
        dev = run(os.path.join(work, "dev"), opm)
        results.append(("device int8", dev))
        same = int((dev == ref).sum())
        print(f"device int8 vs reference: {same} of {ref.size} values equal")
        if same != ref.size:
            failures.append(f"device and reference differ on {ref.size - same} values")
    for name, got in results:
        steps = (got.astype(np.float64) - want) / scale
        grid = got.astype(np.float64) / scale + zp
        worst, differ = np.abs(steps).max(), int((np.abs(steps) > 0.5).sum())
        print(f"{name} vs onnxruntime: max {worst:.3f} steps of {scale:.3g}, {differ} of {steps.size}"
              f" values differ, {len(np.unique(got))} distinct values")
        if worst > 2 + 1e-3 or differ > 0.02 * steps.size:
            failures.append(f"{name}: {differ} values differ from onnxruntime's, up to {worst:.3f} "
                            "steps (bar: 2 steps, 2 % of values)")
        if np.abs(grid - np.round(grid)).max() > 1e-3:
            failures.append(f"{name}: values off the quantized grid")
        if len(np.unique(got)) < 20:
            failures.append(f"{name}: only {len(np.unique(got))} distinct values (saturated?)")


failures = []
for variant, residual in (("gelu", False), ("residual", True)):
    print(f"-- {variant}")
    check(variant, residual)
for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)
