// Batched matrix product for CPU devices, written as explicit SIMD (the matmul.cl epilogue):
//   y[b,m,n] = ACT(ALPHA * sum_k A[b,m,k] B[b,k,n] + BETA * c[b,m,n] + res)   (or + res after ACT)
// Each work-item computes RM rows x NV * V adjacent columns as RM x NV vectors of V floats: per
// k it loads NV vectors of B's row k and broadcasts RM values of A's column k, each into NV
// vector FMAs (RM x NV accumulators: 16 of the 32 AVX-512 registers for 8 x 2, 8 of AVX2's 16
// for 2 x 4 vectors of 8; code generation's ChooseMatMulBlock).
// B's rows must be contiguous. A constant B (weights) comes as panels instead, laid out once by
// code generation: B_PANEL, bp[N_BLOCKS][K][V] with zeros past N, so each work-item streams
// one contiguous run (rows of a wide B are over a page apart, which defeats the prefetchers);
// code generation pads the panels to a multiple of NV.
// Defines: TA TB TC TR TY; A_SK (A's stride along k); B_PANEL; A_BOFF(b) B_BOFF(b) C_IDX(b,m,n)
// R_IDX(b,m,n) (generated: in terms of the stride arguments below where those can say it);
// RM V NV; ALPHA BETA; HAS_C HAS_RES RES_AFTER; ACT; ACTV and C_CONTIG (optional: the epilogue
// on whole vectors, nn_common.cl); A_VEC4 (A's rows contiguous along k: four k per step);
// K_TAIL (k not all in fours: the one-k loop is compiled) and EDGE (N not a multiple of V * NV:
// the partial blocks' paths are compiled), so that a kernel builds only the code its sizes use.
// Arguments after the output: BATCH M N K; A_SM B_SK (row strides in elements); a_bs b_bs
// (A's and B's stride per batch, 0 where broadcast); c_sb c_sm c_sn and r_sb r_sm r_sn (C's and
// the residual's strides per batch, row and column; 0 without them); alpha (ALPHA is alpha:
// an attention's scaled product shares the program of the plain one); with EPI_SWITCH, epi_act
// epi_res (nn_common.cl). Sizes, and where code generation merges them the epilogues, are
// arguments so that one program serves every product of a model with the same blocking.
#include "nn_common.cl"

#define VF NN_CAT(float, V)
#define M_BLOCKS ((M + RM - 1) / RM)
#define N_BLOCKS ((N + V * NV - 1) / (V * NV))
#ifdef ACTV
NN_DEFINE_ACT_CHAIN_V
#endif

#if A_CAT
// A's rows are a Concat's along k (the parts' rows one after another, each part rounded to half
// or not: A_RND<p>): a work-item copies its RM rows once into private memory, 16 values at a
// time, instead of a launch writing the Concat (the small policy's features and desire, 13,000
// values). Defines: A_CAT (parts, up to 4), A_CAT_K (the row), A_K<p> and A_OFF<p> (a part's
// length and place in the row), A_RND<p>(x) and A_RND<p>_16(x) (identity or nn_round_half);
// arguments ap<p>, ap<p>_off in place of a, a_off.
#define A_PART(p)                                               \
  {                                                             \
    __global const float *s = ap##p + ap##p##_off + m * A_K##p; \
    float *d = dst + A_OFF##p;                                  \
    int j = 0;                                                  \
    for (; j + 16 <= A_K##p; j += 16)                           \
      vstore16(A_RND##p##_16(vload16(0, s + j)), 0, d + j);     \
    for (; j < A_K##p; j++)                                     \
      d[j] = A_RND##p(s[j]);                                    \
  }
#define A_ARGS A_CAT_PARAMS
#else
#define A_ARGS __global const STYPE(TA) * a, uint a_off
#endif

__kernel void matmul_vec(A_ARGS, __global const STYPE(TB) * bm, uint b_off,
#if HAS_C
                         __global const STYPE(TC) * c, uint c_off,
#endif
#if HAS_RES
                         __global const STYPE(TR) * r, uint r_off,
#endif
                         __global STYPE(TY) * y, uint y_off, const int BATCH, const int M,
                         const int N, const int K, const int A_SM, const int B_SK, const int a_bs,
                         const int b_bs, const int c_sb, const int c_sm, const int c_sn,
                         const int r_sb, const int r_sm, const int r_sn,
                         const float alpha NN_EPI_SWITCH_PARAMS) {
  // Row blocks vary fastest, so the work-items that run one after another on a thread share
  // B's panel (one panel of a 384 x 1152 B is 24 KiB, the whole B 1.7 MiB: more than L2).
  const int mb = get_global_id(0);
  const int nb = get_global_id(1);
  const int bt = get_global_id(2);
  if (nb >= N_BLOCKS || mb >= M_BLOCKS || bt >= BATCH)
    return;
  const int m0 = mb * RM;
  const int n0 = nb * (V * NV);
#if !A_CAT
  const int abase = a_off + A_BOFF(bt);
#endif
#if B_PANEL
  const int bbase = b_off + nb * NV * (K * V);
#else
  const int bbase = b_off + B_BOFF(bt) + n0;
#endif

  // Rows past the edge repeat the last valid one; their results are not stored. Row pointers,
  // not offsets: the four loads per row and step address from one pointer and k, instead of a
  // 32-bit sum sign-extended per load.
#if A_CAT
  float apriv[RM * A_CAT_K];
  const float *arow[RM];
#pragma unroll 1
  for (int i = 0; i < RM; i++) {
    const int m = min(m0 + i, M - 1);
    float *dst = apriv + i * A_CAT_K;
    A_PART(0)
    A_PART(1)
#if A_CAT > 2
    A_PART(2)
#endif
#if A_CAT > 3
    A_PART(3)
#endif
  }
#pragma unroll
  for (int i = 0; i < RM; i++)
    arow[i] = apriv + i * A_CAT_K;
#else
  __global const STYPE(TA) * arow[RM];
#pragma unroll
  for (int i = 0; i < RM; i++)
    arow[i] = a + abase + min(m0 + i, M - 1) * A_SM;
#endif
  // acc[j * RM + i]: row m0 + i, columns n0 + j * V ...
  VF acc[RM * NV];
#pragma unroll
  for (int i = 0; i < RM * NV; i++)
    acc[i] = (VF)(0.0f);

#if B_PANEL
#define B_ROW(k, j) LOADV(TB, V, bm, bbase + (j) * (K * V) + (k)*V)
  {
#else
#define B_ROW(k, j) LOADV(TB, V, bm, bbase + (k)*B_SK + (j)*V)
  if (n0 + V * NV <= N) {
#endif
    int k = 0;
#if A_VEC4
    // A's rows run along k: four k at a time. Each A value is loaded as a scalar and splat
    // where it is used, which x86 compilers fold into the FMA (a broadcast memory operand, or
    // a broadcast load). One float4 load per row split into four splats instead took a shuffle
    // per splat on the port the FMAs share: the full-size policy ran 12 % slower.
    for (; k + 4 <= K; k += 4) {
      VF b0[NV], b1[NV], b2[NV], b3[NV];
#pragma unroll
      for (int j = 0; j < NV; j++) {
        b0[j] = B_ROW(k, j);
        b1[j] = B_ROW(k + 1, j);
        b2[j] = B_ROW(k + 2, j);
        b3[j] = B_ROW(k + 3, j);
      }
#pragma unroll
      for (int i = 0; i < RM; i++) {
        const float a0 = LOAD(TA, arow[i], k), a1 = LOAD(TA, arow[i], k + 1);
        const float a2 = LOAD(TA, arow[i], k + 2), a3 = LOAD(TA, arow[i], k + 3);
#pragma unroll
        for (int j = 0; j < NV; j++) {
          acc[j * RM + i] = fma((VF)(a0), b0[j], acc[j * RM + i]);
          acc[j * RM + i] = fma((VF)(a1), b1[j], acc[j * RM + i]);
          acc[j * RM + i] = fma((VF)(a2), b2[j], acc[j * RM + i]);
          acc[j * RM + i] = fma((VF)(a3), b3[j], acc[j * RM + i]);
        }
      }
    }
#endif
#if K_TAIL
    for (; k < K; k++) {
      VF bv[NV];
#pragma unroll
      for (int j = 0; j < NV; j++)
        bv[j] = B_ROW(k, j);
#pragma unroll
      for (int i = 0; i < RM; i++) {
        const VF av = (VF)(LOAD(TA, arow[i], k * A_SK));
#pragma unroll
        for (int j = 0; j < NV; j++)
          acc[j * RM + i] = fma(av, bv[j], acc[j * RM + i]);
      }
    }
#endif
  }
#if !B_PANEL && EDGE
  else {
    for (int k = 0; k < K; k++) {
      for (int j = 0; j < NV; j++) {
        float t[V];
        for (int l = 0; l < V; l++)
          t[l] = n0 + j * V + l < N ? LOAD(TB, bm, bbase + k * B_SK + j * V + l) : 0.0f;
        const VF bv = NN_CAT(vload, V)(0, t);
#pragma unroll
        for (int i = 0; i < RM; i++)
          acc[j * RM + i] = fma((VF)(LOAD(TA, arow[i], k * A_SK)), bv, acc[j * RM + i]);
      }
    }
  }
#endif

  // The epilogue is a loop, not unrolled, over a copy of the accumulators (indexed by constants
  // only, they stay in registers in the loop above): unrolled, the activation chain was
  // repeated RM x NV times, which made the kernel much slower to build for no speed.
  VF out[RM * NV];
#pragma unroll
  for (int i = 0; i < RM * NV; i++)
    out[i] = acc[i];
#pragma unroll 1
  for (int j = 0; j < NV; j++) {
    const int nj = n0 + j * V;
    if (NV > 1 && nj >= N)
      break;
#ifdef ACTV
    // A whole vector of columns: the epilogue as vector code (activations included). C_CONTIG:
    // C runs along n (else one value per row, broadcast over n).
    if (nj + V <= N) {
#pragma unroll 1
      for (int i = 0; i < RM; i++) {
        const int m = m0 + i;
        if (M % RM != 0 && m >= M)
          break;
        VF v = ALPHA * out[j * RM + i];
#if HAS_C && C_CONTIG
        v += BETA * LOADV(TC, V, c, c_off + C_IDX(bt, m, nj));
#elif HAS_C
        v += BETA * LOAD(TC, c, c_off + C_IDX(bt, m, nj));
#endif
        NN_STORE_EPILOGUE_V(V, v, R_IDX(bt, m, nj), (bt * M + m) * N + nj);
      }
      continue;
    }
#endif
#if EDGE || !defined(ACTV)
    // Epilogue, lane by lane (the edge, or an activation without a vector form).
#pragma unroll 1
    for (int i = 0; i < RM; i++) {
      const int m = m0 + i;
      if (m >= M)
        break;
      float t[V];
      NN_CAT(vstore, V)(out[j * RM + i], 0, t);
      for (int l = 0; l < V; l++) {
        const int n = nj + l;
        if (n >= N)
          break;
        float v = ALPHA * t[l];
#if HAS_C
        v += BETA * LOAD(TC, c, c_off + C_IDX(bt, m, n));
#endif
        NN_STORE_EPILOGUE(v, R_IDX(bt, m, n), (bt * M + m) * N + n);
      }
    }
#endif
  }
}
