// ConvInteger and QLinearConv, 1-D and 2-D, grouped, depthwise, dilated: one work-item per
// output element, int32 accumulation of (x - xzp) * (w - wzp) over the taps inside the input
// (padding contributes 0, as the zero point itself would after the shift).
// QLINEAR adds the int32 bias and requantizes: round(acc * (xs * ws[m] / ys)) + yzp, saturated
// to [QMIN, QMAX], in float32 like onnxruntime (see nn_requant_mult).
// Defines: TX TW TY (tags), N C H W OC OH OW G, the window (KH KW SH SW DH DW PH PW),
// HAS_XZP TXZ, HAS_WZP TWZ WZP_N (1 or OC), QLINEAR with TXS TWS TYS (scales) WS_N (1 or OC),
// TYZ, HAS_BIAS, QMIN QMAX (the range of TYZ), HAS_LUT with TL: the requantized value indexes a
// 256-entry table whose value is the output (see FuseQuantizedLookup).
#include "quant.cl"

__kernel void qconv(__global const STYPE(TX) * x, uint x_off, __global const STYPE(TW) * w,
                    uint w_off,
#if HAS_XZP
                    __global const STYPE(TXZ) * xz, uint xz_off,
#endif
#if HAS_WZP
                    __global const STYPE(TWZ) * wz, uint wz_off,
#endif
#if QLINEAR
                    __global const STYPE(TXS) * xs, uint xs_off, __global const STYPE(TWS) * ws,
                    uint ws_off, __global const STYPE(TYS) * ys, uint ys_off,
                    __global const STYPE(TYZ) * yz, uint yz_off,
#if HAS_BIAS
                    __global const int *b, uint b_off,
#endif
#if HAS_LUT
                    __global const STYPE(TL) * lut, uint lut_off,
#endif
#endif
                    __global STYPE(TY) * y, uint y_off) {
  const uint i = get_global_id(0);
  if (i >= N * OC * OH * OW)
    return;
  const int ox = i % OW, oy = (i / OW) % OH, m = (i / (OW * OH)) % OC, n = i / (OW * OH * OC);
  const int cg = C / G, g = m / (OC / G);
#if HAS_XZP
  const int xzp = LOAD(TXZ, xz, xz_off);
#else
  const int xzp = 0;
#endif
#if HAS_WZP
  const int wzp = LOAD(TWZ, wz, wz_off + (WZP_N == 1 ? 0 : m));
#else
  const int wzp = 0;
#endif
  int acc = 0;
  for (int c = 0; c < cg; c++) {
    const uint xc = ((uint)n * C + g * cg + c) * H * W;
    const uint wc = ((uint)m * cg + c) * KH * KW;
    for (int ky = 0; ky < KH; ky++) {
      const int iy = oy * SH + ky * DH - PH;
      if (iy < 0 || iy >= H)
        continue;
      for (int kx = 0; kx < KW; kx++) {
        const int ix = ox * SW + kx * DW - PW;
        if (ix < 0 || ix >= W)
          continue;
        const int xv = (int)LOAD(TX, x, x_off + xc + iy * W + ix) - xzp;
        const int wv = (int)LOAD(TW, w, w_off + wc + ky * KW + kx) - wzp;
        acc += xv * wv;
      }
    }
  }
#if QLINEAR
#if HAS_BIAS
  acc += b[b_off + m];
#endif
  const float mult = nn_div_rn(LOAD(TXS, xs, xs_off) * LOAD(TWS, ws, ws_off + (WS_N == 1 ? 0 : m)),
                               LOAD(TYS, ys, ys_off));
  const float v = (float)acc * mult;
  const float q = nn_requantize(v, (float)LOAD(TYZ, yz, yz_off), QMIN, QMAX);
#if HAS_LUT && LUT_DQ
  STORE(TY, y, y_off + i, (q - DQ_ZP) * DQ_SCALE);  // (NN_DQ_OUT, one value)
#elif HAS_LUT
  STORE(TY, y, y_off + i, LOAD(TL, lut, lut_off + (int)q - (int)QMIN));
#else
  STORE(TY, y, y_off + i, q);
#endif
#else
  STORE(TY, y, y_off + i, acc);
#endif
}
