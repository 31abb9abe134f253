// Direct 2D convolution (grouped, depthwise, dilated, strided, padded; 1D as H = 1) with the
// fused epilogue y = ACT(conv + bias + res) or, with RES_AFTER, y = ACT(conv + bias) + res.
//
// Each work-item computes OCB output channels of one group for OWB adjacent output columns, so
// every loaded input value is reused OCB times and every weight OWB times, from registers.
// Defines: TX TW TB TR TY (storage tags); N C H W OC OH OW KH KW SH SW PH PW DH DW G;
// OCB OWB; HAS_BIAS HAS_RES RES_AFTER; ACT.
// Weights are ONNX's OIHW layout: w[oc][ic][kh][kw] with ic in the group (C / G per group).
// W_IMAGE (adreno): the weights are an RGBA image2d of IMG_W texels per row holding the same
// elements in order (four per texel), read through the texture cache.
#include "nn_common.cl"

#if W_IMAGE
static __constant sampler_t nn_weight_sampler =
    CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
static inline float nn_weight(__read_only image2d_t img, int idx) {
  const int t = idx >> 2;
  const float4 v = read_imagef(img, nn_weight_sampler, (int2)(t % IMG_W, t / IMG_W));
  const int c = idx & 3;
  return c == 0 ? v.x : (c == 1 ? v.y : (c == 2 ? v.z : v.w));
}
#define W_PARAMS __read_only image2d_t w
#define LOAD_W(i) nn_weight(w, (i))
#else
#define W_PARAMS __global const STYPE(TW) * w, uint w_off
#define LOAD_W(i) LOAD(TW, w, w_off + (i))
#endif

#define CG (C / G)
#define OCG (OC / G)
#define OC_BLOCKS ((OCG + OCB - 1) / OCB)
#define OW_BLOCKS ((OW + OWB - 1) / OWB)

__kernel void conv2d(__global const STYPE(TX) * x, uint x_off, W_PARAMS,
#if HAS_BIAS
                     __global const STYPE(TB) * b, uint b_off,
#endif
#if HAS_RES
                     __global const STYPE(TR) * r, uint r_off,
#endif
                     __global STYPE(TY) * y, uint y_off) {
  const int owb = get_global_id(0);
  const int oh = get_global_id(1);
  const int z = get_global_id(2);
  if (owb >= OW_BLOCKS || oh >= OH || z >= N * G * OC_BLOCKS)
    return;
  const int n = z / (G * OC_BLOCKS);
  const int g = (z / OC_BLOCKS) % G;
  const int oc0 = g * OCG + (z % OC_BLOCKS) * OCB;
  const int oc_end = min(oc0 + OCB, g * OCG + OCG);
  const int ow0 = owb * OWB;

  float acc[OCB][OWB];
  for (int a = 0; a < OCB; a++)
    for (int c = 0; c < OWB; c++)
      acc[a][c] = 0.0f;

  for (int ic = 0; ic < CG; ic++) {
    const int xc = x_off + ((n * C + g * CG + ic) * H) * W;
    for (int kh = 0; kh < KH; kh++) {
      const int ih = oh * SH - PH + kh * DH;
      if (ih < 0 || ih >= H)
        continue;
      for (int kw = 0; kw < KW; kw++) {
        float xv[OWB];
        for (int c = 0; c < OWB; c++) {
          const int iw = (ow0 + c) * SW - PW + kw * DW;
          xv[c] = (iw >= 0 && iw < W) ? LOAD(TX, x, xc + ih * W + iw) : 0.0f;
        }
        for (int a = 0; a < OCB; a++) {
          const int oc = min(oc0 + a, oc_end - 1);
          const float wv = LOAD_W(((oc * CG + ic) * KH + kh) * KW + kw);
          for (int c = 0; c < OWB; c++)
            acc[a][c] = fma(xv[c], wv, acc[a][c]);
        }
      }
    }
  }

  for (int a = 0; a < OCB; a++) {
    const int oc = oc0 + a;
    if (oc >= oc_end)
      break;
#if HAS_BIAS
    const float bias = LOAD(TB, b, b_off + oc);
#else
    const float bias = 0.0f;
#endif
    for (int c = 0; c < OWB; c++) {
      const int ow = ow0 + c;
      if (ow >= OW)
        break;
      const int yi = ((n * OC + oc) * OH + oh) * OW + ow;
      float v = acc[a][c] + bias;
      NN_STORE_EPILOGUE(v, yi, yi);
    }
  }
}
