// Built with -ffp-contract=off (see gst/drive/meson.build): a fused multiply-add would round
// differently from the kernels, which are built with contraction off as well.
#include "drive/warp_reference.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace op::drive {

namespace {

size_t RoundUp(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}

std::string Describe(const Nv12Layout &l) {
  return std::to_string(l.width) + "x" + std::to_string(l.height) + " NV12 (Y offset " +
         std::to_string(l.y_offset) + " stride " + std::to_string(l.y_stride) + ", UV offset " +
         std::to_string(l.uv_offset) + " stride " + std::to_string(l.uv_stride) + ")";
}

// Round half to even, then clamp to [0, max]. Clamping in float before the conversion keeps
// NaN (→ 0) and infinities (→ an edge) defined, in the same order the kernels use.
int NearestClamped(float v, int max) {
  float r = std::rint(v);
  r = std::fmax(r, 0.0f);
  r = std::fmin(r, float(max));
  return int(r);
}

}  // namespace

size_t Nv12Layout::MinBytes() const {
  if (width <= 0 || height <= 0)
    return 0;
  const size_t y_end = y_offset + y_stride * size_t(height - 1) + size_t(width);
  const size_t uv_end =
      uv_offset + uv_stride * size_t(chroma_height() - 1) + 2 * size_t(chroma_width());
  return y_end > uv_end ? y_end : uv_end;
}

Status Nv12Layout::Validate() const {
  if (width <= 0 || height <= 0 || width > 16384 || height > 16384)
    return InvalidArgument(Describe(*this) + ": frame size out of range");
  if (y_stride < size_t(width))
    return InvalidArgument(Describe(*this) + ": Y stride is shorter than a row");
  if (uv_stride < 2 * size_t(chroma_width()))
    return InvalidArgument(Describe(*this) + ": UV stride is shorter than a row");
  const size_t y_end = y_offset + y_stride * size_t(height - 1) + size_t(width);
  const size_t uv_end =
      uv_offset + uv_stride * size_t(chroma_height() - 1) + 2 * size_t(chroma_width());
  if (uv_offset < y_end && y_offset < uv_end)
    return InvalidArgument(Describe(*this) + ": the Y and UV planes overlap");
  // The kernels index bytes with 32-bit unsigned arithmetic.
  if (MinBytes() > 0xFFFFFFFFull)
    return InvalidArgument(Describe(*this) + ": frame larger than 4 GiB");
  return Status::Ok();
}

Nv12Layout Nv12Layout::Tight(int width, int height) {
  Nv12Layout l;
  l.width = width;
  l.height = height;
  l.y_stride = size_t(width);
  l.uv_stride = 2 * size_t(l.chroma_width());
  l.uv_offset = size_t(width) * size_t(height);
  return l;
}

Nv12Layout Nv12Layout::Camera(int width, int height) {
  Nv12Layout l;
  l.width = width;
  l.height = height;
  l.y_stride = RoundUp(size_t(width), 128);
  l.uv_stride = l.y_stride;
  l.uv_offset = l.y_stride * RoundUp(size_t(height), 32);
  return l;
}

KernelMatrices ToKernelMatrices(const Mat3 &m) {
  const Mat3 uv = ChromaMatrix(m);
  KernelMatrices k{};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      k.y[3 * i + j] = float(m[i][j]);
      k.uv[3 * i + j] = float(uv[i][j]);
    }
  return k;
}

void WarpCoordinate(const float *m, int x, int y, float *sx, float *sy) {
  const float fx = float(x), fy = float(y);
  // Left to right, each product and sum rounded to float32: ((m0·x + m1·y) + m2).
  const float nx = m[0] * fx + m[1] * fy + m[2];
  const float ny = m[3] * fx + m[4] * fy + m[5];
  const float d = m[6] * fx + m[7] * fy + m[8];
  *sx = nx / d;
  *sy = ny / d;
}

Status WarpReference(const uint8_t *frame, size_t frame_bytes, const Nv12Layout &layout,
                     const KernelMatrices &m, uint8_t *out) {
  OP_RETURN_IF_ERROR(layout.Validate());
  if (frame_bytes < layout.MinBytes())
    return InvalidArgument(Describe(layout) + ": buffer of " + std::to_string(frame_bytes) +
                           " bytes, the layout needs " + std::to_string(layout.MinBytes()));
  // Luma: each model pixel (x, y) goes to channel (y mod 2) + 2·(x mod 2), at (y/2, x/2).
  for (int y = 0; y < kModelHeight; y++)
    for (int x = 0; x < kModelWidth; x++) {
      float sx, sy;
      WarpCoordinate(m.y, x, y, &sx, &sy);
      const int ix = NearestClamped(sx, layout.width - 1);
      const int iy = NearestClamped(sy, layout.height - 1);
      const int ch = (y & 1) + 2 * (x & 1);
      out[ch * kPlaneBytes + size_t(y / 2) * kPlaneCols + size_t(x / 2)] =
          frame[layout.y_offset + size_t(iy) * layout.y_stride + size_t(ix)];
    }
  // Chroma: U and V share one coordinate in the interleaved plane; channels 4 and 5.
  for (int y = 0; y < kPlaneRows; y++)
    for (int x = 0; x < kPlaneCols; x++) {
      float sx, sy;
      WarpCoordinate(m.uv, x, y, &sx, &sy);
      const int ix = NearestClamped(sx, layout.chroma_width() - 1);
      const int iy = NearestClamped(sy, layout.chroma_height() - 1);
      const size_t src = layout.uv_offset + size_t(iy) * layout.uv_stride + 2 * size_t(ix);
      out[4 * kPlaneBytes + size_t(y) * kPlaneCols + size_t(x)] = frame[src];
      out[5 * kPlaneBytes + size_t(y) * kPlaneCols + size_t(x)] = frame[src + 1];
    }
  return Status::Ok();
}

}  // namespace op::drive
