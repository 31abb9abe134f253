#!/usr/bin/env python3
"""Differential test: every op of the reference interpreter against onnxruntime.

Usage: ops_vs_onnxruntime.py OPC [--keep DIR] [--filter NAME[,NAME...]] [--device]

For each case this builds a single-op ONNX model (onnx.helper) with odd shapes (1, 3, 13, 127),
random inputs, runs it in onnxruntime (the independent expectation; integer products of uint8
and int8 on the uint8-weight twin, ort_exact.py), then runs `OPC run
--reference` on the same files and compares (with --device: `OPC run` on the OpenCL device,
exit 77 without one; the device test runs the quantization cases this way). Exit status 1 on any mismatch, 77 without
onnxruntime.

Tolerances (|got - want| <= atol + rtol * |want|), per kind of op:
  EXACT  integer, bool, layout and selection ops: bit-equal.
  ULP    one rounding of float32 (elementwise math, casts): rtol 2e-6 (a few ulps; the
         interpreter rounds its long-double result once, onnxruntime's vectorised float
         exp/tanh/erf carry an error of ~1-2 ulp), atol 1e-7 for results near 0.
  SUM    float32 sums of up to ~1,600 products (conv, gemm, reductions, normalisation):
         onnxruntime accumulates in float32 in its own order; with values O(1) the worst
         difference is ~K * 2^-24 * max|term| ≈ 1e-4 absolute for K = 1,143, typically far
         less, so rtol 1e-5, atol 2e-5.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "common"))
from ort_exact import uint8_weights_twin  # noqa: E402

EXACT = (0.0, 0.0)
ULP = (2e-6, 1e-7)
SUM = (1e-5, 2e-5)

ort.set_default_logger_severity(3)  # opset-6 cases draw legacy warnings
rng = np.random.default_rng(2026)
CASES = []


def f32(*shape, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def case(name, op, inputs, attrs=None, opset=17, tol=ULP, n_out=1, consts=None, order=None):
    """inputs: list of (name, array); consts: list of (name, array) initializers; order: the
    node's input names in order (default: the inputs, then the consts)."""
    CASES.append(dict(name=name, op=op, inputs=inputs, attrs=attrs or {}, opset=opset, tol=tol,
                      n_out=n_out, consts=consts or [], order=order))


# --- elementwise unary (float32), shape (3, 13, 127)
S = (3, 13, 127)
for op, lo, hi, attrs, opset in [
        ("Sqrt", 0.01, 9, {}, 17), ("Exp", -5, 5, {}, 17), ("Log", 0.01, 9, {}, 17),
        ("Neg", -3, 3, {}, 17), ("Abs", -3, 3, {}, 17), ("Reciprocal", 0.1, 3, {}, 17),
        ("Relu", -3, 3, {}, 17), ("LeakyRelu", -3, 3, {"alpha": 0.1}, 17),
        ("Elu", -3, 3, {"alpha": 0.7}, 17), ("Sigmoid", -8, 8, {}, 17),
        ("HardSigmoid", -5, 5, {"alpha": 0.3, "beta": 0.4}, 17), ("HardSwish", -5, 5, {}, 17),
        ("Tanh", -4, 4, {}, 17), ("Erf", -3, 3, {}, 17), ("Softplus", -10, 10, {}, 17),
        ("Identity", -3, 3, {}, 17), ("Floor", -3, 3, {}, 17), ("Ceil", -3, 3, {}, 17),
        ("Round", -3, 3, {}, 17), ("Sign", -3, 3, {}, 17), ("Sin", -3, 3, {}, 17),
        ("Cos", -3, 3, {}, 17), ("Tan", -1.4, 1.4, {}, 17), ("Asin", -0.99, 0.99, {}, 17),
        ("Acos", -0.99, 0.99, {}, 17), ("Atan", -3, 3, {}, 17), ("Sinh", -3, 3, {}, 17),
        ("Cosh", -3, 3, {}, 17), ("Asinh", -3, 3, {}, 17), ("Acosh", 1, 5, {}, 17),
        ("Atanh", -0.99, 0.99, {}, 17), ("Selu", -3, 3, {}, 17), ("Celu", -3, 3, {"alpha": 1.5}, 17),
        ("Softsign", -3, 3, {}, 17), ("ThresholdedRelu", -3, 3, {"alpha": 0.5}, 17),
        ("Shrink", -3, 3, {"lambd": 0.7, "bias": 0.2}, 17)]:
    case(op.lower(), op, [("x", f32(*S, lo=lo, hi=hi))], attrs, opset,
         EXACT if op in ("Neg", "Abs", "Relu", "Identity", "Floor", "Ceil", "Round", "Sign") else ULP)
case("round_halves", "Round", [("x", (np.arange(-20, 21, dtype=np.float32) / 4).reshape(41, 1))], tol=EXACT)
case("clip_inputs", "Clip", [("x", f32(*S))], consts=[("lo", np.array(-1.0, np.float32)), ("hi", np.array(0.5, np.float32))], tol=EXACT)
case("clip_opset6", "Clip", [("x", f32(13, 127))], {"min": -0.25, "max": 2.0}, opset=6, tol=EXACT)
case("not", "Not", [("x", rng.integers(0, 2, (13, 127)).astype(bool))], tol=EXACT)
special = np.array([np.nan, np.inf, -np.inf, 0, 1.5, -2], np.float32).reshape(1, 6)
case("isnan", "IsNaN", [("x", special)], tol=EXACT)
case("isinf", "IsInf", [("x", special)], {"detect_negative": 0}, tol=EXACT)

# --- binary with broadcasting
for op, lo, hi in [("Add", -3, 3), ("Sub", -3, 3), ("Mul", -3, 3), ("Div", 0.5, 3), ("Pow", 0.1, 2)]:
    case(op.lower(), op, [("a", f32(3, 13, 127, lo=lo, hi=hi)), ("b", f32(13, 1, lo=lo, hi=hi))])
    case(op.lower() + "_scalar", op, [("a", f32(1, lo=lo, hi=hi)), ("b", f32(3, 1, 127, lo=lo, hi=hi))])
case("add_int64", "Add", [("a", rng.integers(-2**40, 2**40, (3, 13), dtype=np.int64)), ("b", rng.integers(-2**40, 2**40, (13,), dtype=np.int64))], tol=EXACT)
case("div_int64", "Div", [("a", rng.integers(1, 1000, (3, 13), dtype=np.int64)), ("b", rng.integers(1, 17, (1, 13), dtype=np.int64))], tol=EXACT)
ia, ib = rng.integers(-5, 5, (3, 13, 127)), rng.integers(-5, 5, (13, 127))
for op in ("Equal", "Less", "Greater", "GreaterOrEqual", "LessOrEqual"):
    case(op.lower(), op, [("a", ia.astype(np.float32)), ("b", ib.astype(np.float32))], tol=EXACT)
case("equal_int64", "Equal", [("a", ia.astype(np.int64)), ("b", ib.astype(np.int64))], tol=EXACT)
for op in ("And", "Or", "Xor"):
    case(op.lower(), op, [("a", ia > 0), ("b", ib > 0)], tol=EXACT)
case("mod_int", "Mod", [("a", ia.astype(np.int64) * 7), ("b", (ib.astype(np.int64) % 4 + 1) * np.where(ib > 0, 1, -1))], tol=EXACT)
case("mod_fmod", "Mod", [("a", f32(3, 13)), ("b", f32(13, lo=0.5, hi=2))], {"fmod": 1})
case("prelu", "PRelu", [("x", f32(1, 3, 13, 127)), ("s", f32(3, 1, 1))])
for op in ("Min", "Max", "Sum", "Mean"):
    case(op.lower(), op, [("a", f32(3, 13, 127)), ("b", f32(13, 1)), ("c", f32(127))])
case("where", "Where", [("c", rng.integers(0, 2, (13, 1)).astype(bool)), ("x", f32(3, 13, 127)), ("y", f32(127))], tol=EXACT)

# --- convolution family (NCHW), odd sizes
case("conv_pads_bias", "Conv", [("x", f32(1, 3, 13, 13))], {"pads": [1, 2, 0, 1]},
     consts=[("w", f32(5, 3, 3, 3)), ("b", f32(5))], tol=SUM)
case("conv_stride_dilation", "Conv", [("x", f32(3, 3, 13, 13))], {"strides": [2, 1], "dilations": [2, 3]},
     consts=[("w", f32(4, 3, 3, 3))], tol=SUM)
case("conv_grouped_same", "Conv", [("x", f32(1, 6, 13, 13))], {"group": 3, "auto_pad": "SAME_UPPER", "strides": [2, 2]},
     consts=[("w", f32(9, 2, 3, 3))], tol=SUM)
case("conv_depthwise_7x7", "Conv", [("x", f32(1, 4, 13, 13))], {"group": 4, "pads": [3, 3, 3, 3], "strides": [2, 2]},
     consts=[("w", f32(4, 1, 7, 7)), ("b", f32(4))], tol=SUM)
case("conv_same_lower", "Conv", [("x", f32(1, 2, 13, 13))], {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
     consts=[("w", f32(3, 2, 4, 4))], tol=SUM)
case("conv1d", "Conv", [("x", f32(1, 3, 127))], {"pads": [2, 2]}, consts=[("w", f32(13, 3, 5))], tol=SUM)
case("conv_transpose", "ConvTranspose", [("x", f32(1, 3, 13, 13))], {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
     consts=[("w", f32(3, 2, 3, 3)), ("b", f32(2))], tol=SUM)
case("conv_transpose_group", "ConvTranspose", [("x", f32(1, 4, 3, 13))], {"group": 2, "strides": [1, 2]},
     consts=[("w", f32(4, 3, 3, 2))], tol=SUM)
case("gemm", "Gemm", [("a", f32(13, 127)), ("b", f32(3, 127))], {"transB": 1, "alpha": 0.5, "beta": 2.0}, consts=[("c", f32(3))], tol=SUM)
case("gemm_transA", "Gemm", [("a", f32(127, 13)), ("b", f32(127, 3))], {"transA": 1}, tol=SUM)
case("matmul_batched", "MatMul", [("a", f32(3, 1, 13, 127)), ("b", f32(1, 3, 127, 5))], tol=SUM)
case("matmul_vector", "MatMul", [("a", f32(127)), ("b", f32(3, 127, 13))], tol=SUM)
case("matmul_2d_vector", "MatMul", [("a", f32(13, 127)), ("b", f32(127))], tol=SUM)
case("batchnorm", "BatchNormalization", [("x", f32(3, 13, 5, 7))], {"epsilon": 1e-3},
     consts=[("s", f32(13)), ("b", f32(13)), ("m", f32(13)), ("v", f32(13, lo=0.1, hi=2))], tol=SUM)
case("layernorm", "LayerNormalization", [("x", f32(3, 13, 127))], {"epsilon": 1e-5},
     consts=[("s", f32(127)), ("b", f32(127))], tol=SUM)
case("layernorm_axis1", "LayerNormalization", [("x", f32(3, 13, 7))], {"axis": 1}, consts=[("s", f32(13, 7))], tol=SUM)
case("instancenorm", "InstanceNormalization", [("x", f32(3, 13, 5, 7))], consts=[("s", f32(13)), ("b", f32(13))], tol=SUM)
case("avgpool", "AveragePool", [("x", f32(1, 3, 13, 13))], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, tol=SUM)
case("avgpool_include_pad", "AveragePool", [("x", f32(1, 3, 13, 13))], {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "count_include_pad": 1}, tol=SUM)
# ceil_mode with count_include_pad is left out on purpose: for a window that runs past the end
# padding onnxruntime divides by the whole kernel, PyTorch and we by the part inside the padded
# input; ONNX leaves it open.
case("avgpool_ceil", "AveragePool", [("x", f32(1, 3, 13, 13))], {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 0], "ceil_mode": 1}, tol=SUM)
case("maxpool", "MaxPool", [("x", f32(3, 3, 13, 13))], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "dilations": [1, 2]}, tol=EXACT)
case("maxpool_ceil_indices", "MaxPool", [("x", f32(1, 3, 13, 13))], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, tol=EXACT, n_out=2)
case("globalavgpool", "GlobalAveragePool", [("x", f32(3, 13, 5, 7))], tol=SUM)
case("globalmaxpool", "GlobalMaxPool", [("x", f32(3, 13, 5, 7))], tol=EXACT)
for nm, attrs, scales, sizes in [
        ("resize_nearest_up", {"mode": "nearest"}, [1, 1, 2, 3], None),
        ("resize_nearest_sizes_floor", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, None, [1, 3, 7, 29]),
        ("resize_linear_half_pixel", {"mode": "linear"}, [1, 1, 2, 2], None),
        ("resize_linear_down", {"mode": "linear"}, None, [1, 3, 5, 9]),
        ("resize_linear_align_corners", {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None, [1, 3, 27, 13]),
        ("resize_linear_pytorch", {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, None, [1, 3, 1, 31]),
        ("resize_cubic_up", {"mode": "cubic"}, [1, 1, 2, 3], None),
        ("resize_cubic_down_exclude", {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, None, [1, 3, 5, 9])]:
    consts = [("roi", np.zeros(0, np.float32))]
    consts.append(("scales", np.array(scales, np.float32)) if scales else ("scales", np.zeros(0, np.float32)))
    if sizes:
        consts.append(("sizes", np.array(sizes, np.int64)))
    case(nm, "Resize", [("x", f32(1, 3, 13, 13))], attrs, consts=consts, tol=EXACT if "nearest" in nm else SUM)

# --- layout and shape ops
X = f32(3, 13, 1, 127)
case("reshape", "Reshape", [("x", X)], consts=[("s", np.array([0, -1, 127], np.int64))], tol=EXACT)
case("flatten", "Flatten", [("x", X)], {"axis": 2}, tol=EXACT)
case("transpose", "Transpose", [("x", X)], {"perm": [3, 0, 2, 1]}, tol=EXACT)
case("concat", "Concat", [("a", f32(3, 1, 127)), ("b", f32(3, 13, 127)), ("c", f32(3, 3, 127))], {"axis": 1}, tol=EXACT)
case("split", "Split", [("x", f32(3, 17, 13))], {"axis": 1}, consts=[("sp", np.array([1, 3, 13], np.int64))], tol=EXACT, n_out=3)
case("split_even_opset11", "Split", [("x", f32(3, 13, 6))], {"axis": -1}, opset=11, tol=EXACT, n_out=3)
case("slice", "Slice", [("x", f32(3, 13, 127))], consts=[("st", np.array([-1, 2], np.int64)), ("en", np.array([-1000, 120], np.int64)), ("ax", np.array([2, 1], np.int64)), ("sp", np.array([-3, 4], np.int64))], tol=EXACT)
case("slice_opset9", "Slice", [("x", f32(3, 13, 127))], {"starts": [1, 5], "ends": [3, 1000], "axes": [0, 2]}, opset=9, tol=EXACT)
case("squeeze", "Squeeze", [("x", X)], consts=[("ax", np.array([2], np.int64))], tol=EXACT)
case("unsqueeze", "Unsqueeze", [("x", f32(3, 13))], consts=[("ax", np.array([0, -1], np.int64))], tol=EXACT)
case("unsqueeze_opset11", "Unsqueeze", [("x", f32(3, 13))], {"axes": [1]}, opset=11, tol=EXACT)
case("expand", "Expand", [("x", f32(13, 1))], consts=[("s", np.array([3, 1, 127], np.int64))], tol=EXACT)
case("tile", "Tile", [("x", f32(3, 13))], consts=[("r", np.array([2, 3], np.int64))], tol=EXACT)
for mode in ("constant", "reflect", "edge"):
    case("pad_" + mode, "Pad", [("x", f32(3, 13, 7))], {"mode": mode},
         consts=[("p", np.array([0, 2, 3, 1, -1, 5] if mode != "constant" else [1, 2, 0, 0, 3, 1], np.int64)), ("v", np.array(1.5, np.float32))], tol=EXACT)
case("gather", "Gather", [("x", f32(3, 13, 127))], {"axis": 1}, consts=[("i", np.array([[0, -1], [12, 3]], np.int64))], tol=EXACT)
case("gather_elements", "GatherElements", [("x", f32(3, 13))], {"axis": 1}, consts=[("i", rng.integers(-13, 13, (3, 5)).astype(np.int64))], tol=EXACT)
case("shape", "Shape", [("x", X)], tol=EXACT)
case("shape_slice", "Shape", [("x", X)], {"start": 1, "end": -1}, tol=EXACT)
case("size", "Size", [("x", X)], tol=EXACT)
case("constant_of_shape", "ConstantOfShape", [], {"value": numpy_helper.from_array(np.array([2.5], np.float32))}, consts=[("s", np.array([3, 13], np.int64))], tol=EXACT)
case("range", "Range", [], consts=[("a", np.array(1.0, np.float32)), ("l", np.array(127.0, np.float32)), ("d", np.array(3.5, np.float32))], tol=ULP)
case("range_int", "Range", [], consts=[("a", np.array(13, np.int64)), ("l", np.array(-3, np.int64)), ("d", np.array(-3, np.int64))], tol=EXACT)
case("dropout", "Dropout", [("x", f32(3, 13))], tol=EXACT)
case("cast_f16", "Cast", [("x", f32(3, 13, 127, lo=-70000, hi=70000))], {"to": TensorProto.FLOAT16}, tol=EXACT)
case("cast_i64", "Cast", [("x", f32(3, 13, lo=-100, hi=100))], {"to": TensorProto.INT64}, tol=EXACT)
case("cast_u8_to_f32", "Cast", [("x", rng.integers(0, 256, (3, 13)).astype(np.uint8))], {"to": TensorProto.FLOAT}, tol=EXACT)
case("cast_like", "CastLike", [("x", f32(3, 13)), ("t", np.zeros(1, np.float16))], tol=EXACT)

# --- reductions, softmax family and friends
R = f32(3, 13, 127, lo=0.1, hi=2)
for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"):
    t = EXACT if op in ("ReduceMax", "ReduceMin") else SUM
    if op == "ReduceSum":
        case("reducesum", op, [("x", R)], {"keepdims": 0}, consts=[("ax", np.array([-1, 0], np.int64))], tol=t)
    else:
        case(op.lower(), op, [("x", R if op != "ReduceProd" else f32(3, 13, 7, lo=0.8, hi=1.2))], {"axes": [1, 2], "keepdims": 1}, tol=t)
case("reducemean_all", "ReduceMean", [("x", R)], {"keepdims": 0}, tol=SUM)
case("argmax", "ArgMax", [("x", np.round(R))], {"axis": 1, "keepdims": 0, "select_last_index": 1}, tol=EXACT)
case("argmin", "ArgMin", [("x", np.round(R))], {"axis": -1}, tol=EXACT)
case("softmax", "Softmax", [("x", f32(3, 13, 127, lo=-10, hi=10))], {"axis": 1})
case("softmax_opset11", "Softmax", [("x", f32(3, 13, 7))], {"axis": 1}, opset=11)
case("logsoftmax", "LogSoftmax", [("x", f32(3, 13, 127, lo=-10, hi=10))], tol=SUM)
case("hardmax", "Hardmax", [("x", f32(3, 13, 127))], {"axis": 1}, tol=EXACT)
case("cumsum", "CumSum", [("x", f32(3, 13, 7))], {"exclusive": 1, "reverse": 1}, consts=[("ax", np.array(1, np.int64))], tol=SUM)
case("trilu_upper", "Trilu", [("x", f32(3, 13, 7))], consts=[("k", np.array(1, np.int64))], tol=EXACT)
case("trilu_lower", "Trilu", [("x", f32(3, 7, 13))], {"upper": 0}, consts=[("k", np.array(-2, np.int64))], tol=EXACT)
case("depth_to_space_dcr", "DepthToSpace", [("x", f32(1, 12, 3, 13))], {"blocksize": 2}, tol=EXACT)
case("depth_to_space_crd", "DepthToSpace", [("x", f32(1, 12, 3, 13))], {"blocksize": 2, "mode": "CRD"}, tol=EXACT)
case("space_to_depth", "SpaceToDepth", [("x", f32(1, 3, 6, 26))], {"blocksize": 2}, tol=EXACT)


# --- quantization: integer results, exact. Scales that are powers of two put values exactly on
# rounding ties (half to even) and past the saturation bounds.
def u8(*shape):
    return rng.integers(0, 256, shape).astype(np.uint8)


def i8(*shape):
    return rng.integers(-128, 128, shape).astype(np.int8)


def scales(*shape):
    return rng.uniform(0.01, 0.1, shape).astype(np.float32)


ties = (np.arange(-600, 601, dtype=np.float32) / 4).reshape(1, 1201)
case("quantize_u8_ties", "QuantizeLinear", [("x", ties), ("s", np.array(0.5, np.float32)), ("z", np.array(128, np.uint8))], opset=13, tol=EXACT)
case("quantize_i8_ties", "QuantizeLinear", [("x", ties), ("s", np.array(0.25, np.float32)), ("z", np.array(-3, np.int8))], opset=13, tol=EXACT)
case("quantize_no_zp", "QuantizeLinear", [("x", f32(3, 13, 7, lo=0, hi=10)), ("s", np.array(0.05, np.float32))], opset=13, tol=EXACT)
case("quantize_axis", "QuantizeLinear", [("x", f32(3, 13, 7, lo=-9, hi=9)), ("s", scales(13)), ("z", i8(13))], {"axis": 1}, opset=13, tol=EXACT)
case("quantize_axis_last", "QuantizeLinear", [("x", f32(3, 13, 7, lo=-9, hi=9)), ("s", scales(7)), ("z", u8(7))], {"axis": -1}, opset=13, tol=EXACT)
case("dequantize_u8", "DequantizeLinear", [("x", u8(3, 13, 127)), ("s", np.array(0.037, np.float32)), ("z", np.array(131, np.uint8))], opset=13, tol=EXACT)
case("dequantize_axis0", "DequantizeLinear", [("x", i8(13, 127)), ("s", scales(13)), ("z", i8(13))], {"axis": 0}, opset=13, tol=EXACT)
case("dequantize_i32", "DequantizeLinear", [("x", rng.integers(-2**20, 2**20, (3, 13)).astype(np.int32)), ("s", scales(13))], {"axis": 1}, opset=13, tol=EXACT)
case("dynamic_quantize", "DynamicQuantizeLinear", [("x", f32(3, 13, 127, lo=-2, hi=5))], opset=11, n_out=3, tol=EXACT)
case("dynamic_quantize_positive", "DynamicQuantizeLinear", [("x", f32(13, 7, lo=0.5, hi=3))], opset=11, n_out=3, tol=EXACT)
case("qlinearconv_grouped", "QLinearConv",
     [("x", u8(1, 6, 13, 13)), ("xs", np.array(0.02, np.float32)), ("xz", np.array(119, np.uint8)),
      ("w", i8(8, 3, 3, 3)), ("ws", scales(8)), ("wz", np.zeros(8, np.int8)),
      ("ys", np.array(0.3, np.float32)), ("yz", np.array(100, np.uint8)),
      ("b", rng.integers(-5000, 5000, 8).astype(np.int32))],
     {"group": 2, "strides": [2, 1], "pads": [1, 0, 1, 2]}, opset=13, tol=EXACT)
case("qlinearconv_depthwise_i8", "QLinearConv",
     [("x", i8(1, 4, 13, 13)), ("xs", np.array(0.05, np.float32)), ("xz", np.array(3, np.int8)),
      ("w", i8(4, 1, 3, 3)), ("ws", np.array(0.01, np.float32)), ("wz", np.array(0, np.int8)),
      ("ys", np.array(0.2, np.float32)), ("yz", np.array(-7, np.int8))],
     {"group": 4, "dilations": [2, 2], "pads": [2, 2, 2, 2]}, opset=13, tol=EXACT)
# Constant weights (as in a model) take the CPU profile's vector kernel (qconv_vec.cl): odd
# input channel counts (a channel pair with a missing partner), output channels that do not
# fill a block of 8, rows shorter and longer than a vector, padding, stride 2, depthwise 7x7 and
# 3x3 stride 2 with two outputs per channel and a dilation (pairs of taps),
# weights whose shifted values need 32 bits (uint8 with a zero point).
case("qlinearconv_const_1x1", "QLinearConv",
     [("x", u8(1, 7, 9, 13)), ("xs", np.array(0.02, np.float32)), ("xz", np.array(131, np.uint8)),
      ("ws", scales(11)), ("ys", np.array(0.05, np.float32)), ("yz", np.array(77, np.uint8))],
     consts=[("w", i8(11, 7, 1, 1)), ("wz", np.zeros(11, np.int8)),
             ("b", rng.integers(-5000, 5000, 11).astype(np.int32))], opset=13, tol=EXACT,
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
# On hosts with AVX-512 VNNI, 1x1 convolutions (the one above among them) take qconv_dot.cl:
# int8 inputs (stored as x + 128), groups, channel counts that do not fill a dword of four,
# output channels past the last block, pixel counts below one vector pair and past the last
# one, a batch of two; and ConvInteger with uint8 weights whose zero point brings them into
# int8. On other hosts they take the kernels named above and below.
case("qlinearconv_const_1x1_grouped_i8", "QLinearConv",
     [("x", i8(2, 22, 8, 13)), ("xs", np.array(0.02, np.float32)), ("xz", np.array(-5, np.int8)),
      ("ws", scales(26)), ("ys", np.array(0.05, np.float32)), ("yz", np.array(-7, np.int8))],
     {"group": 2}, opset=13, tol=EXACT,
     consts=[("w", i8(26, 11, 1, 1)), ("wz", np.zeros(26, np.int8)),
             ("b", rng.integers(-5000, 5000, 26).astype(np.int32))],
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
case("qlinearconv_const_1x1_short_rows", "QLinearConv",
     [("x", u8(1, 16, 3, 5)), ("xs", np.array(0.02, np.float32)), ("xz", np.array(3, np.uint8)),
      ("ws", np.array(0.01, np.float32)), ("ys", np.array(0.1, np.float32)), ("yz", np.array(128, np.uint8))],
     {}, opset=13, tol=EXACT,
     consts=[("w", i8(40, 16, 1, 1)), ("wz", np.array(0, np.int8))],
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"])
case("convinteger_const_1x1_u8_weights", "ConvInteger", [("x", u8(1, 37, 5, 8)), ("xz", np.array(200, np.uint8))],
     {}, opset=10, tol=EXACT,
     consts=[("w", u8(24, 37, 1, 1)), ("wz", np.array(128, np.uint8))], order=["x", "w", "xz", "wz"])
# Windows with four or more channels per group take qconv_dot.cl on those hosts too (padded
# rows written out as the zero point; the one below among them): int8 inputs with asymmetric
# padding, a dilation and strides (2, 1), and ConvInteger 5x5 at stride 2 with a batch of two.
case("qlinearconv_const_3x3_dilated_i8", "QLinearConv",
     [("x", i8(1, 9, 11, 37)), ("xs", np.array(0.02, np.float32)), ("xz", np.array(6, np.int8)),
      ("ws", scales(13)), ("ys", np.array(0.2, np.float32)), ("yz", np.array(-2, np.int8))],
     {"strides": [2, 1], "pads": [1, 2, 0, 1], "dilations": [1, 2]}, opset=13, tol=EXACT,
     consts=[("w", i8(13, 9, 3, 3)), ("wz", np.zeros(13, np.int8)),
             ("b", rng.integers(-5000, 5000, 13).astype(np.int32))],
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
case("convinteger_const_5x5_s2", "ConvInteger", [("x", u8(2, 6, 15, 40)), ("xz", np.array(77, np.uint8))],
     {"strides": [2, 2], "pads": [2, 2, 2, 2]}, opset=10, tol=EXACT,
     consts=[("w", u8(10, 6, 5, 5)), ("wz", np.array(128, np.uint8))], order=["x", "w", "xz", "wz"])
case("qlinearconv_const_3x3_s2", "QLinearConv",
     [("x", u8(2, 5, 13, 37)), ("xs", np.array(0.02, np.float32)), ("xz", np.array(119, np.uint8)),
      ("ws", scales(9)), ("ys", np.array(0.3, np.float32)), ("yz", np.array(100, np.uint8))],
     {"strides": [2, 2], "pads": [1, 1, 1, 1]}, opset=13, tol=EXACT,
     consts=[("w", i8(9, 5, 3, 3)), ("wz", np.zeros(9, np.int8)),
             ("b", rng.integers(-5000, 5000, 9).astype(np.int32))],
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
case("qlinearconv_const_depthwise_7x7", "QLinearConv",
     [("x", u8(1, 6, 11, 35)), ("xs", np.array(0.05, np.float32)), ("xz", np.array(3, np.uint8)),
      ("ws", scales(6)), ("ys", np.array(0.1, np.float32)), ("yz", np.array(128, np.uint8))],
     {"group": 6, "pads": [3, 3, 3, 3]}, opset=13, tol=EXACT,
     consts=[("w", i8(6, 1, 7, 7)), ("wz", np.zeros(6, np.int8))],
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"])
# More depthwise layers for qconv_dw.cl: int8 inputs, rows of 70 (four vectors and a tail) and
# of 17, asymmetric padding, a batch of two, 5x5 ConvInteger with uint8 weights whose zero point
# brings them into int8.
case("qlinearconv_const_depthwise_7x7_i8_wide", "QLinearConv",
     [("x", i8(2, 5, 20, 70)), ("xs", np.array(0.05, np.float32)), ("xz", np.array(-4, np.int8)),
      ("ws", scales(5)), ("ys", np.array(0.3, np.float32)), ("yz", np.array(5, np.int8))],
     {"group": 5, "pads": [3, 2, 3, 4]}, opset=13, tol=EXACT,
     consts=[("w", i8(5, 1, 7, 7)), ("wz", np.zeros(5, np.int8)),
             ("b", rng.integers(-5000, 5000, 5).astype(np.int32))],
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
case("convinteger_const_depthwise_5x5_u8_weights", "ConvInteger", [("x", u8(1, 3, 9, 17)), ("xz", np.array(9, np.uint8))],
     {"group": 3, "pads": [2, 2, 2, 2]}, opset=10, tol=EXACT,
     consts=[("w", u8(3, 1, 5, 5)), ("wz", np.array(128, np.uint8))], order=["x", "w", "xz", "wz"])
case("qlinearconv_const_depthwise_s2_x2", "QLinearConv",
     [("x", u8(1, 4, 12, 41)), ("xs", np.array(0.05, np.float32)), ("xz", np.array(90, np.uint8)),
      ("ws", scales(8)), ("ys", np.array(0.1, np.float32)), ("yz", np.array(128, np.uint8))],
     {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1], "dilations": [1, 2]}, opset=13, tol=EXACT,
     consts=[("w", i8(8, 1, 3, 3)), ("wz", np.zeros(8, np.int8))],
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"])
# Depthwise with stride 1 takes qconv_dw.cl (products summed in float32, exact below 2^24):
# a bias, uint8 weights whose shifted values reach -255, inputs shifted down to -250, rows
# narrower than a vector, and ConvInteger 7x7 with |x - xzp| and |w - wzp| both up to 255.
case("qlinearconv_const_depthwise_3x3_u8", "QLinearConv",
     [("x", u8(2, 5, 9, 6)), ("xs", np.array(0.05, np.float32)), ("xz", np.array(250, np.uint8)),
      ("ws", scales(5)), ("ys", np.array(0.4, np.float32)), ("yz", np.array(3, np.uint8))],
     {"group": 5, "pads": [1, 1, 1, 1]}, opset=13, tol=EXACT,
     consts=[("w", u8(5, 1, 3, 3)), ("wz", np.array(255, np.uint8)),
             ("b", rng.integers(-20000, 20000, 5).astype(np.int32))],
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
# Stride 2 and several outputs per channel take qconv_dw.cl too (taps from the even and odd
# lanes of double-width loads): 7x7 stride 2 with two outputs per channel on rows wide enough
# for interior segments (the full-size vision model's downsampling), and strides (1, 2) with
# three outputs per channel of int8 inputs.
case("qlinearconv_const_depthwise_7x7_s2_x2", "QLinearConv",
     [("x", u8(1, 4, 13, 70)), ("xs", np.array(0.05, np.float32)), ("xz", np.array(120, np.uint8)),
      ("ws", scales(8)), ("ys", np.array(0.2, np.float32)), ("yz", np.array(128, np.uint8))],
     {"group": 4, "strides": [2, 2], "pads": [3, 3, 3, 3]}, opset=13, tol=EXACT,
     consts=[("w", i8(8, 1, 7, 7)), ("wz", np.zeros(8, np.int8)),
             ("b", rng.integers(-5000, 5000, 8).astype(np.int32))],
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
case("qlinearconv_const_depthwise_5x4_s1x2_x3_i8", "QLinearConv",
     [("x", i8(1, 2, 9, 40)), ("xs", np.array(0.05, np.float32)), ("xz", np.array(-3, np.int8)),
      ("ws", scales(6)), ("ys", np.array(0.2, np.float32)), ("yz", np.array(-7, np.int8))],
     {"group": 2, "strides": [1, 2], "pads": [2, 1, 2, 2]}, opset=13, tol=EXACT,
     consts=[("w", i8(6, 1, 5, 4)), ("wz", np.zeros(6, np.int8))],
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"])
case("convinteger_const_depthwise_7x7", "ConvInteger", [("x", u8(1, 3, 10, 37)), ("xz", np.array(0, np.uint8))],
     {"group": 3, "pads": [3, 3, 3, 3]}, opset=10, tol=EXACT,
     consts=[("w", u8(3, 1, 7, 7)), ("wz", np.array(255, np.uint8))], order=["x", "w", "xz", "wz"])
# Sums that may reach 2^24 (600 channels of uint8 × uint8 without zero points) stay on the
# integer kernel (qconv_vec.cl); the others above take qconv_f.cl (float32 sums, exact below).
case("convinteger_const_wide_sums", "ConvInteger", [("x", u8(1, 600, 3, 20)), ("xz", np.array(0, np.uint8))],
     {}, opset=10, tol=EXACT,
     consts=[("w", u8(5, 600, 1, 1)), ("wz", np.array(0, np.uint8))], order=["x", "w", "xz", "wz"])
case("qlinearconv_const_grouped_i8", "QLinearConv",
     [("x", i8(1, 6, 13, 13)), ("xs", np.array(0.02, np.float32)), ("xz", np.array(-5, np.int8)),
      ("ws", np.array(0.01, np.float32)), ("ys", np.array(0.3, np.float32)), ("yz", np.array(-7, np.int8))],
     {"group": 2, "strides": [2, 1], "pads": [1, 0, 1, 2]}, opset=13, tol=EXACT,
     consts=[("w", i8(8, 3, 3, 3)), ("wz", np.array(0, np.int8))],
     order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"])
case("convinteger_const_u8", "ConvInteger", [("x", u8(1, 3, 13, 21)), ("xz", np.array(128, np.uint8))],
     {"pads": [1, 1, 1, 1]}, opset=10, tol=EXACT,
     consts=[("w", u8(5, 3, 3, 3)), ("wz", np.array(200, np.uint8))], order=["x", "w", "xz", "wz"])
case("convinteger", "ConvInteger", [("x", u8(2, 3, 13, 13)), ("w", u8(5, 3, 3, 3)), ("xz", np.array(128, np.uint8)), ("wz", np.array(7, np.uint8))],
     {"strides": [2, 2], "pads": [1, 1, 1, 1]}, opset=10, tol=EXACT)
case("convinteger_1d", "ConvInteger", [("x", u8(1, 3, 127)), ("w", u8(13, 3, 5)), ("xz", np.array(0, np.uint8)), ("wz", np.array(250, np.uint8))], {"pads": [2, 2]}, opset=10, tol=EXACT)
case("matmulinteger_batched", "MatMulInteger", [("a", u8(3, 1, 13, 127)), ("b", i8(1, 3, 127, 5)), ("az", np.array(128, np.uint8)), ("bz", np.array(-2, np.int8))], opset=10, tol=EXACT)
case("matmulinteger_per_column", "MatMulInteger", [("a", u8(13, 127)), ("b", u8(127, 7)), ("az", np.array(3, np.uint8)), ("bz", u8(7))], opset=10, tol=EXACT)
# A constant 2-D B takes qmatmul_f.cl (float32 sums, exact below 2^24): batched A, a column
# count that does not fill a block of 16, rows that do not fill a block of 8, per-column zero
# points; sums that may reach 2^24 stay on qmatmul_vec.cl.
case("qlinearmatmul_const", "QLinearMatMul",
     [("a", u8(2, 13, 200)), ("as", np.array(0.02, np.float32)), ("az", np.array(77, np.uint8)),
      ("bs", scales(37)), ("ys", np.array(0.3, np.float32)), ("yz", np.array(100, np.uint8))],
     opset=10, tol=EXACT, consts=[("b", i8(200, 37)), ("bz", np.zeros(37, np.int8))],
     order=["a", "as", "az", "b", "bs", "bz", "ys", "yz"])
# On hosts with AVX-512 VNNI, qmatmul_dot.cl takes those whose shifted B fits int8 (the one
# above among them): int8 A with K not a multiple of 4 and one panel of 16 columns, and uint8 B
# brought into int8 by its zero point with a panel pair past N.
case("qlinearmatmul_const_i8_k_tail", "QLinearMatMul",
     [("a", i8(3, 61)), ("as", np.array(0.02, np.float32)), ("az", np.array(-9, np.int8)),
      ("bs", scales(16)), ("ys", np.array(0.1, np.float32)), ("yz", np.array(-4, np.int8))],
     opset=10, tol=EXACT, consts=[("b", i8(61, 16)), ("bz", np.zeros(16, np.int8))],
     order=["a", "as", "az", "b", "bs", "bz", "ys", "yz"])
case("matmulinteger_const_u8_weights", "MatMulInteger", [("a", u8(2, 9, 130)), ("az", np.array(31, np.uint8))],
     opset=10, tol=EXACT, consts=[("b", u8(130, 40)), ("bz", np.array(128, np.uint8))], order=["a", "b", "az", "bz"])
case("matmulinteger_const_per_column", "MatMulInteger", [("a", u8(5, 61)), ("az", np.array(250, np.uint8))],
     opset=10, tol=EXACT, consts=[("b", u8(61, 19)), ("bz", u8(19))], order=["a", "b", "az", "bz"])
case("matmulinteger_const_wide_sums", "MatMulInteger", [("a", u8(5, 600)), ("az", np.array(0, np.uint8))],
     opset=10, tol=EXACT, consts=[("b", u8(600, 20)), ("bz", np.array(0, np.uint8))], order=["a", "b", "az", "bz"])
case("qlinearmatmul", "QLinearMatMul",
     [("a", u8(2, 13, 127)), ("as", np.array(0.02, np.float32)), ("az", np.array(128, np.uint8)),
      ("b", i8(127, 7)), ("bs", np.array(0.01, np.float32)), ("bz", np.array(0, np.int8)),
      ("ys", np.array(0.1, np.float32)), ("yz", np.array(120, np.uint8))], opset=10, tol=EXACT)


def build(c, path):
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in c["inputs"]]
    inits = [numpy_helper.from_array(a, n) for n, a in c["consts"]]
    outs = [f"y{i}" for i in range(c["n_out"])]
    node = helper.make_node(c["op"], c["order"] or [n for n, _ in c["inputs"]] + [n for n, _ in c["consts"]], outs,
                            name=c["name"], **c["attrs"])
    g = helper.make_graph([node], c["name"], ins, [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    # Value infos of the outputs are left open; onnx's shape inference fills them for ORT.
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", c["opset"])])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m)
    del m.graph.output[:]
    for o in outs:
        vi = [v for v in m.graph.value_info if v.name == o]
        m.graph.output.append(vi[0] if vi else helper.make_empty_tensor_value_info(o))
    onnx.save(m, path)


def main():
    opc = sys.argv[1]
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    only = sys.argv[sys.argv.index("--filter") + 1].split(",") if "--filter" in sys.argv else None
    device = "--device" in sys.argv
    work = keep or tempfile.mkdtemp(prefix="nn_ops_")
    failures, ran = [], 0
    ops_seen = set()
    for c in CASES:
        if only and not any(o in c["name"] for o in only):
            continue
        d = os.path.join(work, c["name"])
        os.makedirs(d, exist_ok=True)
        model = os.path.join(d, "model.onnx")
        build(c, model)
        feeds = {n: a for n, a in c["inputs"]}
        # onnxruntime's uint8 x int8 products saturate on x86 without VNNI: it runs the
        # uint8-weight twin, which is exact everywhere (ort_exact.py).
        twin, ort_feeds = uint8_weights_twin(onnx.load(model), feeds)
        sess = ort.InferenceSession(twin.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, ort_feeds)
        args = [opc, "run", model, "--output-dir", os.path.join(d, "out")]
        if not device:
            args.append("--reference")
        for n, a in c["inputs"]:
            np.save(os.path.join(d, n + ".npy"), a)
            args += ["--input", f"{n}={os.path.join(d, n + '.npy')}"]
        r = subprocess.run(args, capture_output=True, text=True)
        ran += 1
        ops_seen.add(c["op"])
        if r.returncode != 0:
            # (not the warning that the CPU device stands in for a GPU: a crash after it fails)
            if device and ("no OpenCL platform" in r.stderr or "no OpenCL device" in r.stderr):
                print("SKIP: no OpenCL device")
                return 77
            failures.append(f"{c['name']}: opc failed: {r.stderr.strip()}")
            continue
        rtol, atol = c["tol"]
        for i, w in enumerate(want):
            got = np.load(os.path.join(d, "out", f"y{i}.npy"))
            if got.dtype != w.dtype or got.shape != w.shape:
                failures.append(f"{c['name']} output {i}: {got.dtype}{got.shape}, onnxruntime {w.dtype}{w.shape}")
                continue
            if w.dtype.kind in "biu" or (rtol == 0 and atol == 0):
                bad = ~((got == w) | (np.isnan(got.astype(np.float64)) & np.isnan(w.astype(np.float64))))
            else:
                g64, w64 = got.astype(np.float64), w.astype(np.float64)
                bad = ~(np.isclose(g64, w64, rtol=rtol, atol=atol) | (np.isnan(g64) & np.isnan(w64)))
            if bad.any():
                k = np.argwhere(bad)[0]
                failures.append(f"{c['name']} output {i}: {int(bad.sum())} of {w.size} differ, first at {tuple(k)}: "
                                f"{got[tuple(k)]!r} vs onnxruntime {w[tuple(k)]!r}")
    for f in failures:
        print("FAIL", f)
    print(f"ops vs onnxruntime: {ran - len(set(f.split(':')[0].split(' ')[0] for f in failures))} of {ran} cases agree "
          f"({len(ops_seen)} ops)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
