// The calibration and int8 arithmetic of `opc quantize` (see quantize.h).
#include "quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace opc::quant {

const char *MethodName(Method m) {
  switch (m) {
    case Method::kMinMax:
      return "minmax";
    case Method::kPercentile:
      return "percentile";
    case Method::kEntropy:
      return "entropy";
  }
  return "?";
}

bool ParseMethod(const std::string &name, Method *m) {
  if (name == "minmax")
    *m = Method::kMinMax;
  else if (name == "percentile")
    *m = Method::kPercentile;
  else if (name == "entropy")
    *m = Method::kEntropy;
  else
    return false;
  return true;
}

void ActivationStats::AddRange(const float *x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!std::isfinite(v))
      continue;  // a NaN or infinity says nothing about the range int8 must cover
    if (!seen_) {
      min_ = max_ = v;
      seen_ = true;
    }
    min_ = std::min(min_, v);
    max_ = std::max(max_, v);
  }
}

void ActivationStats::StartHistograms() {
  values_.assign(kHistogramBins, 0.0);
  magnitudes_.assign(kHistogramBins, 0.0);
}

namespace {

int Bin(double x, double lo, double width) {
  if (!(width > 0))
    return 0;
  const double b = std::floor((x - lo) / width);
  return static_cast<int>(std::clamp(b, 0.0, double(kHistogramBins - 1)));
}

}  // namespace

void ActivationStats::AddHistogram(const float *x, size_t n) {
  const double vw = (double(max_) - min_) / kHistogramBins;
  const double mw = double(absmax()) / kHistogramBins;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]))
      continue;
    values_[Bin(x[i], min_, vw)] += 1;
    magnitudes_[Bin(std::fabs(x[i]), 0.0, mw)] += 1;
  }
}

Range MinMaxRange(const ActivationStats &s) {
  return {s.min(), s.max()};
}

Range PercentileRange(const ActivationStats &s, double percentile) {
  const std::vector<double> &h = s.values();
  double total = 0;
  for (double c : h)
    total += c;
  if (total == 0)
    return {s.min(), s.max()};
  const double width = (double(s.max()) - s.min()) / kHistogramBins;
  const double hi_rank = percentile / 100.0 * total;
  const double lo_rank = (1.0 - percentile / 100.0) * total;
  int lo_bin = -1, hi_bin = -1;
  double cum = 0;
  for (int b = 0; b < kHistogramBins; ++b) {
    cum += h[b];
    if (lo_bin < 0 && cum >= lo_rank)
      lo_bin = b;
    if (hi_bin < 0 && cum >= hi_rank)
      hi_bin = b;
  }
  if (hi_bin < 0)
    hi_bin = kHistogramBins - 1;
  if (lo_bin < 0)
    lo_bin = 0;
  return {float(s.min() + lo_bin * width), float(s.min() + (hi_bin + 1) * width)};
}

int EntropyThresholdBin(const std::vector<double> &hist, int levels) {
  const int bins = static_cast<int>(hist.size());
  if (levels >= bins)
    return bins;
  std::vector<double> suffix(bins + 1, 0.0);  // suffix[i] = sum of hist[i:]
  for (int i = bins - 1; i >= 0; --i)
    suffix[i] = suffix[i + 1] + hist[i];
  std::vector<double> level_sum(levels), level_nonzero(levels);
  double best = std::numeric_limits<double>::infinity();
  int best_i = bins;
  for (int i = levels; i <= bins; ++i) {
    // P: hist[0:i] with the outliers folded into its last bin; Q: hist[0:i] in `levels` levels.
    std::fill(level_sum.begin(), level_sum.end(), 0.0);
    std::fill(level_nonzero.begin(), level_nonzero.end(), 0.0);
    for (int j = 0; j < i; ++j) {
      const int l = static_cast<int>(int64_t(j) * levels / i);
      level_sum[l] += hist[j];
      level_nonzero[l] += hist[j] != 0;
    }
    const double p_total = suffix[0];
    const double q_total = suffix[0] - suffix[i];
    if (p_total == 0 || q_total == 0)
      continue;
    double kl = 0;
    bool finite = true;
    for (int j = 0; j < i && finite; ++j) {
      const double p = (j == i - 1 ? hist[j] + suffix[i] : hist[j]) / p_total;
      if (p == 0)
        continue;
      const int l = static_cast<int>(int64_t(j) * levels / i);
      const double q = hist[j] != 0 ? level_sum[l] / level_nonzero[l] / q_total : 0.0;
      if (q == 0)
        finite = false;
      else
        kl += p * std::log(p / q);
    }
    if (finite && kl < best) {
      best = kl;
      best_i = i;
    }
  }
  return best_i;
}

Range EntropyRange(const ActivationStats &s) {
  const int levels = s.min() < 0 ? 128 : 255;
  const int i = EntropyThresholdBin(s.magnitudes(), levels);
  const float t = static_cast<float>(double(s.absmax()) / kHistogramBins * i);
  return {std::max(s.min(), -t), std::min(s.max(), t)};
}

ActivationParams Uint8Params(Range r) {
  const float lo = std::min(r.lo, 0.0f), hi = std::max(r.hi, 0.0f);
  ActivationParams p;
  if (!(hi - lo > 0))
    return p;
  p.scale = (hi - lo) / 255.0f;
  const float zp = std::nearbyint(-lo / p.scale);
  p.zero_point = static_cast<uint8_t>(std::clamp(zp, 0.0f, 255.0f));
  return p;
}

namespace {

void Layout(const std::vector<int64_t> &dims, int axis, int64_t *outer, int64_t *channels,
            int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < axis; ++i)
    *outer *= dims[i];
  *channels = dims.empty() ? 1 : dims[axis];
  for (size_t i = axis + 1; i < dims.size(); ++i)
    *inner *= dims[i];
}

}  // namespace

QuantizedWeight QuantizeWeight(const std::vector<float> &w, const std::vector<int64_t> &dims,
                               int axis) {
  int64_t outer, channels, inner;
  Layout(dims, axis, &outer, &channels, &inner);
  QuantizedWeight qw;
  qw.scale.assign(channels, 0.0f);
  std::vector<float> absmax(channels, 0.0f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t k = 0; k < inner; ++k)
        absmax[c] = std::max(absmax[c], std::fabs(w[(o * channels + c) * inner + k]));
  for (int64_t c = 0; c < channels; ++c)
    qw.scale[c] = absmax[c] > 0 ? absmax[c] / 127.0f : 1.0f;
  qw.q.resize(w.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t i = (o * channels + c) * inner + k;
        const float q = std::nearbyint(w[i] / qw.scale[c]);
        qw.q[i] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
      }
  return qw;
}

std::vector<float> DequantizeWeight(const QuantizedWeight &qw, const std::vector<int64_t> &dims,
                                    int axis) {
  int64_t outer, channels, inner;
  Layout(dims, axis, &outer, &channels, &inner);
  std::vector<float> w(qw.q.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t i = (o * channels + c) * inner + k;
        w[i] = float(qw.q[i]) * qw.scale[c];
      }
  return w;
}

void FakeQuantize(float *x, size_t n, ActivationParams p) {
  const float zp = p.zero_point;
  for (size_t i = 0; i < n; ++i) {
    const float q = std::clamp(std::nearbyint(x[i] / p.scale) + zp, 0.0f, 255.0f);
    x[i] = (q - zp) * p.scale;
  }
}

}  // namespace opc::quant
