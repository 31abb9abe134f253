// 2D max and average pooling (1D as H = 1), one work-item per output element.
// Defines: TX TY (tags); N C H W OH OW KH KW SH SW PH PW DH DW; MAX_POOL (else average);
// COUNT_PAD (average divides by the whole window, padding included, clipped to the padded
// input as ONNX does) .
#include "nn_common.cl"

__kernel void pool(__global const STYPE(TX) * x, uint x_off, __global STYPE(TY) * y, uint y_off) {
  const uint i = get_global_id(0);
  if (i >= N * C * OH * OW)
    return;
  const int ow = i % OW;
  const int oh = (i / OW) % OH;
  const int nc = i / (OW * OH);
  const int base = x_off + nc * H * W;
  const int h0 = oh * SH - PH;
  const int w0 = ow * SW - PW;
#if MAX_POOL
  float acc = -INFINITY;
#else
  float acc = 0.0f;
  int count = 0;
#endif
  for (int kh = 0; kh < KH; kh++) {
    const int ih = h0 + kh * DH;
    if (ih < 0 || ih >= H)
      continue;
    for (int kw = 0; kw < KW; kw++) {
      const int iw = w0 + kw * DW;
      if (iw < 0 || iw >= W)
        continue;
      const float v = LOAD(TX, x, base + ih * W + iw);
#if MAX_POOL
      acc = fmax(acc, v);
#else
      acc += v;
      count++;
#endif
    }
  }
#if !MAX_POOL
#if COUNT_PAD
  // The window clipped to the padded input (ceil_mode windows may hang past it).
  const int hend = min(h0 + (KH - 1) * DH + 1, H + PH_END);
  const int wend = min(w0 + (KW - 1) * DW + 1, W + PW_END);
  count = ((hend - h0 + DH - 1) / DH) * ((wend - w0 + DW - 1) / DW);
#endif
  acc = count > 0 ? acc / count : 0.0f;
#endif
  STORE(TY, y, y_off + i, acc);
}
