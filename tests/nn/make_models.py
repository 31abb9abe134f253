#!/usr/bin/env python3
"""Writes the small ONNX files the nn import tests read (tests/nn/test_nn_front.cpp).

Usage: make_models.py OUTDIR

Each model is tiny and built with onnx.helper, so the expected values are known here and
written next to it as .npy files. Needs numpy and onnx (the project venv), not onnxruntime.
"""
import base64
import os
import pickle
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(model, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def model_of(nodes, inputs, outputs, inits=(), opset=13, meta=None):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="make_models.py")
    if meta:
        for k, v in meta.items():
            p = m.metadata_props.add()
            p.key, p.value = k, v
    return m


def main(out):
    rng = np.random.default_rng(4)
    slices = {"pose": slice(0, 12, None), "lead": slice(12, 30, None), "pad": slice(30, 32, None)}
    slices_b64 = base64.b64encode(pickle.dumps(slices, protocol=2)).decode()

    # tiny.onnx: conv + bias + relu + residual + gemm-ish tail, fp32; output slices metadata.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = rng.standard_normal((3, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "x"], ["y"], name="residual"),
    ]
    save(model_of(nodes, [x], [y], [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
                  meta={"output_slices": slices_b64}), f"{out}/tiny.onnx")
    xin = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    np.save(f"{out}/tiny_x.npy", xin)
    # Expected output, by a direct numpy convolution (independent of our interpreter).
    xp = np.pad(xin.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((2, 3, 5, 5))
    for i in range(5):
        for j in range(5):
            conv[:, :, i, j] = np.einsum("nchw,mchw->nm", xp[:, :, i:i + 3, j:j + 3], w) + b
    np.save(f"{out}/tiny_y.npy", (np.maximum(conv, 0) + xin).astype(np.float32))

    # typed.onnx: constants in the typed protobuf fields (not raw_data) of every dtype, each
    # passed to an output through Identity; expected values saved as .npy.
    vals = {
        "f32": np.array([1.5, -2.25, 3.0], np.float32),
        "f16": np.array([0.5, -65504.0, 6.1035e-05], np.float16),
        "i64": np.array([-(2 ** 40), 7, 2 ** 62], np.int64),
        "u8": np.array([0, 200, 255], np.uint8),
        "b": np.array([True, False, True]),
    }
    inits, outs, nodes = [], [], []
    for name, v in vals.items():
        t = helper.make_tensor(name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape,
                               v.tolist() if v.dtype != np.float16 else v.view(np.uint16).tolist(),
                               raw=False)
        if v.dtype == np.float16:  # typed field of fp16 holds the bit patterns in int32_data
            t = TensorProto()
            t.name, t.data_type = name, TensorProto.FLOAT16
            t.dims.extend(v.shape)
            t.int32_data.extend(v.view(np.uint16).astype(np.int32).tolist())
        inits.append(t)
        nodes.append(helper.make_node("Identity", [name], [name + "_out"]))
        outs.append(helper.make_tensor_value_info(name + "_out", helper.np_dtype_to_tensor_dtype(v.dtype), v.shape))
        np.save(f"{out}/typed_{name}.npy", v)
    # And the same values as raw_data through a Constant node.
    craw = numpy_helper.from_array(vals["f16"], "craw")
    nodes.append(helper.make_node("Constant", [], ["craw"], value=craw))
    nodes.append(helper.make_node("Identity", ["craw"], ["craw_out"]))
    outs.append(helper.make_tensor_value_info("craw_out", TensorProto.FLOAT16, [3]))
    save(model_of(nodes, [], outs, inits), f"{out}/typed.onnx")

    # unsupported.onnx: an op we do not implement, named, opset 13.
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 4])
    o = helper.make_tensor_value_info("o", TensorProto.FLOAT, [4, 4])
    save(model_of([helper.make_node("Relu", ["a"], ["t"], name="ok"),
                   helper.make_node("Det", ["t"], ["o"], name="det_node")], [a], [o]),
         f"{out}/unsupported.onnx")

    # unknown_attribute.onnx: a Relu with an attribute ONNX's Relu does not have.
    save(model_of([helper.make_node("Relu", ["a"], ["o"], name="odd_relu", slope=0.1)], [a], [o]),
         f"{out}/unknown_attribute.onnx")

    # two_inputs.onnx: two inputs sharing the symbolic dim "batch"; binding one binds both.
    ta = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 3])
    tb = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", "n"])
    save(model_of([helper.make_node("Add", ["a", "b"], ["o"])], [ta, tb],
                  [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)]), f"{out}/two_inputs.onnx")

    # truncated.onnx: the first half of tiny.onnx.
    data = open(f"{out}/tiny.onnx", "rb").read()
    open(f"{out}/truncated.onnx", "wb").write(data[: len(data) // 2])

    # external/: weights in a file next to the model (accepted), and a model whose data path
    # climbs out of its folder (refused).
    wt = rng.standard_normal((4, 4)).astype(np.float32)
    os.makedirs(f"{out}/external", exist_ok=True)
    wt.tofile(f"{out}/external/weights.bin")
    np.save(f"{out}/external_w.npy", wt)
    for sub, loc in (("external", "weights.bin"), ("external_bad", "../external/weights.bin")):
        t = TensorProto()
        t.name, t.data_type = "w", TensorProto.FLOAT
        t.dims.extend([4, 4])
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", loc), ("offset", "0"), ("length", str(wt.nbytes))):
            e = t.external_data.add()
            e.key, e.value = k, v
        m = model_of([helper.make_node("MatMul", ["a", "w"], ["o"])], [a], [o], [t])
        save(m, f"{out}/{sub}/model.onnx")

    # Pickles that must be refused: a GLOBAL other than slice (os.system), and BUILD.
    evil = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03."
    build = b"\x80\x02}q\x00(X\x04\x00\x00\x00poseq\x01K\x00u}b."
    for name, raw in (("pickle_global", evil), ("pickle_build", build)):
        save(model_of([helper.make_node("Relu", ["a"], ["o"])], [a], [o],
                      meta={"output_slices": base64.b64encode(raw).decode()}), f"{out}/{name}.onnx")
    print(f"make_models.py: wrote models to {out}")


if __name__ == "__main__":
    main(sys.argv[1])
