// ConvInteger and QLinearConv (1x1, or any window with strides 1 or 2) for CPUs with AVX-512
// VNNI: the
// integer products summed by vpdpbusd, which multiplies 4 unsigned bytes by 4 signed bytes and
// adds the 4 products to an int32 lane, 64 multiply-adds per instruction where an fp32 FMA does
// 16. Code generation takes these kernels only where the host processor has the instruction
// (the OpenCL CPU device is the host) and records it in the compiled model.
//
// qpack4 lays the input out for it: x[N * G][CG][P] (bytes, P = OH * OW pixels) becomes
// xp[N * G][C4][PP] dwords, C4 = ceil(CG / 4), PP = P rounded up to PIX_STEP, whose four bytes
// are four consecutive channels of one pixel (channels past the group's end and pixels past P
// are 0). Signed inputs are stored as x + 128 (the zero point code generation passes is moved
// by 128 too), so that every stored byte is the unsigned operand vpdpbusd takes.
//
// qconv_dot: each work-item computes OCB output channels of one group for 16 * PV adjacent
// pixels, int32 accumulators of 16 lanes (one zmm register each: OCB * PV of them, chosen by code
// generation to stay within the 32 registers with the PV inputs beside them). Per group of four
// input channels it loads PV vectors of 16 packed pixels and, per output channel, broadcasts the
// four weights as one dword. The weights are re-laid out by code generation as
// wt[G * OC_BLOCKS][C4][OCB] dwords of four signed bytes w - wzp (0 past the group's end).
// With u the stored input bytes and z their zero point, sum (u - z) * w = sum u * w - z * sum w,
// with ws[oc] = sum w computed by code generation (exact: int32 throughout, which code generation
// checks), so padded channels and pixels cost nothing but their zeros.
//
// The epilogue is qconv.cl's exactly: (sum + bias) * nn_div_rn(xs * ws[m], ys), round half to
// even, + yzp, saturated to [QMIN, QMAX]; without QLINEAR (ConvInteger) the int32 sum is stored.
//
// WINDOW (any other window): xp is [N * G][C4][HP][WP], the input rows with the padding written
// out as the zero point's bytes (so (u - z) = 0 there, and no tap tests a bound), HP and WP
// large enough for every tap of every vector of padded output width OWP; one work-item computes
// OCB channels of 16 * PV adjacent pixels of one output row, per group of four channels and tap
// one load of 16 dwords per vector at stride 1, two and their even lanes at stride 2. Weights
// [G * OC_BLOCKS][C4][KH][KW][OCB] dwords.
// Defines: TX (u8 or i8) SIGNED_X, N C OC P G, OCB PV PP (pixels per channel row of xp);
// WINDOW with H W OH OW KH KW SH SW DH DW PH PW HP WP OWP; HAS_XZP TXZ; QLINEAR with TXS TWS TYS
// TYZ TY WS_N HAS_BIAS QMIN QMAX, HAS_LUT TL.
#include "quant.cl"

#define CG (C / G)
#define OCG (OC / G)
#define C4 ((CG + 3) / 4)
#define OC_BLOCKS ((OCG + OCB - 1) / OCB)
#define PIX_STEP (16 * PV)
#if WINDOW
#define PIX_BLOCKS (OWP / PIX_STEP)
#else
#define PIX_BLOCKS (PP / PIX_STEP)
#endif

#if defined(QPACK) && WINDOW
// One work-item: 16 packed columns of one padded row of one group of four channels.
__kernel void qpack4(__global const STYPE(TX) * x, uint x_off,
#if HAS_XZP
                     __global const STYPE(TXZ) * xz, uint xz_off,
#endif
                     __global uint *xp, uint xp_off) {
  const int cb = get_global_id(0);
  const int row = get_global_id(1);
  const int z = get_global_id(2);
  if (cb * 16 >= WP || row >= HP || z >= N * G * C4)
    return;
  const int ng = z / C4, c4 = z % C4;
#if HAS_XZP
  const uint zb = (uint)((int)LOAD(TXZ, xz, xz_off) + (SIGNED_X ? 128 : 0));
#else
  const uint zb = SIGNED_X ? 128u : 0u;
#endif
  __global const STYPE(TX) *src = x + x_off + ng * (CG * H * W);
  const int ih = row - PH, iw0 = cb * 16 - PW;
  uint d[16];
  for (int q = 0; q < 16; q++)
    d[q] = 0;
  for (int j = 0; j < 4; j++) {
    const int c = 4 * c4 + j;
    if (c >= CG)
      break;  // a missing channel's bytes stay 0 (its weights are 0)
    for (int q = 0; q < 16; q++) {
      const int iw = iw0 + q;
      uint u = zb;
      if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
        u = (uint)(uchar)src[(c * H + ih) * W + iw];
        if (SIGNED_X)
          u ^= 0x80u;
      }
      d[q] |= u << (8 * j);
    }
  }
  vstore16(vload16(0, d), 0, xp + xp_off + ((ng * C4 + c4) * HP + row) * WP + cb * 16);
}
#elif defined(QPACK)
__kernel void qpack4(__global const STYPE(TX) * x, uint x_off, __global uint *xp, uint xp_off) {
  const int pb = get_global_id(0);
  const int c4 = get_global_id(1);
  const int ng = get_global_id(2);
  if (pb * 16 >= PP || c4 >= C4 || ng >= N * G)
    return;
  const int p0 = pb * 16;
  __global const STYPE(TX) *row = x + x_off + ng * (CG * P);
  uint16 d = (uint16)(0);
  for (int j = 0; j < 4; j++) {
    const int c = 4 * c4 + j;
    if (c >= CG)
      break;
    uint16 u;
    if (p0 + 16 <= P) {
      u = convert_uint16(as_uchar16(vload16(0, row + c * P + p0)));
    } else {
      uint t[16];
      for (int i = 0; i < 16; i++)
        t[i] = p0 + i < P ? (uint)(uchar)row[c * P + p0 + i] : (SIGNED_X ? 0x80u : 0u);
      u = vload16(0, t);
    }
#if SIGNED_X
    u ^= (uint16)(0x80u);  // x + 128 of a signed byte; a padded pixel's 0x80 stores 0
#endif
    d |= u << (8 * j);
  }
  vstore16(d, 0, xp + xp_off + (ng * C4 + c4) * PP + p0);
}
#endif

#ifdef QDOT
// acc += the four u8 x s8 products of each dword lane of xv and wv. As inline assembly: the
// kernel compiler's target (the processor family its kernel library was built for) may be one
// without VNNI, whose instruction selector then refuses the builtin even under a target
// attribute; the assembler takes the instruction whatever the target.
#define NN_DP(acc, xv, wv) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(xv), "v"(wv))

__kernel void qconv_dot(__global const int *xp, uint xp_off, __global const int *w, uint w_off,
                        __global const int *wsum, uint wsum_off,
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
                        __global STYPE(TY) * y, uint y_off
#else
                        __global int *y, uint y_off
#endif
) {
  // Channel blocks vary fastest, as in conv2d_vec: consecutive work-items of a thread read the
  // same packed pixels with the next weights.
  const int z = get_global_id(0);
  const int pb = get_global_id(1);
#if WINDOW
  const int oh = get_global_id(2);
  if (pb >= PIX_BLOCKS || z >= N * G * OC_BLOCKS || oh >= OH)
    return;
#else
  if (pb >= PIX_BLOCKS || z >= N * G * OC_BLOCKS)
    return;
#endif
  const int n = z / (G * OC_BLOCKS);
  const int gb = z % (G * OC_BLOCKS);
  const int g = gb / OC_BLOCKS;
  const int oc0 = g * OCG + (gb % OC_BLOCKS) * OCB;
  const int p0 = pb * PIX_STEP;
#if WINDOW
  __global const int *xr = xp + xp_off + (n * G + g) * (C4 * HP * WP) + oh * SH * WP + p0 * SW;
  __global const int *wr = w + w_off + gb * (C4 * KH * KW * OCB);
#else
  __global const int *xr = xp + xp_off + (n * G + g) * (C4 * PP) + p0;
  __global const int *wr = w + w_off + gb * (C4 * OCB);
#endif

  int16 acc[PV][OCB];
#pragma unroll
  for (int a = 0; a < OCB; a++)
#pragma unroll
    for (int j = 0; j < PV; j++)
      acc[j][a] = (int16)(0);

#if WINDOW
  for (int c4 = 0; c4 < C4; c4++)
    for (int kh = 0; kh < KH; kh++)
      for (int kw = 0; kw < KW; kw++) {
        __global const int *xt = xr + (c4 * HP + kh * DH) * WP + kw * DW;
        int16 xv[PV];
#pragma unroll
        for (int j = 0; j < PV; j++) {
#if SW == 1
          xv[j] = vload16(0, xt + 16 * j);
#else
          xv[j] = (int16)(vload16(0, xt + 32 * j).even, vload16(0, xt + 32 * j + 16).even);
#endif
        }
        __global const int *wt = wr + ((c4 * KH + kh) * KW + kw) * OCB;
#pragma unroll
        for (int a = 0; a < OCB; a++) {
          const int16 wv = (int16)(wt[a]);
#pragma unroll
          for (int j = 0; j < PV; j++)
            NN_DP(acc[j][a], xv[j], wv);
        }
      }
#else
  for (int c4 = 0; c4 < C4; c4++) {
    int16 xv[PV];
#pragma unroll
    for (int j = 0; j < PV; j++)
      xv[j] = vload16(0, xr + c4 * PP + 16 * j);
#pragma unroll
    for (int a = 0; a < OCB; a++) {
      const int16 wv = (int16)(wr[c4 * OCB + a]);
#pragma unroll
      for (int j = 0; j < PV; j++)
        NN_DP(acc[j][a], xv[j], wv);
    }
  }
#endif

      // The zero point of the stored bytes.
#if HAS_XZP
  const int zb = (int)LOAD(TXZ, xz, xz_off) + (SIGNED_X ? 128 : 0);
#else
  const int zb = SIGNED_X ? 128 : 0;
#endif
#if QLINEAR
  const float xsc = LOAD(TXS, xs, xs_off), ysc = LOAD(TYS, ys, ys_off);
  const float zp = (float)LOAD(TYZ, yz, yz_off);
#endif
  for (int a = 0; a < OCB; a++) {
    const int oc = oc0 + a;
    if (OCG % OCB != 0 && oc >= g * OCG + OCG)
      break;
#if QLINEAR && HAS_BIAS
    const int bias = b[b_off + oc] - zb * wsum[wsum_off + oc];
#else
    const int bias = -zb * wsum[wsum_off + oc];
#endif
#if QLINEAR
    const float mult = nn_div_rn(xsc * LOAD(TWS, ws, ws_off + (WS_N == 1 ? 0 : oc)), ysc);
#endif
    for (int j = 0; j < PV; j++) {
      const int pj = p0 + 16 * j;
#if WINDOW
      if (pj >= OW)
        break;
      const int lanes = pj + 16 <= OW ? 16 : OW - pj;
      const int yi = y_off + (n * OC + oc) * P + oh * OW + pj;
#else
      if (pj >= P)
        break;
      const int lanes = pj + 16 <= P ? 16 : P - pj;
      const int yi = y_off + (n * OC + oc) * P + pj;
#endif
      const int16 sum = acc[j][a] + bias;
#if QLINEAR
      const float16 v = convert_float16(sum) * mult;
      // round half to even, + zp, saturated; NaN (a zero output scale) gives 0 as in qconv.cl
      const float16 r = nn_requantize16(v, zp, QMIN, QMAX);
#if HAS_LUT && LUT_DQ
      NN_DQ_OUT(16, r, lanes, yi)
#elif HAS_LUT
      int li[16];
      vstore16(convert_int16(r) - (int)QMIN, 0, li);
      for (int c = 0; c < lanes; c++)
        STORE(TY, y, yi + c, LOAD(TL, lut, lut_off + li[c]));
#else
      if (lanes == 16) {
        vstore16(NN_CAT(convert_, NN_CAT(STYPE(TY), 16))(r), 0, y + yi);
      } else {
        float t[16];
        vstore16(r, 0, t);
        for (int c = 0; c < lanes; c++)
          STORE(TY, y, yi + c, t[c]);
      }
#endif
#else
      if (lanes == 16) {
        vstore16(sum, 0, y + yi);
      } else {
        int t[16];
        vstore16(sum, 0, t);
        for (int c = 0; c < lanes; c++)
          y[yi + c] = t[c];
      }
#endif
    }
  }
}
#endif
