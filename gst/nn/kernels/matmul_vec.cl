// Batched matrix product for CPU devices, written as explicit SIMD (the matmul.cl epilogue):
//   y[b,m,n] = ACT(ALPHA * sum_k A[b,m,k] B[b,k,n] + BETA * c[b,m,n] + res)   (or + res after ACT)
// Each work-item computes RM rows x V adjacent columns as RM vectors of V floats: per k it
// loads one vector of B's row k and broadcasts RM values of A's column k into RM vector FMAs.
// B's rows must be contiguous. A constant B (weights) comes as panels instead, laid out once by
// code generation: B_PANEL, bp[N_BLOCKS][K][V] with zeros past N, so each work-item streams
// one contiguous run (rows of a wide B are over a page apart, which defeats the prefetchers).
// Defines: TA TB TC TR TY; BATCH M N K; A_SM A_SK B_SK (strides in elements); B_PANEL; A_BOFF(b)
// B_BOFF(b) C_IDX(b,m,n) R_IDX(b,m,n) (generated); RM V; ALPHA BETA; HAS_C HAS_RES RES_AFTER;
// ACT; ACTV and C_CONTIG (optional: the epilogue on whole vectors, nn_common.cl); A_VEC4 (A's rows
// contiguous along k, with vector loads).
#include "nn_common.cl"

#define VF NN_CAT(float, V)
#define M_BLOCKS ((M + RM - 1) / RM)
#define N_BLOCKS ((N + V - 1) / V)
#ifdef ACTV
NN_DEFINE_ACT_CHAIN_V
#endif

__kernel void matmul_vec(__global const STYPE(TA) * a, uint a_off, __global const STYPE(TB) * bm,
                         uint b_off,
#if HAS_C
                         __global const STYPE(TC) * c, uint c_off,
#endif
#if HAS_RES
                         __global const STYPE(TR) * r, uint r_off,
#endif
                         __global STYPE(TY) * y, uint y_off) {
  // Row blocks vary fastest, so the work-items that run one after another on a thread share
  // B's panel (one panel of a 384 x 1152 B is 24 KiB, the whole B 1.7 MiB: more than L2).
  const int mb = get_global_id(0);
  const int nb = get_global_id(1);
  const int bt = get_global_id(2);
  if (nb >= N_BLOCKS || mb >= M_BLOCKS || bt >= BATCH)
    return;
  const int m0 = mb * RM;
  const int n0 = nb * V;
  const int abase = a_off + A_BOFF(bt);
#if B_PANEL
  const int bbase = b_off + nb * (K * V);
#else
  const int bbase = b_off + B_BOFF(bt) + n0;
#endif

  // Rows past the edge repeat the last valid one; their results are not stored.
  int arow[RM];
#pragma unroll
  for (int i = 0; i < RM; i++)
    arow[i] = abase + min(m0 + i, M - 1) * A_SM;
  VF acc[RM];
#pragma unroll
  for (int i = 0; i < RM; i++)
    acc[i] = (VF)(0.0f);

#if B_PANEL
#define B_ROW(k) LOADV(TB, V, bm, bbase + (k)*V)
  {
#else
#define B_ROW(k) LOADV(TB, V, bm, bbase + (k)*B_SK)
  if (n0 + V <= N) {
#endif
    int k = 0;
#if A_VEC4
    // A's rows run along k: four k at a time, one float4 load per row instead of four scalar
    // loads (the same FMAs in the same order).
    for (; k + 4 <= K; k += 4) {
      const VF b0 = B_ROW(k), b1 = B_ROW(k + 1), b2 = B_ROW(k + 2), b3 = B_ROW(k + 3);
#pragma unroll
      for (int i = 0; i < RM; i++) {
        const float4 av = LOADV(TA, 4, a, arow[i] + k);
        acc[i] = fma((VF)(av.s0), b0, acc[i]);
        acc[i] = fma((VF)(av.s1), b1, acc[i]);
        acc[i] = fma((VF)(av.s2), b2, acc[i]);
        acc[i] = fma((VF)(av.s3), b3, acc[i]);
      }
    }
#endif
    for (; k < K; k++) {
      const VF bv = B_ROW(k);
#pragma unroll
      for (int i = 0; i < RM; i++)
        acc[i] = fma((VF)(LOAD(TA, a, arow[i] + k * A_SK)), bv, acc[i]);
    }
  }
#if !B_PANEL
  else {
    for (int k = 0; k < K; k++) {
      float t[V];
      for (int j = 0; j < V; j++)
        t[j] = n0 + j < N ? LOAD(TB, bm, bbase + k * B_SK + j) : 0.0f;
      const VF bv = NN_CAT(vload, V)(0, t);
#pragma unroll
      for (int i = 0; i < RM; i++)
        acc[i] = fma((VF)(LOAD(TA, a, arow[i] + k * A_SK)), bv, acc[i]);
    }
  }
#endif

#ifdef ACTV
  // A whole vector of columns: the epilogue as vector code (activations included). C_CONTIG:
  // C runs along n (else one value per row, broadcast over n).
  if (n0 + V <= N) {
#pragma unroll
    for (int i = 0; i < RM; i++) {
      const int m = m0 + i;
      if (M % RM != 0 && m >= M)
        break;
      VF v = ALPHA * acc[i];
#if HAS_C && C_CONTIG
      v += BETA * LOADV(TC, V, c, c_off + C_IDX(bt, m, n0));
#elif HAS_C
      v += BETA * LOAD(TC, c, c_off + C_IDX(bt, m, n0));
#endif
      NN_STORE_EPILOGUE_V(V, v, R_IDX(bt, m, n0), (bt * M + m) * N + n0);
    }
    return;
  }
#endif
  // Epilogue, lane by lane (the edge, or an activation without a vector form).
  for (int i = 0; i < RM; i++) {
    const int m = m0 + i;
    if (m >= M)
      break;
    float t[V];
    NN_CAT(vstore, V)(acc[i], 0, t);
    for (int j = 0; j < V; j++) {
      const int n = n0 + j;
      if (n >= N)
        break;
      float v = ALPHA * t[j];
#if HAS_C
      v += BETA * LOAD(TC, c, c_off + C_IDX(bt, m, n));
#endif
      NN_STORE_EPILOGUE(v, R_IDX(bt, m, n), (bt * M + m) * N + n);
    }
  }
}
