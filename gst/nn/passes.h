// Graph passes: each is a small function that rewrites a shape-inferred graph into one that
// computes the same outputs (tests/nn/test_passes.cpp checks each with the reference
// interpreter before and after). They run in the order of OptimizeGraph.
#pragma once

#include "nn/graph.h"

namespace op::nn {

// QDQ (QuantizeLinear/DequantizeLinear pairs around float ops, as onnxruntime's quantize_static
// writes them): DequantizeLinear(x) → Conv(DequantizeLinear(w), [DequantizeLinear(b)]) →
// [Relu] → QuantizeLinear → QLinearConv, which computes in integers. Needs per-tensor constant
// scales and zero points for x and y, constant int8/uint8 weights with per-tensor or
// per-output-channel scales, an int32 bias whose scale is x_scale * w_scale (zero point 0), and a
// Relu only where the output's zero point is the bottom of its range (so saturation is the
// Relu). Anything else stays float.
Status FuseQuantizedConv(Graph &graph);
// The same for DequantizeLinear(a) → MatMul / Gemm(DequantizeLinear(b), [DequantizeLinear(c)])
// → [Relu] → QuantizeLinear → QLinearMatMul: per-tensor constant scales and zero points of a and
// y, b per tensor or (constant, 2-D) per output column, Gemm without transA and with alpha and
// beta 1 (a transposed constant B is transposed at compile time), and an int32 bias per column
// on the scale a_scale * b_scale[n], which becomes QLinearMatMul's ninth input (an extension of
// ours: requantization adds it to the integer sum first, as QLinearConv's bias).
Status FuseQuantizedMatMul(Graph &graph);
// QLinearConv → DequantizeLinear → [elementwise float steps] → QuantizeLinear, where each step
// reads only the running values and scalar constants and nothing outside reads them: each output
// element is a function of one quantized value, so the steps become a 256-entry table computed
// on the reference interpreter, QLinearConv's tenth input (an extension of ours: the requantized
// value indexes the table, whose type is the output's). Where the steps do not end so (a value
// read elsewhere, as a residual stream's), the DequantizeLinear alone becomes a float32 table.
Status FuseQuantizedLookup(Graph &graph);
// Folds DequantizeLinear of constants (weights and biases left in float by FuseQuantizedConv).
Status FoldDequantizeLinear(Graph &graph);
// Evaluates nodes whose inputs are all constant (shape computations, constant inputs).
Status FoldConstants(Graph &graph);
// Identity, Dropout (inference) and no-op Reshape/Cast/Expand/Transpose are bypassed.
Status RemoveIdentities(Graph &graph);
// Cast(fp16→fp32)→Cast(fp32→fp16) and Cast(fp32→fp16)→Cast(fp16→fp32)... pairs that change
// nothing: only the exact round trip fp16→fp32→fp16 is removed (fp32→fp16→fp32 rounds, so it
// stays).
Status RemoveCastPairs(Graph &graph);
// BatchNormalization after a Conv (constant weights) → new Conv weights and bias.
Status FoldBatchNormIntoConv(Graph &graph);
// LayerNorm written out (ReduceMean, Sub, Pow 2 or Mul, ReduceMean, Add eps, Sqrt, Div, then
// an optional constant Mul and Add) → LayerNormalization (older exports lack the op).
Status FuseLayerNormalization(Graph &graph);
// Transpose (last two dims) → MatMul by a constant 2-D W → constant Adds along the last dim and
// unary ops → Transpose back (a token-mixing layer) → MatMul(W^T, x) and the same chain on the
// untransposed rows (biases [N] as [N, 1]): the same products in the same order, two launches
// fewer, and FuseConvGemm can then take the chain and a residual into the product.
Status MixAlongRows(Graph &graph);
// Conv/Gemm/MatMul + bias Add + activation + residual Add → FusedConv / FusedGemm.
Status FuseConvGemm(Graph &graph);
// Runs of elementwise Unary/Binary ops on one value → ElementwiseChain.
Status FuseElementwiseChains(Graph &graph);
// A QuantizeLinear (one constant scale and zero point) of an ElementwiseChain's value → a
// second output of the chain (the quantizer's scale and zero point appended to its inputs,
// attribute "quantize" 1): one launch writes the float value and its quantized copy.
Status FuseQuantizeIntoChain(Graph &graph);
// An ElementwiseChain of one value (GELU, say) right after a Conv/Gemm/MatMul (fused or not,
// without an activation of its own) → that node's epilogue (activation "Chain").
Status FuseChainIntoEpilogue(Graph &graph);
// Removes nodes and tensors nobody reads.
Status EliminateDeadCode(Graph &graph);

struct OptimizeOptions {
  bool fuse =
      true;  // false: only folding and cleanup (what the conformance runner's plain mode uses)
};
// All of the above, in order; the graph must be shape-inferred.
Status OptimizeGraph(Graph &graph, const OptimizeOptions &options = {});

}  // namespace op::nn
