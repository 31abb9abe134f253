// The reference interpreter: plain C++ for every op of nn/ops.def, with ONNX semantics. It is
// the oracle of the tests (device kernels, passes and conformance are compared against it) and
// the evaluator of constant folding. Clarity over speed: float ops compute in double and round
// to the output dtype once (float16 outputs are rounded to half).
#pragma once

#include <vector>

#include "nn/graph.h"

namespace op::nn {

// The largest value (one tensor) the interpreter makes: 256 MiB, far above any real network's
// activations and constants, far below what a hostile ConstantOfShape or Range can ask for.
// Constant folding goes through EvaluateNode, so this bounds every folded constant too.
constexpr uint64_t kMaxReferenceValueBytes = uint64_t{256} << 20;

// Runs the whole graph. `inputs` are matched to graph inputs by name (Tensor.name, dtype,
// shape, data); every graph input needs one, of the declared dtype and a static shape equal to
// the declared one (after shape inference) or compatible with it (before). Returns the outputs
// in graph.outputs order, as constant-style tensors (name, dtype, shape, data).
StatusOr<std::vector<Tensor>> RunReference(const Graph &graph, const std::vector<Tensor> &inputs);

// Evaluates one node on values (all inputs present as data, kNoTensor → null). Returns one
// value per node output (an unused optional output comes back with dtype kUndefined).
StatusOr<std::vector<Tensor>> EvaluateNode(const Node &node,
                                           const std::vector<const Tensor *> &inputs);

}  // namespace op::nn
