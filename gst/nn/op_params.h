// Op parameters resolved once, the same way for shape inference, the reference interpreter and
// code generation: ONNX's defaults filled in, attributes-or-inputs (by opset) read, auto_pad
// turned into explicit pads, negative axes normalised. Every function takes the node and its
// input tensors (dtype and shape; constant data where an input carries parameters such as
// Slice's starts or Reshape's shape) and fails with a message naming the node.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nn/graph.h"

namespace op::nn {

using Inputs = std::vector<const Tensor *>;  // one per node input; null for an absent one

// Conv, ConvTranspose, FusedConv, AveragePool, MaxPool: per spatial dim (rank - 2 of them).
struct WindowParams {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
  std::vector<int64_t> output_padding;  // ConvTranspose only
  int64_t group = 1;                    // convolutions only
  bool ceil_mode = false;               // pools only
  bool count_include_pad = false;       // AveragePool only
  std::vector<int64_t> out_spatial;     // the output's spatial dims
};
StatusOr<WindowParams> GetWindowParams(const Node &node, const Inputs &in);

// Slice: for every dim of the input, start and step (possibly negative) and the output length.
struct SliceParams {
  std::vector<int64_t> starts, steps, lengths;
};
StatusOr<SliceParams> GetSliceParams(const Node &node, const Inputs &in);

// Pad: begin and end pads per dim (negative = crop), mode "constant" / "reflect" / "edge".
struct PadParams {
  std::vector<int64_t> begin, end;
  std::string mode = "constant";
  double value = 0;
};
StatusOr<PadParams> GetPadParams(const Node &node, const Inputs &in);

// Reductions (Reduce*, ArgMax/ArgMin use `axis`): sorted, normalised axes; an empty list means
// "no reduction" only when noop_with_empty_axes is set, else all axes are listed.
struct ReduceParams {
  std::vector<int64_t> axes;
  bool keepdims = true;
};
StatusOr<ReduceParams> GetReduceParams(const Node &node, const Inputs &in);

// Split sizes along the normalised axis.
StatusOr<std::vector<int64_t>> GetSplitSizes(const Node &node, const Inputs &in, int64_t *axis);

// Squeeze / Unsqueeze axes (normalised, sorted; Squeeze with none given lists every 1-dim).
StatusOr<std::vector<int64_t>> GetSqueezeAxes(const Node &node, const Inputs &in);

// Resize: output dims, per-dim scale (output/input unless scales were given), and the modes.
struct ResizeParams {
  std::vector<int64_t> out_dims;
  std::vector<double> scales;
  std::vector<double> roi;  // 2 * rank values (tf_crop_and_resize only)
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  double cubic_coeff = -0.75, extrapolation = 0;
  bool exclude_outside = false;
};
StatusOr<ResizeParams> GetResizeParams(const Node &node, const Inputs &in);

// Softmax-family axis handling: opset < 13 flattens to 2-D at `axis` (default 1); 13+ works on
// the single axis (default -1). `outer` x `axis_len` x `inner` describes the iteration.
struct SoftmaxParams {
  int64_t outer = 1, axis_len = 1, inner = 1;
};
StatusOr<SoftmaxParams> GetSoftmaxParams(const Node &node, const Shape &x);

// Clip bounds (attributes before opset 11, optional inputs after); infinities when absent.
StatusOr<std::pair<double, double>> GetClipBounds(const Node &node, const Inputs &in);

// Gemm / MatMul / FusedGemm as a batched product: out = batch dims x M x N, inner K.
struct MatMulParams {
  Shape out;  // the output shape
  int64_t m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  bool a_vector = false, b_vector = false;  // a rank-1 operand (MatMul's promotion)
};
StatusOr<MatMulParams> GetMatMulParams(const Node &node, const Inputs &in);

}  // namespace op::nn
