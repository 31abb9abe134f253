// Per-op output typing: the dtype and static shape of each node output from its inputs. Pure (no
// graph walk, no evaluation), so both shape inference and the reference interpreter use it.
#pragma once

#include <vector>

#include "nn/graph.h"

namespace op::nn {

// Indices that are constants of the model (Gather, GatherElements) out of range: refused at load
// as onnxruntime refuses them. Not part of InferOutputTypes, because the reference interpreter
// calls that with every input holding a value: indices known only at run time are clamped
// (reference.cpp and the device kernel), not refused.
Status CheckConstantIndices(const Node &node, const std::vector<const Tensor *> &inputs);

// The output dtypes and shapes of a node from its inputs (dtype and static shape; data where
// an input carries parameters). One entry per node output (an absent optional output gets
// kUndefined). Refuses outputs of absurd size (more than 2^32 elements). Shared by InferNode and
// the reference interpreter.
StatusOr<std::vector<Tensor>> InferOutputTypes(const Node &node,
                                               const std::vector<const Tensor *> &inputs);

}  // namespace op::nn
