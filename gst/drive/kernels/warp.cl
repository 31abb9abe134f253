// The openpilot warp (contract §2): NV12 camera frame → one prepared 6×128×256 uint8 frame.
//
// Bit-exact with gst/drive/warp_reference.cpp: every product and sum is rounded to float32 in
// the order written (no contraction into fused multiply-adds, and the host never passes
// -cl-mad-enable), division is built correctly rounded where the device supports it, rint()
// rounds half to even, and clamping happens in float before the conversion so NaN and infinities
// land on defined pixels.
#pragma OPENCL FP_CONTRACT OFF

#define OP_PLANE_ROWS 128
#define OP_PLANE_COLS 256
#define OP_PLANE_BYTES (OP_PLANE_ROWS * OP_PLANE_COLS)

// Source coordinate of destination pixel (x, y) under the row-major 3×3 matrix in m.s0..s8.
inline float2 op_warp_coord(const float16 m, const int x, const int y) {
  const float fx = (float)x;
  const float fy = (float)y;
  const float nx = m.s0 * fx + m.s1 * fy + m.s2;
  const float ny = m.s3 * fx + m.s4 * fy + m.s5;
  const float d = m.s6 * fx + m.s7 * fy + m.s8;
  return (float2)(nx / d, ny / d);
}

inline uint op_nearest_clamped(const float v, const int max_index) {
  float r = rint(v);
  r = fmax(r, 0.0f);
  r = fmin(r, (float)max_index);
  return (uint)r;
}

// One work item per 2×2 block of the 512×256 luma output, i.e. per pixel of the 128×256
// planes: it writes the four luma phases (channel = row phase + 2 · column phase) and the U and
// V samples, which share one coordinate in the interleaved plane.
// Global size (256, 128) or larger; dst_offset selects the history slot.
__kernel void op_warp_nv12(__global const uchar *frame, __global uchar *dst, const uint dst_offset,
                           const int width, const int height, const uint y_offset,
                           const uint y_stride, const uint uv_offset, const uint uv_stride,
                           const float16 m_y, const float16 m_uv) {
  const int col = get_global_id(0);
  const int row = get_global_id(1);
  if (col >= OP_PLANE_COLS || row >= OP_PLANE_ROWS)
    return;

  __global uchar *out = dst + dst_offset + row * OP_PLANE_COLS + col;
  for (int dx = 0; dx < 2; dx++) {
    for (int dy = 0; dy < 2; dy++) {
      const float2 s = op_warp_coord(m_y, 2 * col + dx, 2 * row + dy);
      const uint ix = op_nearest_clamped(s.x, width - 1);
      const uint iy = op_nearest_clamped(s.y, height - 1);
      out[(dy + 2 * dx) * OP_PLANE_BYTES] = frame[y_offset + iy * y_stride + ix];
    }
  }

  const float2 s = op_warp_coord(m_uv, col, row);
  const uint ix = op_nearest_clamped(s.x, (width + 1) / 2 - 1);
  const uint iy = op_nearest_clamped(s.y, (height + 1) / 2 - 1);
  const uchar2 uv = vload2(0, frame + uv_offset + iy * uv_stride + 2 * ix);
  out[4 * OP_PLANE_BYTES] = uv.x;
  out[5 * OP_PLANE_BYTES] = uv.y;
}

// The unrounded float32 coordinates of a width×height destination grid, (sx, sy) per pixel:
// lets the tests compare the kernels' arithmetic with the reference's, not only the pixels.
__kernel void op_warp_coords(__global float *coords, const int width, const int height,
                             const float16 m) {
  const int x = get_global_id(0);
  const int y = get_global_id(1);
  if (x >= width || y >= height)
    return;
  vstore2(op_warp_coord(m, x, y), y * width + x, coords);
}
