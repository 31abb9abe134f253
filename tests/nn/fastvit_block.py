#!/usr/bin/env python3
"""Builds a FastViT-style block as ONNX with onnx.helper (no torch), with the shapes the real
vision network is reported to have (docs/contract.md, "Model variants"): a grouped 7x7 stride-2
convolution with BatchNorm, GELU in its tanh form, then
tokens through LayerNorm and two-head self-attention (MatMul, Softmax) with a residual, and a
Gemm head. Used by test_opc.py (reference interpreter vs onnxruntime) and available to device
tests.

Usage: fastvit_block.py OUT.onnx [--fp16]
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(path, fp16=False, seed=5):
    rng = np.random.default_rng(seed)
    C, H, W, heads = 16, 13, 13, 2
    dt = np.float16 if fp16 else np.float32
    tdt = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    inits = []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr).astype(dt) if np.asarray(arr).dtype.kind == "f" else np.asarray(arr), name))
        return name

    def w(name, *shape, scale=None):
        s = scale if scale is not None else 1.0 / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else shape[0])
        return const(name, rng.standard_normal(shape) * s)

    n = []
    n.append(helper.make_node("Conv", ["x", w("conv_w", C, 2, 7, 7), w("conv_b", C, scale=0.1)], ["c"],
                              group=C // 2, strides=[2, 2], pads=[3, 3, 3, 3], name="grouped7x7"))
    n.append(helper.make_node("BatchNormalization", ["c", const("bn_s", rng.uniform(0.5, 1.5, C)),
                                                     const("bn_b", rng.uniform(-0.2, 0.2, C)),
                                                     const("bn_m", rng.uniform(-0.2, 0.2, C)),
                                                     const("bn_v", rng.uniform(0.5, 2, C))], ["bn"]))
    # GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    n += [helper.make_node("Pow", ["bn", const("three", np.array(3.0))], ["g_p"]),
          helper.make_node("Mul", ["g_p", const("g_k", np.array(0.044715))], ["g_m"]),
          helper.make_node("Add", ["bn", "g_m"], ["g_a"]),
          helper.make_node("Mul", ["g_a", const("g_s", np.array(np.sqrt(2 / np.pi)))], ["g_s2"]),
          helper.make_node("Tanh", ["g_s2"], ["g_t"]),
          helper.make_node("Add", ["g_t", const("one", np.array(1.0))], ["g_1"]),
          helper.make_node("Mul", ["bn", const("half", np.array(0.5))], ["g_h"]),
          helper.make_node("Mul", ["g_h", "g_1"], ["gelu"])]
    T = 7 * 7
    n += [helper.make_node("Reshape", ["gelu", const("tok_shape", np.array([1, C, T], np.int64))], ["t0"]),
          helper.make_node("Transpose", ["t0"], ["tok"], perm=[0, 2, 1]),
          helper.make_node("LayerNormalization", ["tok", const("ln_s", rng.uniform(0.5, 1.5, C)),
                                                  const("ln_b", rng.uniform(-0.1, 0.1, C))], ["ln"], axis=-1, epsilon=1e-5)]
    for p in "qkv":
        n.append(helper.make_node("MatMul", ["ln", w(f"w{p}", C, C)], [p]))
        n.append(helper.make_node("Reshape", [p, const(f"{p}_hs", np.array([1, T, heads, C // heads], np.int64))], [p + "4"]))
        n.append(helper.make_node("Transpose", [p + "4"], [p + "h"], perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3]))
    n += [helper.make_node("MatMul", ["qh", "kh"], ["att"]),
          helper.make_node("Mul", ["att", const("att_scale", np.array(1 / np.sqrt(C // heads)))], ["att_s"]),
          helper.make_node("Softmax", ["att_s"], ["prob"], axis=-1),
          helper.make_node("MatMul", ["prob", "vh"], ["ctx"]),
          helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
          helper.make_node("Reshape", ["ctx_t", const("ctx_shape", np.array([1, T, C], np.int64))], ["ctx_r"]),
          helper.make_node("MatMul", ["ctx_r", w("wo", C, C)], ["proj"]),
          helper.make_node("Add", ["proj", const("proj_b", rng.uniform(-0.1, 0.1, C))], ["proj_b_out"]),
          helper.make_node("Add", ["tok", "proj_b_out"], ["res"]),
          helper.make_node("ReduceMean", ["res"], ["pooled"], axes=[1], keepdims=0),
          helper.make_node("Gemm", ["pooled", w("head_w", 10, C), w("head_b", 10, scale=0.1)], ["logits"], transB=1),
          helper.make_node("Relu", ["logits"], ["y"])]
    g = helper.make_graph(n, "fastvit_block", [helper.make_tensor_value_info("x", tdt, [1, C, H, W])],
                          [helper.make_tensor_value_info("y", tdt, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="fastvit_block.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


if __name__ == "__main__":
    build(sys.argv[1], fp16="--fp16" in sys.argv)
