// Counts for `opc info` and benchmarks: op histogram, FLOPs, parameters of a shape-inferred
// graph. A multiply-add counts as 2 FLOPs; layout ops count 0.
#pragma once

#include <map>
#include <string>

#include "nn/graph.h"

namespace op::nn {

struct GraphStats {
  std::map<std::string, int> ops;  // op name → node count
  int64_t flops = 0;               // per run
  int64_t parameters = 0;          // elements of the constants nodes read
  int64_t parameter_bytes = 0;
  int64_t activation_bytes = 0;  // sum of all non-constant tensors (no memory reuse)
};

// Needs static shapes (after InferShapes) for FLOPs; the histogram works on any graph.
GraphStats ComputeStats(const Graph &graph);
// The FLOPs of one node (0 if its shapes are not static).
int64_t NodeFlops(const Graph &graph, const Node &node);

}  // namespace op::nn
