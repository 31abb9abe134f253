// Internals of the reference interpreter shared by reference.cpp (elementwise, layout, shape
// ops) and reference_nn.cpp (convolutions, products, pools, normalisation, resize,
// reductions). Not a public header.
#pragma once

#include <vector>

#include "nn/graph.h"
#include "nn/op_params.h"

namespace op::nn::ref {

// Elementwise math runs in long double: exact for every int64 and float value, so one code
// path serves all dtypes (heavier ops convert to double vectors instead).
using Real = long double;

Real GetReal(const Tensor &t, size_t i);
void SetReal(Bytes &b, DType t, size_t i, Real v);

// A zero-filled value of this dtype and shape.
Tensor NewValue(DType dtype, const Shape &shape);
Bytes &Mut(Tensor &t);  // the value's bytes (NewValue owns them; never shared yet)

std::vector<double> ToDoubles(const Tensor &t);
Tensor FromDoubles(DType dtype, const Shape &shape, const std::vector<double> &v);

// For broadcasting `in` to `out`: the element offset of `in` for every element of `out`.
std::vector<int64_t> BroadcastOffsets(const Shape &in, const Shape &out);

// Applies a Unary op (by kind, with its scalar parameters) to one value.
struct UnaryParams {
  double alpha = 0, beta = 0, gamma = 0;
  bool flag_a = true, flag_b = true;  // IsInf detect_negative / detect_positive
};
UnaryParams GetUnaryParams(OpKind op, const Attributes &attrs);
Real ApplyUnary(OpKind op, Real x, const UnaryParams &p, DType dtype);
// Applies a Binary op; `dtype` is the inputs' dtype (integer division truncates).
Real ApplyBinary(OpKind op, Real a, Real b, DType dtype, int64_t fmod);

// The steps of an ElementwiseChain, or of a fused op whose activation is "Chain" (attributes
// ops, operand, swap, step_alpha, step_beta). A binary step's operand is a scalar (-1) or one of
// the chain's `num_inputs` inputs.
struct ChainStep {
  OpKind op = OpKind::kIdentity;
  OpClass cls = OpClass::kUnary;
  int64_t operand = -1;
  bool swap = false;
  UnaryParams p;
  double scalar = 0;
};
StatusOr<std::vector<ChainStep>> GetChainSteps(const Node &n, size_t num_inputs);
// One element of a chain, in float32 as the fused kernels compute it; `input(k)` is the value
// of the chain's input k (input 0 is where the chain starts).
template <typename Input>
float ApplyChain(const std::vector<ChainStep> &steps, Input input) {
  float v = input(0);
  for (const ChainStep &s : steps) {
    if (s.cls == OpClass::kUnary) {
      v = static_cast<float>(ApplyUnary(s.op, v, s.p, DType::kFloat32));
      continue;
    }
    const float o = s.operand < 0 ? static_cast<float>(s.scalar) : input(s.operand);
    v = static_cast<float>(s.swap ? ApplyBinary(s.op, o, v, DType::kFloat32, 0)
                                  : ApplyBinary(s.op, v, o, DType::kFloat32, 0));
  }
  return v;
}

// Activation of a fused op from its attributes (activation, activation_alpha/beta): one Unary
// op, or a chain of element-wise steps on the pre-activation value (activation "Chain").
struct Activation {
  OpKind op = OpKind::kIdentity;
  UnaryParams params;
  std::vector<ChainStep> chain;  // activation "Chain"
  bool is_chain = false;
};
StatusOr<Activation> GetActivation(const Node &node);

// reference_nn.cpp: the heavy ops. `in` are values, `out` are typed (dtype, shape) and get data.
Status RunConv(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunConvTranspose(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunMatMul(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunPool(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunGlobalPool(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunNormalization(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunResize(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunReduce(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunSoftmax(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunCumSum(const Node &n, const Inputs &in, std::vector<Tensor> &out);

// reference_quant.cpp: the quantization ops (onnxruntime's float32 arithmetic, ties to even).
Status RunQuantizeLinear(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunDequantizeLinear(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunDynamicQuantizeLinear(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunQuantizedConv(const Node &n, const Inputs &in, std::vector<Tensor> &out);
Status RunQuantizedMatMul(const Node &n, const Inputs &in, std::vector<Tensor> &out);

}  // namespace op::nn::ref
