// Depthwise 2D convolution (one input and one output channel per group, stride 1, no dilation)
// for CPU devices, written as explicit SIMD: each work-item computes R output rows of V
// adjacent output pixels of one channel, holding R vectors of V floats. Each input row the R
// rows need is read once as KW shifted vectors, which feed up to R accumulators (one per
// output row the input row falls in), so a 7x7 window costs (KH + R - 1) x KW vector loads for
// R x KH x KW FMAs instead of one load per FMA. A row whose window leaves the image on the
// left or right copies its segment once, with zeros outside, into a private array and reads
// the shifted vectors from there; interior rows load straight from the input.
//
// Epilogue NN_STORE_EPILOGUE (nn_common.cl), as conv2d_vec's; ACTV (optional) runs it on
// whole vectors.
// Defines: TX TW TB TR TY; N C H W OH OW KH KW PH PW; R V; HAS_BIAS HAS_RES RES_AFTER; ACT;
// ACTV. Weights in ONNX order w[C][1][KH][KW].
#include "nn_common.cl"

#define VF NN_CAT(float, V)
#define PIX_BLOCKS ((OW + V - 1) / V)
#define ROW_BLOCKS ((OH + R - 1) / R)
#define SEG (V + KW - 1)
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
                        __global STYPE(TY) * y, uint y_off) {
  const int pb = get_global_id(0);
  const int rb = get_global_id(1);
  const int z = get_global_id(2);
  if (pb >= PIX_BLOCKS || rb >= ROW_BLOCKS || z >= N * C)
    return;
  const int ch = z % C;
  const int p0 = PIX_BLOCKS == 1 ? 0 : pb * V;
  const int oh0 = rb * R;
  const int xbase = x_off + z * (H * W);
  const int wbase = w_off + ch * (KH * KW);
  const int iw0 = p0 - PW;
  const bool interior = iw0 >= 0 && iw0 + SEG <= W;

  VF acc[R];
#pragma unroll
  for (int a = 0; a < R; a++)
    acc[a] = (VF)(0.0f);

#pragma unroll
  for (int i = 0; i < KH + R - 1; i++) {
    // Input row i of the block is tap row kh = i - a of output row a.
    const int ih = oh0 - PH + i;
    if (ih < 0 || ih >= H)
      continue;
    const int row = xbase + ih * W + iw0;
    VF xv[KW];
    if (interior) {
#pragma unroll
      for (int kw = 0; kw < KW; kw++)
        xv[kw] = LOADV(TX, V, x, row + kw);
    } else {
      float seg[SEG];
      for (int c = 0; c < SEG; c++)
        seg[c] = (iw0 + c >= 0 && iw0 + c < W) ? LOAD(TX, x, row + c) : 0.0f;
#pragma unroll
      for (int kw = 0; kw < KW; kw++)
        xv[kw] = NN_CAT(vload, V)(0, seg + kw);
    }
#pragma unroll
    for (int a = 0; a < R; a++) {
      const int kh = i - a;
      if (kh < 0 || kh >= KH)
        continue;
#pragma unroll
      for (int kw = 0; kw < KW; kw++)
        acc[a] = fma(xv[kw], (VF)(LOAD(TW, w, wbase + kh * KW + kw)), acc[a]);
    }
  }

#if HAS_BIAS
  const float bias = LOAD(TB, b, b_off + ch);
#else
  const float bias = 0.0f;
#endif
  const int ybase = z * (OH * OW) + p0;
  for (int a = 0; a < R; a++) {
    const int oh = oh0 + a;
    if (OH % R != 0 && oh >= OH)
      break;
    const int yrow = ybase + oh * OW;
#ifdef ACTV
    if (p0 + V <= OW) {
      const VF v = acc[a] + bias;
      NN_STORE_EPILOGUE_V(V, v, yrow, yrow);
      continue;
    }
#endif
    float t[V];
    NN_CAT(vstore, V)(acc[a], 0, t);
    const int lanes = p0 + V <= OW ? V : OW - p0;
    for (int c = 0; c < (lanes == V ? V : lanes); c++) {
      const int yi = yrow + c;
      float v = t[c] + bias;
      NN_STORE_EPILOGUE(v, yi, yi);
    }
  }
}
