// The reference interpreter's heavy ops: convolutions, matrix products, pools, normalisation,
// resize, reductions, softmax. Plain loops in double precision; clarity over speed, except for
// the 2-D convolution's loop order, which keeps the real models' reference runs in seconds.
#include <algorithm>
#include <cmath>
#include <limits>

#include "nn/reference_ops.h"

namespace op::nn::ref {
namespace {

Status Bad(const Node &n, const std::string &why) {
  return InvalidArgument(n.Describe() + ": " + why);
}

const Tensor *At(const Inputs &in, size_t i) {
  return i < in.size() ? in[i] : nullptr;
}

// Adds the optional bias (per channel for convs, broadcast for gemm) and residual, applies the
// activation of a fused op, in the order its attributes say.
Status Epilogue(const Node &n, const Tensor *residual, std::vector<double> &y, const Shape &ys) {
  OP_ASSIGN_OR_RETURN(Activation act, GetActivation(n));
  const bool after = n.attrs.Int("residual_after_activation", 0) != 0;
  std::vector<double> r;
  std::vector<int64_t> roff;
  if (residual) {
    if (!BroadcastShapes(residual->shape, ys).ok() ||
        BroadcastShapes(residual->shape, ys).value() != ys)
      return Bad(
          n, "residual " + residual->shape.ToString() + " does not broadcast to " + ys.ToString());
    r = ToDoubles(*residual);
    roff = BroadcastOffsets(residual->shape, ys);
  }
  for (size_t i = 0; i < y.size(); ++i) {
    double v = y[i];
    if (residual && !after)
      v += r[static_cast<size_t>(roff[i])];
    if (act.is_chain) {
      const float x0 = static_cast<float>(v);
      v = ApplyChain(act.chain, [x0](int64_t) { return x0; });
    } else {
      v = static_cast<double>(ApplyUnary(act.op, v, act.params, DType::kFloat32));
    }
    if (residual && after)
      v += r[static_cast<size_t>(roff[i])];
    y[i] = v;
  }
  return Status::Ok();
}

}  // namespace

Status RunConv(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  OP_ASSIGN_OR_RETURN(WindowParams p, GetWindowParams(n, in));
  const Tensor &xt = *in[0], &wt = *in[1];
  const Tensor *bt = At(in, 2);
  const std::vector<double> x = ToDoubles(xt), w = ToDoubles(wt);
  std::vector<double> b = bt ? ToDoubles(*bt) : std::vector<double>();
  const Shape &ys = out[0].shape;
  const int64_t N = xt.shape[0], C = xt.shape[1], M = wt.shape[0], G = p.group;
  const int64_t cg = C / G, mg = M / G;
  if (M % G)
    return Bad(n, "output channels not divisible by group");
  if (bt && static_cast<int64_t>(b.size()) != M)
    return Bad(n, "bias size differs from channels");
  const size_t s = p.kernel.size();
  // Flatten spatial dims: input and output spatial sizes and strides.
  std::vector<int64_t> in_sp(xt.shape.dims.begin() + 2, xt.shape.dims.end());
  int64_t in_area = 1, out_area = 1, k_area = 1;
  for (size_t d = 0; d < s; ++d) {
    in_area *= in_sp[d];
    out_area *= p.out_spatial[d];
    k_area *= p.kernel[d];
  }
  std::vector<double> y(static_cast<size_t>(ys.NumElements()), 0.0);
  if (s == 2) {
    // 2-D: the same sums, ordered weight by weight over whole output rows so the inner loop is
    // a plain multiply-add (the real networks' reference runs take seconds, not minutes).
    const int64_t IH = in_sp[0], IW = in_sp[1], OH = p.out_spatial[0], OW = p.out_spatial[1];
    const int64_t KH = p.kernel[0], KW = p.kernel[1];
    for (int64_t nb = 0; nb < N; ++nb)
      for (int64_t m = 0; m < M; ++m) {
        const int64_t g = m / mg;
        double *yp = &y[static_cast<size_t>((nb * M + m) * out_area)];
        for (int64_t c = 0; c < cg; ++c) {
          const double *xp = &x[static_cast<size_t>((nb * C + g * cg + c) * in_area)];
          for (int64_t ky = 0; ky < KH; ++ky)
            for (int64_t kx = 0; kx < KW; ++kx) {
              const double wv = w[static_cast<size_t>(((m * cg + c) * KH + ky) * KW + kx)];
              const int64_t dx = kx * p.dilations[1] - p.pads_begin[1];
              // Output columns whose input column ox * stride + dx lies inside [0, IW).
              const int64_t sx = p.strides[1];
              const int64_t ox0 = dx >= 0 ? 0 : (-dx + sx - 1) / sx;
              const int64_t ox1 = IW - dx <= 0 ? 0 : std::min(OW, (IW - dx + sx - 1) / sx);
              for (int64_t oy = 0; oy < OH; ++oy) {
                const int64_t iy = oy * p.strides[0] - p.pads_begin[0] + ky * p.dilations[0];
                if (iy < 0 || iy >= IH)
                  continue;
                const double *row = xp + iy * IW + dx;
                double *orow = yp + oy * OW;
                for (int64_t ox = ox0; ox < ox1; ++ox)
                  orow[ox] += wv * row[ox * sx];
              }
            }
        }
        if (bt)
          for (int64_t o = 0; o < out_area; ++o)
            yp[o] += b[static_cast<size_t>(m)];
      }
    if (n.op == OpKind::kFusedConv)
      OP_RETURN_IF_ERROR(Epilogue(n, At(in, 3), y, ys));
    out[0] = FromDoubles(out[0].dtype, ys, y);
    return Status::Ok();
  }
  std::vector<int64_t> oidx(s), kidx(s);
  for (int64_t nb = 0; nb < N; ++nb)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t g = m / mg;
      double *yp = &y[static_cast<size_t>((nb * M + m) * out_area)];
      for (int64_t o = 0; o < out_area; ++o) {
        // Unflatten the output position.
        int64_t rem = o;
        for (size_t d = s; d-- > 0;) {
          oidx[d] = rem % p.out_spatial[d];
          rem /= p.out_spatial[d];
        }
        double acc = 0;
        for (int64_t kk = 0; kk < k_area; ++kk) {
          int64_t krem = kk, ioff = 0;
          bool inside = true;
          for (size_t d = s; d-- > 0;) {
            kidx[d] = krem % p.kernel[d];
            krem /= p.kernel[d];
          }
          int64_t mul = 1;
          for (size_t d = s; d-- > 0;) {
            const int64_t i = oidx[d] * p.strides[d] - p.pads_begin[d] + kidx[d] * p.dilations[d];
            if (i < 0 || i >= in_sp[d]) {
              inside = false;
              break;
            }
            ioff += i * mul;
            mul *= in_sp[d];
          }
          if (!inside)
            continue;
          for (int64_t c = 0; c < cg; ++c) {
            const double xv = x[static_cast<size_t>((nb * C + g * cg + c) * in_area + ioff)];
            const double wv = w[static_cast<size_t>((m * cg + c) * k_area + kk)];
            acc += xv * wv;
          }
        }
        yp[o] = acc + (bt ? b[static_cast<size_t>(m)] : 0.0);
      }
    }
  if (n.op == OpKind::kFusedConv)
    OP_RETURN_IF_ERROR(Epilogue(n, At(in, 3), y, ys));
  out[0] = FromDoubles(out[0].dtype, ys, y);
  return Status::Ok();
}

Status RunConvTranspose(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  OP_ASSIGN_OR_RETURN(WindowParams p, GetWindowParams(n, in));
  const Tensor &xt = *in[0], &wt = *in[1];
  const Tensor *bt = At(in, 2);
  const std::vector<double> x = ToDoubles(xt), w = ToDoubles(wt);
  const Shape &ys = out[0].shape;
  const int64_t N = xt.shape[0], C = xt.shape[1], G = p.group;
  const int64_t cg = C / G, mg = wt.shape[1], M = mg * G;
  const size_t s = p.kernel.size();
  std::vector<int64_t> in_sp(xt.shape.dims.begin() + 2, xt.shape.dims.end());
  int64_t in_area = 1, out_area = 1, k_area = 1;
  for (size_t d = 0; d < s; ++d) {
    in_area *= in_sp[d];
    out_area *= ys[d + 2];
    k_area *= p.kernel[d];
  }
  std::vector<double> y(static_cast<size_t>(ys.NumElements()), 0.0);
  if (bt) {
    std::vector<double> b = ToDoubles(*bt);
    if (static_cast<int64_t>(b.size()) != M)
      return Bad(n, "bias size differs from channels");
    for (int64_t nb = 0; nb < N; ++nb)
      for (int64_t m = 0; m < M; ++m)
        std::fill_n(&y[static_cast<size_t>((nb * M + m) * out_area)], out_area,
                    b[static_cast<size_t>(m)]);
  }
  std::vector<int64_t> iidx(s), kidx(s);
  for (int64_t nb = 0; nb < N; ++nb)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t g = c / cg;
      for (int64_t ii = 0; ii < in_area; ++ii) {
        int64_t rem = ii;
        for (size_t d = s; d-- > 0;) {
          iidx[d] = rem % in_sp[d];
          rem /= in_sp[d];
        }
        const double xv = x[static_cast<size_t>((nb * C + c) * in_area + ii)];
        for (int64_t kk = 0; kk < k_area; ++kk) {
          int64_t krem = kk;
          for (size_t d = s; d-- > 0;) {
            kidx[d] = krem % p.kernel[d];
            krem /= p.kernel[d];
          }
          int64_t ooff = 0, mul = 1;
          bool inside = true;
          for (size_t d = s; d-- > 0;) {
            const int64_t o = iidx[d] * p.strides[d] - p.pads_begin[d] + kidx[d] * p.dilations[d];
            if (o < 0 || o >= ys[d + 2]) {
              inside = false;
              break;
            }
            ooff += o * mul;
            mul *= ys[d + 2];
          }
          if (!inside)
            continue;
          for (int64_t mm = 0; mm < mg; ++mm) {
            const int64_t m = g * mg + mm;
            y[static_cast<size_t>((nb * M + m) * out_area + ooff)] +=
                xv * w[static_cast<size_t>((c * mg + mm) * k_area + kk)];
          }
        }
      }
    }
  out[0] = FromDoubles(out[0].dtype, ys, y);
  return Status::Ok();
}

Status RunMatMul(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  OP_ASSIGN_OR_RETURN(MatMulParams p, GetMatMulParams(n, in));
  Shape as = in[0]->shape, bs = in[1]->shape;
  if (p.a_vector)
    as.dims.insert(as.dims.begin(), 1);
  if (p.b_vector)
    bs.dims.push_back(1);
  const std::vector<double> a = ToDoubles(*in[0]), b = ToDoubles(*in[1]);
  // Batch dims broadcast: offsets of each batch's matrix in a and b.
  Shape batch(std::vector<int64_t>(p.out.dims.begin(),
                                   p.out.dims.end() - (p.a_vector ? 0 : 1) - (p.b_vector ? 0 : 1)));
  Shape ab(std::vector<int64_t>(as.dims.begin(), as.dims.end() - 2));
  Shape bb(std::vector<int64_t>(bs.dims.begin(), bs.dims.end() - 2));
  const std::vector<int64_t> aoff = BroadcastOffsets(ab, batch), boff = BroadcastOffsets(bb, batch);
  const int64_t M = p.m, N = p.n, K = p.k;
  const int64_t asz = as[as.rank() - 2] * as[as.rank() - 1],
                bsz = bs[bs.rank() - 2] * bs[bs.rank() - 1];
  const double alpha = n.op == OpKind::kMatMul ? 1.0 : n.attrs.Float("alpha", 1.f);
  const double beta = n.op == OpKind::kMatMul ? 1.0 : n.attrs.Float("beta", 1.f);
  std::vector<double> y(static_cast<size_t>(p.out.NumElements()), 0.0);
  const size_t nb = aoff.size();
  for (size_t bi = 0; bi < nb; ++bi) {
    const double *A = &a[static_cast<size_t>(aoff[bi] * asz)];
    const double *B = &b[static_cast<size_t>(boff[bi] * bsz)];
    double *Y = &y[bi * static_cast<size_t>(M * N)];
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const double av = p.trans_a ? A[k * M + i] : A[i * K + k];
        if (av == 0)
          continue;
        for (int64_t j = 0; j < N; ++j)
          Y[i * N + j] += av * (p.trans_b ? B[j * K + k] : B[k * N + j]);
      }
  }
  for (double &v : y)
    v *= alpha;
  const Tensor *c = At(in, 2);
  if (c && n.op != OpKind::kMatMul) {
    auto bc = BroadcastShapes(c->shape, p.out);
    if (!bc.ok() || *bc != p.out)
      return Bad(n, "C " + c->shape.ToString() + " does not broadcast to " + p.out.ToString());
    const std::vector<double> cv = ToDoubles(*c);
    const std::vector<int64_t> coff = BroadcastOffsets(c->shape, p.out);
    for (size_t i = 0; i < y.size(); ++i)
      y[i] += beta * cv[static_cast<size_t>(coff[i])];
  }
  if (n.op == OpKind::kFusedGemm)
    OP_RETURN_IF_ERROR(Epilogue(n, At(in, 3), y, p.out));
  out[0] = FromDoubles(out[0].dtype, p.out, y);
  return Status::Ok();
}

Status RunPool(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  OP_ASSIGN_OR_RETURN(WindowParams p, GetWindowParams(n, in));
  const Tensor &xt = *in[0];
  const std::vector<double> x = ToDoubles(xt);
  const Shape &ys = out[0].shape;
  const size_t s = p.kernel.size();
  std::vector<int64_t> in_sp(xt.shape.dims.begin() + 2, xt.shape.dims.end());
  int64_t in_area = 1, out_area = 1, k_area = 1;
  for (size_t d = 0; d < s; ++d) {
    in_area *= in_sp[d];
    out_area *= p.out_spatial[d];
    k_area *= p.kernel[d];
  }
  const bool is_max = n.op == OpKind::kMaxPool;
  if (is_max && n.attrs.Int("storage_order", 0) != 0)
    return Unsupported(n.Describe() + ": storage_order 1");
  const int64_t planes = xt.shape[0] * xt.shape[1];
  std::vector<double> y(static_cast<size_t>(ys.NumElements()));
  std::vector<double> ind(y.size());
  std::vector<int64_t> oidx(s), kidx(s);
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t o = 0; o < out_area; ++o) {
      int64_t rem = o;
      for (size_t d = s; d-- > 0;) {
        oidx[d] = rem % p.out_spatial[d];
        rem /= p.out_spatial[d];
      }
      double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
      int64_t best = -1, count = 0;
      for (int64_t kk = 0; kk < k_area; ++kk) {
        int64_t krem = kk;
        for (size_t d = s; d-- > 0;) {
          kidx[d] = krem % p.kernel[d];
          krem /= p.kernel[d];
        }
        int64_t ioff = 0, mul = 1;
        bool inside = true, in_padded = true;
        for (size_t d = s; d-- > 0;) {
          const int64_t i = oidx[d] * p.strides[d] - p.pads_begin[d] + kidx[d] * p.dilations[d];
          if (i < 0 || i >= in_sp[d])
            inside = false;
          if (i < -p.pads_begin[d] || i >= in_sp[d] + p.pads_end[d])
            in_padded = false;
          ioff += std::clamp<int64_t>(i, 0, in_sp[d] - 1) * mul;
          mul *= in_sp[d];
        }
        if (!inside) {
          if (in_padded && p.count_include_pad)
            ++count;
          continue;
        }
        const double v = x[static_cast<size_t>(pl * in_area + ioff)];
        ++count;
        if (is_max) {
          if (v > acc || best < 0) {
            acc = v;
            best = pl * in_area + ioff;
          }
        } else {
          acc += v;
        }
      }
      const size_t yi = static_cast<size_t>(pl * out_area + o);
      y[yi] = is_max ? acc : (count ? acc / static_cast<double>(count) : 0.0);
      ind[yi] = static_cast<double>(best);
    }
  out[0] = FromDoubles(out[0].dtype, ys, y);
  if (out.size() > 1 && out[1].dtype != DType::kUndefined)
    out[1] = FromDoubles(DType::kInt64, ys, ind);
  return Status::Ok();
}

Status RunGlobalPool(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  const Tensor &xt = *in[0];
  const std::vector<double> x = ToDoubles(xt);
  const int64_t planes = xt.shape[0] * xt.shape[1];
  const int64_t area = planes ? xt.shape.NumElements() / planes : 0;
  std::vector<double> y(static_cast<size_t>(planes));
  for (int64_t pl = 0; pl < planes; ++pl) {
    double acc = n.op == OpKind::kGlobalMaxPool ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < area; ++i) {
      const double v = x[static_cast<size_t>(pl * area + i)];
      acc = n.op == OpKind::kGlobalMaxPool ? std::max(acc, v) : acc + v;
    }
    y[static_cast<size_t>(pl)] =
        n.op == OpKind::kGlobalMaxPool ? acc : acc / static_cast<double>(area);
  }
  out[0] = FromDoubles(out[0].dtype, out[0].shape, y);
  return Status::Ok();
}

Status RunNormalization(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  const Tensor &xt = *in[0];
  const std::vector<double> x = ToDoubles(xt);
  std::vector<double> y(x.size());
  const double eps = n.attrs.Float("epsilon", 1e-5f);
  if (n.op == OpKind::kBatchNormalization) {
    if (n.opset < 9 && n.attrs.Int("spatial", 1) == 0)
      return Unsupported(n.Describe() + ": spatial=0");
    const auto scale = ToDoubles(*in[1]), bias = ToDoubles(*in[2]), mean = ToDoubles(*in[3]),
               var = ToDoubles(*in[4]);
    const int64_t C = xt.shape.rank() > 1 ? xt.shape[1] : 1;
    const int64_t inner = xt.shape.rank() > 2 ? xt.shape.NumElements() / (xt.shape[0] * C) : 1;
    if (static_cast<int64_t>(scale.size()) != C || static_cast<int64_t>(bias.size()) != C ||
        static_cast<int64_t>(mean.size()) != C || static_cast<int64_t>(var.size()) != C)
      return Bad(n, "scale, bias, mean and var must have one value per channel");
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t c = static_cast<size_t>((static_cast<int64_t>(i) / inner) % C);
      y[i] = (x[i] - mean[c]) / std::sqrt(var[c] + eps) * scale[c] + bias[c];
    }
    out[0] = FromDoubles(out[0].dtype, out[0].shape, y);
    return Status::Ok();
  }
  if (n.op == OpKind::kInstanceNormalization) {
    const auto scale = ToDoubles(*in[1]), bias = ToDoubles(*in[2]);
    const int64_t C = xt.shape[1], planes = xt.shape[0] * C;
    if (static_cast<int64_t>(scale.size()) != C || static_cast<int64_t>(bias.size()) != C)
      return Bad(n, "scale and bias must have one value per channel");
    const int64_t area = xt.shape.NumElements() / planes;
    for (int64_t pl = 0; pl < planes; ++pl) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < area; ++i)
        mean += x[static_cast<size_t>(pl * area + i)];
      mean /= static_cast<double>(area);
      for (int64_t i = 0; i < area; ++i) {
        const double d = x[static_cast<size_t>(pl * area + i)] - mean;
        var += d * d;
      }
      var /= static_cast<double>(area);
      const size_t c = static_cast<size_t>(pl % C);
      for (int64_t i = 0; i < area; ++i) {
        const size_t k = static_cast<size_t>(pl * area + i);
        y[k] = (x[k] - mean) / std::sqrt(var + eps) * scale[c] + bias[c];
      }
    }
    out[0] = FromDoubles(out[0].dtype, out[0].shape, y);
    return Status::Ok();
  }
  // LayerNormalization over the dims from `axis` on; scale and bias broadcast onto them.
  const int64_t r = static_cast<int64_t>(xt.shape.rank());
  const int64_t axis = *NormalizeAxis(n.attrs.Int("axis", -1), r);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i)
    (i < axis ? outer : inner) *= xt.shape[static_cast<size_t>(i)];
  Shape norm(std::vector<int64_t>(xt.shape.dims.begin() + axis, xt.shape.dims.end()));
  auto check = [&](const Tensor *t) -> Status {
    if (!t)
      return Status::Ok();
    auto b = BroadcastShapes(t->shape, norm);
    if (!b.ok() || *b != norm)
      return Bad(n, "scale/bias " + t->shape.ToString() + " do not fit " + norm.ToString());
    return Status::Ok();
  };
  OP_RETURN_IF_ERROR(check(in[1]));
  OP_RETURN_IF_ERROR(check(At(in, 2)));
  const auto scale = ToDoubles(*in[1]);
  const auto soff = BroadcastOffsets(in[1]->shape, norm);
  std::vector<double> bias;
  std::vector<int64_t> boff;
  if (At(in, 2)) {
    bias = ToDoubles(*in[2]);
    boff = BroadcastOffsets(in[2]->shape, norm);
  }
  std::vector<double> means(static_cast<size_t>(outer)), inv(static_cast<size_t>(outer));
  for (int64_t o = 0; o < outer; ++o) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i)
      mean += x[static_cast<size_t>(o * inner + i)];
    mean /= static_cast<double>(inner);
    for (int64_t i = 0; i < inner; ++i) {
      const double d = x[static_cast<size_t>(o * inner + i)] - mean;
      var += d * d;
    }
    var /= static_cast<double>(inner);
    const double is = 1.0 / std::sqrt(var + eps);
    means[static_cast<size_t>(o)] = mean;
    inv[static_cast<size_t>(o)] = is;
    for (int64_t i = 0; i < inner; ++i) {
      const size_t k = static_cast<size_t>(o * inner + i);
      double v = (x[k] - mean) * is * scale[static_cast<size_t>(soff[static_cast<size_t>(i)])];
      if (!bias.empty())
        v += bias[static_cast<size_t>(boff[static_cast<size_t>(i)])];
      y[k] = v;
    }
  }
  out[0] = FromDoubles(out[0].dtype, out[0].shape, y);
  if (out.size() > 1 && out[1].dtype != DType::kUndefined)
    out[1] = FromDoubles(out[1].dtype, out[1].shape, means);
  if (out.size() > 2 && out[2].dtype != DType::kUndefined)
    out[2] = FromDoubles(out[2].dtype, out[2].shape, inv);
  return Status::Ok();
}

Status RunResize(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  OP_ASSIGN_OR_RETURN(ResizeParams p, GetResizeParams(n, in));
  const Tensor &xt = *in[0];
  const std::vector<double> x = ToDoubles(xt);
  const Shape &xs = xt.shape, &ys = out[0].shape;
  const size_t r = xs.rank();
  const std::vector<int64_t> xst = Strides(xs);
  // Source coordinate of output index i along dim d (ONNX's coordinate_transformation_mode).
  auto source = [&](size_t d, int64_t i, bool *outside) -> double {
    // The resized length is in * scale, unrounded when scales were given (ONNX's reference
    // uses it so in align_corners and tf_crop_and_resize); equal to the output dim for sizes.
    const double scale = p.scales[d], in_d = static_cast<double>(xs[d]);
    const double out_d = p.coord == "align_corners" || p.coord == "tf_crop_and_resize"
                             ? in_d * scale
                             : static_cast<double>(ys[d]);
    const double fi = static_cast<double>(i);
    *outside = false;
    if (p.coord == "half_pixel")
      return (fi + 0.5) / scale - 0.5;
    if (p.coord == "pytorch_half_pixel")
      return out_d > 1 ? (fi + 0.5) / scale - 0.5 : 0.0;
    if (p.coord == "align_corners")
      return out_d == 1 ? 0.0 : fi * (in_d - 1) / (out_d - 1);
    if (p.coord == "asymmetric")
      return fi / scale;
    if (p.coord == "tf_half_pixel_for_nn")
      return (fi + 0.5) / scale;
    // tf_crop_and_resize
    const double start = p.roi[d], end = p.roi[d + r];
    const double v = out_d > 1 ? start * (in_d - 1) + fi * (end - start) * (in_d - 1) / (out_d - 1)
                               : 0.5 * (start + end) * (in_d - 1);
    *outside = v < 0 || v > in_d - 1;
    return v;
  };
  static const char *kCoords[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                  "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kCoords), std::end(kCoords), p.coord) == std::end(kCoords))
    return Unsupported(n.Describe() + ": coordinate_transformation_mode '" + p.coord + "'");
  // Per dim and output index: the source indices with their weights (1 for nearest, 2 for
  // linear, 4 for cubic) and whether the coordinate fell outside (tf_crop_and_resize).
  struct Taps {
    std::vector<std::pair<int64_t, double>> taps;
    bool outside = false;
  };
  // Keys' cubic convolution kernel with coefficient a (ONNX's cubic_coeff_a).
  const double A = p.cubic_coeff;
  auto cubic = [A](double t) {
    t = std::fabs(t);
    if (t <= 1)
      return ((A + 2) * t - (A + 3)) * t * t + 1;
    if (t < 2)
      return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
    return 0.0;
  };
  std::vector<std::vector<Taps>> taps(r);
  for (size_t d = 0; d < r; ++d)
    for (int64_t i = 0; i < ys[d]; ++i) {
      Taps t;
      const double s = source(d, i, &t.outside);
      const int64_t last = xs[d] - 1;
      if (p.mode == "nearest") {
        double v;
        if (p.nearest == "round_prefer_floor")
          v = (s - std::floor(s) == 0.5) ? std::floor(s) : std::round(s);
        else if (p.nearest == "round_prefer_ceil")
          v = std::round(s);
        else if (p.nearest == "floor")
          v = std::floor(s);
        else if (p.nearest == "ceil")
          v = std::ceil(s);
        else
          return Unsupported(n.Describe() + ": nearest_mode '" + p.nearest + "'");
        t.taps.emplace_back(std::clamp<int64_t>(static_cast<int64_t>(v), 0, last), 1.0);
      } else if (p.mode == "linear") {
        const double c = std::clamp(s, 0.0, static_cast<double>(last));
        const int64_t i0 = static_cast<int64_t>(std::floor(c));
        const double w = c - static_cast<double>(i0);
        t.taps.emplace_back(i0, 1 - w);
        t.taps.emplace_back(std::min(i0 + 1, last), w);
      } else {
        // Cubic: four taps around floor(s), clamped to the edge; with exclude_outside, taps
        // beyond the input get no weight and the rest are renormalised.
        const int64_t i0 = static_cast<int64_t>(std::floor(s));
        const double f = s - static_cast<double>(i0);
        double sum = 0;
        for (int64_t k = -1; k <= 2; ++k) {
          const int64_t src = i0 + k;
          double w = cubic(f - static_cast<double>(k));
          if (p.exclude_outside && (src < 0 || src > last))
            w = 0;
          sum += w;
          t.taps.emplace_back(std::clamp<int64_t>(src, 0, last), w);
        }
        if (p.exclude_outside && sum != 0)
          for (auto &tap : t.taps)
            tap.second /= sum;
      }
      taps[d].push_back(t);
    }
  std::vector<double> y(static_cast<size_t>(ys.NumElements()));
  std::vector<int64_t> idx(r, 0), pick(r, 0);
  for (size_t k = 0; k < y.size(); ++k) {
    bool outside = false;
    for (size_t d = 0; d < r; ++d)
      outside |= taps[d][static_cast<size_t>(idx[d])].outside;
    if (outside) {
      y[k] = p.extrapolation;
    } else {
      // Sum over every combination of one tap per dim (a separable filter).
      double acc = 0;
      std::fill(pick.begin(), pick.end(), 0);
      for (;;) {
        double wgt = 1;
        int64_t off = 0;
        for (size_t d = 0; d < r; ++d) {
          const auto &tap = taps[d][static_cast<size_t>(idx[d])].taps[static_cast<size_t>(pick[d])];
          wgt *= tap.second;
          off += tap.first * xst[d];
        }
        if (wgt != 0)
          acc += wgt * x[static_cast<size_t>(off)];
        size_t d = r;
        while (d-- > 0) {
          if (++pick[d] < static_cast<int64_t>(taps[d][static_cast<size_t>(idx[d])].taps.size()))
            break;
          pick[d] = 0;
        }
        if (d == static_cast<size_t>(-1))
          break;
      }
      y[k] = acc;
    }
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < ys[d])
        break;
      idx[d] = 0;
    }
  }
  out[0] = FromDoubles(out[0].dtype, ys, y);
  return Status::Ok();
}

Status RunReduce(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  OP_ASSIGN_OR_RETURN(ReduceParams p, GetReduceParams(n, in));
  const Tensor &xt = *in[0];
  const std::vector<double> x = ToDoubles(xt);
  const Shape &xs = xt.shape;
  const size_t r = xs.rank();
  // Output index (with reduced dims as 1) for each input element.
  Shape kept = xs;
  for (int64_t a : p.axes)
    kept[static_cast<size_t>(a)] = 1;
  const std::vector<int64_t> kst = Strides(kept);
  const size_t nout = static_cast<size_t>(kept.NumElements());
  const OpKind op = n.op;
  const bool arg = op == OpKind::kArgMax || op == OpKind::kArgMin;
  double init = 0;
  if (op == OpKind::kReduceMax || op == OpKind::kArgMax)
    init = -std::numeric_limits<double>::infinity();
  if (op == OpKind::kReduceMin || op == OpKind::kArgMin)
    init = std::numeric_limits<double>::infinity();
  if (op == OpKind::kReduceProd)
    init = 1;
  std::vector<double> acc(nout, init), cnt(nout, 0), best(nout, -1);
  // ReduceLogSumExp subtracts the max first for stability.
  std::vector<double> mx(nout, -std::numeric_limits<double>::infinity());
  std::vector<int64_t> idx(r, 0), aidx(r, 0);
  const bool last = n.attrs.Int("select_last_index", 0) != 0;
  for (int pass = op == OpKind::kReduceLogSumExp ? 0 : 1; pass < 2; ++pass) {
    std::fill(idx.begin(), idx.end(), 0);
    for (size_t k = 0; k < x.size(); ++k) {
      size_t o = 0;
      for (size_t d = 0; d < r; ++d)
        o += static_cast<size_t>((kept[d] == 1 ? 0 : idx[d]) * kst[d]);
      const double v = x[k];
      if (pass == 0) {
        mx[o] = std::max(mx[o], v);
      } else {
        switch (op) {
          case OpKind::kReduceMax:
            acc[o] = std::max(acc[o], v);
            break;
          case OpKind::kReduceMin:
            acc[o] = std::min(acc[o], v);
            break;
          case OpKind::kReduceProd:
            acc[o] *= v;
            break;
          case OpKind::kReduceL1:
            acc[o] += std::fabs(v);
            break;
          case OpKind::kReduceL2:
          case OpKind::kReduceSumSquare:
            acc[o] += v * v;
            break;
          case OpKind::kReduceLogSumExp:
            acc[o] += std::exp(v - mx[o]);
            break;
          case OpKind::kArgMax:
          case OpKind::kArgMin: {
            const int64_t pos = idx[static_cast<size_t>(p.axes[0])];
            const bool better = op == OpKind::kArgMax ? (last ? v >= acc[o] : v > acc[o])
                                                      : (last ? v <= acc[o] : v < acc[o]);
            if (better || best[o] < 0) {
              acc[o] = v;
              best[o] = static_cast<double>(pos);
            }
            break;
          }
          default:  // Mean, Sum, LogSum
            acc[o] += v;
        }
        cnt[o] += 1;
      }
      for (size_t d = r; d-- > 0;) {
        if (++idx[d] < xs[d])
          break;
        idx[d] = 0;
      }
    }
  }
  (void)aidx;
  for (size_t o = 0; o < nout; ++o) {
    switch (op) {
      case OpKind::kReduceMean:
        acc[o] = cnt[o] ? acc[o] / cnt[o] : std::numeric_limits<double>::quiet_NaN();
        break;
      case OpKind::kReduceL2:
        acc[o] = std::sqrt(acc[o]);
        break;
      case OpKind::kReduceLogSum:
        acc[o] = std::log(acc[o]);
        break;
      case OpKind::kReduceLogSumExp:
        acc[o] = std::log(acc[o]) + mx[o];
        break;
      default:
        break;
    }
  }
  out[0] = FromDoubles(out[0].dtype, out[0].shape, arg ? best : acc);
  return Status::Ok();
}

Status RunSoftmax(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  OP_ASSIGN_OR_RETURN(SoftmaxParams p, GetSoftmaxParams(n, in[0]->shape));
  const std::vector<double> x = ToDoubles(*in[0]);
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < p.outer; ++o)
    for (int64_t i = 0; i < p.inner; ++i) {
      auto at = [&](int64_t a) { return static_cast<size_t>((o * p.axis_len + a) * p.inner + i); };
      double mx = -std::numeric_limits<double>::infinity();
      int64_t arg = 0;
      for (int64_t a = 0; a < p.axis_len; ++a)
        if (x[at(a)] > mx) {
          mx = x[at(a)];
          arg = a;
        }
      if (n.op == OpKind::kHardmax) {
        for (int64_t a = 0; a < p.axis_len; ++a)
          y[at(a)] = a == arg ? 1 : 0;
        continue;
      }
      double sum = 0;
      for (int64_t a = 0; a < p.axis_len; ++a)
        sum += std::exp(x[at(a)] - mx);
      for (int64_t a = 0; a < p.axis_len; ++a)
        y[at(a)] = n.op == OpKind::kSoftmax ? std::exp(x[at(a)] - mx) / sum
                                            : x[at(a)] - mx - std::log(sum);
    }
  out[0] = FromDoubles(out[0].dtype, out[0].shape, y);
  return Status::Ok();
}

Status RunCumSum(const Node &n, const Inputs &in, std::vector<Tensor> &out) {
  const Tensor &xt = *in[0];
  if (!At(in, 1))
    return Bad(n, "needs an axis input");
  OP_ASSIGN_OR_RETURN(auto axv, ConstantInts(*in[1]));
  if (axv.size() != 1)
    return Bad(n, "axis must be one value");
  const int64_t r = static_cast<int64_t>(xt.shape.rank());
  auto ax = NormalizeAxis(axv[0], r);
  if (!ax.ok())
    return Bad(n, ax.status().message());
  const bool exclusive = n.attrs.Int("exclusive", 0) != 0, reverse = n.attrs.Int("reverse", 0) != 0;
  int64_t outer = 1, len = xt.shape[static_cast<size_t>(*ax)], inner = 1;
  for (int64_t i = 0; i < *ax; ++i)
    outer *= xt.shape[static_cast<size_t>(i)];
  for (int64_t i = *ax + 1; i < r; ++i)
    inner *= xt.shape[static_cast<size_t>(i)];
  Tensor &y = out[0];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      Real acc = 0;
      for (int64_t a = 0; a < len; ++a) {
        const int64_t aa = reverse ? len - 1 - a : a;
        const size_t k = static_cast<size_t>((o * len + aa) * inner + i);
        const Real v = GetReal(xt, k);
        if (!exclusive)
          acc += v;
        SetReal(Mut(y), y.dtype, k, acc);
        if (exclusive)
          acc += v;
      }
    }
  return Status::Ok();
}

}  // namespace op::nn::ref
