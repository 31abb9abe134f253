// Op parameter resolution (see op_params.h): ONNX defaults, opset differences, auto_pad.
#include "nn/op_params.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace op::nn {
namespace {

Status Bad(const Node &n, const std::string &why) {
  return InvalidArgument(n.Describe() + ": " + why);
}

const Tensor *At(const Inputs &in, size_t i) {
  return i < in.size() ? in[i] : nullptr;
}

// An optional parameter input: absent, or empty (ONNX writes "" or a 0-element tensor), gives
// nullopt; otherwise it must be a constant of integers.
StatusOr<std::optional<std::vector<int64_t>>> OptionalInts(const Node &n, const Inputs &in,
                                                           size_t i, const char *what) {
  const Tensor *t = At(in, i);
  if (!t || (t->shape.IsStatic() && t->shape.NumElements() == 0))
    return std::optional<std::vector<int64_t>>();
  if (!t->is_constant())
    return Unsupported(n.Describe() + ": " + what + " must be a constant (computed at runtime)");
  auto v = ConstantInts(*t);
  if (!v.ok())
    return Bad(n, std::string(what) + ": " + v.status().message());
  return std::optional<std::vector<int64_t>>(std::move(*v));
}

StatusOr<std::optional<std::vector<double>>> OptionalDoubles(const Node &n, const Inputs &in,
                                                             size_t i, const char *what) {
  const Tensor *t = At(in, i);
  if (!t || (t->shape.IsStatic() && t->shape.NumElements() == 0))
    return std::optional<std::vector<double>>();
  if (!t->is_constant())
    return Unsupported(n.Describe() + ": " + what + " must be a constant (computed at runtime)");
  auto v = ConstantDoubles(*t);
  if (!v.ok())
    return Bad(n, std::string(what) + ": " + v.status().message());
  return std::optional<std::vector<double>>(std::move(*v));
}

int64_t CeilDiv(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}
int64_t FloorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

}  // namespace

StatusOr<WindowParams> GetWindowParams(const Node &node, const Inputs &in) {
  const Tensor *x = At(in, 0);
  if (!x)
    return Bad(node, "missing input X");
  const Shape &xs = x->shape;
  if (xs.rank() < 3)
    return Bad(node, "input " + xs.ToString() + " needs rank >= 3 (N, C, ...)");
  const size_t s = xs.rank() - 2;
  const bool conv = node.op == OpKind::kConv || node.op == OpKind::kFusedConv ||
                    node.op == OpKind::kConvTranspose;
  const bool transpose = node.op == OpKind::kConvTranspose;
  WindowParams p;
  const Tensor *w = conv ? At(in, 1) : nullptr;
  if (conv && (!w || w->shape.rank() != xs.rank()))
    return Bad(node, "weights must have the rank of the input " + xs.ToString());
  p.kernel = node.attrs.Ints("kernel_shape");
  if (p.kernel.empty() && w)
    p.kernel.assign(w->shape.dims.begin() + 2, w->shape.dims.end());
  if (p.kernel.size() != s)
    return Bad(node, "kernel_shape must have " + std::to_string(s) + " values");
  p.strides = node.attrs.Ints("strides", std::vector<int64_t>(s, 1));
  p.dilations = node.attrs.Ints("dilations", std::vector<int64_t>(s, 1));
  std::vector<int64_t> pads = node.attrs.Ints("pads", std::vector<int64_t>(2 * s, 0));
  if (p.strides.size() != s || p.dilations.size() != s || pads.size() != 2 * s)
    return Bad(
        node, "strides, dilations or pads do not match the " + std::to_string(s) + " spatial dims");
  for (size_t i = 0; i < s; ++i)
    if (p.strides[i] < 1 || p.dilations[i] < 1 || p.kernel[i] < 1)
      return Bad(node, "kernel, strides and dilations must be positive");
  p.pads_begin.assign(pads.begin(), pads.begin() + static_cast<long>(s));
  p.pads_end.assign(pads.begin() + static_cast<long>(s), pads.end());
  p.group = node.attrs.Int("group", 1);
  p.ceil_mode = node.attrs.Int("ceil_mode", 0) != 0;
  p.count_include_pad = node.attrs.Int("count_include_pad", 0) != 0;
  std::string auto_pad = node.attrs.String("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" &&
      auto_pad != "VALID")
    return Bad(node, "unknown auto_pad '" + auto_pad + "'");
  if (conv) {
    if (p.group < 1 || xs[1] % p.group != 0)
      return Bad(node, "group " + std::to_string(p.group) + " does not divide the channels");
    if (!transpose && w->shape[1] * p.group != xs[1])
      return Bad(node, "weights " + w->shape.ToString() + " do not match input channels " +
                           std::to_string(xs[1]) + " with group " + std::to_string(p.group));
    if (transpose && w->shape[0] != xs[1])
      return Bad(node, "weights " + w->shape.ToString() + " do not match input channels " +
                           std::to_string(xs[1]));
  }
  p.out_spatial.resize(s);
  if (transpose) {
    p.output_padding = node.attrs.Ints("output_padding", std::vector<int64_t>(s, 0));
    std::vector<int64_t> output_shape = node.attrs.Ints("output_shape");
    if (output_shape.size() == s + 2)
      output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    if (p.output_padding.size() != s)
      return Bad(node, "output_padding has the wrong length");
    for (size_t i = 0; i < s; ++i) {
      const int64_t in_d = xs[i + 2], k = (p.kernel[i] - 1) * p.dilations[i] + 1;
      const int64_t full = p.strides[i] * (in_d - 1) + p.output_padding[i] + k;
      int64_t out = -1;
      if (!output_shape.empty()) {
        if (output_shape.size() != s)
          return Bad(node, "output_shape has the wrong length");
        out = output_shape[i];
      } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        out = in_d * p.strides[i];
      }
      if (out >= 0) {
        // Floor division: a negative total (output_shape larger than the full output) puts
        // the extra row at the end, as ONNX's reference implementation does.
        const int64_t total = full - out, half = FloorDiv(total, 2);
        if (auto_pad == "SAME_UPPER") {
          p.pads_begin[i] = half;
          p.pads_end[i] = total - half;
        } else {
          p.pads_begin[i] = total - half;
          p.pads_end[i] = half;
        }
      } else if (auto_pad == "VALID") {
        p.pads_begin[i] = p.pads_end[i] = 0;
      }
      p.out_spatial[i] = full - p.pads_begin[i] - p.pads_end[i];
      if (p.out_spatial[i] < 1)
        return Bad(node, "output would be empty");
    }
    return p;
  }
  for (size_t i = 0; i < s; ++i) {
    const int64_t in_d = xs[i + 2], k = (p.kernel[i] - 1) * p.dilations[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = CeilDiv(in_d, p.strides[i]);
      const int64_t total = std::max<int64_t>(0, (out - 1) * p.strides[i] + k - in_d);
      p.pads_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      p.pads_end[i] = total - p.pads_begin[i];
      p.out_spatial[i] = out;
      continue;
    }
    if (auto_pad == "VALID")
      p.pads_begin[i] = p.pads_end[i] = 0;
    // onnxruntime refuses a pool window that could lie wholly in the padding.
    if (!conv && (p.pads_begin[i] >= p.kernel[i] || p.pads_end[i] >= p.kernel[i]))
      return Bad(node, "pads (" + std::to_string(p.pads_begin[i]) + ", " +
                           std::to_string(p.pads_end[i]) + ") must be smaller than the kernel " +
                           std::to_string(p.kernel[i]));
    const int64_t span = in_d + p.pads_begin[i] + p.pads_end[i] - k;
    if (span < 0)
      return Bad(node, "window " + std::to_string(k) + " is larger than the padded input");
    int64_t out = (p.ceil_mode ? CeilDiv(span, p.strides[i]) : FloorDiv(span, p.strides[i])) + 1;
    // A last window that would start in the end padding is dropped (as PyTorch and ORT do).
    if (p.ceil_mode && (out - 1) * p.strides[i] >= in_d + p.pads_begin[i])
      --out;
    p.out_spatial[i] = out;
  }
  return p;
}

StatusOr<SliceParams> GetSliceParams(const Node &node, const Inputs &in) {
  const Shape &xs = in[0]->shape;
  const int64_t r = static_cast<int64_t>(xs.rank());
  std::vector<int64_t> starts, ends, axes, steps;
  if (node.opset < 10) {
    starts = node.attrs.Ints("starts");
    ends = node.attrs.Ints("ends");
    axes = node.attrs.Ints("axes");
  } else {
    OP_ASSIGN_OR_RETURN(auto s, OptionalInts(node, in, 1, "starts"));
    OP_ASSIGN_OR_RETURN(auto e, OptionalInts(node, in, 2, "ends"));
    OP_ASSIGN_OR_RETURN(auto a, OptionalInts(node, in, 3, "axes"));
    OP_ASSIGN_OR_RETURN(auto st, OptionalInts(node, in, 4, "steps"));
    if (!s || !e)
      return Bad(node, "starts and ends are required");
    starts = *s;
    ends = *e;
    if (a)
      axes = *a;
    if (st)
      steps = *st;
  }
  if (axes.empty())
    for (int64_t i = 0; i < static_cast<int64_t>(starts.size()); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return Bad(node, "starts, ends, axes and steps differ in length");
  SliceParams p;
  p.starts.assign(xs.rank(), 0);
  p.steps.assign(xs.rank(), 1);
  p.lengths = xs.dims;
  std::vector<bool> seen(xs.rank(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    auto ax = NormalizeAxis(axes[i], r);
    if (!ax.ok())
      return Bad(node, ax.status().message());
    if (seen[*ax])
      return Bad(node, "axis " + std::to_string(*ax) + " is sliced twice");
    seen[*ax] = true;
    const int64_t dim = xs[*ax], step = steps[i];
    if (step == 0)
      return Bad(node, "a step of 0");
    if (step == std::numeric_limits<int64_t>::min())
      return Bad(node, "a step of INT64_MIN (its negation overflows)");
    int64_t st = starts[i], en = ends[i];
    if (st < 0)
      st = std::max<int64_t>(st, -dim) + dim;
    if (en < 0)
      en = std::max<int64_t>(en, -dim - 1) + dim;
    if (step > 0) {
      st = std::clamp<int64_t>(st, 0, dim);
      en = std::clamp<int64_t>(en, 0, dim);
    } else {
      st = std::clamp<int64_t>(st, 0, dim - 1);
      en = std::clamp<int64_t>(en, -1, dim - 1);
    }
    int64_t len = step > 0 ? CeilDiv(en - st, step) : CeilDiv(st - en, -step);
    p.starts[*ax] = st;
    p.steps[*ax] = step;
    p.lengths[*ax] = std::max<int64_t>(0, len);
  }
  return p;
}

StatusOr<PadParams> GetPadParams(const Node &node, const Inputs &in) {
  const size_t r = in[0]->shape.rank();
  PadParams p;
  p.mode = node.attrs.String("mode", "constant");
  if (p.mode != "constant" && p.mode != "reflect" && p.mode != "edge")
    return Unsupported(node.Describe() + ": pad mode '" + p.mode + "' is not supported");
  std::vector<int64_t> pads;
  if (node.opset < 11) {
    pads = node.attrs.Ints("pads");
    p.value = node.attrs.Float("value", 0.f);
  } else {
    OP_ASSIGN_OR_RETURN(auto pv, OptionalInts(node, in, 1, "pads"));
    if (!pv)
      return Bad(node, "pads are required");
    pads = *pv;
    OP_ASSIGN_OR_RETURN(auto cv, OptionalDoubles(node, in, 2, "constant_value"));
    if (cv && !cv->empty())
      p.value = (*cv)[0];
    OP_ASSIGN_OR_RETURN(auto axes, OptionalInts(node, in, 3, "axes"));
    if (axes) {
      std::vector<int64_t> full(2 * r, 0);
      if (pads.size() != 2 * axes->size())
        return Bad(node, "pads do not match axes");
      for (size_t i = 0; i < axes->size(); ++i) {
        auto ax = NormalizeAxis((*axes)[i], static_cast<int64_t>(r));
        if (!ax.ok())
          return Bad(node, ax.status().message());
        full[*ax] = pads[i];
        full[*ax + r] = pads[i + axes->size()];
      }
      pads = full;
    }
  }
  if (pads.size() != 2 * r)
    return Bad(node, "pads has " + std::to_string(pads.size()) + " values, rank " +
                         std::to_string(r) + " needs " + std::to_string(2 * r));
  p.begin.assign(pads.begin(), pads.begin() + static_cast<long>(r));
  p.end.assign(pads.begin() + static_cast<long>(r), pads.end());
  for (size_t i = 0; i < r; ++i) {
    const int64_t d = in[0]->shape[i];
    if (d + p.begin[i] + p.end[i] < 0)
      return Bad(node, "pads crop more than the input");
    if (p.mode == "reflect" && (p.begin[i] >= d || p.end[i] >= d) &&
        (p.begin[i] > 0 || p.end[i] > 0))
      return Bad(node, "reflect pads must be smaller than the dim");
    if (p.mode == "edge" && d == 0 && (p.begin[i] > 0 || p.end[i] > 0))
      return Bad(node, "edge pads of an empty dim");
  }
  return p;
}

StatusOr<ReduceParams> GetReduceParams(const Node &node, const Inputs &in) {
  const int64_t r = static_cast<int64_t>(in[0]->shape.rank());
  ReduceParams p;
  p.keepdims = node.attrs.Int("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  bool given = false;
  if (node.op == OpKind::kArgMax || node.op == OpKind::kArgMin) {
    axes = {node.attrs.Int("axis", 0)};
    given = true;
  } else if (At(in, 1)) {
    OP_ASSIGN_OR_RETURN(auto a, OptionalInts(node, in, 1, "axes"));
    if (a) {
      axes = *a;
      given = !axes.empty();
    }
  } else if (node.attrs.Has("axes")) {
    axes = node.attrs.Ints("axes");
    given = !axes.empty();
  }
  if (!given) {
    if (node.attrs.Int("noop_with_empty_axes", 0))
      return p;  // identity
    for (int64_t i = 0; i < r; ++i)
      p.axes.push_back(i);
    return p;
  }
  for (int64_t a : axes) {
    auto ax = NormalizeAxis(a, r);
    if (!ax.ok())
      return Bad(node, ax.status().message());
    p.axes.push_back(*ax);
  }
  std::sort(p.axes.begin(), p.axes.end());
  p.axes.erase(std::unique(p.axes.begin(), p.axes.end()), p.axes.end());
  return p;
}

StatusOr<std::vector<int64_t>> GetSplitSizes(const Node &node, const Inputs &in, int64_t *axis) {
  const Shape &xs = in[0]->shape;
  auto ax = NormalizeAxis(node.attrs.Int("axis", 0), static_cast<int64_t>(xs.rank()));
  if (!ax.ok())
    return Bad(node, ax.status().message());
  *axis = *ax;
  const int64_t dim = xs[*ax];
  std::vector<int64_t> sizes;
  if (node.opset >= 13) {
    OP_ASSIGN_OR_RETURN(auto s, OptionalInts(node, in, 1, "split"));
    if (s)
      sizes = *s;
  } else {
    sizes = node.attrs.Ints("split");
  }
  const int64_t n = node.attrs.Int("num_outputs", static_cast<int64_t>(node.outputs.size()));
  if (sizes.empty()) {
    if (n < 1)
      return Bad(node, "no outputs");
    const int64_t each = CeilDiv(dim, n);
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::min(each, dim - i * each));
  }
  int64_t total = 0;
  for (int64_t v : sizes) {
    if (v < 0)
      return Bad(node, "negative split size");
    total += v;
  }
  if (total != dim || sizes.size() != node.outputs.size())
    return Bad(node, "split sizes do not add up to the dim " + std::to_string(dim) +
                         " or do not match the outputs");
  return sizes;
}

StatusOr<std::vector<int64_t>> GetSqueezeAxes(const Node &node, const Inputs &in) {
  const Shape &xs = in[0]->shape;
  std::vector<int64_t> axes;
  bool given = false;
  if (node.opset >= 13) {
    OP_ASSIGN_OR_RETURN(auto a, OptionalInts(node, in, 1, "axes"));
    if (a) {
      axes = *a;
      given = true;
    }
  } else if (node.attrs.Has("axes")) {
    axes = node.attrs.Ints("axes");
    given = true;
  }
  const bool unsqueeze = node.op == OpKind::kUnsqueeze;
  if (!given) {
    if (unsqueeze)
      return Bad(node, "axes are required");
    for (size_t i = 0; i < xs.rank(); ++i)
      if (xs[i] == 1)
        axes.push_back(static_cast<int64_t>(i));
    return axes;
  }
  const int64_t r =
      static_cast<int64_t>(xs.rank()) + (unsqueeze ? static_cast<int64_t>(axes.size()) : 0);
  for (int64_t &a : axes) {
    auto ax = NormalizeAxis(a, r);
    if (!ax.ok())
      return Bad(node, ax.status().message());
    a = *ax;
    if (!unsqueeze && xs[a] != 1)
      return Bad(node, "cannot squeeze axis " + std::to_string(a) + " of " + xs.ToString());
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return Bad(node, "repeated axes");
  return axes;
}

StatusOr<ResizeParams> GetResizeParams(const Node &node, const Inputs &in) {
  const Shape &xs = in[0]->shape;
  const size_t r = xs.rank();
  ResizeParams p;
  p.mode = node.attrs.String("mode", "nearest");
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic")
    return Unsupported(node.Describe() + ": resize mode '" + p.mode + "' is not supported");
  std::optional<std::vector<double>> scales;
  std::optional<std::vector<int64_t>> sizes;
  if (node.opset < 11) {
    p.coord = "asymmetric";
    p.nearest = "floor";
    OP_ASSIGN_OR_RETURN(scales, OptionalDoubles(node, in, 1, "scales"));
  } else {
    p.coord = node.attrs.String("coordinate_transformation_mode", "half_pixel");
    p.nearest = node.attrs.String("nearest_mode", "round_prefer_floor");
    p.cubic_coeff = node.attrs.Float("cubic_coeff_a", -0.75f);
    p.exclude_outside = node.attrs.Int("exclude_outside", 0) != 0;
    p.extrapolation = node.attrs.Float("extrapolation_value", 0.f);
    OP_ASSIGN_OR_RETURN(auto roi, OptionalDoubles(node, in, 1, "roi"));
    if (roi)
      p.roi = *roi;
    OP_ASSIGN_OR_RETURN(scales, OptionalDoubles(node, in, 2, "scales"));
    OP_ASSIGN_OR_RETURN(sizes, OptionalInts(node, in, 3, "sizes"));
    if (node.attrs.Has("axes") || node.attrs.Has("keep_aspect_ratio_policy"))
      return Unsupported(node.Describe() + ": axes / keep_aspect_ratio_policy (opset 18)");
  }
  if (p.coord == "tf_crop_and_resize" && p.roi.size() != 2 * r)
    return Bad(node, "tf_crop_and_resize needs a roi of 2 x rank values");
  p.out_dims.resize(r);
  p.scales.resize(r);
  if (sizes) {
    if (sizes->size() != r)
      return Bad(node, "sizes must have one value per dim");
    for (size_t i = 0; i < r; ++i) {
      if ((*sizes)[i] < 1)
        return Bad(node, "sizes must be positive (dim " + std::to_string(i) + " is " +
                             std::to_string((*sizes)[i]) + ")");
      p.out_dims[i] = (*sizes)[i];
      p.scales[i] = static_cast<double>((*sizes)[i]) / static_cast<double>(xs[i]);
    }
  } else if (scales) {
    if (scales->size() != r)
      return Bad(node, "scales must have one value per dim");
    for (size_t i = 0; i < r; ++i) {
      if ((*scales)[i] <= 0)
        return Bad(node, "scales must be positive");
      p.scales[i] = (*scales)[i];
      p.out_dims[i] = static_cast<int64_t>(std::floor(static_cast<double>(xs[i]) * (*scales)[i]));
    }
  } else {
    return Bad(node, "needs scales or sizes");
  }
  return p;
}

StatusOr<SoftmaxParams> GetSoftmaxParams(const Node &node, const Shape &x) {
  const int64_t r = static_cast<int64_t>(x.rank());
  SoftmaxParams p;
  if (r == 0)
    return p;
  const bool legacy = node.opset < 13;
  auto ax = NormalizeAxis(node.attrs.Int("axis", legacy ? 1 : -1), r);
  if (!ax.ok())
    return Bad(node, ax.status().message());
  for (int64_t i = 0; i < *ax; ++i)
    p.outer *= x[i];
  if (legacy) {
    // Coerced to 2-D: everything from axis on is one row.
    for (int64_t i = *ax; i < r; ++i)
      p.axis_len *= x[i];
  } else {
    p.axis_len = x[*ax];
    for (int64_t i = *ax + 1; i < r; ++i)
      p.inner *= x[i];
  }
  return p;
}

StatusOr<std::pair<double, double>> GetClipBounds(const Node &node, const Inputs &in) {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  if (node.opset < 11) {
    lo = node.attrs.Float("min", -std::numeric_limits<float>::max());
    hi = node.attrs.Float("max", std::numeric_limits<float>::max());
    return std::make_pair(lo, hi);
  }
  OP_ASSIGN_OR_RETURN(auto mn, OptionalDoubles(node, in, 1, "min"));
  OP_ASSIGN_OR_RETURN(auto mx, OptionalDoubles(node, in, 2, "max"));
  if (mn && !mn->empty())
    lo = (*mn)[0];
  if (mx && !mx->empty())
    hi = (*mx)[0];
  return std::make_pair(lo, hi);
}

StatusOr<MatMulParams> GetMatMulParams(const Node &node, const Inputs &in) {
  if (!At(in, 0) || !At(in, 1))
    return Bad(node, "needs two inputs");
  Shape a = in[0]->shape, b = in[1]->shape;
  MatMulParams p;
  if (node.op == OpKind::kGemm || node.op == OpKind::kFusedGemm) {
    p.trans_a = node.attrs.Int("transA", 0) != 0;
    p.trans_b = node.attrs.Int("transB", 0) != 0;
  }
  if (node.op == OpKind::kGemm && (a.rank() != 2 || b.rank() != 2))
    return Bad(node, "Gemm needs 2-D inputs, got " + a.ToString() + " and " + b.ToString());
  if (a.rank() == 0 || b.rank() == 0)
    return Bad(node, "scalar operands");
  if (a.rank() == 1) {
    a.dims.insert(a.dims.begin(), 1);
    p.a_vector = true;
    p.trans_a = false;
  }
  if (b.rank() == 1) {
    b.dims.push_back(1);
    p.b_vector = true;
    p.trans_b = false;
  }
  const size_t ra = a.rank(), rb = b.rank();
  p.m = p.trans_a ? a[ra - 1] : a[ra - 2];
  const int64_t ka = p.trans_a ? a[ra - 2] : a[ra - 1];
  const int64_t kb = p.trans_b ? b[rb - 1] : b[rb - 2];
  p.n = p.trans_b ? b[rb - 2] : b[rb - 1];
  if (ka != kb)
    return Bad(node,
               "inner dims differ: " + in[0]->shape.ToString() + " x " + in[1]->shape.ToString());
  p.k = ka;
  Shape ba(std::vector<int64_t>(a.dims.begin(), a.dims.end() - 2));
  Shape bb(std::vector<int64_t>(b.dims.begin(), b.dims.end() - 2));
  auto batch = BroadcastShapes(ba, bb);
  if (!batch.ok())
    return Bad(node, "batch dims: " + batch.status().message());
  p.out = *batch;
  if (!p.a_vector)
    p.out.dims.push_back(p.m);
  if (!p.b_vector)
    p.out.dims.push_back(p.n);
  return p;
}

}  // namespace op::nn
