// Depthwise 2D convolution for CPU devices (one input channel per group, M output channels of
// it, stride 1 or 2 each way, no dilation), written as explicit SIMD: dw_rows.cl's blocking
// (M channels x R output rows of V adjacent pixels per work-item, each input row loaded once
// for all of them).
//
// Epilogue NN_STORE_EPILOGUE (nn_common.cl), as conv2d_vec's; ACTV (optional) runs it on
// whole vectors.
// Defines: TX TW TB TR TY; KH KW SH SW PH PW M; R V; HAS_BIAS HAS_RES RES_AFTER; ACT; ACTV;
// EDGE (OW not a multiple of V: the lane-by-lane epilogue of a partial vector is compiled).
// Arguments after the output: N C H W OH OW (then, with EPI_SWITCH, epi_act epi_res:
// nn_common.cl), so one program serves every image size and channel
// count (a model's depthwise layers differ in little else). Weights in ONNX order
// w[C * M][1][KH][KW]; output channel c * M + j reads input channel c.
#include "nn_common.cl"

#define NN_DW_LOADV(i) LOADV(TX, V, x, i)
#define NN_DW_LOAD(i) LOAD(TX, x, i)
#include "dw_rows.cl"

#define OC (C * M)
#define PIX_BLOCKS ((OW + V - 1) / V)
#define ROW_BLOCKS ((OH + R - 1) / R)
#ifdef ACTV
NN_DEFINE_ACT_CHAIN_V
#endif

__kernel void conv2d_dw(__global const STYPE(TX) * x, uint x_off, __global const STYPE(TW) * w,
                        uint w_off,
#if HAS_BIAS
                        __global const STYPE(TB) * b, uint b_off,
#endif
#if HAS_RES
                        __global const STYPE(TR) * r, uint r_off,
#endif
                        __global STYPE(TY) * y, uint y_off, const int N, const int C, const int H,
                        const int W, const int OH, const int OW NN_EPI_SWITCH_PARAMS) {
  const int pb = get_global_id(0);
  const int rb = get_global_id(1);
  const int z = get_global_id(2);
  if (pb >= PIX_BLOCKS || rb >= ROW_BLOCKS || z >= N * C)
    return;
  const int ch = z % C;
  const int p0 = PIX_BLOCKS == 1 ? 0 : pb * V;
  const int oh0 = rb * R;
  VF acc[M][R];
#pragma unroll
  for (int j = 0; j < M; j++)
#pragma unroll
    for (int a = 0; a < R; a++)
      acc[j][a] = (VF)(0.0f);
  nn_dw_rows(x, x_off + z * (H * W), 0.0f, w, w_off + ch * (M * KH * KW), H, W, oh0, p0 * SW - PW,
             acc);

  // The epilogue is a loop, not unrolled, over a copy of the accumulators (see conv2d_vec.cl).
  VF out[M][R];
#pragma unroll
  for (int j = 0; j < M; j++)
#pragma unroll
    for (int a = 0; a < R; a++)
      out[j][a] = acc[j][a];
  const int n = z / C;
#pragma unroll 1
  for (int j = 0; j < M; j++) {
    const int oc = ch * M + j;
#if HAS_BIAS
    const float bias = LOAD(TB, b, b_off + oc);
#else
    const float bias = 0.0f;
#endif
    const int ybase = (n * OC + oc) * (OH * OW) + p0;
#pragma unroll 1
    for (int a = 0; a < R; a++) {
      const int oh = oh0 + a;
      if (OH % R != 0 && oh >= OH)
        break;
      const int yrow = ybase + oh * OW;
#ifdef ACTV
      if (p0 + V <= OW) {
        const VF v = out[j][a] + bias;
        NN_STORE_EPILOGUE_V(V, v, yrow, yrow);
        continue;
      }
#endif
#if EDGE || !defined(ACTV)
      float t[V];
      NN_CAT(vstore, V)(out[j][a], 0, t);
      const int lanes = p0 + V <= OW ? V : OW - p0;
      for (int c = 0; c < (lanes == V ? V : lanes); c++) {
        const int yi = yrow + c;
        float v = t[c] + bias;
        NN_STORE_EPILOGUE(v, yi, yi);
      }
#endif
    }
  }
}
