"""ONNX helpers for the reference-model generator: no torch needed, so the model cards and checks
can be redone from the committed files alone.

- to_fp16: rewrites a float32 graph into the form openpilot's networks have (fp16 weights and
  compute, float32 or uint8 at the graph boundary with Cast nodes in between);
- to_fp32_twin: the reverse, for peers and references that need float32 arithmetic (float16
  initializers widened, Cast-to-float16 made Cast-to-float32);
- constants_to_initializers: the runtime's op list has no Constant, so constants become weights;
- count_flops / count_params: what the model cards report, from onnx shape inference;
- encode_slices / decode_slices: the `output_slices` metadata in openpilot's encoding.
"""

import base64
import pickle

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

# The ops our runtime imports (docs/runtime.md); the generator refuses to write a model using others.
SUPPORTED_OPS = frozenset("""
Conv ConvTranspose Gemm MatMul Add Sub Mul Div Pow Sqrt Exp Log Neg Abs Reciprocal Relu LeakyRelu
Elu Sigmoid HardSigmoid HardSwish Tanh Erf Softplus Clip Min Max Where Equal Less Greater Reshape
Flatten Transpose Concat Split Slice Squeeze Unsqueeze Expand Tile Pad Gather Shape ConstantOfShape
Range Identity Dropout Cast ReduceMean ReduceSum ReduceMax Softmax LogSoftmax LayerNormalization
BatchNormalization AveragePool MaxPool GlobalAveragePool Resize
""".split())


def constants_to_initializers(model):
    """Moves every Constant node's value into the initializer list under the node's output name."""
    graph = model.graph
    keep = []
    for node in graph.node:
        if node.op_type != "Constant":
            keep.append(node)
            continue
        attr = node.attribute[0]
        if attr.name != "value":
            raise ValueError(f"Constant {node.name}: attribute {attr.name} is not handled")
        tensor = onnx.TensorProto()
        tensor.CopyFrom(attr.t)
        tensor.name = node.output[0]
        graph.initializer.append(tensor)
    del graph.node[:]
    graph.node.extend(keep)


def _fp16_tensor(tensor):
    """Returns a float16 copy of a float32 TensorProto (round to nearest even, like a GPU does)."""
    arr = numpy_helper.to_array(tensor).astype(np.float16)
    return numpy_helper.from_array(arr, tensor.name)


def to_fp16(model):
    """Rewrites a float32 model in place so that weights and compute are float16.

    Graph inputs and outputs keep their types: a float32 input gets a Cast to float16 right after
    it and each float32 output is produced by a final Cast to float32, which is how openpilot's
    fp16 networks present themselves (uint8 images in, float32 `outputs` out). Casts the exporter
    wrote to float32 (the uint8 normalisation) now cast to float16 directly.
    """
    graph = model.graph
    for i, init in enumerate(graph.initializer):
        if init.data_type == TensorProto.FLOAT:
            graph.initializer[i].CopyFrom(_fp16_tensor(init))
    for node in graph.node:
        for attr in node.attribute:
            if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.FLOAT16
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == TensorProto.FLOAT:
                attr.t.CopyFrom(_fp16_tensor(attr.t))

    # Boundary casts. Renaming is done on the consumers so the graph's input names stay.
    new_nodes = []
    for inp in graph.input:
        if inp.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        half = inp.name + "_fp16"
        for node in graph.node:
            for k, name in enumerate(node.input):
                if name == inp.name:
                    node.input[k] = half
        new_nodes.append(helper.make_node("Cast", [inp.name], [half], name=half + "_cast",
                                          to=TensorProto.FLOAT16))
    tail = []
    for out in graph.output:
        if out.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        half = out.name + "_fp16"
        for node in graph.node:
            for k, name in enumerate(node.output):
                if name == out.name:
                    node.output[k] = half
        tail.append(helper.make_node("Cast", [half], [out.name], name=out.name + "_cast",
                                     to=TensorProto.FLOAT))
    body = list(graph.node)
    del graph.node[:]
    graph.node.extend(new_nodes + body + tail)
    # Intermediate types changed; shape inference recomputes them when someone needs them.
    del graph.value_info[:]


def to_fp32_twin(model):
    """The float32 twin of a float16 model, in place: the same graph computing in float32."""
    for i, init in enumerate(model.graph.initializer):
        if init.data_type == TensorProto.FLOAT16:
            a = numpy_helper.to_array(init).astype(np.float32)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(a, init.name))
    for n in model.graph.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT16:
                a.i = TensorProto.FLOAT
    del model.graph.value_info[:]
    return model


def encode_slices(slices):
    """openpilot's `output_slices`: base64 of a pickle of dict[str, slice] with plain ints.

    Protocol 4 is written explicitly (not Python's default) so the bytes do not depend on the
    Python version that runs the generator.
    """
    clean = {str(k): slice(int(v.start), int(v.stop), None) for k, v in slices.items()}
    return base64.b64encode(pickle.dumps(clean, protocol=4)).decode("ascii")


def decode_slices(text):
    """Inverse of encode_slices; only for our own files (unpickling is unsafe on foreign data)."""
    return pickle.loads(base64.b64decode(text))


def _shapes(model):
    """Maps every tensor name to its static shape (list of ints) after onnx shape inference."""
    inferred = shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = [d.dim_value for d in dims]
    for init in g.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


# Floating-point operations per output element of elementwise and normalisation ops. The big
# terms (Conv, Gemm, MatMul) are exact; these small ones are conventional estimates.
_PER_ELEMENT = {
    "Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Pow": 1, "Sqrt": 1, "Tanh": 1, "Erf": 1,
    "Relu": 1, "Sigmoid": 1, "Exp": 1, "Neg": 1, "Reciprocal": 1, "Clip": 1, "Max": 1, "Min": 1,
    "Softmax": 5, "LayerNormalization": 8,
}


def count_flops(model):
    """Returns (total, by_op) floating-point operations of one run; a multiply-add counts as 2."""
    shapes = _shapes(model)
    by_op = {}

    def prod(xs):
        return int(np.prod(xs, dtype=np.int64)) if xs else 1

    for node in model.graph.node:
        out = shapes.get(node.output[0], [])
        if node.op_type == "Conv":
            w = shapes[node.input[1]]  # (Cout, Cin/groups, kh, kw)
            f = 2 * prod(out) * prod(w[1:])
            if len(node.input) > 2:
                f += prod(out)
        elif node.op_type == "Gemm":
            a = shapes[node.input[0]]  # (M, K), or (K, M) when transposed
            trans_a = any(x.name == "transA" and x.i for x in node.attribute)
            k = a[0] if trans_a else a[1]
            f = 2 * prod(out) * k + (prod(out) if len(node.input) > 2 else 0)
        elif node.op_type == "MatMul":
            f = 2 * prod(out) * shapes[node.input[0]][-1]
        elif node.op_type in ("ReduceMean", "ReduceSum", "ReduceMax"):
            f = prod(shapes[node.input[0]])
        elif node.op_type in _PER_ELEMENT:
            f = _PER_ELEMENT[node.op_type] * prod(out)
        else:
            f = 0  # layout and shape ops move data, they do not compute
        by_op[node.op_type] = by_op.get(node.op_type, 0) + f
    return sum(by_op.values()), by_op


def count_params(model):
    """Number of floating-point weights (integer initializers are shapes and indices)."""
    floats = (TensorProto.FLOAT, TensorProto.FLOAT16)
    return sum(int(np.prod(t.dims, dtype=np.int64)) for t in model.graph.initializer
               if t.data_type in floats)


def io_signature(model):
    """[(name, type name, dims)] of the graph inputs and outputs, as the model cards list them."""
    def sig(vi):
        tt = vi.type.tensor_type
        return (vi.name, helper.tensor_dtype_to_np_dtype(tt.elem_type).name,
                tuple(d.dim_value for d in tt.shape.dim))
    return [sig(v) for v in model.graph.input], [sig(v) for v in model.graph.output]
