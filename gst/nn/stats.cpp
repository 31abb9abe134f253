// Graph statistics (see stats.h).
#include "nn/stats.h"

#include <algorithm>
#include <set>

#include "nn/op_params.h"
#include "nn_op_cases.h"

namespace op::nn {

int64_t NodeFlops(const Graph &g, const Node &n) {
  Inputs in;
  for (TensorId id : n.inputs) {
    if (id != kNoTensor && !g.tensor(id).shape.IsStatic())
      return 0;
    in.push_back(id == kNoTensor ? nullptr : &g.tensor(id));
  }
  int64_t out = 0;
  for (TensorId id : n.outputs)
    if (id != kNoTensor) {
      if (!g.tensor(id).shape.IsStatic())
        return 0;
      out += g.tensor(id).shape.NumElements();
    }
  const int64_t x = in.empty() || !in[0] ? 0 : in[0]->shape.NumElements();
  switch (ClassOf(n.op)) {
    case OpClass::kUnary:
    case OpClass::kBinary:
    case OpClass::kVariadic:
      return out * (n.op == OpKind::kIdentity ? 0 : 1);
    case OpClass::kOther:
    case OpClass::kFused:
      break;
  }
  switch (n.op) {
    case OpKind::kConv:
    case OpKind::kFusedConv:
    case OpKind::kConvTranspose: {
      auto p = GetWindowParams(n, in);
      if (!p.ok())
        return 0;
      int64_t k = 1;
      for (int64_t d : p->kernel)
        k *= d;
      // Per output element (transposed: per input element), one product per weight of its
      // group: W is (M, C/group, k...) for Conv and (C, M/group, k...) for ConvTranspose.
      const int64_t per = in[1]->shape[1];
      const int64_t base = n.op == OpKind::kConvTranspose ? x : out;
      return 2 * base * per * k + (n.op == OpKind::kFusedConv ? 2 * out : 0);
    }
    case OpKind::kGemm:
    case OpKind::kMatMul:
    case OpKind::kFusedGemm: {
      auto p = GetMatMulParams(n, in);
      if (!p.ok())
        return 0;
      return 2 * p->out.NumElements() * p->k + (n.op == OpKind::kMatMul ? 0 : 2 * out);
    }
    case OpKind::kAveragePool:
    case OpKind::kMaxPool: {
      auto p = GetWindowParams(n, in);
      if (!p.ok())
        return 0;
      int64_t k = 1;
      for (int64_t d : p->kernel)
        k *= d;
      return out * k;
    }
    case OpKind::kQLinearConv:
    case OpKind::kConvInteger: {
      // The integer convolution: one multiply-add per weight of a group, per output element.
      const Tensor *w = n.op == OpKind::kQLinearConv ? (in.size() > 3 ? in[3] : nullptr)
                                                     : (in.size() > 1 ? in[1] : nullptr);
      if (!w || w->shape.rank() < 2)
        return 0;
      return 2 * out * (w->shape.NumElements() / std::max<int64_t>(w->shape[0], 1));
    }
    case OpKind::kQLinearMatMul:
    case OpKind::kMatMulInteger: {
      const Tensor *a = in.empty() ? nullptr : in[0];
      if (!a || a->shape.rank() < 1)
        return 0;
      return 2 * out * a->shape[a->shape.rank() - 1];
    }
    case OpKind::kElementwiseChain:
      return out * static_cast<int64_t>(n.attrs.Strings("ops").size());
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
      return 4 * x;
    case OpKind::kLayerNormalization:
    case OpKind::kBatchNormalization:
    case OpKind::kInstanceNormalization:
      return 6 * x;
    case OpKind::kResize:
      return n.attrs.String("mode", "nearest") == "nearest"
                 ? 0
                 : out * (int64_t{1} << (2 * std::min<size_t>(in[0]->shape.rank(), 4)));
    case OpKind::kGlobalAveragePool:
    case OpKind::kGlobalMaxPool:
    case NN_REDUCE_OPS:
    case OpKind::kCumSum:
    case OpKind::kHardmax:
      return x;
    default:
      return 0;  // layout, shape and cast ops move data only
  }
}

GraphStats ComputeStats(const Graph &g) {
  GraphStats s;
  std::set<TensorId> params;
  for (const Node &n : g.nodes) {
    ++s.ops[OpName(n.op)];
    s.flops += NodeFlops(g, n);
    for (TensorId id : n.inputs)
      if (id != kNoTensor && g.tensor(id).is_constant())
        params.insert(id);
  }
  for (TensorId id : params) {
    const Tensor &t = g.tensor(id);
    s.parameters += std::max<int64_t>(0, t.shape.NumElements());
    s.parameter_bytes += static_cast<int64_t>(t.data->size());
  }
  for (const Tensor &t : g.tensors)
    if (!t.is_constant())
      s.activation_bytes += static_cast<int64_t>(t.ByteSize());
  return s;
}

}  // namespace op::nn
