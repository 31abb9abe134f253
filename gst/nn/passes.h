// Graph passes: each is a small function that rewrites a shape-inferred graph into one that
// computes the same outputs (tests/nn/test_passes.cpp checks each with the reference
// interpreter before and after). They run in the order of OptimizeGraph.
#pragma once

#include "nn/graph.h"

namespace op::nn {

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
// Conv/Gemm/MatMul + bias Add + activation + residual Add → FusedConv / FusedGemm.
Status FuseConvGemm(Graph &graph);
// Runs of elementwise Unary/Binary ops on one value → ElementwiseChain.
Status FuseElementwiseChains(Graph &graph);
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
