// The NV12 frame layout, the float32 matrices the warp kernels take, and a plain C++ reference of
// the warp: the oracle the OpenCL kernels are compared with, bit for bit (docs/contract.md, "The
// warp").
#pragma once

#include <cstddef>
#include <cstdint>

#include "drive/camera.h"

namespace op::drive {

// Where the planes of one NV12 frame lie in its buffer. Y rows are `y_stride` bytes apart from
// `y_offset`; the UV plane (interleaved U,V, half size) starts at `uv_offset`.
struct Nv12Layout {
  int width = 0;
  int height = 0;
  size_t y_offset = 0;
  size_t y_stride = 0;
  size_t uv_offset = 0;
  size_t uv_stride = 0;

  int chroma_width() const { return (width + 1) / 2; }
  int chroma_height() const { return (height + 1) / 2; }
  // The smallest buffer that holds every byte the layout addresses.
  size_t MinBytes() const;
  // Sizes and strides that fit together (a stride shorter than a row, planes that overlap and
  // sizes a 32-bit kernel index cannot address are refused).
  Status Validate() const;

  // Tightly packed NV12, what ordinary decoders and rawvideoparse produce.
  static Nv12Layout Tight(int width, int height);
  // The camera daemon's layout: stride = width rounded up to 128, Y plane height rounded up to
  // 32, UV plane right after it (1928×1208: stride 2048, UV offset 2,490,368).
  static Nv12Layout Camera(int width, int height);
};

// One prepared frame: 6 channels of 128×256 (Y split into 4 phases, then U, then V).
constexpr int kChannelsPerFrame = 6;
constexpr int kPlaneRows = kModelHeight / 2;  // 128
constexpr int kPlaneCols = kModelWidth / 2;   // 256
constexpr size_t kPlaneBytes = size_t(kPlaneRows) * kPlaneCols;
constexpr size_t kFrameTensorBytes = kChannelsPerFrame * kPlaneBytes;  // 196,608

// The matrices as the kernels see them: the luma matrix M and chroma matrix S·M·S⁻¹, both
// computed in double and then rounded to float32, row-major.
struct KernelMatrices {
  float y[9];
  float uv[9];
};
KernelMatrices ToKernelMatrices(const Mat3 &m);

// Warps one NV12 frame (`frame`, at least layout.MinBytes() bytes) into `out`
// (kFrameTensorBytes): float32 projective division, round half to even, clamp to edge.
// Compiled without floating-point contraction so that it matches the kernels bit for bit.
Status WarpReference(const uint8_t *frame, size_t frame_bytes, const Nv12Layout &layout,
                     const KernelMatrices &m, uint8_t *out);

// The float32 source coordinate of destination pixel (x, y) under the row-major matrix `m`,
// before rounding: exposed so tests can compare the kernels' arithmetic itself.
void WarpCoordinate(const float *m, int x, int y, float *sx, float *sy);

}  // namespace op::drive
