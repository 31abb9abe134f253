// ConvInteger and QLinearConv for CPU devices (2-D, constant weights), written as explicit SIMD
// like conv2d_vec: each work-item computes OCB output channels of one group for V adjacent
// output pixels (two halves of 8), in int32 accumulators.
//
// The reduction runs over pairs of input channels. Per pair and tap it loads V inputs of each
// channel, shifts them by the input zero point into shorts and interleaves the two channels
// (c0 p0, c1 p0, c0 p1, c1 p1, ...); per output channel the weight pair (w0, w1) is broadcast
// the same way and the products of the even and the odd lanes are summed into int lanes:
// acc += x_even * w_even + x_odd * w_odd, the shape x86 code generators turn into one
// multiply-add of shorts into ints per 8 (or 16) lanes (pmaddwd). Every product and sum is
// exact: |x - xzp| <= 255 and |w - wzp| <= 255 fit in 16 bits, their products in 32.
//
// Weights are re-laid out by code generation as wt[G * OC_BLOCKS][CP][KH][KW][OCB][2] with the
// weight zero point already subtracted (TW is i8 when every shifted weight fits, else i32);
// CP = ceil(CG / 2), the odd channel's partner past the group's end has weight 0 (its input is
// the even channel again, a valid read), as have the output channels past the group's end.
// TAP_PAIRS (one input channel per group: depthwise): the pairs are horizontal taps instead,
// wt[G * OC_BLOCKS][KH][KWP][OCB][2] with KWP = ceil(KW / 2) and an odd KW's last partner 0.
//
// The epilogue is qconv.cl's exactly: + int32 bias, * nn_div_rn(xs * ws[m], ys), round half to
// even, + yzp, saturated to [QMIN, QMAX] (the Relu the fusion pass absorbed is that saturation).
// Defines: TX TW TY; N C H W OC OH OW G; KH KW SH SW DH DW PH PW; OCB V (8 or 16) FLAT TAP_PAIRS;
// HAS_XZP TXZ; QLINEAR with TXS TWS TYS TYZ WS_N HAS_BIAS QMIN QMAX (TYZ's range), HAS_LUT TL
// (the requantized value indexes a 256-entry table whose value is the output: FuseQuantizedLookup).
#include "quant.cl"

#define CG (C / G)
#define OCG (OC / G)
#define CP ((CG + 1) / 2)
#define OC_BLOCKS ((OCG + OCB - 1) / OCB)
#define TAPS (KH * KW)
#define KWP ((KW + 1) / 2)
#if FLAT
#define ROWS 1
#define PIXELS (OH * OW)
#else
#define ROWS OH
#define PIXELS OW
#endif
#define PIX_BLOCKS ((PIXELS + V - 1) / V)
#define HALVES (V / 8)

// Interleaves two channels' 8 shifted inputs: (a0, b0, a1, b1, ...).
static inline short16 nn_q_interleave(short8 a, short8 b) {
  return (short16)(a.s0, b.s0, a.s1, b.s1, a.s2, b.s2, a.s3, b.s3, a.s4, b.s4, a.s5, b.s5, a.s6,
                   b.s6, a.s7, b.s7);
}

// acc + x.even * w.even + x.odd * w.odd in int lanes: pmaddwd's arithmetic. LLVM folds the
// interleaving back out of the portable form (the even lanes of x are the first channel) and
// multiplies in 32 bits, so x86 compilers that have the instruction get it by name.
static inline int8 nn_q_madd(short16 x, short16 w, int8 acc) {
#if defined(__clang__) && defined(__AVX2__)
  return acc + __builtin_astype(__builtin_ia32_pmaddwd256(x, w), int8);
#else
  return acc + convert_int8(x.even) * convert_int8(w.even) +
         convert_int8(x.odd) * convert_int8(w.odd);
#endif
}

// V inputs of a run of `len` elements from `at` on (stride SW), shifted by xzp; elements outside
// [0, len) read as the zero point itself (0 after the shift), as padding must.
static inline void nn_q_row(__global const STYPE(TX) * x, int at, int iw0, int len, short xzp,
                            short8 *out) {
  if (SW == 1 && iw0 >= 0 && iw0 + V <= len) {
    for (int h = 0; h < HALVES; h++)
      out[h] = convert_short8(vload8(0, x + at + iw0 + 8 * h)) - xzp;
    return;
  }
  if (SW == 2 && iw0 >= 0 && iw0 + 2 * V <= len) {
    for (int h = 0; h < HALVES; h++)
      out[h] = convert_short8(vload16(0, x + at + iw0 + 16 * h).even) - xzp;
    return;
  }
  short t[V];
  for (int c = 0; c < V; c++) {
    const int iw = iw0 + c * SW;
    t[c] = (iw >= 0 && iw < len) ? (short)x[at + iw] - xzp : 0;
  }
  for (int h = 0; h < HALVES; h++)
    out[h] = vload8(h, t);
}

// One tap of one channel pair: every output channel's weight pair against the interleaved inputs.
#define NN_Q_TAP(x0, x1, wi)                                         \
  do {                                                               \
    short16 xi[HALVES];                                              \
    for (int h = 0; h < HALVES; h++)                                 \
      xi[h] = nn_q_interleave(x0[h], x1[h]);                         \
    _Pragma("unroll") for (int a = 0; a < OCB; a++) {                \
      const short2 wp = convert_short2(vload2(0, w + (wi) + 2 * a)); \
      const short16 wv = (short16)(wp, wp, wp, wp, wp, wp, wp, wp);  \
      for (int h = 0; h < HALVES; h++)                               \
        acc[h][a] = nn_q_madd(xi[h], wv, acc[h][a]);                 \
    }                                                                \
  } while (0)

__kernel void qconv_vec(__global const STYPE(TX) * x, uint x_off, __global const STYPE(TW) * w,
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
  const int pb = get_global_id(0);
  const int oh = get_global_id(1);
  const int z = get_global_id(2);
  if (pb >= PIX_BLOCKS || oh >= ROWS || z >= N * G * OC_BLOCKS)
    return;
  const int n = z / (G * OC_BLOCKS);
  const int gb = z % (G * OC_BLOCKS);
  const int g = gb / OC_BLOCKS;
  const int oc0 = g * OCG + (gb % OC_BLOCKS) * OCB;
  const int p0 = pb * V;
  x += x_off + (n * C + g * CG) * H * W;
#if TAP_PAIRS
  w += w_off + gb * (KH * KWP * OCB * 2);
#else
  w += w_off + gb * (CP * TAPS * OCB * 2);
#endif
#if HAS_XZP
  const short xzp = (short)LOAD(TXZ, xz, xz_off);
#else
  const short xzp = 0;
#endif

  int8 acc[HALVES][OCB];
  for (int h = 0; h < HALVES; h++)
    for (int a = 0; a < OCB; a++)
      acc[h][a] = (int8)(0);

#if TAP_PAIRS
  // One input channel (depthwise): pairs of horizontal taps instead of channels.
  for (int kh = 0; kh < KH; kh++) {
    const int ih = oh * SH - PH + kh * DH;
    if (ih < 0 || ih >= H)
      continue;
    for (int kp = 0; kp < KWP; kp++) {
      const int kw0 = 2 * kp, kw1 = kw0 + 1 < KW ? kw0 + 1 : kw0;
      short8 x0[HALVES], x1[HALVES];
      nn_q_row(x, ih * W, p0 * SW - PW + kw0 * DW, W, xzp, x0);
      nn_q_row(x, ih * W, p0 * SW - PW + kw1 * DW, W, xzp, x1);
      NN_Q_TAP(x0, x1, (kh * KWP + kp) * OCB * 2);
    }
  }
#else
  for (int cp = 0; cp < CP; cp++) {
    const int c0 = 2 * cp, c1 = c0 + 1 < CG ? c0 + 1 : c0;
#if FLAT
    short8 x0[HALVES], x1[HALVES];
    nn_q_row(x, c0 * (H * W), p0, H * W, xzp, x0);
    nn_q_row(x, c1 * (H * W), p0, H * W, xzp, x1);
    NN_Q_TAP(x0, x1, cp * OCB * 2);
#else
    for (int kh = 0; kh < KH; kh++) {
      const int ih = oh * SH - PH + kh * DH;
      if (ih < 0 || ih >= H)
        continue;
      for (int kw = 0; kw < KW; kw++) {
        short8 x0[HALVES], x1[HALVES];
        const int iw0 = p0 * SW - PW + kw * DW;
        nn_q_row(x, (c0 * H + ih) * W, iw0, W, xzp, x0);
        nn_q_row(x, (c1 * H + ih) * W, iw0, W, xzp, x1);
        NN_Q_TAP(x0, x1, (cp * TAPS + kh * KW + kw) * OCB * 2);
      }
    }
#endif
  }
#endif

  const int ybase = (n * OC) * (OH * OW) + oh * OW + p0;
#if QLINEAR
  const float xsc = LOAD(TXS, xs, xs_off), ysc = LOAD(TYS, ys, ys_off);
  const float zp = (float)LOAD(TYZ, yz, yz_off);
#endif
  for (int a = 0; a < OCB; a++) {
    const int oc = oc0 + a;
    if (OCG % OCB != 0 && oc >= g * OCG + OCG)
      break;
#if QLINEAR
#if HAS_BIAS
    const int bias = b[b_off + oc];
#else
    const int bias = 0;
#endif
    const float mult = nn_div_rn(xsc * LOAD(TWS, ws, ws_off + (WS_N == 1 ? 0 : oc)), ysc);
#endif
    for (int h = 0; h < HALVES; h++) {
      const int pix = p0 + 8 * h;
      if (pix >= PIXELS)
        break;
      const int yi = y_off + ybase + oc * (OH * OW) + 8 * h;
#if QLINEAR
      const float8 v = convert_float8(acc[h][a] + bias) * mult;
      // round half to even, + zp, saturated; NaN (a zero output scale) gives 0 as in qconv.cl
      const float8 q = clamp(rint(v) + zp, (float8)(QMIN), (float8)(QMAX));
      const float8 r = select(q, (float8)(0.0f), isnan(v));
#if HAS_LUT && LUT_DQ
      NN_DQ_OUT(8, r, min(8, PIXELS - pix), yi)
#elif HAS_LUT
      // The table's value of each requantized value: one scalar load per output, against the
      // CG * KH * KW multiply-adds that made it.
      int li[8];
      vstore8(convert_int8(r) - (int)QMIN, 0, li);
      const int nv = min(8, PIXELS - pix);
      for (int c = 0; c < nv; c++)
        STORE(TY, y, yi + c, LOAD(TL, lut, lut_off + li[c]));
#else
      if (pix + 8 <= PIXELS) {
        vstore8(NN_CAT(convert_, NN_CAT(STYPE(TY), 8))(r), 0, y + yi);
      } else {
        float t[8];
        vstore8(r, 0, t);
        for (int c = 0; c < PIXELS - pix; c++)
          STORE(TY, y, yi + c, t[c]);
      }
#endif
#else
      if (pix + 8 <= PIXELS) {
        vstore8(acc[h][a], 0, y + yi);
      } else {
        int t[8];
        vstore8(acc[h][a], 0, t);
        for (int c = 0; c < PIXELS - pix; c++)
          y[yi + c] = t[c];
      }
#endif
    }
  }
}
