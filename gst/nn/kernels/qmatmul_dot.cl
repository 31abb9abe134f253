// MatMulInteger and QLinearMatMul for CPUs with AVX-512 VNNI and a constant 2-D B: qmatmul_f.cl's
// blocking (each work-item computes RB rows of one batch) with the integer products summed by
// vpdpbusd (see qconv_dot.cl), over CB panels of 16 columns. Per group of four k it loads each
// panel's dwords (four k of one column each) once, and broadcasts every row's four bytes of A
// as one dword against them.
//
// B is re-laid out by code generation as dwords [NP][K4][16] (NP panels, a multiple of CB; K4 =
// ceil(K / 4)) of four signed bytes b - bzp[n] (0 past K and past N), with each column's sum of
// b - bzp in bsum. Signed A is taken as a + 128 (the dword xor 0x80808080) so that every byte is
// the unsigned operand, and sum (a - z) * b = sum a * b - z * bsum[n] with z the zero point of
// the bytes used; all int32 and exact (code generation bounds K).
// The epilogue is qmatmul_f.cl's (+ bias[n], * nn_div_rn(as * bs[n], ys), round half to even,
// + yzp, saturated). Defines: TA (u8 or i8) SIGNED_A TY; BATCH M N K RB CB NP; A_BOFF(b);
// HAS_AZP TAZ (one zero point); QLINEAR with TAS TBS TYS TYZ BS_N HAS_BIAS QMIN QMAX.
#include "quant.cl"

#define K4 ((K + 3) / 4)
#define MB ((M + RB - 1) / RB)
#define NB ((N + 15) / 16)
#define NG (NP / CB)
// acc += the four u8 x s8 products of each dword lane (inline assembly: see qconv_dot.cl).
#define NN_DP(acc, xv, wv) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(xv), "v"(wv))

// Four bytes of A from `p` as the unsigned operand; `n` of them are real (the rest 0).
static inline int nn_qa4(__global const STYPE(TA) * p, int n) {
  uint v;
  if (n >= 4) {
    v = as_uint(as_uchar4(vload4(0, p)));
  } else {
    v = 0;
    for (int j = 0; j < n; j++)
      v |= (uint)(uchar)p[j] << (8 * j);
  }
  return (int)(SIGNED_A ? v ^ 0x80808080u : v);
}

__kernel void qmatmul_dot(__global const STYPE(TA) * a, uint a_off, __global const int *b,
                          uint b_off, __global const int *bsum, uint bsum_off,
#if HAS_AZP
                          __global const STYPE(TAZ) * az, uint az_off,
#endif
#if QLINEAR
                          __global const STYPE(TAS) * as, uint as_off,
                          __global const STYPE(TBS) * bs, uint bs_off,
                          __global const STYPE(TYS) * ys, uint ys_off,
                          __global const STYPE(TYZ) * yz, uint yz_off,
#if HAS_BIAS
                          __global const int *bias, uint bias_off,
#endif
                          __global STYPE(TY) * y, uint y_off
#else
                          __global int *y, uint y_off
#endif
) {
  // Row blocks vary fastest, so the work-items that run one after another on a thread share
  // B's panels, as in qmatmul_f.
  const int mb = get_global_id(0), ng = get_global_id(1), bt = get_global_id(2);
  if (ng >= NG || mb >= MB || bt >= BATCH)
    return;
  const int r0 = mb * RB;
  a += a_off + A_BOFF(bt);
  b += b_off + ng * CB * (K4 * 16);
  int rows[RB];
  for (int r = 0; r < RB; r++)
    rows[r] = min(r0 + r, M - 1) * K;  // rows past M repeat the last (not stored)
  int16 acc[RB][CB];
#pragma unroll
  for (int r = 0; r < RB; r++)
#pragma unroll
    for (int p = 0; p < CB; p++)
      acc[r][p] = (int16)(0);
  for (int k4 = 0; k4 < K4; k4++) {
    int16 bv[CB];
#pragma unroll
    for (int p = 0; p < CB; p++)
      bv[p] = vload16(0, b + (p * K4 + k4) * 16);
    const int left = K - 4 * k4;
#pragma unroll
    for (int r = 0; r < RB; r++) {
      const int16 av = (int16)(nn_qa4(a + rows[r] + 4 * k4, left));
#pragma unroll
      for (int p = 0; p < CB; p++)
        NN_DP(acc[r][p], av, bv[p]);
    }
  }

#if HAS_AZP
  const int zb = (int)LOAD(TAZ, az, az_off) + (SIGNED_A ? 128 : 0);
#else
  const int zb = SIGNED_A ? 128 : 0;
#endif
#if QLINEAR
  const float asc = LOAD(TAS, as, as_off), ysc = LOAD(TYS, ys, ys_off);
  const float zp = (float)LOAD(TYZ, yz, yz_off);
#endif
  for (int p = 0; p < CB; p++) {
    const int c0 = (ng * CB + p) * 16;
    if (c0 >= N)
      break;
    float mult[16];
    int add[16];
    for (int c = 0; c < 16; c++) {
      const int col = min(c0 + c, N - 1);
#if QLINEAR
      mult[c] = nn_div_rn(asc * LOAD(TBS, bs, bs_off + (BS_N == 1 ? 0 : col)), ysc);
#endif
#if QLINEAR && HAS_BIAS
      add[c] = bias[bias_off + col] - zb * bsum[bsum_off + col];
#else
      add[c] = -zb * bsum[bsum_off + col];
#endif
    }
    const int16 addv = vload16(0, add);
#if QLINEAR
    const float16 multv = vload16(0, mult);
#endif
    for (int r = 0; r < RB; r++) {
      if (r0 + r >= M)
        break;
      const int yi = y_off + (bt * M + r0 + r) * N + c0;
      const int16 sum = acc[r][p] + addv;
#if QLINEAR
      const float16 v = convert_float16(sum) * multv;
      // round half to even, + zp, saturated; NaN (a zero output scale) gives 0 as in qmatmul.cl
      const float16 res = nn_requantize16(v, zp, QMIN, QMAX);
      if (c0 + 16 <= N) {
        vstore16(NN_CAT(convert_, NN_CAT(STYPE(TY), 16))(res), 0, y + yi);
      } else {
        float t[16];
        vstore16(res, 0, t);
        for (int c = 0; c < N - c0; c++)
          STORE(TY, y, yi + c, t[c]);
      }
#else
      int t[16];
      vstore16(sum, 0, t);
      for (int c = 0; c < 16 && c0 + c < N; c++)
        y[yi + c] = t[c];
#endif
    }
  }
}
