#!/usr/bin/env python3
"""Writes a FastViT-style block as ONNX (opset 17, float32, fixed random weights).

usage: make_fastvit_block.py OUT.onnx

x (1,16,14,14) → grouped 7×7 stride-2 conv (groups 16, 16→32 channels) + bias → GELU in tanh
form (Mul/Pow/Add/Tanh nodes, as PyTorch exports it) → tokens (1,49,32) → LayerNorm →
single-head self-attention (Q, K, V projections, scaled scores, Softmax, output projection)
+ residual → LayerNorm → MLP 32→64→32 with GELU + residual → y (1,49,32).
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(42)
    inits, nodes = [], []

    def w(name, shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        s = scale if scale is not None else 1.0 / np.sqrt(fan_in)
        inits.append(numpy_helper.from_array(rng.normal(0, s, size=shape).astype(np.float32), name))
        return name

    def c(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=f'{op}_{len(nodes)}', **attrs))
        return outs[0]

    def gelu(x, p):
        x3 = node('Pow', [x, c(p + '_three', np.float32(3.0))], [p + '_x3'])
        inner = node('Mul', [x3, c(p + '_k', np.float32(0.044715))], [p + '_a'])
        inner = node('Add', [x, inner], [p + '_b'])
        inner = node('Mul', [inner, c(p + '_s', np.float32(0.7978845608))], [p + '_c'])
        t = node('Tanh', [inner], [p + '_t'])
        t = node('Add', [t, c(p + '_one', np.float32(1.0))], [p + '_u'])
        h = node('Mul', [x, t], [p + '_v'])
        return node('Mul', [h, c(p + '_half', np.float32(0.5))], [p + '_gelu'])

    def layernorm(x, p, n):
        return node('LayerNormalization',
                    [x, w(p + '_g', [n], 0.1), w(p + '_beta', [n], 0.1)], [p + '_ln'],
                    axis=-1, epsilon=1e-5)

    y = node('Conv', ['x', w('conv_w', [32, 1, 7, 7]), w('conv_b', [32], 0.1)], ['conv'],
             group=16, kernel_shape=[7, 7], pads=[3, 3, 3, 3], strides=[2, 2])
    y = gelu(y, 'g0')
    y = node('Reshape', [y, c('tok_shape', np.array([1, 32, 49], np.int64))], ['tok_r'])
    tok = node('Transpose', [y], ['tok'], perm=[0, 2, 1])
    h = layernorm(tok, 'ln1', 32)
    q = node('MatMul', [h, w('wq', [32, 32])], ['q'])
    k = node('MatMul', [h, w('wk', [32, 32])], ['k'])
    v = node('MatMul', [h, w('wv', [32, 32])], ['v'])
    kt = node('Transpose', [k], ['kt'], perm=[0, 2, 1])
    s = node('MatMul', [q, kt], ['scores'])
    s = node('Mul', [s, c('inv_sqrt_d', np.float32(1 / np.sqrt(32)))], ['scaled'])
    a = node('Softmax', [s], ['attn'], axis=-1)
    o = node('MatMul', [a, v], ['ctx'])
    o = node('MatMul', [o, w('wo', [32, 32])], ['proj'])
    tok = node('Add', [tok, o], ['res1'])
    h = layernorm(tok, 'ln2', 32)
    h = node('MatMul', [h, w('w1', [32, 64])], ['fc1'])
    h = node('Add', [h, w('b1', [64], 0.1)], ['fc1b'])
    h = gelu(h, 'g1')
    h = node('MatMul', [h, w('w2', [64, 32])], ['fc2'])
    h = node('Add', [h, w('b2', [32], 0.1)], ['fc2b'])
    node('Add', [tok, h], ['y'])

    graph = helper.make_graph(
        nodes, 'fastvit_block',
        [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 16, 14, 14])],
        [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 49, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == '__main__':
    main()
