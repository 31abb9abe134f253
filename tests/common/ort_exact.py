"""onnxruntime as an exact integer peer on every x86 CPU.

On x86 CPUs without VNNI (AVX2, and AVX-512 before Cascade Lake), onnxruntime computes uint8
activations times int8 weights with VPMADDUBSW, which saturates each pair of products to int16:
with weights outside [-64, 63] its sums are wrong (onnxruntime documents this and suggests
7-bit weights). The same arithmetic with uint8 weights (w + 128, zero point + 128) widens to
16 bits before multiplying and is exact, and (w + 128) - (zp + 128) = w - zp, so the result is
the same integer. `uint8_weights_twin` rewrites a model (and its feeds) that way; the tests run
onnxruntime on the twin and ours on the model as written.
"""
import numpy as np
from onnx import TensorProto, numpy_helper

# op -> (activation input, weight input, weight zero point input)
_INTEGER_OPS = {
    "QLinearConv": (0, 3, 5),
    "QLinearMatMul": (0, 3, 5),
    "ConvInteger": (0, 1, 3),
    "MatMulInteger": (0, 1, 3),
}


def _shift(a):
    return np.asarray(a.astype(np.int16) + 128).astype(np.uint8)


def uint8_weights_twin(model, feeds=None):
    """Rewrites `model` (an onnx ModelProto, changed in place) and `feeds` (a dict, copied) so
    that every integer product of uint8 activations and int8 weights, and every
    DequantizeLinear of an int8 initializer (a QDQ model's weights, which onnxruntime fuses
    into QLinearConv), reads uint8 weights instead. Returns (model, feeds)."""
    feeds = dict(feeds or {})
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    inputs = {i.name: i for i in g.input}
    elem = {n: t.data_type for n, t in inits.items()}
    elem.update({n: i.type.tensor_type.elem_type for n, i in inputs.items()})
    elem.update({n: t.type.tensor_type.elem_type for n, t in ((v.name, v) for v in g.value_info)})
    done = set()

    def shift(name):
        if not name or name in done:
            return
        done.add(name)
        if name in inits:
            t = inits[name]
            t.CopyFrom(numpy_helper.from_array(_shift(numpy_helper.to_array(t)), name))
        elif name in feeds:
            feeds[name] = _shift(feeds[name])
            inputs[name].type.tensor_type.elem_type = TensorProto.UINT8
        else:
            raise ValueError(f"uint8_weights_twin: {name} is neither an initializer nor a feed")

    for node in g.node:
        ins = list(node.input)
        if node.op_type in _INTEGER_OPS:
            xi, wi, zi = _INTEGER_OPS[node.op_type]
            if elem.get(ins[xi]) != TensorProto.UINT8 or elem.get(ins[wi]) != TensorProto.INT8:
                continue
            if zi >= len(ins) or not ins[zi]:
                zname = ins[wi] + "_twin_zero_point"
                g.initializer.append(numpy_helper.from_array(np.array(0, np.int8), zname))
                inits[zname] = g.initializer[-1]
                ins += [""] * (zi + 1 - len(ins))
                ins[zi] = zname
                del node.input[:]
                node.input.extend(ins)
            shift(ins[wi])
            shift(ins[zi])
        elif node.op_type == "DequantizeLinear" and elem.get(ins[0]) == TensorProto.INT8 \
                and ins[0] in inits and len(ins) > 2 and ins[2] in inits:
            shift(ins[0])
            shift(ins[2])
    return model, feeds
