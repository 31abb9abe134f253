// The openpilot warp (docs/contract.md, "The warp"): NV12 camera frame → one prepared 6×128×256
// uint8 frame.
//
// Bit-exact with gst/drive/warp_reference.cpp: every product and sum is rounded to float32 in
// the order written (no contraction into fused multiply-adds, and the host never passes
// -cl-mad-enable), division is built correctly rounded where the device supports it, rint()
// rounds half to even, and clamping happens in float before the conversion so NaN and infinities
// land on defined pixels.
//
// Each work item handles OP_WARP_VEC consecutive columns of one output row with explicit vector
// arithmetic (set by the host per device: wide on CPUs, where it becomes SIMD code, narrow on
// GPUs). Vector lanes are computed exactly like scalars, so the width never changes a result.
#pragma OPENCL FP_CONTRACT OFF

#ifndef OP_WARP_VEC
#define OP_WARP_VEC 16
#endif

#define OP_PLANE_ROWS 128
#define OP_PLANE_COLS 256
#define OP_PLANE_BYTES (OP_PLANE_ROWS * OP_PLANE_COLS)

#if OP_WARP_VEC == 1  // OpenCL C has no float1: the scalar types stand in
#define op_floatn float
#define op_uintn uint
#define op_convert_uintn convert_uint
#define op_vloadn(offset, p) ((p)[offset])
#define op_vstoren(v, offset, p) ((p)[offset] = (v))
#else
#define OP_CAT_(a, b) a##b
#define OP_CAT(a, b) OP_CAT_(a, b)
#define op_floatn OP_CAT(float, OP_WARP_VEC)
#define op_uintn OP_CAT(uint, OP_WARP_VEC)
#define op_convert_uintn OP_CAT(convert_uint, OP_WARP_VEC)
#define op_vloadn OP_CAT(vload, OP_WARP_VEC)
#define op_vstoren OP_CAT(vstore, OP_WARP_VEC)
#endif

__constant float op_iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// Source coordinates of the destination pixels (x, y) under the row-major 3×3 matrix in
// m.s0..s8, as ((m0·x + m1·y) + m2) / ((m6·x + m7·y) + m8), each step rounded to float32.
static inline void op_warp_coord(const float16 m, const op_floatn x, const float y, op_floatn *sx,
                                 op_floatn *sy) {
  const op_floatn nx = m.s0 * x + m.s1 * y + m.s2;
  const op_floatn ny = m.s3 * x + m.s4 * y + m.s5;
  const op_floatn d = m.s6 * x + m.s7 * y + m.s8;
  *sx = nx / d;
  *sy = ny / d;
}

static inline op_uintn op_nearest_clamped(const op_floatn v, const int max_index) {
  op_floatn r = rint(v);
  r = fmax(r, 0.0f);
  r = fmin(r, (float)max_index);
  return op_convert_uintn(r);
}

// Global size (256 / OP_WARP_VEC, 128): work item (g, row) writes plane columns
// g·OP_WARP_VEC … +OP_WARP_VEC−1 of plane row `row` in all six channels. Luma pixel
// (2·col + dx, 2·row + dy) goes to channel dy + 2·dx; U and V share one coordinate in the
// interleaved plane. dst_offset selects the history slot.
__kernel void op_warp_nv12(__global const uchar *frame, __global uchar *dst, const uint dst_offset,
                           const int width, const int height, const uint y_offset,
                           const uint y_stride, const uint uv_offset, const uint uv_stride,
                           const float16 m_y, const float16 m_uv) {
  const int group = get_global_id(0);
  const int row = get_global_id(1);
  if (group >= OP_PLANE_COLS / OP_WARP_VEC || row >= OP_PLANE_ROWS)
    return;

  const int col0 = group * OP_WARP_VEC;
  const op_floatn lane = op_vloadn(0, op_iota);
  __global uchar *out = dst + dst_offset + row * OP_PLANE_COLS + col0;
  uint index[OP_WARP_VEC];
  uchar value[OP_WARP_VEC];
  for (int dx = 0; dx < 2; dx++) {
    for (int dy = 0; dy < 2; dy++) {
      op_floatn sx, sy;
      op_warp_coord(m_y, 2.0f * ((float)col0 + lane) + (float)dx, (float)(2 * row + dy), &sx, &sy);
      const op_uintn ix = op_nearest_clamped(sx, width - 1);
      const op_uintn iy = op_nearest_clamped(sy, height - 1);
      op_vstoren(y_offset + iy * y_stride + ix, 0, index);
      for (int i = 0; i < OP_WARP_VEC; i++)
        value[i] = frame[index[i]];
      __global uchar *plane = out + (dy + 2 * dx) * OP_PLANE_BYTES;
      for (int i = 0; i < OP_WARP_VEC; i++)
        plane[i] = value[i];
    }
  }

  op_floatn sx, sy;
  op_warp_coord(m_uv, (float)col0 + lane, (float)row, &sx, &sy);
  const op_uintn ix = op_nearest_clamped(sx, (width + 1) / 2 - 1);
  const op_uintn iy = op_nearest_clamped(sy, (height + 1) / 2 - 1);
  op_vstoren(uv_offset + iy * uv_stride + 2 * ix, 0, index);
  __global uchar *u_plane = out + 4 * OP_PLANE_BYTES;
  __global uchar *v_plane = out + 5 * OP_PLANE_BYTES;
  for (int i = 0; i < OP_WARP_VEC; i++) {
    u_plane[i] = frame[index[i]];
    v_plane[i] = frame[index[i] + 1];
  }
}

// The unrounded float32 coordinates of a width×height destination grid, (sx, sy) per pixel;
// width a multiple of OP_WARP_VEC, global size (width / OP_WARP_VEC, height). Lets the tests
// compare the kernels' arithmetic with the reference's, not only the pixels.
__kernel void op_warp_coords(__global float *coords, const int width, const int height,
                             const float16 m) {
  const int x0 = get_global_id(0) * OP_WARP_VEC;
  const int y = get_global_id(1);
  if (x0 >= width || y >= height)
    return;
  op_floatn sx, sy;
  op_warp_coord(m, (float)x0 + op_vloadn(0, op_iota), (float)y, &sx, &sy);
  float xs[OP_WARP_VEC], ys[OP_WARP_VEC];
  op_vstoren(sx, 0, xs);
  op_vstoren(sy, 0, ys);
  __global float *out = coords + 2 * (y * width + x0);
  for (int i = 0; i < OP_WARP_VEC; i++) {
    out[2 * i] = xs[i];
    out[2 * i + 1] = ys[i];
  }
}
