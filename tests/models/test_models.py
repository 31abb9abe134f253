#!/usr/bin/env python3
"""The committed reference models (models/*_small.onnx) keep openpilot's contract and run.

Expectations are written out here from docs/contract.md ("Vision network", "Policy network and
temporal inputs") and from the runtime's op list (docs/runtime.md), not imported from the generator, so a generator bug cannot agree with itself.
With --full, checks models/full/*_full.onnx instead and skips (exit 77) when they were not
generated. Run by meson with the project venv's python.
"""

import base64
import hashlib
import os
import pickle
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto

ROOT = os.environ.get("OP_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
MODELS = os.path.join(ROOT, "models")

VISION_IN = [("img", TensorProto.UINT8, [1, 12, 128, 256]),
             ("big_img", TensorProto.UINT8, [1, 12, 128, 256])]
POLICY_IN = [("features_buffer", TensorProto.FLOAT, [1, 25, 512]),
             ("desire_pulse", TensorProto.FLOAT, [1, 25, 8]),
             ("traffic_convention", TensorProto.FLOAT, [1, 2])]
VISION_SLICES = [("pose", 12), ("wide_from_device_euler", 6), ("road_transform", 12),
                 ("lane_lines", 528), ("road_edges", 264), ("lane_lines_prob", 8),
                 ("desire_pred", 32), ("meta", 55), ("lead_prob", 3), ("lead", 144), ("hidden_state", 512)]
POLICY_SLICES = [("plan", 990), ("desire_state", 8)]
EXPECT = {
    "driving_vision": (VISION_IN, VISION_SLICES),
    "driving_policy": (POLICY_IN, POLICY_SLICES),
    "driving_supercombo": (VISION_IN + POLICY_IN, VISION_SLICES + POLICY_SLICES),
}
# Width of the trailing `pad` slice (the policy's output has none, as openpilot's).
PAD = {"driving_vision": 24, "driving_policy": 0, "driving_supercombo": 24}
# The runtime's op list (gst/nn/ops.def, docs/runtime.md).
SUPPORTED = set("""Conv ConvTranspose Gemm MatMul Add Sub Mul Div Pow Sqrt Exp Log Neg Abs Reciprocal
Relu LeakyRelu Elu Sigmoid HardSigmoid HardSwish Tanh Erf Softplus Clip Min Max Where Equal Less
Greater Reshape Flatten Transpose Concat Split Slice Squeeze Unsqueeze Expand Tile Pad Gather Shape
ConstantOfShape Range Identity Dropout Cast ReduceMean ReduceSum ReduceMax Softmax LogSoftmax
LayerNormalization BatchNormalization AveragePool MaxPool GlobalAveragePool Resize""".split())

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def dims(vi):
    return [d.dim_value for d in vi.type.tensor_type.shape.dim]


def conv_macs(model):
    """Multiply-accumulates of every Conv, Gemm and MatMul, from onnx shape inference: an
    independent lower bound on the model's compute (elementwise ops are left out)."""
    inf = onnx.shape_inference.infer_shapes(model)
    g = inf.graph
    shape = {vi.name: dims(vi) for vi in list(g.value_info) + list(g.input) + list(g.output)}
    shape.update({t.name: list(t.dims) for t in inf.graph.initializer})
    macs = 0
    for n in inf.graph.node:
        out = shape[n.output[0]]
        if n.op_type == "Conv":
            macs += int(np.prod(out)) * int(np.prod(shape[n.input[1]][1:]))
        elif n.op_type in ("Gemm", "MatMul"):
            a = shape[n.input[0]]
            macs += int(np.prod(out)) * a[-1]  # our Gemms have transA = 0
    return macs


def check_model(path, name, size):
    model = onnx.load(path)
    onnx.checker.check_model(model)
    inputs, slices = EXPECT[name]
    tag = os.path.basename(path)

    # Inputs and the single output, exactly.
    got_in = [(i.name, i.type.tensor_type.elem_type, dims(i)) for i in model.graph.input]
    check(got_in == inputs, f"{tag}: inputs {got_in}")
    total = sum(n for _, n in slices) + PAD[name]
    outs = [(o.name, o.type.tensor_type.elem_type, dims(o)) for o in model.graph.output]
    check(len(outs) == 1 and outs[0][0] == "outputs" and outs[0][1] == TensorProto.FLOAT
          and outs[0][2][0] == 1, f"{tag}: one float32 output `outputs` (1, N): {outs}")
    n_out = outs[0][2][1]

    # output_slices: base64 pickle (protocol >= 2) of dict[str, slice] with plain ints.
    meta = {p.key: p.value for p in model.metadata_props}
    check("output_slices" in meta, f"{tag}: has output_slices metadata")
    raw = base64.b64decode(meta["output_slices"])
    check(raw[0] == 0x80 and raw[1] >= 2, f"{tag}: pickle protocol {raw[1]} >= 2")
    sl = pickle.loads(raw)
    check(type(sl) is dict and all(type(k) is str and type(v) is slice for k, v in sl.items()),
          f"{tag}: slices decode to dict[str, slice]")
    check(all(type(v.start) is int and type(v.stop) is int and v.step is None for v in sl.values()),
          f"{tag}: slice bounds are plain ints, step None")
    named = [(k, v.stop - v.start) for k, v in sl.items() if k != "pad"]
    check(named == slices, f"{tag}: slice names and sizes are the contract's, in order")
    pad = sl["pad"].stop - sl["pad"].start if "pad" in sl else 0
    check(pad == PAD[name] and (pad == 0 or list(sl)[-1] == "pad"),
          f"{tag}: pad slice of {PAD[name]} at the end")
    ordered = sorted(sl.values(), key=lambda s: s.start)
    contiguous = ordered[0].start == 0 and all(a.stop == b.start for a, b in zip(ordered, ordered[1:]))
    check(contiguous and ordered[-1].stop == n_out, f"{tag}: slices tile [0, {n_out}) exactly")
    check(n_out == total, f"{tag}: output width {n_out} == slices + pad {total}")

    # Ops and the fp16 form: float16 weights, Cast at the boundary, fp32 output.
    ops = {n.op_type for n in model.graph.node}
    check(ops <= SUPPORTED, f"{tag}: ops within the runtime's list (extra: {sorted(ops - SUPPORTED)})")
    floats = [t for t in model.graph.initializer
              if t.data_type in (TensorProto.FLOAT, TensorProto.FLOAT16)]
    check(floats and all(t.data_type == TensorProto.FLOAT16 for t in floats),
          f"{tag}: all weights are float16")
    casts = [n for n in model.graph.node if n.op_type == "Cast"]
    last = model.graph.node[-1]
    check(last.op_type == "Cast" and last.output[0] == "outputs"
          and last.attribute[0].i == TensorProto.FLOAT, f"{tag}: outputs come from a Cast to float32")
    for name_in, _, _ in inputs:
        first = [n for n in model.graph.node if name_in in n.input]
        check(first and all(n.op_type == "Cast" and n.attribute[0].i == TensorProto.FLOAT16
                            for n in first),
              f"{tag}: input {name_in} is only read by a Cast to float16")
    check(len(casts) >= len(inputs) + 1, f"{tag}: {len(casts)} Cast nodes")
    if "vision" in name or "supercombo" in name:
        gelu_tanh = "Tanh" in ops
        check(gelu_tanh and "LayerNormalization" in ops and "Softmax" in ops and "MatMul" in ops,
              f"{tag}: GELU (tanh form), LayerNorm and attention ops present")
        grouped = [n for n in model.graph.node if n.op_type == "Conv"
                   and any(a.name == "group" and a.i > 1 for a in n.attribute)]
        attrs = [{a.name: list(a.ints) for a in n.attribute} for n in grouped]
        k7s2 = [a for a in attrs if a.get("kernel_shape") == [7, 7] and a.get("strides") == [2, 2]]
        check(len(k7s2) >= 3, f"{tag}: {len(k7s2)} grouped 7x7 stride-2 convs")
        gflop = 2 * conv_macs(model) / 1e9
        if name == "driving_vision":
            ok = gflop < 0.150 if size == "small" else 1.5 <= gflop <= 2.5
            check(ok, f"{tag}: {gflop * 1000:.1f} MFLOP in Conv/Gemm/MatMul within the {size} budget")
    if name == "driving_policy":
        check({"Gemm", "Relu", "MatMul", "ReduceMean"} <= ops,
              f"{tag}: Gemm, Relu, MatMul, ReduceMean present")
        params = sum(int(np.prod(t.dims)) for t in floats)
        if size == "full":
            check(2e6 <= params <= 10e6, f"{tag}: {params:,} parameters (a few million)")

    # onnxruntime on random inputs: finite, every slice varied, and the output depends on input.
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(123)
    runs = []
    for _ in range(2):
        feeds = {}
        for n, t, d in inputs:
            if t == TensorProto.UINT8:
                feeds[n] = rng.integers(0, 256, d, dtype=np.uint8)
            elif n == "traffic_convention":
                feeds[n] = np.eye(2, dtype=np.float32)[[rng.integers(0, 2)]]
            else:
                feeds[n] = rng.standard_normal(d).astype(np.float32)
        out = sess.run(None, feeds)
        check(len(out) == 1 and out[0].dtype == np.float32 and list(out[0].shape) == [1, n_out],
              f"{tag}: onnxruntime output float32 (1, {n_out})")
        runs.append(out[0])
    check(all(np.isfinite(o).all() for o in runs), f"{tag}: every output finite")
    for k, s in sl.items():
        std = float(runs[0][0, s].std())
        check(std > 1e-2, f"{tag}: slice {k} varied (std {std:.3g})")
    diff = float(np.abs(runs[0] - runs[1]).max())
    check(diff > 1e-3, f"{tag}: different inputs give different outputs (max diff {diff:.3g})")


def check_hashes(record, folder, names):
    want = {}
    with open(record) as f:
        for line in f:
            if line.strip():
                h, p = line.split()
                want[os.path.basename(p)] = h
    for n in names:
        with open(os.path.join(folder, n), "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        check(want.get(n) == got, f"{n}: sha256 matches {os.path.basename(record)}")


def check_card(folder, name):
    """models/README.md's generated card names this very file (size and hash prefix), so the
    cards cannot silently describe an older model."""
    path = os.path.join(folder, name)
    with open(os.path.join(MODELS, "README.md")) as f:
        readme = f.read()
    with open(path, "rb") as f:
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()[:16]
    line = f"`{os.path.relpath(path, MODELS)}`, {len(data):,} bytes, sha256 `{digest}"
    check(line in readme, f"{name}: README.md card describes this file")


def main():
    size = "full" if "--full" in sys.argv else "small"
    folder = MODELS if size == "small" else os.path.join(MODELS, "full")
    names = [f"{m}_{size}.onnx" for m in EXPECT]
    missing = [n for n in names if not os.path.exists(os.path.join(folder, n))]
    if missing:
        if size == "full":
            print(f"SKIP: {', '.join(missing)} not generated "
                  "(.venv/bin/python3 models/generate.py --size full)")
            return 77
        check(False, f"committed models present (missing {missing})")
        return 1
    check_hashes(os.path.join(MODELS, f"{size}.sha256"), folder, names)
    for m in EXPECT:
        check_card(folder, f"{m}_{size}.onnx")
        check_model(os.path.join(folder, f"{m}_{size}.onnx"), m, size)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
