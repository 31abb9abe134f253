// ConvInteger and QLinearConv, depthwise (one input channel per group, M output channels of it,
// stride 1 or 2 each way, no dilation), for CPU devices: conv2d_dw's blocking (dw_rows.cl: M
// channels x R output rows of V adjacent pixels per work-item; each input row the R rows need
// is read once as KW shifted vectors), with the integer products summed in float32 vectors.
//
// That sum is exact: |x - xzp| <= 255 and |w - wzp| <= 255, so every product is an integer of
// magnitude below 2^16, and every partial sum of KH * KW <= 258 of them an integer below 2^24,
// which float32 represents exactly (code generation checks the tap count). The sum is converted
// back to int32 before the epilogue, so the results equal qconv.cl's bit for bit, at the
// speed of float multiply-adds: without VNNI, x86's integer multiply-add (pmaddwd) does as
// many multiply-adds per instruction as an fp32 FMA, and a single channel leaves it nothing to
// pair but neighbouring taps, shuffled into place.
//
// Weights are re-laid out by code generation as float32 wt[C * M][KH][KW] = w - wzp[m]. Padding
// reads as the zero point (0 after the shift). The epilogue is qconv_vec.cl's.
// Defines: TX TW TY; KH KW SH SW PH PW M; R V; HAS_XZP TXZ; QLINEAR with TXS TWS TYS TYZ WS_N
// HAS_BIAS QMIN QMAX (TYZ's range) HAS_LUT TL. Arguments after the output: N C H W OH OW, as
// conv2d_dw's.
#include "quant.cl"

#define NN_DW_LOADV(i) (NN_CAT(convert_float, V)(NN_CAT(vload, V)(0, x + (i))) - xzp)
#define NN_DW_LOAD(i) ((float)x[i] - xzp)
#include "dw_rows.cl"

#define VI NN_CAT(int, V)
#define OC (C * M)
#define PIX_BLOCKS ((OW + V - 1) / V)
#define ROW_BLOCKS ((OH + R - 1) / R)

__kernel void qconv_dw(__global const STYPE(TX) * x, uint x_off, __global const STYPE(TW) * w,
                       uint w_off,
#if HAS_XZP
                       __global const STYPE(TXZ) * xz, uint xz_off,
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
                       __global STYPE(TY) * y, uint y_off, const int N, const int C, const int H,
                       const int W, const int OH, const int OW) {
  const int pb = get_global_id(0);
  const int rb = get_global_id(1);
  const int z = get_global_id(2);
  if (pb >= PIX_BLOCKS || rb >= ROW_BLOCKS || z >= N * C)
    return;
  const int ch = z % C;
  const int p0 = PIX_BLOCKS == 1 ? 0 : pb * V;
  const int oh0 = rb * R;
#if HAS_XZP
  const float xzp = (float)LOAD(TXZ, xz, xz_off);
#else
  const float xzp = 0.0f;
#endif
  VF acc[M][R];
#pragma unroll
  for (int j = 0; j < M; j++)
#pragma unroll
    for (int a = 0; a < R; a++)
      acc[j][a] = (VF)(0.0f);
  nn_dw_rows(x, x_off + z * (H * W), xzp, w, w_off + ch * (M * KH * KW), H, W, oh0, p0 * SW - PW,
             acc);

#if QLINEAR
  const float xsc = LOAD(TXS, xs, xs_off), ysc = LOAD(TYS, ys, ys_off);
  const float zp = (float)LOAD(TYZ, yz, yz_off);
#endif
  const int n = z / C;
  const int lanes = p0 + V <= OW ? V : OW - p0;
  for (int j = 0; j < M; j++) {
    const int oc = ch * M + j;
#if QLINEAR
#if HAS_BIAS
    const int bias = b[b_off + oc];
#else
    const int bias = 0;
#endif
    const float mult = nn_div_rn(xsc * LOAD(TWS, ws, ws_off + (WS_N == 1 ? 0 : oc)), ysc);
#endif
    const int ybase = y_off + (n * OC + oc) * (OH * OW) + p0;
    for (int a = 0; a < R; a++) {
      const int oh = oh0 + a;
      if (OH % R != 0 && oh >= OH)
        break;
      const int yrow = ybase + oh * OW;
      const VI sum = NN_CAT(convert_int, V)(acc[j][a]);  // exact: an integer below 2^24
#if QLINEAR
      const VF v = NN_CAT(convert_float, V)(sum + bias) * mult;
      // round half to even, + zp, saturated; NaN (a zero output scale) gives 0 as in qconv.cl
      const VF q = clamp(rint(v) + zp, (VF)(QMIN), (VF)(QMAX));
      const VF r = select(q, (VF)(0.0f), isnan(v));
#if HAS_LUT && LUT_DQ
      NN_DQ_OUT(V, r, lanes, yrow)
#elif HAS_LUT
      int li[V];
      NN_CAT(vstore, V)(NN_CAT(convert_int, V)(r) - (int)QMIN, 0, li);
      for (int c = 0; c < lanes; c++)
        STORE(TY, y, yrow + c, LOAD(TL, lut, lut_off + li[c]));
#else
      if (lanes == V) {
        NN_CAT(vstore, V)(NN_CAT(convert_, NN_CAT(STYPE(TY), V))(r), 0, y + yrow);
      } else {
        float t[V];
        NN_CAT(vstore, V)(r, 0, t);
        for (int c = 0; c < lanes; c++)
          STORE(TY, y, yrow + c, t[c]);
      }
#endif
#else
      int t[V];
      NN_CAT(vstore, V)(sum, 0, t);
      for (int c = 0; c < lanes; c++)
        y[yrow + c] = t[c];
#endif
    }
  }
}
