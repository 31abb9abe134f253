// The reference interpreter (see reference.h): graph runner, elementwise ops, layout and shape
// ops. Heavy ops are in reference_nn.cpp.
#include "nn/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "nn/op_types.h"
#include "nn/reference_ops.h"
#include "nn_op_cases.h"

namespace op::nn {
namespace ref {

Real GetReal(const Tensor &t, size_t i) {
  const uint8_t *p = t.data->data();
  switch (t.dtype) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return HalfToFloat(v);
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    case DType::kUInt8:
    case DType::kBool:
      return p[i];
    case DType::kInt8:
      return static_cast<int8_t>(p[i]);
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return static_cast<Real>(v);
    }
    case DType::kUndefined:
      return 0;
  }
  return 0;
}

namespace {
// Float → integer conversion: truncation toward zero, NaN → 0, saturating at the type's range
// (ONNX leaves out-of-range casts undefined; saturating keeps the reference deterministic).
int64_t ToInt(Real v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9.2233720368547758e18L)
    return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18L)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}
}  // namespace

void SetReal(Bytes &b, DType t, size_t i, Real v) {
  uint8_t *p = b.data();
  switch (t) {
    case DType::kFloat32: {
      float f = static_cast<float>(v);
      std::memcpy(p + 4 * i, &f, 4);
      return;
    }
    case DType::kFloat16: {
      uint16_t h = FloatToHalf(static_cast<float>(v));
      std::memcpy(p + 2 * i, &h, 2);
      return;
    }
    case DType::kFloat64: {
      double d = static_cast<double>(v);
      std::memcpy(p + 8 * i, &d, 8);
      return;
    }
    case DType::kUInt8:
      p[i] = static_cast<uint8_t>(ToInt(v));
      return;
    case DType::kInt8:
      p[i] = static_cast<uint8_t>(static_cast<int8_t>(ToInt(v)));
      return;
    case DType::kBool:
      p[i] = v != 0 ? 1 : 0;
      return;
    case DType::kInt32: {
      int32_t x = static_cast<int32_t>(ToInt(v));
      std::memcpy(p + 4 * i, &x, 4);
      return;
    }
    case DType::kInt64: {
      int64_t x = ToInt(v);
      std::memcpy(p + 8 * i, &x, 8);
      return;
    }
    case DType::kUndefined:
      return;
  }
}

Tensor NewValue(DType dtype, const Shape &shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.data = std::make_shared<Bytes>(t.ByteSize());
  return t;
}

Bytes &Mut(Tensor &t) {
  return const_cast<Bytes &>(*t.data);
}

std::vector<double> ToDoubles(const Tensor &t) {
  std::vector<double> v(static_cast<size_t>(t.shape.NumElements()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(GetReal(t, i));
  return v;
}

Tensor FromDoubles(DType dtype, const Shape &shape, const std::vector<double> &v) {
  Tensor t = NewValue(dtype, shape);
  for (size_t i = 0; i < v.size(); ++i)
    SetReal(Mut(t), dtype, i, v[i]);
  return t;
}

std::vector<int64_t> BroadcastOffsets(const Shape &in, const Shape &out) {
  const size_t r = out.rank();
  std::vector<int64_t> st(r, 0);
  const std::vector<int64_t> in_st = Strides(in);
  for (size_t i = 0; i < in.rank(); ++i) {
    size_t o = i + (r - in.rank());
    st[o] = in.dims[i] == 1 ? 0 : in_st[i];
  }
  const int64_t n = out.NumElements();
  std::vector<int64_t> offs(static_cast<size_t>(n));
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    offs[static_cast<size_t>(k)] = off;
    for (size_t d = r; d-- > 0;) {
      ++idx[d];
      off += st[d];
      if (idx[d] < out.dims[d])
        break;
      off -= st[d] * idx[d];
      idx[d] = 0;
    }
  }
  return offs;
}

UnaryParams GetUnaryParams(OpKind op, const Attributes &a) {
  UnaryParams p;
  switch (op) {
    case OpKind::kLeakyRelu:
      p.alpha = a.Float("alpha", 0.01f);
      break;
    case OpKind::kElu:
    case OpKind::kCelu:
      p.alpha = a.Float("alpha", 1.f);
      break;
    case OpKind::kHardSigmoid:
      p.alpha = a.Float("alpha", 0.2f);
      p.beta = a.Float("beta", 0.5f);
      break;
    case OpKind::kSelu:
      p.alpha = a.Float("alpha", 1.67326319217681884765625f);
      p.gamma = a.Float("gamma", 1.05070102214813232421875f);
      break;
    case OpKind::kThresholdedRelu:
      p.alpha = a.Float("alpha", 1.f);
      break;
    case OpKind::kShrink:
      p.alpha = a.Float("lambd", 0.5f);
      p.beta = a.Float("bias", 0.f);
      break;
    case OpKind::kIsInf:
      p.flag_a = a.Int("detect_negative", 1) != 0;
      p.flag_b = a.Int("detect_positive", 1) != 0;
      break;
    default:
      break;
  }
  return p;
}

Real ApplyUnary(OpKind op, Real x, const UnaryParams &p, DType dtype) {
  using std::exp;
  switch (op) {
    case OpKind::kSqrt:
      return std::sqrt(x);
    case OpKind::kExp:
      return exp(x);
    case OpKind::kLog:
      return std::log(x);
    case OpKind::kNeg:
      return -x;
    case OpKind::kAbs:
      return std::fabs(x);
    case OpKind::kReciprocal:
      return 1 / x;
    case OpKind::kRelu:
      return x > 0 ? x : 0;
    case OpKind::kLeakyRelu:
      return x < 0 ? p.alpha * x : x;
    case OpKind::kElu:
      return x < 0 ? p.alpha * (exp(x) - 1) : x;
    case OpKind::kSigmoid:
      return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
    case OpKind::kHardSigmoid:
      return std::max<Real>(0, std::min<Real>(1, p.alpha * x + p.beta));
    case OpKind::kHardSwish:
      return x * std::max<Real>(0, std::min<Real>(1, x / 6 + 0.5L));
    case OpKind::kTanh:
      return std::tanh(x);
    case OpKind::kErf:
      return std::erf(x);
    case OpKind::kSoftplus:
      return x > 30 ? x : std::log1p(exp(x));
    case OpKind::kClip:  // bounds in alpha/beta
      return std::min<Real>(std::max<Real>(x, p.alpha), p.beta);
    case OpKind::kIdentity:
      return x;
    case OpKind::kFloor:
      return std::floor(x);
    case OpKind::kCeil:
      return std::ceil(x);
    case OpKind::kRound:
      return std::nearbyint(x);
    case OpKind::kSign:
      return x > 0 ? 1 : (x < 0 ? -1 : 0);
    case OpKind::kSin:
      return std::sin(x);
    case OpKind::kCos:
      return std::cos(x);
    case OpKind::kTan:
      return std::tan(x);
    case OpKind::kAsin:
      return std::asin(x);
    case OpKind::kAcos:
      return std::acos(x);
    case OpKind::kAtan:
      return std::atan(x);
    case OpKind::kSinh:
      return std::sinh(x);
    case OpKind::kCosh:
      return std::cosh(x);
    case OpKind::kAsinh:
      return std::asinh(x);
    case OpKind::kAcosh:
      return std::acosh(x);
    case OpKind::kAtanh:
      return std::atanh(x);
    case OpKind::kSelu:
      return x > 0 ? p.gamma * x : p.gamma * (p.alpha * exp(x) - p.alpha);
    case OpKind::kCelu:
      return std::max<Real>(0, x) + std::min<Real>(0, p.alpha * (exp(x / p.alpha) - 1));
    case OpKind::kSoftsign:
      return x / (1 + std::fabs(x));
    case OpKind::kThresholdedRelu:
      return x > p.alpha ? x : 0;
    case OpKind::kShrink:
      return x < -p.alpha ? x + p.beta : (x > p.alpha ? x - p.beta : 0);
    case OpKind::kNot:
      return x == 0 ? 1 : 0;
    case OpKind::kIsNaN:
      return std::isnan(x) ? 1 : 0;
    case OpKind::kIsInf:
      return (std::isinf(x) && ((x > 0 && p.flag_b) || (x < 0 && p.flag_a))) ? 1 : 0;
    default:
      (void)dtype;
      return std::numeric_limits<Real>::quiet_NaN();
  }
}

Real ApplyBinary(OpKind op, Real a, Real b, DType dtype, int64_t fmod) {
  const bool integer = !IsFloat(dtype);
  switch (op) {
    case OpKind::kAdd:
      return a + b;
    case OpKind::kSub:
      return a - b;
    case OpKind::kMul:
      return a * b;
    case OpKind::kDiv:
      if (integer)
        return b == 0 ? 0 : std::trunc(a / b);
      return a / b;
    case OpKind::kPow:
      if (integer)
        return std::trunc(std::pow(a, b));
      return std::pow(a, b);
    case OpKind::kMod: {
      if (fmod || !integer) {
        if (!fmod) {  // integer-style modulo with the divisor's sign on floats
          Real r = std::fmod(a, b);
          return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
        }
        return std::fmod(a, b);
      }
      if (b == 0)
        return 0;
      Real r = std::fmod(a, b);
      return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }
    case OpKind::kPRelu:
      return a < 0 ? a * b : a;
    case OpKind::kEqual:
      return a == b;
    case OpKind::kLess:
      return a < b;
    case OpKind::kGreater:
      return a > b;
    case OpKind::kGreaterOrEqual:
      return a >= b;
    case OpKind::kLessOrEqual:
      return a <= b;
    case OpKind::kAnd:
      return (a != 0) && (b != 0);
    case OpKind::kOr:
      return (a != 0) || (b != 0);
    case OpKind::kXor:
      return (a != 0) != (b != 0);
    case OpKind::kMin:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<Real>::quiet_NaN()
                                            : std::min(a, b);
    case OpKind::kMax:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<Real>::quiet_NaN()
                                            : std::max(a, b);
    case OpKind::kSum:
    case OpKind::kMean:
      return a + b;
    default:
      return std::numeric_limits<Real>::quiet_NaN();
  }
}

StatusOr<std::vector<ChainStep>> GetChainSteps(const Node &n, size_t num_inputs) {
  const auto ops = n.attrs.Strings("ops");
  const auto operand = n.attrs.Ints("operand");
  const auto swap = n.attrs.Ints("swap");
  const auto alpha = n.attrs.Floats("step_alpha");
  const auto beta = n.attrs.Floats("step_beta");
  const size_t steps = ops.size();
  if (operand.size() != steps || swap.size() != steps || alpha.size() != steps ||
      beta.size() != steps)
    return InvalidArgument(n.Describe() + ": chain attribute lists differ in length");
  std::vector<ChainStep> st;
  for (size_t k = 0; k < steps; ++k) {
    ChainStep s;
    if (!OpFromName(ops[k], &s.op))
      return InvalidArgument(n.Describe() + ": unknown chain op " + ops[k]);
    s.cls = ClassOf(s.op);
    if (s.cls != OpClass::kUnary && s.cls != OpClass::kBinary)
      return InvalidArgument(n.Describe() + ": chain op " + ops[k] + " is not elementwise");
    s.operand = operand[k];
    if (s.cls == OpClass::kBinary &&
        (s.operand < -1 || s.operand >= static_cast<int64_t>(num_inputs)))
      return InvalidArgument(n.Describe() + ": chain operand index out of range");
    s.swap = swap[k] != 0;
    s.scalar = alpha[k];
    s.p.alpha = alpha[k];
    s.p.beta = beta[k];
    if (s.op == OpKind::kSelu)
      s.p.gamma = beta[k];
    st.push_back(s);
  }
  return st;
}

StatusOr<Activation> GetActivation(const Node &node) {
  Activation act;
  const std::string name = node.attrs.String("activation", "");
  if (name.empty())
    return act;
  if (name == "Chain") {
    OP_ASSIGN_OR_RETURN(act.chain, GetChainSteps(node, 1));
    act.is_chain = true;
    return act;
  }
  if (!OpFromName(name, &act.op) || ClassOf(act.op) != OpClass::kUnary)
    return InvalidArgument(node.Describe() + ": activation '" + name + "' is not a unary op");
  Attributes a;
  const float alpha = node.attrs.Float("activation_alpha", 0.f);
  const float beta = node.attrs.Float("activation_beta", 0.f);
  if (node.attrs.Has("activation_alpha"))
    a.Set("alpha", alpha);
  if (node.attrs.Has("activation_beta"))
    a.Set("beta", beta);
  act.params = GetUnaryParams(act.op, a);
  if (act.op == OpKind::kClip) {
    act.params.alpha =
        node.attrs.Float("activation_alpha", -std::numeric_limits<float>::infinity());
    act.params.beta = node.attrs.Float("activation_beta", std::numeric_limits<float>::infinity());
  }
  return act;
}

}  // namespace ref

namespace {

using namespace ref;

Status Bad(const Node &n, const std::string &why) {
  return InvalidArgument(n.Describe() + ": " + why);
}

// out = op(inputs...) elementwise with broadcasting.
void Elementwise(const Node &n, const Inputs &in, Tensor &out) {
  const Shape &os = out.shape;
  const size_t count = static_cast<size_t>(os.NumElements());
  if (ClassOf(n.op) == OpClass::kUnary) {
    UnaryParams p = GetUnaryParams(n.op, n.attrs);
    for (size_t i = 0; i < count; ++i)
      SetReal(Mut(out), out.dtype, i, ApplyUnary(n.op, GetReal(*in[0], i), p, in[0]->dtype));
    return;
  }
  std::vector<const Tensor *> ops;
  for (const Tensor *t : in)
    if (t)
      ops.push_back(t);
  std::vector<std::vector<int64_t>> offs;
  for (const Tensor *t : ops)
    offs.push_back(BroadcastOffsets(t->shape, os));
  const int64_t fmod = n.attrs.Int("fmod", 0);
  const DType dt = ops[0]->dtype;
  for (size_t i = 0; i < count; ++i) {
    Real acc = GetReal(*ops[0], static_cast<size_t>(offs[0][i]));
    for (size_t k = 1; k < ops.size(); ++k)
      acc = ApplyBinary(n.op, acc, GetReal(*ops[k], static_cast<size_t>(offs[k][i])), dt, fmod);
    if (n.op == OpKind::kMean)
      acc /= static_cast<Real>(ops.size());
    SetReal(Mut(out), out.dtype, i, acc);
  }
}

Status RunChain(const Node &n, const Inputs &in, Tensor &out) {
  OP_ASSIGN_OR_RETURN(std::vector<ChainStep> st, GetChainSteps(n, in.size()));
  for (const ChainStep &s : st)
    if (s.operand >= 0 && !in[static_cast<size_t>(s.operand)])
      return Bad(n, "chain operand index out of range");
  std::vector<std::vector<int64_t>> offs;
  for (const Tensor *t : in)
    offs.push_back(t ? BroadcastOffsets(t->shape, out.shape) : std::vector<int64_t>{});
  const size_t count = static_cast<size_t>(out.shape.NumElements());
  for (size_t i = 0; i < count; ++i) {
    const float v = ApplyChain(st, [&](int64_t k) {
      return static_cast<float>(GetReal(*in[static_cast<size_t>(k)],
                                        static_cast<size_t>(offs[static_cast<size_t>(k)][i])));
    });
    SetReal(Mut(out), out.dtype, i, v);
  }
  return Status::Ok();
}

// Copies elements by index mapping: out[i] = in[src[i]] (raw bytes, any dtype).
// A Gather/GatherElements index known only at run time, as the device kernel reads it: a negative
// one counts from the end, then it is clamped into [0, dim - 1].
int64_t ClampGatherIndex(int64_t j, int64_t dim) {
  if (j < 0)
    j += dim;
  return std::clamp<int64_t>(j, 0, dim - 1);
}

void Gather(const Tensor &in, const std::vector<int64_t> &src, Tensor &out) {
  const size_t es = DTypeSize(in.dtype);
  const uint8_t *s = in.data->data();
  uint8_t *d = Mut(out).data();
  for (size_t i = 0; i < src.size(); ++i)
    std::memcpy(d + i * es, s + static_cast<size_t>(src[i]) * es, es);
}

// Source index of every output element for a strided view: out index → sum(idx * stride) + base.
std::vector<int64_t> ViewIndex(const Shape &out, const std::vector<int64_t> &strides,
                               int64_t base) {
  const int64_t n = out.NumElements();
  std::vector<int64_t> src(static_cast<size_t>(n));
  std::vector<int64_t> idx(out.rank(), 0);
  int64_t off = base;
  for (int64_t k = 0; k < n; ++k) {
    src[static_cast<size_t>(k)] = off;
    for (size_t d = out.rank(); d-- > 0;) {
      ++idx[d];
      off += strides[d];
      if (idx[d] < out.dims[d])
        break;
      off -= strides[d] * idx[d];
      idx[d] = 0;
    }
  }
  return src;
}

// Calls f(index vector, flat k) for every element of shape s.
template <typename F>
void ForEach(const Shape &s, F f) {
  const int64_t n = s.NumElements();
  std::vector<int64_t> idx(s.rank(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(idx, k);
    for (size_t d = s.rank(); d-- > 0;) {
      if (++idx[d] < s.dims[d])
        break;
      idx[d] = 0;
    }
  }
}

Status RunLayout(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  const Tensor &x = *in[0];
  Tensor &y = out[0];
  const std::vector<int64_t> xst = Strides(x.shape);
  switch (n.op) {
    case OpKind::kTranspose: {
      std::vector<int64_t> perm = n.attrs.Ints("perm");
      if (perm.empty())
        for (size_t i = 0; i < x.shape.rank(); ++i)
          perm.push_back(static_cast<int64_t>(x.shape.rank() - 1 - i));
      std::vector<int64_t> st;
      for (int64_t p : perm)
        st.push_back(xst[static_cast<size_t>(p)]);
      Gather(x, ViewIndex(y.shape, st, 0), y);
      return Status::Ok();
    }
    case OpKind::kSlice: {
      OP_ASSIGN_OR_RETURN(SliceParams p, GetSliceParams(n, in));
      std::vector<int64_t> st;
      int64_t base = 0;
      for (size_t i = 0; i < xst.size(); ++i) {
        st.push_back(xst[i] * p.steps[i]);
        base += xst[i] * p.starts[i];
      }
      Gather(x, ViewIndex(y.shape, st, base), y);
      return Status::Ok();
    }
    case OpKind::kExpand:
      Gather(x, BroadcastOffsets(x.shape, y.shape), y);
      return Status::Ok();
    case OpKind::kTile: {
      std::vector<int64_t> src(static_cast<size_t>(y.shape.NumElements()));
      ForEach(y.shape, [&](const std::vector<int64_t> &idx, int64_t k) {
        int64_t off = 0;
        for (size_t d = 0; d < idx.size(); ++d)
          off += (idx[d] % x.shape[d]) * xst[d];
        src[static_cast<size_t>(k)] = off;
      });
      Gather(x, src, y);
      return Status::Ok();
    }
    case OpKind::kPad: {
      OP_ASSIGN_OR_RETURN(PadParams p, GetPadParams(n, in));
      const size_t es = DTypeSize(x.dtype);
      Bytes fill(es);
      Bytes tmp(es);
      SetReal(tmp, x.dtype, 0, p.value);
      fill = tmp;
      ForEach(y.shape, [&](const std::vector<int64_t> &idx, int64_t k) {
        int64_t off = 0;
        bool inside = true;
        for (size_t d = 0; d < idx.size(); ++d) {
          int64_t i = idx[d] - p.begin[d];
          const int64_t dim = x.shape[d];
          if (i < 0 || i >= dim) {
            if (p.mode == "constant") {
              inside = false;
              break;
            }
            if (p.mode == "edge") {
              i = std::clamp<int64_t>(i, 0, dim - 1);
            } else {  // reflect (without repeating the edge)
              const int64_t period = 2 * (dim - 1);
              if (period == 0) {
                i = 0;
              } else {
                i = ((i % period) + period) % period;
                if (i >= dim)
                  i = period - i;
              }
            }
          }
          off += i * xst[d];
        }
        uint8_t *dst = Mut(y).data() + static_cast<size_t>(k) * es;
        if (inside)
          std::memcpy(dst, x.data->data() + static_cast<size_t>(off) * es, es);
        else
          std::memcpy(dst, fill.data(), es);
      });
      return Status::Ok();
    }
    case OpKind::kConcat: {
      const int64_t axis =
          *NormalizeAxis(n.attrs.Int("axis", 0), static_cast<int64_t>(x.shape.rank()));
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < axis; ++i)
        outer *= y.shape[i];
      for (size_t i = static_cast<size_t>(axis) + 1; i < y.shape.rank(); ++i)
        inner *= y.shape[i];
      const size_t es = DTypeSize(y.dtype);
      int64_t at = 0;
      for (const Tensor *t : in) {
        if (!t)
          continue;
        const int64_t chunk = t->shape[axis] * inner;
        for (int64_t o = 0; o < outer && chunk > 0; ++o)  // an empty input has no storage
          std::memcpy(
              Mut(y).data() + static_cast<size_t>((o * y.shape[axis] * inner + at * inner)) * es,
              t->data->data() + static_cast<size_t>(o * chunk) * es,
              static_cast<size_t>(chunk) * es);
        at += t->shape[axis];
      }
      return Status::Ok();
    }
    case OpKind::kSplit: {
      int64_t axis = 0;
      OP_ASSIGN_OR_RETURN(auto sizes, GetSplitSizes(n, in, &axis));
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < axis; ++i)
        outer *= x.shape[i];
      for (size_t i = static_cast<size_t>(axis) + 1; i < x.shape.rank(); ++i)
        inner *= x.shape[i];
      const size_t es = DTypeSize(x.dtype);
      int64_t at = 0;
      for (size_t k = 0; k < sizes.size(); ++k) {
        if (out[k].dtype == DType::kUndefined) {
          at += sizes[k];
          continue;
        }
        const int64_t chunk = sizes[k] * inner;
        for (int64_t o = 0; o < outer && chunk > 0; ++o)  // an empty output has no storage
          std::memcpy(
              Mut(out[k]).data() + static_cast<size_t>(o * chunk) * es,
              x.data->data() + static_cast<size_t>(o * x.shape[axis] * inner + at * inner) * es,
              static_cast<size_t>(chunk) * es);
        at += sizes[k];
      }
      return Status::Ok();
    }
    case OpKind::kGather: {
      const int64_t r = static_cast<int64_t>(x.shape.rank());
      const int64_t axis = *NormalizeAxis(n.attrs.Int("axis", 0), r);
      OP_ASSIGN_OR_RETURN(auto idx, ConstantInts(*in[1]));
      int64_t outer = 1, inner = 1;
      for (int64_t i = 0; i < axis; ++i)
        outer *= x.shape[i];
      for (int64_t i = axis + 1; i < r; ++i)
        inner *= x.shape[i];
      const int64_t dim = x.shape[axis];
      std::vector<int64_t> src;
      src.reserve(static_cast<size_t>(y.shape.NumElements()));
      // Constant indices out of range were refused at load (shape inference); runtime ones are
      // clamped as the device kernel clamps them (docs/numerics.md).
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j : idx) {
          j = ClampGatherIndex(j, dim);
          for (int64_t i = 0; i < inner; ++i)
            src.push_back((o * dim + j) * inner + i);
        }
      Gather(x, src, y);
      return Status::Ok();
    }
    case OpKind::kGatherElements: {
      const int64_t r = static_cast<int64_t>(x.shape.rank());
      const int64_t axis = *NormalizeAxis(n.attrs.Int("axis", 0), r);
      OP_ASSIGN_OR_RETURN(auto idx, ConstantInts(*in[1]));
      std::vector<int64_t> src(idx.size());
      ForEach(y.shape, [&](const std::vector<int64_t> &ix, int64_t k) {
        int64_t off = 0;
        for (size_t d = 0; d < ix.size(); ++d) {
          int64_t i = ix[d];
          if (static_cast<int64_t>(d) == axis)
            i = ClampGatherIndex(idx[static_cast<size_t>(k)], x.shape[d]);
          off += i * xst[d];
        }
        src[static_cast<size_t>(k)] = off;
      });
      Gather(x, src, y);
      return Status::Ok();
    }
    case OpKind::kDepthToSpace:
    case OpKind::kSpaceToDepth: {
      const int64_t b = n.attrs.Int("blocksize", 1);
      const bool crd = n.attrs.String("mode", "DCR") == "CRD";
      std::vector<int64_t> src(static_cast<size_t>(y.shape.NumElements()));
      ForEach(y.shape, [&](const std::vector<int64_t> &ix, int64_t k) {
        int64_t c, h, w;
        if (n.op == OpKind::kDepthToSpace) {
          const int64_t oc = y.shape[1];
          const int64_t bh = ix[2] % b, bw = ix[3] % b;
          c = crd ? ix[1] * b * b + bh * b + bw : (bh * b + bw) * oc + ix[1];
          h = ix[2] / b;
          w = ix[3] / b;
        } else {
          const int64_t ic = x.shape[1];
          const int64_t blk = ix[1] / ic;
          c = ix[1] % ic;
          h = ix[2] * b + blk / b;
          w = ix[3] * b + blk % b;
        }
        src[static_cast<size_t>(k)] = ix[0] * xst[0] + c * xst[1] + h * xst[2] + w * xst[3];
      });
      Gather(x, src, y);
      return Status::Ok();
    }
    case OpKind::kTrilu: {
      int64_t kk = 0;
      if (in.size() > 1 && in[1]) {
        OP_ASSIGN_OR_RETURN(auto kv, ConstantInts(*in[1]));
        if (!kv.empty())
          kk = kv[0];
      }
      const bool upper = n.attrs.Int("upper", 1) != 0;
      const size_t r = x.shape.rank(), es = DTypeSize(x.dtype);
      if (x.ByteSize() == 0)
        return Status::Ok();  // nothing to copy, and no storage to copy from
      std::memcpy(Mut(y).data(), x.data->data(), x.ByteSize());
      ForEach(y.shape, [&](const std::vector<int64_t> &ix, int64_t k) {
        const int64_t diff = ix[r - 1] - ix[r - 2];
        const bool keep = upper ? diff >= kk : diff <= kk;
        if (!keep)
          std::memset(Mut(y).data() + static_cast<size_t>(k) * es, 0, es);
      });
      return Status::Ok();
    }
    default:
      return Internal(n.Describe() + ": not a layout op");
  }
}

}  // namespace

StatusOr<std::vector<Tensor>> EvaluateNode(const Node &n, const Inputs &in) {
  for (const Tensor *t : in)
    if (t && !t->is_constant())
      return Internal(n.Describe() + ": an input has no value");
  OP_ASSIGN_OR_RETURN(std::vector<Tensor> out, InferOutputTypes(n, in));
  // Every value the interpreter makes, and so every folded constant, is allocated here: a
  // model cannot make it allocate more than kMaxReferenceValueBytes for one value.
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].dtype != DType::kUndefined && out[i].ByteSize() > kMaxReferenceValueBytes)
      return InvalidArgument(n.Describe() + ": output " + std::to_string(i) + " " +
                             out[i].shape.ToString() + " would be " +
                             std::to_string(out[i].ByteSize()) +
                             " bytes, above the reference interpreter's limit of " +
                             std::to_string(kMaxReferenceValueBytes) + " per value");
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].dtype != DType::kUndefined)
      out[i] = NewValue(out[i].dtype, out[i].shape);
  const Tensor *x = in.empty() ? nullptr : in[0];
  auto copy_x = [&]() {
    if (x->ByteSize())
      std::memcpy(Mut(out[0]).data(), x->data->data(), x->ByteSize());
  };
  switch (n.op) {
    case NN_UNARY_OPS:
    case NN_BINARY_OPS:
    case NN_VARIADIC_OPS:
      if (n.op == OpKind::kIdentity) {
        copy_x();
      } else if (n.op == OpKind::kClip) {
        // The bounds are attributes before opset 11, inputs after.
        OP_ASSIGN_OR_RETURN(auto bounds, GetClipBounds(n, in));
        UnaryParams p;
        p.alpha = bounds.first;
        p.beta = bounds.second;
        for (size_t i = 0; i < static_cast<size_t>(x->shape.NumElements()); ++i)
          SetReal(Mut(out[0]), out[0].dtype, i,
                  ApplyUnary(OpKind::kClip, GetReal(*x, i), p, x->dtype));
      } else {
        Elementwise(n, in, out[0]);
      }
      break;
    case OpKind::kWhere: {
      std::vector<std::vector<int64_t>> offs;
      for (int k = 0; k < 3; ++k)
        offs.push_back(BroadcastOffsets(in[k]->shape, out[0].shape));
      const size_t es = DTypeSize(out[0].dtype);
      for (size_t i = 0; i < offs[0].size(); ++i) {
        const bool c = in[0]->data->data()[offs[0][i]] != 0;
        const Tensor *src = c ? in[1] : in[2];
        std::memcpy(Mut(out[0]).data() + i * es,
                    src->data->data() + static_cast<size_t>(offs[c ? 1 : 2][i]) * es, es);
      }
      break;
    }
    case OpKind::kElementwiseChain:
      OP_RETURN_IF_ERROR(RunChain(n, in, out[0]));
      if (n.attrs.Int("quantize", 0) != 0) {
        // the fused QuantizeLinear of the value (its scale and zero point the last inputs)
        const size_t qn = static_cast<size_t>(n.attrs.Int("quantize_inputs", 1));
        if (out.size() < 2 || in.size() < qn + 1)
          return Bad(n, "a fused quantizer needs its inputs and output");
        Inputs qin{&out[0], in[in.size() - qn]};
        if (qn == 2)
          qin.push_back(in.back());
        std::vector<Tensor> qout{out[1]};
        Node qnode;
        qnode.op = OpKind::kQuantizeLinear;
        qnode.name = n.name;
        OP_RETURN_IF_ERROR(RunQuantizeLinear(qnode, qin, qout));
        out[1] = std::move(qout[0]);
      }
      break;
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
      copy_x();
      break;
    case OpKind::kDropout:
      copy_x();
      if (out.size() > 1 && out[1].dtype != DType::kUndefined)
        std::fill(Mut(out[1]).begin(), Mut(out[1]).end(), uint8_t{1});
      break;
    case OpKind::kCast:
    case OpKind::kCastLike:
      for (size_t i = 0; i < static_cast<size_t>(x->shape.NumElements()); ++i)
        SetReal(Mut(out[0]), out[0].dtype, i, GetReal(*x, i));
      break;
    case OpKind::kTranspose:
    case OpKind::kSlice:
    case OpKind::kExpand:
    case OpKind::kTile:
    case OpKind::kPad:
    case OpKind::kConcat:
    case OpKind::kSplit:
    case OpKind::kGather:
    case OpKind::kGatherElements:
    case OpKind::kDepthToSpace:
    case OpKind::kSpaceToDepth:
    case OpKind::kTrilu:
      OP_RETURN_IF_ERROR(RunLayout(n, in, out));
      break;
    case OpKind::kShape: {
      const int64_t r = static_cast<int64_t>(x->shape.rank());
      int64_t start = n.attrs.Int("start", 0);
      if (start < 0)
        start += r;
      start = std::clamp<int64_t>(start, 0, r);
      for (int64_t i = 0; i < out[0].shape[0]; ++i)
        SetReal(Mut(out[0]), DType::kInt64, static_cast<size_t>(i),
                static_cast<Real>(x->shape[static_cast<size_t>(start + i)]));
      break;
    }
    case OpKind::kSize:
      SetReal(Mut(out[0]), DType::kInt64, 0, static_cast<Real>(x->shape.NumElements()));
      break;
    case OpKind::kConstantOfShape: {
      const Tensor *v = n.attrs.GetTensor("value");
      if (v && v->shape.NumElements() != 1)
        return Bad(n, "value must hold one element");
      const Real val = v ? GetReal(*v, 0) : 0;
      for (size_t i = 0; i < static_cast<size_t>(out[0].shape.NumElements()); ++i)
        SetReal(Mut(out[0]), out[0].dtype, i, val);
      break;
    }
    case OpKind::kRange: {
      const Real start = GetReal(*in[0], 0), delta = GetReal(*in[2], 0);
      for (size_t i = 0; i < static_cast<size_t>(out[0].shape.NumElements()); ++i)
        SetReal(Mut(out[0]), out[0].dtype, i, start + static_cast<Real>(i) * delta);
      break;
    }
    case OpKind::kConv:
    case OpKind::kFusedConv:
      OP_RETURN_IF_ERROR(RunConv(n, in, out));
      break;
    case OpKind::kConvTranspose:
      OP_RETURN_IF_ERROR(RunConvTranspose(n, in, out));
      break;
    case OpKind::kGemm:
    case OpKind::kMatMul:
    case OpKind::kFusedGemm:
      OP_RETURN_IF_ERROR(RunMatMul(n, in, out));
      break;
    case OpKind::kAveragePool:
    case OpKind::kMaxPool:
      OP_RETURN_IF_ERROR(RunPool(n, in, out));
      break;
    case OpKind::kGlobalAveragePool:
    case OpKind::kGlobalMaxPool:
      OP_RETURN_IF_ERROR(RunGlobalPool(n, in, out));
      break;
    case OpKind::kBatchNormalization:
    case OpKind::kLayerNormalization:
    case OpKind::kInstanceNormalization:
      OP_RETURN_IF_ERROR(RunNormalization(n, in, out));
      break;
    case OpKind::kResize:
      OP_RETURN_IF_ERROR(RunResize(n, in, out));
      break;
    case NN_REDUCE_OPS:
      OP_RETURN_IF_ERROR(RunReduce(n, in, out));
      break;
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kHardmax:
      OP_RETURN_IF_ERROR(RunSoftmax(n, in, out));
      break;
    case OpKind::kCumSum:
      OP_RETURN_IF_ERROR(RunCumSum(n, in, out));
      break;
    case OpKind::kQuantizeLinear:
      OP_RETURN_IF_ERROR(RunQuantizeLinear(n, in, out));
      break;
    case OpKind::kDequantizeLinear:
      OP_RETURN_IF_ERROR(RunDequantizeLinear(n, in, out));
      break;
    case OpKind::kDynamicQuantizeLinear:
      OP_RETURN_IF_ERROR(RunDynamicQuantizeLinear(n, in, out));
      break;
    case OpKind::kQLinearConv:
    case OpKind::kConvInteger:
      OP_RETURN_IF_ERROR(RunQuantizedConv(n, in, out));
      break;
    case OpKind::kQLinearMatMul:
    case OpKind::kMatMulInteger:
      OP_RETURN_IF_ERROR(RunQuantizedMatMul(n, in, out));
      break;
  }
  return out;
}

StatusOr<std::vector<Tensor>> RunReference(const Graph &g, const std::vector<Tensor> &inputs) {
  std::vector<Tensor> values(g.tensors.size());
  for (size_t i = 0; i < g.tensors.size(); ++i)
    if (g.tensors[i].is_constant())
      values[i] = g.tensors[i];
  for (TensorId id : g.inputs) {
    const Tensor &decl = g.tensor(id);
    const Tensor *given = nullptr;
    for (const Tensor &t : inputs)
      if (t.name == decl.name)
        given = &t;
    if (!given)
      return InvalidArgument("input '" + decl.name + "' is not given");
    if (given->dtype != decl.dtype)
      return InvalidArgument("input '" + decl.name + "' is " + DTypeName(given->dtype) +
                             ", the model needs " + DTypeName(decl.dtype));
    bool fits = given->shape.rank() == decl.shape.rank() || decl.shape.dims.empty();
    for (size_t d = 0; fits && d < decl.shape.rank(); ++d)
      if (decl.shape[d] >= 0 && decl.shape[d] != given->shape[d])
        fits = false;
    if (!fits || !given->shape.IsStatic())
      return InvalidArgument("input '" + decl.name + "' has shape " + given->shape.ToString() +
                             ", the model needs " + decl.shape.ToString());
    if (!given->data || given->data->size() != given->ByteSize())
      return InvalidArgument("input '" + decl.name + "' has " +
                             std::to_string(given->data ? given->data->size() : 0) +
                             " bytes, its shape needs " + std::to_string(given->ByteSize()));
    values[static_cast<size_t>(id)] = *given;
  }
  // Values are dropped after their last reader so big graphs fit in memory.
  std::vector<int> uses = g.UseCounts();
  for (const Node &n : g.nodes) {
    Inputs in;
    for (TensorId id : n.inputs) {
      if (id == kNoTensor) {
        in.push_back(nullptr);
        continue;
      }
      const Tensor &v = values[static_cast<size_t>(id)];
      if (!v.data)
        return Internal(n.Describe() + ": input '" + g.tensor(id).name + "' has no value");
      in.push_back(&v);
    }
    auto outs = EvaluateNode(n, in);
    if (!outs.ok())
      return outs.status();
    for (TensorId id : n.inputs)
      if (id != kNoTensor && --uses[static_cast<size_t>(id)] == 0 && !g.tensor(id).is_constant())
        values[static_cast<size_t>(id)] = Tensor();
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i] == kNoTensor)
        continue;
      Tensor &dst = values[static_cast<size_t>(n.outputs[i])];
      dst = std::move((*outs)[i]);
      dst.name = g.tensor(n.outputs[i]).name;
    }
  }
  std::vector<Tensor> result;
  for (TensorId id : g.outputs) {
    Tensor v = values[static_cast<size_t>(id)];
    if (!v.data)
      return Internal("output '" + g.tensor(id).name + "' was not computed");
    v.name = g.tensor(id).name;
    result.push_back(std::move(v));
  }
  return result;
}

}  // namespace op::nn
