// ConvInteger and QLinearConv for CPU devices (2-D, constant weights) with the integer products
// summed in float32: conv2d_vec's blocking (each work-item computes OCB output channels of one
// group for V adjacent output pixels, PV pixel vectors of a flat 1x1 run, one vector FMA per
// input vector and broadcast weight).
//
// The sum is exact. Every input is shifted by its zero point (|x - xzp| <= XMAX), every weight
// by its own (code generation stores w - wzp as float32), so each product is an integer, and
// code generation takes this kernel only where, for every output channel m,
// XMAX * sum over its taps of |w - wzp| < 2^24: every partial sum, in any order, is then an
// integer below 2^24, which float32 represents exactly. The sum is converted back to int32
// before the epilogue, so the results equal qconv.cl's bit for bit. Without VNNI, x86's integer
// multiply-add (pmaddwd) does no more multiply-adds per instruction than an fp32 FMA, and needs
// the inputs widened and interleaved first; the FMA needs one conversion per loaded vector.
//
// Weights: wt[G * OC_BLOCKS][CG][KH][KW][OCB] (float32; channels past the group's end 0).
// Padding reads as the zero point (0 after the shift). The epilogue is qconv_vec.cl's.
// Defines: TX TW TY; N C H W OC OH OW G; KH KW SH SW PH PW DH DW; OCB V PV FLAT; HAS_XZP TXZ;
// QLINEAR with TXS TWS TYS TYZ WS_N HAS_BIAS QMIN QMAX (TYZ's range) HAS_LUT TL.
#include "quant.cl"

#define VF NN_CAT(float, V)
#define VI NN_CAT(int, V)
#define CG (C / G)
#define OCG (OC / G)
#define OC_BLOCKS ((OCG + OCB - 1) / OCB)
#if FLAT
#define ROWS 1
#define PIXELS (OH * OW)
#else
#define ROWS OH
#define PIXELS OW
#endif
#define PIX_BLOCKS ((PIXELS + V * PV - 1) / (V * PV))
// V inputs from p as float, shifted by the zero point.
#define NN_QF_LOAD(p) (NN_CAT(convert_float, V)(NN_CAT(vload, V)(0, (p))) - xzp)

__kernel void qconv_f(__global const STYPE(TX) * x, uint x_off, __global const STYPE(TW) * w,
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
                      __global STYPE(TY) * y, uint y_off) {
  // Channel blocks vary fastest, as in conv2d_vec: consecutive work-items of a thread read the
  // same input pixels with the next weights.
  const int z = get_global_id(0);
  const int oh = get_global_id(1);
  const int pb = get_global_id(2);
  if (pb >= PIX_BLOCKS || oh >= ROWS || z >= N * G * OC_BLOCKS)
    return;
  const int n = z / (G * OC_BLOCKS);
  const int gb = z % (G * OC_BLOCKS);
  const int g = gb / OC_BLOCKS;
  const int oc0 = g * OCG + (gb % OC_BLOCKS) * OCB;
  const int p0 = pb * (V * PV);
  const int xbase = x_off + (n * C + g * CG) * H * W;
  const int wbase = w_off + gb * (CG * KH * KW * OCB);
#if HAS_XZP
  const float xzp = (float)LOAD(TXZ, xz, xz_off);
#else
  const float xzp = 0.0f;
#endif

  VF acc[OCB], acc2[OCB];
#pragma unroll
  for (int a = 0; a < OCB; a++)
    acc[a] = acc2[a] = (VF)(0.0f);

#if FLAT
  if (p0 + PV * V <= PIXELS) {
    for (int ic = 0; ic < CG; ic++) {
      const VF xv = NN_QF_LOAD(x + xbase + ic * (H * W) + p0);
#if PV == 2
      const VF xv2 = NN_QF_LOAD(x + xbase + ic * (H * W) + p0 + V);
#endif
#pragma unroll
      for (int a = 0; a < OCB; a++) {
        const VF wv = (VF)(LOAD(TW, w, wbase + ic * OCB + a));
        acc[a] = fma(xv, wv, acc[a]);
#if PV == 2
        acc2[a] = fma(xv2, wv, acc2[a]);
#endif
      }
    }
  } else {
    for (int ic = 0; ic < CG; ic++) {
      for (int j = 0; j < PV; j++) {
        const int pj = p0 + j * V;
        float t[V];
        for (int c = 0; c < V; c++)
          t[c] = pj + c < PIXELS ? (float)x[xbase + ic * (H * W) + pj + c] - xzp : 0.0f;
        const VF xv = NN_CAT(vload, V)(0, t);
#pragma unroll
        for (int a = 0; a < OCB; a++) {
          const VF wv = (VF)(LOAD(TW, w, wbase + ic * OCB + a));
          if (j == 0)
            acc[a] = fma(xv, wv, acc[a]);
          else
            acc2[a] = fma(xv, wv, acc2[a]);
        }
      }
    }
  }
#else
  for (int ic = 0; ic < CG; ic++) {
    for (int kh = 0; kh < KH; kh++) {
      const int ih = oh * SH - PH + kh * DH;
      if (ih < 0 || ih >= H)
        continue;
      const int row = xbase + (ic * H + ih) * W;
      for (int kw = 0; kw < KW; kw++) {
        const int iw0 = p0 * SW - PW + kw * DW;
        VF xv;
        if (SW == 1 && iw0 >= 0 && iw0 + V <= W) {
          xv = NN_QF_LOAD(x + row + iw0);
        } else if (SW == 2 && iw0 >= 0 && iw0 + 2 * V <= W) {
          // The even lanes of 2V inputs (bytes: one 32-byte load at V = 16).
          xv = NN_CAT(convert_float,
                      V)((NN_CAT(STYPE(TX), V))(NN_CAT(vload, V)(0, x + row + iw0).even,
                                                NN_CAT(vload, V)(0, x + row + iw0 + V).even)) -
               xzp;
        } else {
          float t[V];
          for (int c = 0; c < V; c++) {
            const int iw = iw0 + c * SW;
            t[c] = (iw >= 0 && iw < W) ? (float)x[row + iw] - xzp : 0.0f;
          }
          xv = NN_CAT(vload, V)(0, t);
        }
        const int wi = wbase + ((ic * KH + kh) * KW + kw) * OCB;
#pragma unroll
        for (int a = 0; a < OCB; a++)
          acc[a] = fma(xv, (VF)(LOAD(TW, w, wi + a)), acc[a]);
      }
    }
  }
#endif

#if QLINEAR
  const float xsc = LOAD(TXS, xs, xs_off), ysc = LOAD(TYS, ys, ys_off);
  const float zp = (float)LOAD(TYZ, yz, yz_off);
#endif
  for (int j = 0; j < PV; j++) {
    const int pj = p0 + j * V;
    if (PV > 1 && pj >= PIXELS)
      break;
    const int ybase = y_off + (n * OC) * (OH * OW) + oh * OW + pj;
    const int lanes = pj + V <= PIXELS ? V : PIXELS - pj;
    for (int a = 0; a < OCB; a++) {
      const int oc = oc0 + a;
      if (OCG % OCB != 0 && oc >= g * OCG + OCG)
        break;
      const int yi = ybase + oc * (OH * OW);
      const VI sum = NN_CAT(convert_int, V)(j == 0 ? acc[a] : acc2[a]);  // exact (see above)
#if QLINEAR
#if HAS_BIAS
      const int bias = b[b_off + oc];
#else
      const int bias = 0;
#endif
      const float mult = nn_div_rn(xsc * LOAD(TWS, ws, ws_off + (WS_N == 1 ? 0 : oc)), ysc);
      const VF v = NN_CAT(convert_float, V)(sum + bias) * mult;
      // round half to even, + zp, saturated; NaN (a zero output scale) gives 0 as in qconv.cl
      const VF q = clamp(rint(v) + zp, (VF)(QMIN), (VF)(QMAX));
      const VF r = select(q, (VF)(0.0f), isnan(v));
#if HAS_LUT && LUT_DQ
      NN_DQ_OUT(V, r, lanes, yi)
#elif HAS_LUT
      int li[V];
      NN_CAT(vstore, V)(NN_CAT(convert_int, V)(r) - (int)QMIN, 0, li);
      for (int c = 0; c < lanes; c++)
        STORE(TY, y, yi + c, LOAD(TL, lut, lut_off + li[c]));
#else
      if (lanes == V) {
        NN_CAT(vstore, V)(NN_CAT(convert_, NN_CAT(STYPE(TY), V))(r), 0, y + yi);
      } else {
        float t[V];
        NN_CAT(vstore, V)(r, 0, t);
        for (int c = 0; c < lanes; c++)
          STORE(TY, y, yi + c, t[c]);
      }
#endif
#else
      int t[V];
      NN_CAT(vstore, V)(sum, 0, t);
      for (int c = 0; c < lanes; c++)
        y[yi + c] = t[c];
#endif
    }
  }
}
