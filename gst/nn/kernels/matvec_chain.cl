// A chain of small matrix-vector products in one work-group (CPU profile): a policy's head,
// x -> Gemm -> Relu -> Gemm -> Relu -> Gemm, whose products take a few microseconds each and
// whose launches cost as much again. The vectors between the layers stay in local memory and
// the layers are separated by barriers, so the chain is one launch. Per layer:
//   out[n] = ACT(ALPHA * sum_k in[k] B[k][n] + BETA * c[n])
// with the sums and the epilogue in matmul_vec's order (k ascending into one accumulator per
// lane, then ALPHA, then + BETA * c, then the activation; lanes past a whole vector lane by lane
// with the scalar activation), so a chain computes what its products would compute one by one,
// bit for bit.
//
// Code generation (LowerProductChain in codegen.cpp) defines:
//   V            float lanes per vector; NP panels of V columns per work-item per layer
//   TA TY        tags of the chain's input vector and output
//   WMAX         the local vectors' length: the widest layer, in whole blocks of 16
//   MV_PARAMS    the arguments before y/y_off: the input (a, a_off; or with MV_CONCAT the
//                Concat's inputs in0, in0_off, ...), then per layer its panels (b<l>, b<l>_off:
//                B laid out [panels][K][V], zeros past N, padded to NP panels) and its bias
//                (c<l>, c<l>_off) where it has one
//   MV_CONCAT    the input row is a Concat's (ConcatRowsBody in codegen_eltwise.cpp), written
//                into local memory here by MV_CONCAT_BODY for items i < MV_CONCAT_ITEMS
//   MV_LAYERS    the layers, in order: MV_LAYER(...) (below) and a barrier after each but the
//                last
//   MV_ACTV<l>(x), MV_ACT<l>(x)  each layer's activation on a vector and on one value
// The chain's input is K0 values; the work-group is one, of enough work-items for the widest
// layer's panels.
#include "nn_common.cl"

#define VF NN_CAT(float, V)

// One layer from local `in` (K values) to local `out`, or to the global output y when LAST.
// HAS_C picks the bias: without one, `c` is any pointer of tag TC and is never read.
#define MV_LAYER(in, out, b, b_off, TB, K, N, c, c_off, TC, HAS_C, ALPHA, BETA, ACTV_, ACT_, LAST) \
  {                                                                                                \
    const int panels = ((N) + V - 1) / V;                                                          \
    const int p0 = lid * NP;                                                                       \
    if (p0 < panels) {                                                                             \
      VF acc[NP];                                                                                  \
      _Pragma("unroll") for (int j = 0; j < NP; j++) acc[j] = (VF)(0.0f);                          \
      const int base = (b_off) + p0 * ((K)*V);                                                     \
      for (int k = 0; k < (K); k++) {                                                              \
        const VF xk = (VF)(in[k]);                                                                 \
        _Pragma("unroll") for (int j = 0; j < NP; j++) acc[j] =                                    \
            fma(xk, LOADV(TB, V, b, base + j * ((K)*V) + k * V), acc[j]);                          \
      }                                                                                            \
      _Pragma("unroll 1") for (int j = 0; j < NP; j++) {                                           \
        const int n0 = (p0 + j) * V;                                                               \
        if (n0 >= (N))                                                                             \
          break;                                                                                   \
        if (n0 + V <= (N)) {                                                                       \
          VF v = (ALPHA)*acc[j];                                                                   \
          if (HAS_C)                                                                               \
            v += (BETA)*LOADV(TC, V, c, (c_off) + n0);                                             \
          v = ACTV_(v);                                                                            \
          if (LAST)                                                                                \
            STOREV(TY, V, y, y_off + n0, v);                                                       \
          else                                                                                     \
            NN_CAT(vstore, V)(v, 0, out + n0);                                                     \
        } else {                                                                                   \
          float t[V];                                                                              \
          NN_CAT(vstore, V)(acc[j], 0, t);                                                         \
          for (int l = 0; l < V && n0 + l < (N); l++) {                                            \
            float v = (ALPHA)*t[l];                                                                \
            if (HAS_C)                                                                             \
              v += (BETA)*LOAD(TC, c, (c_off) + n0 + l);                                           \
            v = ACT_(v);                                                                           \
            if (LAST)                                                                              \
              STORE(TY, y, y_off + n0 + l, v);                                                     \
            else                                                                                   \
              out[n0 + l] = v;                                                                     \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }

__kernel void matvec_chain(MV_PARAMS, __global STYPE(TY) * y, uint y_off) {
  __local float v0[WMAX], v1[WMAX];
  const int lid = get_local_id(0);
#if MV_CONCAT
  {
    __local float *out0 = v0;
    const uint out0_off = 0;
    for (uint i = lid; i < MV_CONCAT_ITEMS; i += get_local_size(0)) {
      MV_CONCAT_BODY
    }
  }
#else
  for (int k = lid; k < K0; k += get_local_size(0))
    v0[k] = LOAD(TA, a, a_off + k);
#endif
  barrier(CLK_LOCAL_MEM_FENCE);
  MV_LAYERS
}
