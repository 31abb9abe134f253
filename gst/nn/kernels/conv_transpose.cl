// 2D transposed convolution (1D as H = 1), one work-item per output element gathering every
// input pixel that scatters into it: ih = (oh + PH - kh * DH) / SH when that divides exactly.
// Defines: TX TW TB TY (tags); N C H W OC OH OW KH KW SH SW PH PW DH DW G; HAS_BIAS; ACT.
// Weights are ONNX's layout for ConvTranspose: w[ic][oc in group][kh][kw].
#include "nn_common.cl"

#define CG (C / G)
#define OCG (OC / G)

__kernel void conv_transpose(__global const STYPE(TX) * x, uint x_off, __global const STYPE(TW) * w,
                             uint w_off,
#if HAS_BIAS
                             __global const STYPE(TB) * b, uint b_off,
#endif
                             __global STYPE(TY) * y, uint y_off) {
  const uint i = get_global_id(0);
  if (i >= N * OC * OH * OW)
    return;
  const int ow = i % OW;
  const int oh = (i / OW) % OH;
  const int oc = (i / (OW * OH)) % OC;
  const int n = i / (OW * OH * OC);
  const int g = oc / OCG;
  const int ocg = oc % OCG;
  float acc = 0.0f;
  for (int ic = 0; ic < CG; ic++) {
    const int c = g * CG + ic;
    for (int kh = 0; kh < KH; kh++) {
      const int th = oh + PH - kh * DH;
      if (th < 0 || th % SH != 0 || th / SH >= H)
        continue;
      const int ih = th / SH;
      for (int kw = 0; kw < KW; kw++) {
        const int tw = ow + PW - kw * DW;
        if (tw < 0 || tw % SW != 0 || tw / SW >= W)
          continue;
        const int iw = tw / SW;
        acc = fma(LOAD(TX, x, x_off + ((n * C + c) * H + ih) * W + iw),
                  LOAD(TW, w, w_off + ((c * OCG + ocg) * KH + kh) * KW + kw), acc);
      }
    }
  }
#if HAS_BIAS
  acc += LOAD(TB, b, b_off + oc);
#endif
  STORE(TY, y, y_off + i, ACT(acc));
}
