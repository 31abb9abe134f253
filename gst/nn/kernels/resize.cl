// Resize of the two innermost axes (N and C unchanged), nearest or bilinear, one work-item per
// output element. Defines: TX TY (tags); NC H W OH OW; SCALE_H SCALE_W (output/input, floats);
// COORD(o, scale, in, out) (generated: the coordinate transformation mode, giving the input
// coordinate of output coordinate o); LINEAR (else nearest with NEAREST(xf, size), generated
// from the rounding mode, giving an index); EXCLUDE_OUTSIDE is not supported by generation.
#include "nn_common.cl"

__kernel void resize(__global const STYPE(TX) * x, uint x_off, __global STYPE(TY) * y, uint y_off) {
  const uint i = get_global_id(0);
  if (i >= NC * OH * OW)
    return;
  const int ow = i % OW;
  const int oh = (i / OW) % OH;
  const int nc = i / (OW * OH);
  const int base = x_off + nc * H * W;
  const float fy = COORD((float)oh, SCALE_H, H, OH);
  const float fx = COORD((float)ow, SCALE_W, W, OW);
#if LINEAR
  const float cy = clamp(fy, 0.0f, (float)(H - 1));
  const float cx = clamp(fx, 0.0f, (float)(W - 1));
  const int y0 = (int)floor(cy);
  const int x0 = (int)floor(cx);
  const int y1 = min(y0 + 1, H - 1);
  const int x1 = min(x0 + 1, W - 1);
  const float ay = cy - y0;
  const float ax = cx - x0;
  const float top =
      LOAD(TX, x, base + y0 * W + x0) * (1.0f - ax) + LOAD(TX, x, base + y0 * W + x1) * ax;
  const float bot =
      LOAD(TX, x, base + y1 * W + x0) * (1.0f - ax) + LOAD(TX, x, base + y1 * W + x1) * ax;
  STORE(TY, y, y_off + i, top * (1.0f - ay) + bot * ay);
#else
  const int iy = clamp((int)NEAREST(fy, H), 0, H - 1);
  const int ix = clamp((int)NEAREST(fx, W), 0, W - 1);
  STORE(TY, y, y_off + i, LOAD(TX, x, base + iy * W + ix));
#endif
}
