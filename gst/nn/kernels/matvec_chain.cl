// A chain of small matrix products in one launch (CPU profile): a policy's head, one row
// x -> Gemm -> Relu -> Gemm -> Relu -> Gemm, or an MLP applied to each of a few rows, whose
// products take a few microseconds each and whose launches cost as much again. Each work-group
// takes RB rows through every layer: the rows between the layers stay in local memory and the
// layers are separated by barriers. Per layer and row m:
//   out[m][n] = ACT(ALPHA * sum_k in[m][k] B[k][n] + BETA * c[n] (+ a[m][n], the residual))
// with the sums and the epilogue in matmul_vec's order (k ascending into one accumulator per
// lane, then ALPHA, then + BETA * c, then the activation; lanes past a whole vector lane by lane
// with the scalar activation), so a chain computes what its products would compute one by one,
// bit for bit.
//
// Code generation (LowerProductChain in codegen.cpp) defines:
//   V            float lanes per vector; NP panels of V columns per work-item per layer
//   M RB K0      the rows, the rows per work-group, the input row's length
//   TA TY        tags of the chain's input vector and output
//   WMAX         the local rows' length: the input's or the widest layer's
//   MV_PARAMS    the arguments before y/y_off: the input (a, a_off; or with MV_CONCAT the
//                Concat's inputs in0, in0_off, ...), then per layer its panels (b<l>, b<l>_off:
//                B laid out [panels][K][V], zeros past N, padded to NP panels) and its bias
//                (c<l>, c<l>_off) where it has one
//   MV_CONCAT    the input row is a Concat's (ConcatRowsBody in codegen_eltwise.cpp), written
//                into local memory here by MV_CONCAT_BODY for items i < MV_CONCAT_ITEMS
//   MV_LAYERS    the layers, in order: MV_LAYER(...) (below) and a barrier after each but the
//                last
//   MV_ACTV<l>(x), MV_ACT<l>(x)  each layer's activation on a vector and on one value
// Work-groups of enough work-items for the widest layer's panels, one per RB rows.
#include "nn_common.cl"

#define VF NN_CAT(float, V)

#if MV_CONCAT  // no residual then: the input row is in local memory only
#define MV_RESV(i) ((VF)(0.0f))
#define MV_RES1(i) 0.0f
#else
#define MV_RESV(i) LOADV(TA, V, a, a_off + (i))
#define MV_RES1(i) LOAD(TA, a, a_off + (i))
#endif

// One layer from local `in` (RB rows of K values, WMAX apart) to local `out`, or to the global
// output y when LAST. HAS_C picks the bias: without one, `c` is any pointer of tag TC and is
// never read. HAS_R adds the chain's input row as a residual (before the activation, or after
// it with RES_AFTER), as matmul_vec's epilogue does.
#define MV_LAYER(in, out, b, b_off, TB, K, N, c, c_off, TC, HAS_C, ALPHA, BETA, ACTV_, ACT_, LAST, \
                 HAS_R, RES_AFTER)                                                                 \
  {                                                                                                \
    const int panels = ((N) + V - 1) / V;                                                          \
    const int p0 = lid * NP;                                                                       \
    if (p0 < panels) {                                                                             \
      VF acc[RB * NP];                                                                             \
      _Pragma("unroll") for (int j = 0; j < RB * NP; j++) acc[j] = (VF)(0.0f);                     \
      const int base = (b_off) + p0 * ((K)*V);                                                     \
      for (int k = 0; k < (K); k++) {                                                              \
        VF bk[NP];                                                                                 \
        _Pragma("unroll") for (int j = 0; j < NP; j++) bk[j] =                                     \
            LOADV(TB, V, b, base + j * ((K)*V) + k * V);                                           \
        _Pragma("unroll") for (int r = 0; r < RB; r++) {                                           \
          const VF xk = (VF)(in[r * WMAX + k]);                                                    \
          _Pragma("unroll") for (int j = 0; j < NP; j++) acc[r * NP + j] =                         \
              fma(xk, bk[j], acc[r * NP + j]);                                                     \
        }                                                                                          \
      }                                                                                            \
      VF res[RB * NP];                                                                             \
      _Pragma("unroll") for (int j = 0; j < RB * NP; j++) res[j] = acc[j];                         \
      _Pragma("unroll 1") for (int j = 0; j < NP; j++) {                                           \
        const int n0 = (p0 + j) * V;                                                               \
        if (n0 >= (N))                                                                             \
          break;                                                                                   \
        _Pragma("unroll 1") for (int r = 0; r < RB; r++) {                                         \
          const int m = m0 + r;                                                                    \
          if (m >= M)                                                                              \
            break;                                                                                 \
          if (n0 + V <= (N)) {                                                                     \
            VF v = (ALPHA)*res[r * NP + j];                                                        \
            if (HAS_C)                                                                             \
              v += (BETA)*LOADV(TC, V, c, (c_off) + n0);                                           \
            if (HAS_R && !(RES_AFTER))                                                             \
              v = v + MV_RESV(m * K0 + n0);                                                        \
            v = ACTV_(v);                                                                          \
            if (HAS_R && (RES_AFTER))                                                              \
              v = v + MV_RESV(m * K0 + n0);                                                        \
            if (LAST)                                                                              \
              STOREV(TY, V, y, y_off + m * (N) + n0, v);                                           \
            else                                                                                   \
              NN_CAT(vstore, V)(v, 0, out + r * WMAX + n0);                                        \
          } else {                                                                                 \
            float t[V];                                                                            \
            NN_CAT(vstore, V)(res[r * NP + j], 0, t);                                              \
            for (int l = 0; l < V && n0 + l < (N); l++) {                                          \
              float v = (ALPHA)*t[l];                                                              \
              if (HAS_C)                                                                           \
                v += (BETA)*LOAD(TC, c, (c_off) + n0 + l);                                         \
              if (HAS_R && !(RES_AFTER))                                                           \
                v = v + MV_RES1(m * K0 + n0 + l);                                                  \
              v = ACT_(v);                                                                         \
              if (HAS_R && (RES_AFTER))                                                            \
                v = v + MV_RES1(m * K0 + n0 + l);                                                  \
              if (LAST)                                                                            \
                STORE(TY, y, y_off + m * (N) + n0 + l, v);                                         \
              else                                                                                 \
                out[r * WMAX + n0 + l] = v;                                                        \
            }                                                                                      \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }

__kernel void matvec_chain(MV_PARAMS, __global STYPE(TY) * y, uint y_off) {
  __local float v0[RB * WMAX], v1[RB * WMAX];
  const int lid = get_local_id(0);
  const int m0 = get_group_id(1) * RB;
#if MV_CONCAT
  {
    __local float *out0 = v0;
    const uint out0_off = 0;
    for (uint i = lid; i < MV_CONCAT_ITEMS; i += get_local_size(0)) {
      MV_CONCAT_BODY
    }
  }
#else
  // Rows past M repeat the last one; their results are not stored.
  for (int r = 0; r < RB; r++)
    for (int k = lid; k < K0; k += get_local_size(0))
      v0[r * WMAX + k] = LOAD(TA, a, a_off + min(m0 + r, M - 1) * K0 + k);
#endif
  barrier(CLK_LOCAL_MEM_FENCE);
  MV_LAYERS
}
