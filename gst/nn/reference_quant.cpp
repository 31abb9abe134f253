// The reference interpreter's quantization ops: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger.
//
// Arithmetic follows onnxruntime's CPU kernels, so both agree on every value that is not a tie:
// scales and requantization multipliers are float32, x / scale is a float32 division, an
// integer accumulator is converted to float32 before it is multiplied by xs * ws / ys, rounding
// is half to even (rint in the default rounding mode) and results saturate to the output type.
// The integer sums themselves are exact: they run through RunConv / RunMatMul in double, which
// holds every int32 sum exactly.
#include <algorithm>
#include <cmath>

#include "nn/reference_ops.h"

namespace op::nn::ref {
namespace {

Status Bad(const Node &n, const std::string &why) {
  return InvalidArgument(n.Describe() + ": " + why);
}

const Tensor *At(const Inputs &in, size_t i) {
  return i < in.size() ? in[i] : nullptr;
}

// Value k of a scale or zero point (one value for every k when it holds one); 0 when absent.
Real Param(const Tensor *t, int64_t k) {
  if (!t)
    return 0;
  return GetReal(*t, t->shape.NumElements() == 1 ? 0 : static_cast<size_t>(k));
}

Real Saturate(Real v, DType t) {
  const Real lo = t == DType::kInt8 ? -128 : 0, hi = t == DType::kInt8 ? 127 : 255;
  return std::clamp(v, lo, hi);
}

// round(v) + zp, saturated: the last step of every quantizing op.
Real Requantize(float v, Real zp, DType t) {
  return Saturate(static_cast<Real>(std::rint(v)) + zp, t);
}

// Element i's index along `axis` for per-axis parameters (0 for per-tensor ones).
struct AxisIndex {
  int64_t inner = 1, count = 1;
  int64_t operator()(size_t i) const { return (static_cast<int64_t>(i) / inner) % count; }
};

StatusOr<AxisIndex> GetAxisIndex(const Node &n, const Shape &x, const Tensor &scale) {
  AxisIndex a;
  if (scale.shape.NumElements() == 1 && scale.shape.rank() <= 1)
    return a;
  OP_ASSIGN_OR_RETURN(int64_t axis,
                      NormalizeAxis(n.attrs.Int("axis", 1), static_cast<int64_t>(x.rank())));
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d)
    a.inner *= x[d];
  a.count = x[static_cast<size_t>(axis)];
  return a;
}

// `t` as float64 values minus a zero point; zp_index(i) picks the zero point of element i.
template <typename F>
Tensor Shifted(const Tensor &t, const Tensor *zp, F zp_index) {
  Tensor s = NewValue(DType::kFloat64, t.shape);
  for (size_t i = 0; i < static_cast<size_t>(t.shape.NumElements()); ++i)
    SetReal(Mut(s), DType::kFloat64, i, GetReal(t, i) - Param(zp, zp_index(i)));
  return s;
}

}  // namespace

Status RunQuantizeLinear(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  const Tensor &x = *in[0], &scale = *in[1];
  const Tensor *zp = At(in, 2);
  OP_ASSIGN_OR_RETURN(AxisIndex ax, GetAxisIndex(n, x.shape, scale));
  const DType yt = out[0].dtype;
  for (size_t i = 0; i < static_cast<size_t>(x.shape.NumElements()); ++i) {
    const int64_t k = ax(i);
    const float v = static_cast<float>(GetReal(x, i)) / static_cast<float>(Param(&scale, k));
    SetReal(Mut(out[0]), yt, i, Requantize(v, Param(zp, k), yt));
  }
  return Status::Ok();
}

Status RunDequantizeLinear(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  const Tensor &x = *in[0], &scale = *in[1];
  const Tensor *zp = At(in, 2);
  OP_ASSIGN_OR_RETURN(AxisIndex ax, GetAxisIndex(n, x.shape, scale));
  for (size_t i = 0; i < static_cast<size_t>(x.shape.NumElements()); ++i) {
    const int64_t k = ax(i);
    // x - zp is exact in int32 (x is int32 only without a zero point).
    const float d = static_cast<float>(GetReal(x, i) - Param(zp, k));
    SetReal(Mut(out[0]), out[0].dtype, i, d * static_cast<float>(Param(&scale, k)));
  }
  return Status::Ok();
}

Status RunDynamicQuantizeLinear(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  const Tensor &x = *in[0];
  const size_t count = static_cast<size_t>(x.shape.NumElements());
  // The range always holds 0, so that 0 is exactly representable.
  float lo = 0, hi = 0;
  for (size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(GetReal(x, i));
    if (std::isnan(v))
      return Bad(n, "the input holds NaN");
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (std::isinf(lo) || std::isinf(hi))
    return Bad(n, "the input holds an infinity");
  const float scale = (hi - lo) / 255.0f;
  // An all-zero input has scale 0: zero point 0 and every value 0 (ONNX divides by it).
  const Real zp = scale > 0 ? Requantize(0.0f - lo / scale, 0, DType::kUInt8) : 0;
  for (size_t i = 0; i < count; ++i) {
    const float v = scale > 0 ? static_cast<float>(GetReal(x, i)) / scale : 0.0f;
    SetReal(Mut(out[0]), DType::kUInt8, i, Requantize(v, zp, DType::kUInt8));
  }
  if (out.size() > 1 && out[1].dtype != DType::kUndefined)
    SetReal(Mut(out[1]), DType::kFloat32, 0, scale);
  if (out.size() > 2 && out[2].dtype != DType::kUndefined)
    SetReal(Mut(out[2]), DType::kUInt8, 0, zp);
  return Status::Ok();
}

Status RunQuantizedConv(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  const bool ql = n.op == OpKind::kQLinearConv;
  const Tensor &x = *in[0], &w = ql ? *in[3] : *in[1];
  const Tensor *xzp = ql ? in[2] : At(in, 2), *wzp = ql ? in[5] : At(in, 3);
  const int64_t per_m = w.shape.NumElements() / std::max<int64_t>(w.shape[0], 1);
  const Tensor xs = Shifted(x, xzp, [](size_t) { return 0; });
  const Tensor ws = Shifted(w, wzp, [&](size_t i) { return static_cast<int64_t>(i) / per_m; });
  Node c = n;
  c.op = OpKind::kConv;
  std::vector<Tensor> acc = {NewValue(DType::kFloat64, out[0].shape)};
  OP_RETURN_IF_ERROR(RunConv(c, Inputs{&xs, &ws}, acc));
  const int64_t m_count = out[0].shape[1];
  const Tensor *lut = ql ? At(in, 9) : nullptr;  // ours: see FuseQuantizedLookup
  int64_t area = 1;
  for (size_t d = 2; d < out[0].shape.rank(); ++d)
    area *= out[0].shape[d];
  for (size_t i = 0; i < static_cast<size_t>(out[0].shape.NumElements()); ++i) {
    const int64_t m = (static_cast<int64_t>(i) / area) % m_count;
    Real a = GetReal(acc[0], i);
    if (!ql) {
      SetReal(Mut(out[0]), DType::kInt32, i, a);
      continue;
    }
    a += Param(At(in, 8), m);
    const float mult = static_cast<float>(Param(in[1], 0)) * static_cast<float>(Param(in[4], m)) /
                       static_cast<float>(Param(in[6], 0));
    const Real q = Requantize(static_cast<float>(a) * mult, Param(in[7], 0), in[7]->dtype);
    if (lut != nullptr) {
      const int64_t lo = in[7]->dtype == DType::kInt8 ? -128 : 0;
      SetReal(Mut(out[0]), out[0].dtype, i,
              GetReal(*lut, static_cast<size_t>(static_cast<int64_t>(q) - lo)));
    } else {
      SetReal(Mut(out[0]), out[0].dtype, i, q);
    }
  }
  return Status::Ok();
}

Status RunQuantizedMatMul(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  const bool ql = n.op == OpKind::kQLinearMatMul;
  const Tensor &a = *in[0], &b = ql ? *in[3] : *in[1];
  const Tensor *azp = ql ? in[2] : At(in, 2), *bzp = ql ? in[5] : At(in, 3);
  const int64_t k_count = a.shape[a.shape.rank() - 1], n_count = b.shape[b.shape.rank() - 1];
  const int64_t m_count = a.shape[a.shape.rank() - 2];
  // A's zero point may be per row (MatMulInteger), B's per column.
  const Tensor as =
      Shifted(a, azp, [&](size_t i) { return (static_cast<int64_t>(i) / k_count) % m_count; });
  const Tensor bs = Shifted(b, bzp, [&](size_t i) { return static_cast<int64_t>(i) % n_count; });
  Node c = n;
  c.op = OpKind::kMatMul;
  std::vector<Tensor> acc = {NewValue(DType::kFloat64, out[0].shape)};
  OP_RETURN_IF_ERROR(RunMatMul(c, Inputs{&as, &bs}, acc));
  for (size_t i = 0; i < static_cast<size_t>(out[0].shape.NumElements()); ++i) {
    const Real v = GetReal(acc[0], i);
    if (!ql) {
      SetReal(Mut(out[0]), DType::kInt32, i, v);
      continue;
    }
    const int64_t j = static_cast<int64_t>(i) % n_count;
    const Real biased = v + (At(in, 8) != nullptr ? GetReal(*in[8], static_cast<size_t>(j)) : 0);
    const float mult = static_cast<float>(Param(in[1], 0)) * static_cast<float>(Param(in[4], j)) /
                       static_cast<float>(Param(in[6], 0));
    SetReal(Mut(out[0]), out[0].dtype, i,
            Requantize(static_cast<float>(biased) * mult, Param(in[7], 0), out[0].dtype));
  }
  return Status::Ok();
}

}  // namespace op::nn::ref
