// Per-op output typing (see op_types.h): one method per class of ops, one case per op,
// parameters from op_params.
#include "nn/op_types.h"

#include <algorithm>
#include <cmath>

#include "nn/op_params.h"
#include "nn_op_cases.h"

namespace op::nn {
namespace {

// 2^32 elements (16 GiB of float32): far above any real network's tensor.
constexpr int64_t kMaxElements = int64_t{1} << 32;

Status Bad(const Node &n, const std::string &why) {
  return InvalidArgument(n.Describe() + ": " + why);
}

Tensor Info(DType t, Shape s) {
  Tensor o;
  o.dtype = t;
  o.shape = std::move(s);
  return o;
}

StatusOr<Shape> BroadcastAll(const Node &n, const Inputs &in) {
  Shape out;
  bool first = true;
  for (const Tensor *t : in) {
    if (!t)
      continue;
    if (first) {
      out = t->shape;
      first = false;
      continue;
    }
    auto b = BroadcastShapes(out, t->shape);
    if (!b.ok())
      return Bad(n, b.status().message());
    out = *b;
  }
  return out;
}

// Reduced shape: reduced axes become 1 (keepdims) or disappear.
Shape Reduced(const Shape &x, const ReduceParams &p) {
  Shape out;
  for (size_t i = 0; i < x.rank(); ++i) {
    bool red = std::binary_search(p.axes.begin(), p.axes.end(), static_cast<int64_t>(i));
    if (!red)
      out.dims.push_back(x[i]);
    else if (p.keepdims)
      out.dims.push_back(1);
  }
  return out;
}

StatusOr<Shape> ReshapeTarget(const Node &n, const Inputs &in) {
  if (in.size() < 2 || !in[1])
    return Bad(n, "needs a shape input");
  if (!in[1]->is_constant())
    return Unsupported(n.Describe() + ": the target shape is computed at runtime");
  OP_ASSIGN_OR_RETURN(auto dims, ConstantInts(*in[1]));
  const Shape &xs = in[0]->shape;
  const bool allowzero = n.attrs.Int("allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  Shape out;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d == 0 && !allowzero) {
      if (i >= xs.rank())
        return Bad(n, "0 in shape refers past the input's rank");
      d = xs[i];
    }
    if (d == -1) {
      if (infer >= 0)
        return Bad(n, "more than one -1 in the shape");
      infer = static_cast<int64_t>(i);
      out.dims.push_back(1);
      continue;
    }
    if (d < -1)
      return Bad(n, "negative dim in the shape");
    known *= d;
    out.dims.push_back(d);
  }
  const int64_t total = xs.NumElements();
  if (infer >= 0) {
    if (known == 0 || total % known)
      return Bad(n, "cannot reshape " + xs.ToString());
    out.dims[static_cast<size_t>(infer)] = total / known;
  }
  if (out.NumElements() != total)
    return Bad(n, "cannot reshape " + xs.ToString() + " to " + out.ToString());
  return out;
}

bool IsQuantType(DType t) {
  return t == DType::kUInt8 || t == DType::kInt8;
}

// A scale or zero point: one value (per tensor), or a 1-D tensor of `count` values (per axis or
// per channel); count 0 allows only one value.
Status CheckQuantParam(const Node &n, const Tensor *t, const char *what, int64_t count) {
  if (!t)
    return Status::Ok();
  const int64_t e = t->shape.NumElements();
  if (e == 1 && t->shape.rank() <= 1)
    return Status::Ok();
  if (count > 0 && t->shape.rank() == 1 && e == count)
    return Status::Ok();
  return Bad(n, std::string(what) + " of shape " + t->shape.ToString() + " must be a scalar" +
                    (count > 0 ? " or hold " + std::to_string(count) + " values" : ""));
}

// The Conv or MatMul that a quantized op computes, for its window and product parameters.
Node InnerNode(const Node &n, OpKind op) {
  Node c = n;
  c.op = op;
  return c;
}

// One node's output typing: each method types one class of ops (the ops.def classes, and the
// other ops by what they do) into `out`.
class Typing {
 public:
  Typing(const Node &node, const Inputs &inputs)
      : n(node), in(inputs), x(in.empty() ? nullptr : in[0]), out(node.outputs.size()) {}
  Status Unary();
  Status Broadcast();
  Status WindowsAndProducts();
  Status Layout();
  Status Combine();
  Status ShapeValued();
  Status Reductions();
  Status Quantized();

  const Node &n;
  const Inputs &in;
  const Tensor *x;  // the first input (null only for the variadic ops)
  std::vector<Tensor> out;

 private:
  Status need(size_t k) const {
    for (size_t i = 0; i < k; ++i)
      if (i >= in.size() || !in[i])
        return Bad(n, "needs " + std::to_string(k) + " inputs");
    return Status::Ok();
  }
  void set(size_t i, DType t, Shape s) {
    if (i < out.size())
      out[i] = Info(t, std::move(s));
  }
};

// Elementwise unary, same shape (Dropout adds its mask; Cast and CastLike change the dtype).
Status Typing::Unary() {
  switch (n.op) {
    case NN_UNARY_OPS: {
      if (n.op == OpKind::kClip) {
        // Bounds are scalars (shape () or (1)), as onnxruntime requires, constant or not.
        for (size_t i = 1; i < 3 && i < in.size(); ++i)
          if (in[i] &&
              !(in[i]->shape.rank() == 0 || (in[i]->shape.rank() == 1 && in[i]->shape[0] == 1)))
            return Bad(n, std::string(i == 1 ? "min" : "max") + " must be a scalar, not " +
                              in[i]->shape.ToString());
      }
      const bool test = n.op == OpKind::kIsNaN || n.op == OpKind::kIsInf;
      set(0, test ? DType::kBool : x->dtype, x->shape);
      break;
    }
    case OpKind::kDropout:
      // Training mode (opset 12+: a third input that is true) drops values at random.
      if (in.size() > 2 && in[2]) {
        if (!in[2]->is_constant())
          return Unsupported(n.Describe() + ": runtime training_mode");
        OP_ASSIGN_OR_RETURN(auto tm, ConstantInts(*in[2]));
        if (!tm.empty() && tm[0])
          return Unsupported(n.Describe() + ": training mode");
      }
      set(0, x->dtype, x->shape);
      set(1, DType::kBool, x->shape);
      break;
    case OpKind::kCast: {
      DType to = DTypeFromOnnx(static_cast<int>(n.attrs.Int("to", 0)));
      if (to == DType::kUndefined)
        return Unsupported(n.Describe() + ": cast to ONNX type " +
                           std::to_string(n.attrs.Int("to", 0)) + " is not supported");
      set(0, to, x->shape);
      break;
    }
    case OpKind::kCastLike:
      OP_RETURN_IF_ERROR(need(2));
      set(0, in[1]->dtype, x->shape);
      break;
    default:
      return Internal(n.Describe() + ": not typed by Unary");
  }
  return Status::Ok();
}

// Elementwise with broadcasting: the binary and variadic ops, Where, fused chains.
Status Typing::Broadcast() {
  switch (n.op) {
    case NN_BINARY_OPS: {
      OP_RETURN_IF_ERROR(need(2));
      if (n.attrs.Int("broadcast", 0) && n.attrs.Has("axis"))
        return Unsupported(n.Describe() + ": legacy broadcast with an axis");
      if (n.op == OpKind::kPRelu && n.opset < 7 && in[1]->shape.rank() == 1 &&
          in[1]->shape[0] != 1 && x->shape.rank() > 1)
        return Unsupported(n.Describe() + ": per-channel slope of opset 6");
      // One element type for both sides (ONNX's T), except Pow's exponent.
      if (n.op != OpKind::kPow && in[0]->dtype != in[1]->dtype)
        return Bad(n, std::string("inputs differ in dtype (") + DTypeName(in[0]->dtype) + ", " +
                          DTypeName(in[1]->dtype) + ")");
      OP_ASSIGN_OR_RETURN(Shape s, BroadcastAll(n, in));
      const bool compare = n.op == OpKind::kEqual || n.op == OpKind::kLess ||
                           n.op == OpKind::kGreater || n.op == OpKind::kGreaterOrEqual ||
                           n.op == OpKind::kLessOrEqual;
      set(0, compare ? DType::kBool : x->dtype, s);
      break;
    }
    case NN_VARIADIC_OPS:
    case OpKind::kWhere:
    case OpKind::kElementwiseChain: {
      const Tensor *first = nullptr;
      for (const Tensor *t : in)
        if (t && !first)
          first = t;
      if (!first)
        return Bad(n, "no inputs");
      OP_ASSIGN_OR_RETURN(Shape s, BroadcastAll(n, in));
      if (n.op == OpKind::kWhere) {
        OP_RETURN_IF_ERROR(need(3));
        if (in[0]->dtype != DType::kBool)
          return Bad(n, "condition must be bool");
        if (in[1]->dtype != in[2]->dtype)
          return Bad(n, "x and y differ in dtype");
        first = in[1];
      }
      // A chain that begins with a Cast of bytes (FuseElementwiseChains) gives its type.
      if (n.op == OpKind::kElementwiseChain && n.attrs.Int("to", 0) != 0) {
        const DType to = DTypeFromOnnx(static_cast<int>(n.attrs.Int("to", 0)));
        if (to != DType::kFloat32 && to != DType::kFloat16)
          return Bad(n, "a chain's type must be float32 or float16");
        set(0, to, s);
      } else {
        set(0, first->dtype, s);
      }
      if (n.op == OpKind::kElementwiseChain && n.outputs.size() > 1) {
        // the fused quantizer's output: its zero point's type, else uint8 (QuantizeLinear's)
        const bool zp = n.attrs.Int("quantize_inputs", 1) == 2 && in.back() != nullptr;
        set(1, zp ? in.back()->dtype : DType::kUInt8, s);
      }
      break;
    }
    default:
      return Internal(n.Describe() + ": not typed by Broadcast");
  }
  return Status::Ok();
}

// Convolutions, pools, matrix products, normalizations, Resize.
Status Typing::WindowsAndProducts() {
  switch (n.op) {
    case OpKind::kConv:
    case OpKind::kFusedConv:
    case OpKind::kConvTranspose: {
      OP_RETURN_IF_ERROR(need(2));
      OP_ASSIGN_OR_RETURN(WindowParams p, GetWindowParams(n, in));
      const int64_t m =
          n.op == OpKind::kConvTranspose ? in[1]->shape[1] * p.group : in[1]->shape[0];
      Shape s{x->shape[0], m};
      for (int64_t d : p.out_spatial)
        s.dims.push_back(d);
      set(0, x->dtype, s);
      break;
    }
    case OpKind::kAveragePool:
    case OpKind::kMaxPool: {
      OP_ASSIGN_OR_RETURN(WindowParams p, GetWindowParams(n, in));
      Shape s{x->shape[0], x->shape[1]};
      for (int64_t d : p.out_spatial)
        s.dims.push_back(d);
      set(0, x->dtype, s);
      set(1, DType::kInt64, s);
      break;
    }
    case OpKind::kGlobalAveragePool:
    case OpKind::kGlobalMaxPool: {
      if (x->shape.rank() < 3)
        return Bad(n, "needs rank >= 3");
      Shape s = x->shape;
      for (size_t i = 2; i < s.rank(); ++i)
        s[i] = 1;
      set(0, x->dtype, s);
      break;
    }
    case OpKind::kGemm:
    case OpKind::kMatMul:
    case OpKind::kFusedGemm: {
      OP_ASSIGN_OR_RETURN(MatMulParams p, GetMatMulParams(n, in));
      set(0, x->dtype, p.out);
      break;
    }
    case OpKind::kBatchNormalization:
      if (n.attrs.Int("training_mode", 0) || (n.opset < 7 && n.attrs.Int("is_test", 1) == 0))
        return Unsupported(n.Describe() + ": training mode");
      OP_RETURN_IF_ERROR(need(5));
      set(0, x->dtype, x->shape);
      for (size_t i = 1; i < out.size(); ++i)
        if (n.outputs[i] != kNoTensor)
          return Unsupported(n.Describe() + ": training outputs");
      break;
    case OpKind::kInstanceNormalization:
      OP_RETURN_IF_ERROR(need(3));
      set(0, x->dtype, x->shape);
      break;
    case OpKind::kLayerNormalization: {
      OP_RETURN_IF_ERROR(need(2));
      auto ax = NormalizeAxis(n.attrs.Int("axis", -1), static_cast<int64_t>(x->shape.rank()));
      if (!ax.ok())
        return Bad(n, ax.status().message());
      set(0, x->dtype, x->shape);
      Shape stat = x->shape;
      for (size_t i = static_cast<size_t>(*ax); i < stat.rank(); ++i)
        stat[i] = 1;
      DType st = DTypeFromOnnx(static_cast<int>(n.attrs.Int("stash_type", 1)));
      set(1, st, stat);
      set(2, st, stat);
      break;
    }
    case OpKind::kResize: {
      OP_ASSIGN_OR_RETURN(ResizeParams p, GetResizeParams(n, in));
      set(0, x->dtype, Shape(p.out_dims));
      break;
    }
    default:
      return Internal(n.Describe() + ": not typed by WindowsAndProducts");
  }
  return Status::Ok();
}

// Layout: the same elements in a new shape or order.
Status Typing::Layout() {
  switch (n.op) {
    case OpKind::kReshape: {
      OP_ASSIGN_OR_RETURN(Shape s, ReshapeTarget(n, in));
      set(0, x->dtype, s);
      break;
    }
    case OpKind::kFlatten: {
      const int64_t r = static_cast<int64_t>(x->shape.rank());
      int64_t axis = n.attrs.Int("axis", 1);
      if (axis < 0)
        axis += r;
      if (axis < 0 || axis > r)
        return Bad(n, "axis out of range");
      int64_t a = 1, b = 1;
      for (int64_t i = 0; i < r; ++i)
        (i < axis ? a : b) *= x->shape[static_cast<size_t>(i)];
      set(0, x->dtype, Shape{a, b});
      break;
    }
    case OpKind::kTranspose: {
      const size_t r = x->shape.rank();
      std::vector<int64_t> perm = n.attrs.Ints("perm");
      if (perm.empty())
        for (size_t i = 0; i < r; ++i)
          perm.push_back(static_cast<int64_t>(r - 1 - i));
      if (perm.size() != r)
        return Bad(n, "perm does not match the rank");
      std::vector<bool> seen(r, false);
      Shape s;
      for (int64_t p : perm) {
        if (p < 0 || p >= static_cast<int64_t>(r) || seen[p])
          return Bad(n, "perm is not a permutation");
        seen[p] = true;
        s.dims.push_back(x->shape[static_cast<size_t>(p)]);
      }
      set(0, x->dtype, s);
      break;
    }
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze: {
      OP_ASSIGN_OR_RETURN(auto axes, GetSqueezeAxes(n, in));
      Shape s;
      if (n.op == OpKind::kSqueeze) {
        for (size_t i = 0; i < x->shape.rank(); ++i)
          if (!std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i)))
            s.dims.push_back(x->shape[i]);
      } else {
        size_t src = 0;
        for (size_t i = 0; i < x->shape.rank() + axes.size(); ++i) {
          if (std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i)))
            s.dims.push_back(1);
          else
            s.dims.push_back(x->shape[src++]);
        }
      }
      set(0, x->dtype, s);
      break;
    }
    default:
      return Internal(n.Describe() + ": not typed by Layout");
  }
  return Status::Ok();
}

// Elements joined, split, sliced, repeated, padded or gathered.
Status Typing::Combine() {
  switch (n.op) {
    case OpKind::kConcat: {
      OP_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(n.attrs.Int("axis", 0),
                                                      static_cast<int64_t>(x->shape.rank())));
      Shape s = x->shape;
      s[axis] = 0;
      for (const Tensor *t : in) {
        if (!t)
          continue;
        if (t->dtype != x->dtype)  // else the copies would read past the smaller elements
          return Bad(n, "inputs differ in type (" + std::string(DTypeName(x->dtype)) + " and " +
                            DTypeName(t->dtype) + ")");
        if (t->shape.rank() != s.rank())
          return Bad(n, "inputs differ in rank");
        for (size_t i = 0; i < s.rank(); ++i)
          if (static_cast<int64_t>(i) != axis && t->shape[i] != s[i])
            return Bad(n, "inputs " + x->shape.ToString() + " and " + t->shape.ToString() +
                              " differ outside the axis");
        s[axis] += t->shape[axis];
      }
      set(0, x->dtype, s);
      break;
    }
    case OpKind::kSplit: {
      int64_t axis = 0;
      OP_ASSIGN_OR_RETURN(auto sizes, GetSplitSizes(n, in, &axis));
      for (size_t i = 0; i < sizes.size(); ++i) {
        Shape s = x->shape;
        s[axis] = sizes[i];
        set(i, x->dtype, s);
      }
      break;
    }
    case OpKind::kSlice: {
      OP_ASSIGN_OR_RETURN(SliceParams p, GetSliceParams(n, in));
      set(0, x->dtype, Shape(p.lengths));
      break;
    }
    case OpKind::kExpand: {
      OP_RETURN_IF_ERROR(need(2));
      if (!in[1]->is_constant())
        return Unsupported(n.Describe() + ": runtime shape");
      OP_ASSIGN_OR_RETURN(auto dims, ConstantInts(*in[1]));
      auto s = BroadcastShapes(x->shape, Shape(dims));
      if (!s.ok())
        return Bad(n, s.status().message());
      set(0, x->dtype, *s);
      break;
    }
    case OpKind::kTile: {
      OP_RETURN_IF_ERROR(need(2));
      if (!in[1]->is_constant())
        return Unsupported(n.Describe() + ": runtime repeats");
      OP_ASSIGN_OR_RETURN(auto rep, ConstantInts(*in[1]));
      if (rep.size() != x->shape.rank())
        return Bad(n, "repeats do not match the rank");
      Shape s = x->shape;
      for (size_t i = 0; i < s.rank(); ++i) {
        if (rep[i] < 0)
          return Bad(n, "negative repeats");
        s[i] *= rep[i];
      }
      set(0, x->dtype, s);
      break;
    }
    case OpKind::kPad: {
      OP_ASSIGN_OR_RETURN(PadParams p, GetPadParams(n, in));
      Shape s = x->shape;
      for (size_t i = 0; i < s.rank(); ++i)
        s[i] += p.begin[i] + p.end[i];
      set(0, x->dtype, s);
      break;
    }
    case OpKind::kGather: {
      OP_RETURN_IF_ERROR(need(2));
      const int64_t r = static_cast<int64_t>(x->shape.rank());
      auto ax = NormalizeAxis(n.attrs.Int("axis", 0), r);
      if (!ax.ok())
        return Bad(n, ax.status().message());
      Shape s;
      for (int64_t i = 0; i < *ax; ++i)
        s.dims.push_back(x->shape[i]);
      for (int64_t d : in[1]->shape.dims)
        s.dims.push_back(d);
      const int64_t dim = x->shape[*ax];
      if (dim == 0 && in[1]->shape.NumElements() > 0)
        return Bad(n, "indices into an empty axis");
      for (int64_t i = *ax + 1; i < r; ++i)
        s.dims.push_back(x->shape[i]);
      set(0, x->dtype, s);
      break;
    }
    case OpKind::kGatherElements: {
      OP_RETURN_IF_ERROR(need(2));
      if (in[1]->shape.rank() != x->shape.rank())
        return Bad(n, "indices rank differs");
      auto ax = NormalizeAxis(n.attrs.Int("axis", 0), static_cast<int64_t>(x->shape.rank()));
      if (!ax.ok())
        return Bad(n, ax.status().message());
      const int64_t dim = x->shape[*ax];
      if (dim == 0 && in[1]->shape.NumElements() > 0)
        return Bad(n, "indices into an empty axis");
      set(0, x->dtype, in[1]->shape);
      break;
    }
    default:
      return Internal(n.Describe() + ": not typed by Combine");
  }
  return Status::Ok();
}

// Outputs made from shapes or constant bounds (Shape, Size, ConstantOfShape, Range).
Status Typing::ShapeValued() {
  switch (n.op) {
    case OpKind::kShape: {
      const int64_t r = static_cast<int64_t>(x->shape.rank());
      int64_t start = n.attrs.Int("start", 0), end = n.attrs.Int("end", r);
      if (start < 0)
        start += r;
      if (end < 0)
        end += r;
      start = std::clamp<int64_t>(start, 0, r);
      end = std::clamp<int64_t>(end, 0, r);
      set(0, DType::kInt64, Shape{std::max<int64_t>(0, end - start)});
      break;
    }
    case OpKind::kSize:
      set(0, DType::kInt64, Shape{});
      break;
    case OpKind::kConstantOfShape: {
      if (!x->is_constant())
        return Unsupported(n.Describe() + ": runtime shape");
      OP_ASSIGN_OR_RETURN(auto dims, ConstantInts(*x));
      for (int64_t d : dims)
        if (d < 0)
          return Bad(n, "negative dim");
      const Tensor *v = n.attrs.GetTensor("value");
      set(0, v ? v->dtype : DType::kFloat32, Shape(dims));
      break;
    }
    case OpKind::kRange: {
      OP_RETURN_IF_ERROR(need(3));
      for (int k = 0; k < 3; ++k)
        if (!in[k]->is_constant())
          return Unsupported(n.Describe() + ": runtime bounds");
      OP_ASSIGN_OR_RETURN(auto s, ConstantDoubles(*in[0]));
      OP_ASSIGN_OR_RETURN(auto l, ConstantDoubles(*in[1]));
      OP_ASSIGN_OR_RETURN(auto d, ConstantDoubles(*in[2]));
      if (s.size() != 1 || l.size() != 1 || d.size() != 1)
        return Bad(n, "needs scalars");
      if (d[0] == 0)
        return Bad(n, "delta is 0");
      const double count = std::ceil((l[0] - s[0]) / d[0]);
      set(0, x->dtype, Shape{std::max<int64_t>(0, static_cast<int64_t>(count))});
      break;
    }
    default:
      return Internal(n.Describe() + ": not typed by ShapeValued");
  }
  return Status::Ok();
}

// Reductions, and the ops along one axis or over blocks (Softmax, CumSum, Trilu, DepthToSpace).
Status Typing::Reductions() {
  switch (n.op) {
    case NN_REDUCE_OPS: {
      OP_ASSIGN_OR_RETURN(ReduceParams p, GetReduceParams(n, in));
      const bool arg = n.op == OpKind::kArgMax || n.op == OpKind::kArgMin;
      set(0, arg ? DType::kInt64 : x->dtype, Reduced(x->shape, p));
      break;
    }
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kHardmax:
    case OpKind::kCumSum:
    case OpKind::kTrilu:
      if (n.op == OpKind::kTrilu && x->shape.rank() < 2)
        return Bad(n, "needs rank >= 2");
      set(0, x->dtype, x->shape);
      break;
    case OpKind::kDepthToSpace:
    case OpKind::kSpaceToDepth: {
      const int64_t b = n.attrs.Int("blocksize", 0);
      if (x->shape.rank() != 4 || b < 1)
        return Bad(n, "needs a 4-D input and blocksize >= 1");
      Shape s = x->shape;
      if (n.op == OpKind::kDepthToSpace) {
        if (s[1] % (b * b))
          return Bad(n, "channels not divisible by blocksize^2");
        s[1] /= b * b;
        s[2] *= b;
        s[3] *= b;
      } else {
        if (s[2] % b || s[3] % b)
          return Bad(n, "spatial dims not divisible by blocksize");
        s[1] *= b * b;
        s[2] /= b;
        s[3] /= b;
      }
      set(0, x->dtype, s);
      break;
    }
    default:
      return Internal(n.Describe() + ": not typed by Reductions");
  }
  return Status::Ok();
}

Status Typing::Quantized() {
  switch (n.op) {
    case OpKind::kQuantizeLinear:
    case OpKind::kDequantizeLinear: {
      OP_RETURN_IF_ERROR(need(2));
      const bool q = n.op == OpKind::kQuantizeLinear;
      const Tensor *zp = in.size() > 2 ? in[2] : nullptr;
      int64_t count = 0;
      if (in[1]->shape.NumElements() != 1 || in[1]->shape.rank() > 1) {
        OP_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(n.attrs.Int("axis", 1),
                                                        static_cast<int64_t>(x->shape.rank())));
        count = x->shape[static_cast<size_t>(axis)];
      }
      OP_RETURN_IF_ERROR(CheckQuantParam(n, in[1], "scale", count));
      OP_RETURN_IF_ERROR(CheckQuantParam(n, zp, "zero point", count));
      if (zp && zp->shape != in[1]->shape)
        return Bad(n, "zero point " + zp->shape.ToString() + " and scale " +
                          in[1]->shape.ToString() + " differ in shape");
      if (!IsFloat(in[1]->dtype) || in[1]->dtype == DType::kFloat64)
        return Bad(n,
                   std::string("scale must be float32 or float16, not ") + DTypeName(in[1]->dtype));
      if (q) {
        if (!IsFloat(x->dtype) && x->dtype != DType::kInt32)
          return Bad(n, std::string("cannot quantize ") + DTypeName(x->dtype));
        const DType yt = zp ? zp->dtype : DType::kUInt8;
        if (!IsQuantType(yt))
          return Unsupported(n.Describe() + ": quantizing to " + DTypeName(yt));
        set(0, yt, x->shape);
      } else {
        if (!IsQuantType(x->dtype) && x->dtype != DType::kInt32)
          return Unsupported(n.Describe() + ": dequantizing " + DTypeName(x->dtype));
        if (zp && zp->dtype != x->dtype)
          return Bad(n, "zero point type differs from the input's");
        set(0, in[1]->dtype, x->shape);
      }
      break;
    }
    case OpKind::kDynamicQuantizeLinear:
      if (x->dtype != DType::kFloat32)
        return Bad(n, std::string("input must be float32, not ") + DTypeName(x->dtype));
      set(0, DType::kUInt8, x->shape);
      set(1, DType::kFloat32, Shape{});
      set(2, DType::kUInt8, Shape{});
      break;
    case OpKind::kQLinearConv:
    case OpKind::kConvInteger: {
      const bool ql = n.op == OpKind::kQLinearConv;
      OP_RETURN_IF_ERROR(need(ql ? 8 : 2));
      const Tensor *w = ql ? in[3] : in[1];
      if (x->shape.rank() < 3 || w->shape.rank() != x->shape.rank())
        return Bad(n, "input " + x->shape.ToString() + " and weights " + w->shape.ToString() +
                          " must both be N-D with N >= 3");
      if (!IsQuantType(x->dtype) || !IsQuantType(w->dtype))
        return Bad(n, std::string("input and weights must be uint8 or int8, not ") +
                          DTypeName(x->dtype) + " and " + DTypeName(w->dtype));
      const Tensor *xzp = ql ? in[2] : (in.size() > 2 ? in[2] : nullptr);
      const Tensor *wzp = ql ? in[5] : (in.size() > 3 ? in[3] : nullptr);
      const int64_t m = w->shape[0];
      OP_RETURN_IF_ERROR(CheckQuantParam(n, xzp, "input zero point", 0));
      OP_RETURN_IF_ERROR(CheckQuantParam(n, wzp, "weight zero point", m));
      if ((xzp && xzp->dtype != x->dtype) || (wzp && wzp->dtype != w->dtype))
        return Bad(n, "a zero point's type differs from its tensor's");
      DType yt = DType::kInt32;
      if (ql) {
        OP_RETURN_IF_ERROR(CheckQuantParam(n, in[1], "input scale", 0));
        OP_RETURN_IF_ERROR(CheckQuantParam(n, in[4], "weight scale", m));
        OP_RETURN_IF_ERROR(CheckQuantParam(n, in[6], "output scale", 0));
        OP_RETURN_IF_ERROR(CheckQuantParam(n, in[7], "output zero point", 0));
        for (size_t i : {1, 4, 6})
          if (in[i]->dtype != DType::kFloat32)
            return Bad(n, "scales must be float32");
        const Tensor *b = in.size() > 8 ? in[8] : nullptr;
        if (b && (b->dtype != DType::kInt32 || b->shape != Shape{m}))
          return Bad(n, "bias must be int32 of shape (" + std::to_string(m) + ")");
        yt = in[7]->dtype;
        if (!IsQuantType(yt))
          return Bad(n, "output zero point must be uint8 or int8");
        // Ours (FuseQuantizedLookup): a table from every requantized value to the output's.
        const Tensor *lut = in.size() > 9 ? in[9] : nullptr;
        if (lut) {
          if ((!IsQuantType(lut->dtype) && lut->dtype != DType::kFloat32) ||
              lut->shape != Shape{256})
            return Bad(n, "lookup table must be uint8, int8 or float32 of shape (256)");
          yt = lut->dtype;
        }
      }
      const Node c = InnerNode(n, OpKind::kConv);
      OP_ASSIGN_OR_RETURN(WindowParams p, GetWindowParams(c, Inputs{x, w}));
      if (p.group < 1 || x->shape[1] != w->shape[1] * p.group || m % p.group)
        return Bad(n, "channels " + std::to_string(x->shape[1]) + " and weights " +
                          w->shape.ToString() + " do not match group " + std::to_string(p.group));
      Shape s{x->shape[0], m};
      for (int64_t d : p.out_spatial)
        s.dims.push_back(d);
      set(0, yt, s);
      break;
    }
    case OpKind::kQLinearMatMul:
    case OpKind::kMatMulInteger: {
      const bool ql = n.op == OpKind::kQLinearMatMul;
      OP_RETURN_IF_ERROR(need(ql ? 8 : 2));
      const Tensor *b = ql ? in[3] : in[1];
      if (!IsQuantType(x->dtype) || !IsQuantType(b->dtype))
        return Bad(n, std::string("A and B must be uint8 or int8, not ") + DTypeName(x->dtype) +
                          " and " + DTypeName(b->dtype));
      if (x->shape.rank() < 2 || b->shape.rank() < 2)
        return Unsupported(n.Describe() + ": a rank-1 operand");
      const Node c = InnerNode(n, OpKind::kMatMul);
      OP_ASSIGN_OR_RETURN(MatMulParams p, GetMatMulParams(c, Inputs{x, b}));
      const Tensor *azp = ql ? in[2] : (in.size() > 2 ? in[2] : nullptr);
      const Tensor *bzp = ql ? in[5] : (in.size() > 3 ? in[3] : nullptr);
      OP_RETURN_IF_ERROR(CheckQuantParam(n, azp, "A's zero point", ql ? 0 : p.m));
      OP_RETURN_IF_ERROR(CheckQuantParam(n, bzp, "B's zero point", p.n));
      if ((azp && azp->dtype != x->dtype) || (bzp && bzp->dtype != b->dtype))
        return Bad(n, "a zero point's type differs from its tensor's");
      DType yt = DType::kInt32;
      if (ql) {
        OP_RETURN_IF_ERROR(CheckQuantParam(n, in[1], "A's scale", 0));
        OP_RETURN_IF_ERROR(CheckQuantParam(n, in[4], "B's scale", p.n));
        OP_RETURN_IF_ERROR(CheckQuantParam(n, in[6], "output scale", 0));
        OP_RETURN_IF_ERROR(CheckQuantParam(n, in[7], "output zero point", 0));
        for (size_t i : {1, 4, 6})
          if (in[i]->dtype != DType::kFloat32)
            return Bad(n, "scales must be float32");
        yt = in[7]->dtype;
        if (!IsQuantType(yt))
          return Bad(n, "output zero point must be uint8 or int8");
        // A ninth input (FuseQuantizedMatMul's): an int32 bias, one value per column.
        if (in.size() > 8 && in[8] != nullptr &&
            (in[8]->dtype != DType::kInt32 || in[8]->shape != Shape{p.n}))
          return Bad(n, "the bias must be int32 with one value per column (" + std::to_string(p.n) +
                            "), not " + DTypeName(in[8]->dtype) + " " + in[8]->shape.ToString());
      }
      set(0, yt, p.out);
      break;
    }
    default:
      return Internal(n.Describe() + ": not typed by Quantized");
  }
  return Status::Ok();
}

}  // namespace

Status CheckConstantIndices(const Node &n, const Inputs &in) {
  if (n.op != OpKind::kGather && n.op != OpKind::kGatherElements)
    return Status::Ok();
  if (in.size() < 2 || !in[0] || !in[1] || !in[1]->is_constant())
    return Status::Ok();
  auto ax = NormalizeAxis(n.attrs.Int("axis", 0), static_cast<int64_t>(in[0]->shape.rank()));
  if (!ax.ok())
    return Bad(n, ax.status().message());
  const int64_t dim = in[0]->shape[*ax];
  OP_ASSIGN_OR_RETURN(auto idx, ConstantInts(*in[1]));
  for (int64_t j : idx)
    if (j < -dim || j >= dim)
      return Bad(
          n, "index " + std::to_string(j) + " is out of range for a dim of " + std::to_string(dim));
  return Status::Ok();
}

StatusOr<std::vector<Tensor>> InferOutputTypes(const Node &n, const Inputs &in) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] && !in[i]->shape.IsStatic())
      return Bad(n,
                 "input " + std::to_string(i) + " has no static shape " + in[i]->shape.ToString());
  }
  if (in.empty() || !in[0]) {
    if (n.op != OpKind::kSum && n.op != OpKind::kMean && n.op != OpKind::kMin &&
        n.op != OpKind::kMax)
      return Bad(n, "missing first input");
  }
  Typing t(n, in);
  // Every op names its class here: without a default, the compiler lists any op left out.
  switch (n.op) {
    case NN_UNARY_OPS:
    case OpKind::kDropout:
    case OpKind::kCast:
    case OpKind::kCastLike:
      OP_RETURN_IF_ERROR(t.Unary());
      break;
    case NN_BINARY_OPS:
    case NN_VARIADIC_OPS:
    case OpKind::kWhere:
    case OpKind::kElementwiseChain:
      OP_RETURN_IF_ERROR(t.Broadcast());
      break;
    case OpKind::kConv:
    case OpKind::kFusedConv:
    case OpKind::kConvTranspose:
    case OpKind::kAveragePool:
    case OpKind::kMaxPool:
    case OpKind::kGlobalAveragePool:
    case OpKind::kGlobalMaxPool:
    case OpKind::kGemm:
    case OpKind::kMatMul:
    case OpKind::kFusedGemm:
    case OpKind::kBatchNormalization:
    case OpKind::kInstanceNormalization:
    case OpKind::kLayerNormalization:
    case OpKind::kResize:
      OP_RETURN_IF_ERROR(t.WindowsAndProducts());
      break;
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kTranspose:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
      OP_RETURN_IF_ERROR(t.Layout());
      break;
    case OpKind::kConcat:
    case OpKind::kSplit:
    case OpKind::kSlice:
    case OpKind::kExpand:
    case OpKind::kTile:
    case OpKind::kPad:
    case OpKind::kGather:
    case OpKind::kGatherElements:
      OP_RETURN_IF_ERROR(t.Combine());
      break;
    case OpKind::kShape:
    case OpKind::kSize:
    case OpKind::kConstantOfShape:
    case OpKind::kRange:
      OP_RETURN_IF_ERROR(t.ShapeValued());
      break;
    case NN_REDUCE_OPS:
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kHardmax:
    case OpKind::kCumSum:
    case OpKind::kTrilu:
    case OpKind::kDepthToSpace:
    case OpKind::kSpaceToDepth:
      OP_RETURN_IF_ERROR(t.Reductions());
      break;
    case OpKind::kQuantizeLinear:
    case OpKind::kDequantizeLinear:
    case OpKind::kDynamicQuantizeLinear:
    case OpKind::kQLinearConv:
    case OpKind::kConvInteger:
    case OpKind::kQLinearMatMul:
    case OpKind::kMatMulInteger:
      OP_RETURN_IF_ERROR(t.Quantized());
      break;
  }
  std::vector<Tensor> &out = t.out;
  for (size_t i = 0; i < out.size(); ++i) {
    if (n.outputs[i] != kNoTensor && out[i].dtype == DType::kUndefined)
      return Unsupported(n.Describe() + ": output " + std::to_string(i) + " is not supported");
    // A hostile model can ask for absurd shapes (ConstantOfShape, Expand, Tile, Resize): refuse
    // them here rather than let a later allocation fail.
    const int64_t count = out[i].shape.NumElements();
    if (out[i].dtype != DType::kUndefined && (count < 0 || count > kMaxElements))
      return Bad(n, "output " + std::to_string(i) + " of shape " + out[i].shape.ToString() +
                        " is too large");
  }
  return std::move(out);
}

}  // namespace op::nn
