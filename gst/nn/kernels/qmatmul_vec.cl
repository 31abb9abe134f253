// MatMulInteger and QLinearMatMul for CPU devices, written as explicit SIMD like qconv_vec.cl:
// each work-item computes RB rows by 16 columns (two halves of 8) of one batch in int32.
// The reduction runs over pairs of k: B's rows k and k + 1 (16 columns each, shifted by B's zero
// points) are interleaved once and every row's pair (a[k], a[k + 1]) - azp is broadcast against
// them; pmaddwd sums the two products into int lanes (qconv_vec.cl says why it is exact). An odd
// K's last pair has the partner 0 on A's side.
// Epilogue as qmatmul.cl's: + bias[n], * nn_div_rn(as * bs[n], ys), round half to even, + yzp,
// saturated. Defines: as qmatmul.cl, plus RB.
#include "quant.cl"

#define NB ((N + 15) / 16)
#define MB ((M + RB - 1) / RB)

static inline short16 nn_q_interleave(short8 a, short8 b) {
  return (short16)(a.s0, b.s0, a.s1, b.s1, a.s2, b.s2, a.s3, b.s3, a.s4, b.s4, a.s5, b.s5, a.s6,
                   b.s6, a.s7, b.s7);
}

static inline int8 nn_q_madd(short16 x, short16 w, int8 acc) {
#if defined(__clang__) && defined(__AVX2__)
  return acc + __builtin_astype(__builtin_ia32_pmaddwd256(x, w), int8);
#else
  return acc + convert_int8(x.even) * convert_int8(w.even) +
         convert_int8(x.odd) * convert_int8(w.odd);
#endif
}

// 16 columns of B's row k from column c0, shifted by the zero points; past N: 0.
static inline short16 nn_q_brow(__global const STYPE(TB) * b, int row, int c0, short16 bzp) {
  if (c0 + 16 <= N)
    return convert_short16(vload16(0, b + row + c0)) - bzp;
  short t[16];
  for (int c = 0; c < 16; c++)
    t[c] = c0 + c < N ? (short)b[row + c0 + c] : 0;
  return vload16(0, t) - bzp;
}

__kernel void qmatmul_vec(__global const STYPE(TA) * a, uint a_off, __global const STYPE(TB) * b,
                          uint b_off,
#if HAS_AZP
                          __global const STYPE(TAZ) * az, uint az_off,
#endif
#if HAS_BZP
                          __global const STYPE(TBZ) * bz, uint bz_off,
#endif
#if QLINEAR
                          __global const STYPE(TAS) * as, uint as_off,
                          __global const STYPE(TBS) * bs, uint bs_off,
                          __global const STYPE(TYS) * ys, uint ys_off,
                          __global const STYPE(TYZ) * yz, uint yz_off,
#if HAS_BIAS
                          __global const int *bias, uint bias_off,
#endif
#endif
                          __global STYPE(TY) * y, uint y_off) {
  const int nb = get_global_id(0), mb = get_global_id(1), bt = get_global_id(2);
  if (nb >= NB || mb >= MB || bt >= BATCH)
    return;
  const int c0 = nb * 16, r0 = mb * RB;
  a += a_off + A_BOFF(bt);
  b += b_off + B_BOFF(bt);
  short bzv[16];
  for (int c = 0; c < 16; c++) {
#if HAS_BZP
    bzv[c] = c0 + c < N ? (short)LOAD(TBZ, bz, bz_off + (BZP_N == 1 ? 0 : c0 + c)) : 0;
#else
    bzv[c] = 0;
#endif
  }
  const short16 bzp = vload16(0, bzv);
  short azp[RB];
  for (int r = 0; r < RB; r++) {
#if HAS_AZP
    azp[r] = (short)LOAD(TAZ, az, az_off + (AZP_N == 1 ? 0 : min(r0 + r, M - 1)));
#else
    azp[r] = 0;
#endif
  }
  int8 acc[RB][2];
  for (int r = 0; r < RB; r++)
    acc[r][0] = acc[r][1] = (int8)(0);
  for (int k = 0; k < K; k += 2) {
    const bool pair = k + 1 < K;
    const short16 b0 = nn_q_brow(b, k * N, c0, bzp);
    const short16 b1 = pair ? nn_q_brow(b, (k + 1) * N, c0, bzp) : (short16)(0);
    const short16 lo = nn_q_interleave(b0.lo, b1.lo), hi = nn_q_interleave(b0.hi, b1.hi);
#pragma unroll
    for (int r = 0; r < RB; r++) {
      const int row = min(r0 + r, M - 1) * K;  // rows past M repeat the last (not stored)
      const short a0 = (short)a[row + k] - azp[r];
      const short a1 = pair ? (short)a[row + k + 1] - azp[r] : 0;
      const short2 ap = (short2)(a0, a1);
      const short16 av = (short16)(ap, ap, ap, ap, ap, ap, ap, ap);
      acc[r][0] = nn_q_madd(lo, av, acc[r][0]);
      acc[r][1] = nn_q_madd(hi, av, acc[r][1]);
    }
  }

#if QLINEAR
  const float asc = LOAD(TAS, as, as_off), ysc = LOAD(TYS, ys, ys_off);
  const float zp = (float)LOAD(TYZ, yz, yz_off);
  float mult[16];
  int bias16[16];
  for (int c = 0; c < 16; c++) {
    const int col = min(c0 + c, N - 1);
    mult[c] = nn_div_rn(asc * LOAD(TBS, bs, bs_off + (BS_N == 1 ? 0 : col)), ysc);
#if HAS_BIAS
    bias16[c] = bias[bias_off + col];
#else
    bias16[c] = 0;
#endif
  }
#endif
  for (int r = 0; r < RB; r++) {
    if (r0 + r >= M)
      break;
    const int yi = y_off + (bt * M + r0 + r) * N + c0;
    int t[16];
    vstore8(acc[r][0], 0, t);
    vstore8(acc[r][1], 1, t);
    for (int c = 0; c < 16 && c0 + c < N; c++) {
#if QLINEAR
      STORE(TY, y, yi + c, nn_requantize((float)(t[c] + bias16[c]) * mult[c], zp, QMIN, QMAX));
#else
      y[yi + c] = t[c];
#endif
    }
  }
}
