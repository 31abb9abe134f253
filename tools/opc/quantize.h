// Post-training quantization: the calibration statistics and int8 parameters behind
// `opc quantize`, kept free of the ONNX rewriting so they can be tested on their own.
//
// Weights: int8, symmetric, one scale per output channel, values in [-127, 127] (zero point 0).
// Activations: uint8, asymmetric, one scale and zero point per tensor; the range always holds 0
// so that zero (padding, ReLU's floor) is exact. uint8 because most of our activations are
// one-sided after their activation function, where an asymmetric uint8 range spends all 256
// levels on the values that occur, and because u8 × s8 is the product integer dot-product
// instructions take (x86 VNNI, ARM's udot/usdot); onnxruntime's QDQ models make the same choice.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace opc::quant {

enum class Method { kMinMax, kPercentile, kEntropy };
const char *MethodName(Method m);
bool ParseMethod(const std::string &name, Method *m);

// Bins of the calibration histograms (TensorRT's and onnxruntime's choice).
constexpr int kHistogramBins = 2048;

// What calibration collects for one activation tensor over every frame: the exact range, and
// two histograms over fixed ranges found by a first pass (values over [min, max]; magnitudes
// over [0, max |x|]).
class ActivationStats {
 public:
  void AddRange(const float *x, size_t n);      // pass 1
  void StartHistograms();                       // between the passes
  void AddHistogram(const float *x, size_t n);  // pass 2
  float min() const { return min_; }
  float max() const { return max_; }
  float absmax() const { return std::max(-min_, max_); }
  bool seen() const { return seen_; }
  const std::vector<double> &values() const { return values_; }
  const std::vector<double> &magnitudes() const { return magnitudes_; }

 private:
  float min_ = 0, max_ = 0;
  bool seen_ = false;
  std::vector<double> values_, magnitudes_;
};

// The calibrated range [lo, hi] of an activation, before it is widened to hold 0.
struct Range {
  float lo = 0, hi = 0;
};

// min-max: the whole observed range.
Range MinMaxRange(const ActivationStats &s);
// percentile: [the (100 - p)th, the pth] percentile of the values, read from the value
// histogram (each end at the edge of the bin where the cumulative count crosses the rank, so
// within one bin width, (max - min) / 2048, of the exact percentile).
Range PercentileRange(const ActivationStats &s, double percentile);
// entropy: the magnitude threshold T that minimises KL(P || Q), P the magnitude histogram cut
// at T with everything beyond T added to its last bin, Q the same bins quantized to
// `levels` levels and expanded back (each level's count spread evenly over its non-empty bins).
// Candidates are T = i · width for i = levels … 2048; a candidate where Q is 0 where P is not
// has infinite divergence. The range is [-T, T] clipped to [min, max]. `levels` is 128 for a
// tensor with negative values (each side of an 8-bit grid) and 255 for a non-negative one.
Range EntropyRange(const ActivationStats &s);
// The entropy search on its own: the threshold index i (T = i · width) for `hist`.
int EntropyThresholdBin(const std::vector<double> &hist, int levels);

// uint8 parameters for a range: scale = (hi - lo) / 255 with lo ≤ 0 ≤ hi enforced,
// zero_point = round(-lo / scale). A range of only 0 gets scale 1.
struct ActivationParams {
  float scale = 1;
  uint8_t zero_point = 0;
};
ActivationParams Uint8Params(Range r);

// Per-output-channel symmetric int8 weights: channel c along `axis` gets
// scale[c] = max |w| / 127 (1 for an all-zero channel) and q = round-half-even(w / scale),
// clamped to [-127, 127].
struct QuantizedWeight {
  std::vector<int8_t> q;
  std::vector<float> scale;  // one per channel
};
QuantizedWeight QuantizeWeight(const std::vector<float> &w, const std::vector<int64_t> &dims,
                               int axis);
// The float values the quantized weight stands for (q · scale), laid out like `w`.
std::vector<float> DequantizeWeight(const QuantizedWeight &qw, const std::vector<int64_t> &dims,
                                    int axis);

// What QuantizeLinear → DequantizeLinear does to an activation, in place (float32 arithmetic,
// round half to even, saturating to [0, 255]).
void FakeQuantize(float *x, size_t n, ActivationParams p);

}  // namespace opc::quant
