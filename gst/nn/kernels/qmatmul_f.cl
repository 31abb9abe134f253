// MatMulInteger and QLinearMatMul for CPU devices with a constant 2-D B, the integer products
// summed in float32: each work-item computes RB rows by 16 columns of one batch; per k it loads
// B's row (16 columns, stored as float32 b - bzp[n] by code generation) once and broadcasts
// every row's a[k] - azp against it, one vector FMA each.
//
// Exact for the reason qconv_f.cl gives: code generation takes this kernel only where, for
// every column n, max |a - azp| * sum over k of |b[k][n] - bzp[n]| < 2^24, so every partial sum
// is an integer float32 holds; it is converted back to int32 before the epilogue, which is
// qmatmul_vec.cl's (+ bias[n], * nn_div_rn(as * bs[n], ys), round half to even, + yzp,
// saturated).
// Defines: TA TB TY (B: a float tag); BATCH M N K; A_BOFF(b); HAS_AZP TAZ (one zero point); QLINEAR
// with TAS TBS TYS TYZ BS_N HAS_BIAS QMIN QMAX; RB. B in panels of 16 columns: float32 [NB][K][16]
// (columns past N are 0), each work-item's one contiguous run.
#include "quant.cl"

#define NB ((N + 15) / 16)
#define MB ((M + RB - 1) / RB)

__kernel void qmatmul_f(__global const STYPE(TA) * a, uint a_off, __global const STYPE(TB) * b,
                        uint b_off,
#if HAS_AZP
                        __global const STYPE(TAZ) * az, uint az_off,
#endif
#if QLINEAR
                        __global const STYPE(TAS) * as, uint as_off, __global const STYPE(TBS) * bs,
                        uint bs_off, __global const STYPE(TYS) * ys, uint ys_off,
                        __global const STYPE(TYZ) * yz, uint yz_off,
#if HAS_BIAS
                        __global const int *bias, uint bias_off,
#endif
#endif
                        __global STYPE(TY) * y, uint y_off) {
  // Row blocks vary fastest, so the work-items that run one after another on a thread share
  // B's panel (K x 16 floats: 24 KiB at K = 384), as in matmul_vec.
  const int mb = get_global_id(0), nb = get_global_id(1), bt = get_global_id(2);
  if (nb >= NB || mb >= MB || bt >= BATCH)
    return;
  const int c0 = nb * 16, r0 = mb * RB;
  a += a_off + A_BOFF(bt);
  b += b_off + nb * (K * 16);
#if HAS_AZP
  const float azp = (float)LOAD(TAZ, az, az_off);
#else
  const float azp = 0.0f;
#endif
  int rows[RB];
  for (int r = 0; r < RB; r++)
    rows[r] = min(r0 + r, M - 1) * K;  // rows past M repeat the last (not stored)
  float16 acc[RB];
#pragma unroll
  for (int r = 0; r < RB; r++)
    acc[r] = (float16)(0.0f);
  int k = 0;
  // Four k at a time: one 4-byte load of each row of A.
  for (; k + 4 <= K; k += 4) {
    const float16 b0 = LOADV(TB, 16, b, k * 16), b1 = LOADV(TB, 16, b, (k + 1) * 16);
    const float16 b2 = LOADV(TB, 16, b, (k + 2) * 16), b3 = LOADV(TB, 16, b, (k + 3) * 16);
#pragma unroll
    for (int r = 0; r < RB; r++) {
      const float4 av = convert_float4(vload4(0, a + rows[r] + k)) - azp;
      acc[r] = fma((float16)(av.s0), b0, acc[r]);
      acc[r] = fma((float16)(av.s1), b1, acc[r]);
      acc[r] = fma((float16)(av.s2), b2, acc[r]);
      acc[r] = fma((float16)(av.s3), b3, acc[r]);
    }
  }
  for (; k < K; k++) {
    const float16 bv = LOADV(TB, 16, b, k * 16);
#pragma unroll
    for (int r = 0; r < RB; r++)
      acc[r] = fma((float16)((float)a[rows[r] + k] - azp), bv, acc[r]);
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
  const float16 multv = vload16(0, mult);
  const int16 biasv = vload16(0, bias16);
#endif
  for (int r = 0; r < RB; r++) {
    if (r0 + r >= M)
      break;
    const int yi = y_off + (bt * M + r0 + r) * N + c0;
    const int16 sum = convert_int16(acc[r]);  // exact (see above)
#if QLINEAR
    const float16 v = convert_float16(sum + biasv) * multv;
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
