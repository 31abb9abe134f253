// Batched matrix product with fused epilogue: Gemm, MatMul and FusedGemm.
//   y[b,m,n] = ACT(ALPHA * sum_k A[b,m,k] B[b,k,n] + BETA * c[b,m,n] + res)   (or + res after ACT)
// Each work-item computes an RM x RN block of y from registers; operands are read straight from
// global memory (transposes are strides), which suits CPU caches and keeps one code path.
// Defines: TA TB TC TR TY (tags); BATCH M N K; A_SM A_SK B_SK B_SN (strides in elements);
// A_BOFF(b) B_BOFF(b) (generated: batch offset with broadcasting); C_IDX(b,m,n), R_IDX(b,m,n)
// (generated: broadcast index of the bias and the residual); RM RN; ALPHA BETA; HAS_C HAS_RES
// RES_AFTER; ACT; KSPLIT (optional, GPU profiles: see below).
//
// KSPLIT > 1 (one row, one batch: a matrix-vector product, as a network's head): a work-group of
// KSPLIT work-items shares one block of RN columns, each summing every KSPLIT-th k; the partial
// sums are added in local memory and the first work-item finishes the block. Without it a GPU
// ran one work-item per block of columns, a few hundred in all, each walking the whole K (on an
// H200 the full-size vision model's three head products took 1.3 of its 8.2 ms at 2-3 GFLOP/s).
#include "nn_common.cl"

#define M_BLOCKS ((M + RM - 1) / RM)
#define N_BLOCKS ((N + RN - 1) / RN)

__kernel void matmul(__global const STYPE(TA) * a, uint a_off, __global const STYPE(TB) * bm,
                     uint b_off,
#if HAS_C
                     __global const STYPE(TC) * c, uint c_off,
#endif
#if HAS_RES
                     __global const STYPE(TR) * r, uint r_off,
#endif
                     __global STYPE(TY) * y, uint y_off) {
#if KSPLIT > 1
  // The grid is exactly N_BLOCKS groups of KSPLIT (M and BATCH are 1): no work-item leaves
  // before the barriers.
  const int nb = get_group_id(0);
  const int mb = 0, bt = 0;
  const int k0 = get_local_id(0);
  __local float part[KSPLIT * RN];
#else
  const int nb = get_global_id(0);
  const int mb = get_global_id(1);
  const int bt = get_global_id(2);
  if (nb >= N_BLOCKS || mb >= M_BLOCKS || bt >= BATCH)
    return;
  const int k0 = 0;
#endif
  const int m0 = mb * RM;
  const int n0 = nb * RN;
  const int abase = a_off + A_BOFF(bt);
  const int bbase = b_off + B_BOFF(bt);

  float acc[RM][RN];
  for (int i = 0; i < RM; i++)
    for (int j = 0; j < RN; j++)
      acc[i][j] = 0.0f;

  // Rows and columns past the edge repeat the last valid one; their results are not stored.
  int arow[RM], bcol[RN];
  for (int i = 0; i < RM; i++)
    arow[i] = abase + min(m0 + i, M - 1) * A_SM;
  for (int j = 0; j < RN; j++)
    bcol[j] = bbase + min(n0 + j, N - 1) * B_SN;

#if KSPLIT > 1
  for (int k = k0; k < K; k += KSPLIT) {
#else
  for (int k = k0; k < K; k++) {
#endif
    float av[RM], bv[RN];
    for (int i = 0; i < RM; i++)
      av[i] = LOAD(TA, a, arow[i] + k * A_SK);
    for (int j = 0; j < RN; j++)
      bv[j] = LOAD(TB, bm, bcol[j] + k * B_SK);
    for (int i = 0; i < RM; i++)
      for (int j = 0; j < RN; j++)
        acc[i][j] = fma(av[i], bv[j], acc[i][j]);
  }
#if KSPLIT > 1
  for (int j = 0; j < RN; j++)
    part[k0 * RN + j] = acc[0][j];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = KSPLIT / 2; s > 0; s >>= 1) {
    if (k0 < s)
      for (int j = 0; j < RN; j++)
        part[k0 * RN + j] += part[(k0 + s) * RN + j];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (k0 != 0)
    return;
  for (int j = 0; j < RN; j++)
    acc[0][j] = part[j];
#endif

  for (int i = 0; i < RM; i++) {
    const int m = m0 + i;
    if (m >= M)
      break;
    for (int j = 0; j < RN; j++) {
      const int n = n0 + j;
      if (n >= N)
        break;
      float v = ALPHA * acc[i][j];
#if HAS_C
      v += BETA * LOAD(TC, c, c_off + C_IDX(bt, m, n));
#endif
      NN_STORE_EPILOGUE(v, R_IDX(bt, m, n), (bt * M + m) * N + n);
    }
  }
}
