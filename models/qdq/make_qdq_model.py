#!/usr/bin/env python3
"""Writes a small convolutional net quantized by onnxruntime's `quantize_static` (QDQ format) and
onnxruntime's output for one fixed input, for the runtime's agreement test
(tests/nn/qdq_vs_onnxruntime.py).

usage: make_qdq_model.py [OUT_DIR]   (default: this script's folder)

Writes small_conv_qdq.onnx, input.npy (x, float32 [1,3,16,32]) and onnxruntime's outputs
ort_y.npy (y, float32 [1,10]) and ort_r3.npy (r3, the last convolution's activation, float32
[1,16,8,16]), all from fixed seeds. The float net: Conv 3→8 3×3 stride 2 + Relu, Conv 8→16 3×3
(group 2) + Relu, depthwise Conv 16 3×3 + Relu, GlobalAveragePool, Flatten, Gemm 16→10;
outputs y and r3.
Quantization: uint8 activations, int8 weights per output channel, int32 biases, min-max
calibration on 16 random inputs. Needs numpy, onnx and onnxruntime (the project's venv).
"""
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)

SHAPE = [1, 3, 16, 32]


def float_model(rng):
    def w(name, shape):
        fan_in = int(np.prod(shape[1:]))
        return numpy_helper.from_array(
            rng.normal(0, 1.0 / np.sqrt(fan_in), size=shape).astype(np.float32), name)

    def b(name, n):
        return numpy_helper.from_array(rng.normal(0, 0.1, size=[n]).astype(np.float32), name)

    inits = [w('w1', [8, 3, 3, 3]), b('b1', 8), w('w2', [16, 4, 3, 3]), b('b2', 16),
             w('w3', [16, 1, 3, 3]), b('b3', 16), w('wg', [10, 16]), b('bg', 10)]
    nodes = [
        helper.make_node('Conv', ['x', 'w1', 'b1'], ['c1'], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node('Relu', ['c1'], ['r1']),
        helper.make_node('Conv', ['r1', 'w2', 'b2'], ['c2'], group=2, pads=[1, 1, 1, 1]),
        helper.make_node('Relu', ['c2'], ['r2']),
        helper.make_node('Conv', ['r2', 'w3', 'b3'], ['c3'], group=16, pads=[1, 1, 1, 1]),
        helper.make_node('Relu', ['c3'], ['r3']),
        helper.make_node('GlobalAveragePool', ['r3'], ['p']),
        helper.make_node('Flatten', ['p'], ['f']),
        helper.make_node('Gemm', ['f', 'wg', 'bg'], ['y'], transB=1),
    ]
    g = helper.make_graph(nodes, 'small_conv',
                          [helper.make_tensor_value_info('x', TensorProto.FLOAT, SHAPE)],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 10]),
                           helper.make_tensor_value_info('r3', TensorProto.FLOAT, [1, 16, 8, 16])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='gst-op')
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


class Calibration(CalibrationDataReader):
    def __init__(self, rng, count):
        self.data = iter([{'x': rng.uniform(-1, 1, size=SHAPE).astype(np.float32)}
                          for _ in range(count)])

    def get_next(self):
        return next(self.data, None)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(2026)
    with tempfile.TemporaryDirectory() as tmp:
        fp = os.path.join(tmp, 'small_conv.onnx')
        onnx.save(float_model(rng), fp)
        q = os.path.join(out, 'small_conv_qdq.onnx')
        quantize_static(fp, q, Calibration(rng, 16), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        per_channel=True)
    x = np.random.default_rng(7).uniform(-1, 1, size=SHAPE).astype(np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(q, so, providers=['CPUExecutionProvider'])
    y, r3 = sess.run(['y', 'r3'], {'x': x})
    np.save(os.path.join(out, 'input.npy'), x)
    np.save(os.path.join(out, 'ort_y.npy'), y)
    np.save(os.path.join(out, 'ort_r3.npy'), r3)
    print(f'{q}: {os.path.getsize(q)} bytes; y = {np.array2string(y.ravel(), precision=4)}')


if __name__ == '__main__':
    main()
