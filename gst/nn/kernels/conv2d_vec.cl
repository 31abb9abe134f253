// Direct 2D convolution for CPU devices, written as explicit SIMD: each work-item computes OCB
// output channels of one group for V adjacent output pixels, holding OCB vectors of V floats
// in registers. Per input channel and tap it loads one vector of V inputs and broadcasts OCB
// weights into OCB vector FMAs, so the FMA units, not the loads, set the pace. Stride 2 keeps
// the even lanes of 2V loaded inputs. Work-group vectorisers have nothing to do: the work-item
// is already vector code.
//
// Epilogue NN_STORE_EPILOGUE (nn_common.cl): y = ACT(conv + bias + res) or, with RES_AFTER,
// ACT(conv + bias) + res.
// Defines: TX TW TB TR TY; KH KW SH SW PH PW DH DW G; OCB V V2 (2 V) PV;
// FLAT (1x1, stride 1, no padding: pixels are one flat run of OH * OW, not rows); EDGE (the
// pixels not a multiple of V * PV: the partial vectors' paths are compiled);
// HAS_BIAS HAS_RES RES_AFTER; ACT; ACTV (optional: the activation on a vector, nn_common.cl).
// Arguments after the output: N C H W OC OH OW, so one program serves every size (the 1x1
// convolutions of a model differ in little else); with EPI_SWITCH then epi_act epi_res, so one
// serves every epilogue of them too (nn_common.cl).
// Weights are re-laid out by code generation as wt[G * OC_BLOCKS][C / G][KH][KW][OCB] (channels
// past the group's end are zero), so the OCB weights of one tap are adjacent.
#include "nn_common.cl"

#define VF NN_CAT(float, V)
#define CG (C / G)

// Stride 2's edges: the odd lanes of 2N inputs from element i, and a vector shifted up by one
// lane behind a zero. (Names written out, not pasted by a macro: the program bundler renames
// each source's statics by the name it reads before the parameter list.)
static inline float4 nn_odd_lanes4(__global const STYPE(TX) * x, int i) {
  return LOADV(TX, 8, x, i).odd;
}
static inline float8 nn_odd_lanes8(__global const STYPE(TX) * x, int i) {
  return LOADV(TX, 16, x, i).odd;
}
static inline float16 nn_odd_lanes16(__global const STYPE(TX) * x, int i) {
  return (float16)(LOADV(TX, 16, x, i).odd, LOADV(TX, 16, x, i + 16).odd);
}
static inline float4 nn_zero_then4(float4 v) {
  return (float4)(0.0f, v.s012);
}
static inline float8 nn_zero_then8(float8 v) {
  return (float8)(0.0f, v.s0123, v.s456);
}
static inline float16 nn_zero_then16(float16 v) {
  return (float16)(0.0f, v.s0123, v.s4567, v.s89ab, v.scde);
}
#define OCG (OC / G)
#define OC_BLOCKS ((OCG + OCB - 1) / OCB)
#if FLAT
#define ROWS 1
#define PIXELS (OH * OW)
#else
#define ROWS OH
#define PIXELS OW
#endif
// PV (1 or 2, FLAT only): pixel vectors per work-item, each weight broadcast feeding PV FMAs.
#define PIX_BLOCKS ((PIXELS + V * PV - 1) / (V * PV))
#ifdef ACTV
NN_DEFINE_ACT_CHAIN_V
#endif

__kernel void conv2d_vec(__global const STYPE(TX) * x, uint x_off, __global const STYPE(TW) * w,
                         uint w_off,
#if HAS_BIAS
                         __global const STYPE(TB) * b, uint b_off,
#endif
#if HAS_RES
                         __global const STYPE(TR) * r, uint r_off,
#endif
                         __global STYPE(TY) * y, uint y_off, const int N, const int C, const int H,
                         const int W, const int OC, const int OH,
                         const int OW NN_EPI_SWITCH_PARAMS) {
  // Channel blocks vary fastest: the work-items that run one after another on a thread read
  // the same input pixels (a flat 1x1 run over C = 144 is 18 KiB, kept in L1) with the next
  // OCB weights (all of a layer's weights fit in L2), instead of streaming the whole input
  // (over 1 MiB at 32 x 64) once per channel block.
  const int z = get_global_id(0);
  const int oh = get_global_id(1);
  const int pb = get_global_id(2);
  if (pb >= PIX_BLOCKS || oh >= ROWS || z >= N * G * OC_BLOCKS)
    return;
  const int n = z / (G * OC_BLOCKS);
  const int gb = z % (G * OC_BLOCKS);
  const int g = gb / OC_BLOCKS;
  const int oc0 = g * OCG + (gb % OC_BLOCKS) * OCB;
  const int p0 = pb * (V * PV);
  const int xbase = x_off + (n * C + g * CG) * H * W;
  const int wbase = w_off + gb * (CG * KH * KW * OCB);

  VF acc[OCB], acc2[OCB];
#pragma unroll
  for (int a = 0; a < OCB; a++)
    acc[a] = acc2[a] = (VF)(0.0f);

#if FLAT
  if (p0 + PV * V <= PIXELS) {
    for (int ic = 0; ic < CG; ic++) {
      const VF xv = LOADV(TX, V, x, xbase + ic * (H * W) + p0);
#if PV == 2
      const VF xv2 = LOADV(TX, V, x, xbase + ic * (H * W) + p0 + V);
#endif
#pragma unroll
      for (int a = 0; a < OCB; a++) {
        const VF wv = (VF)(LOAD(TW, w, wbase + ic * OCB + a));
        acc[a] = fma(xv, wv, acc[a]);
#if PV == 2
        acc2[a] = fma(xv2, wv, acc2[a]);
#endif
      }
    }
  }
#if EDGE
  else {
    for (int ic = 0; ic < CG; ic++) {
      for (int j = 0; j < PV; j++) {
        const int pj = p0 + j * V;
        float t[V];
        for (int c = 0; c < V; c++)
          t[c] = pj + c < PIXELS ? LOAD(TX, x, xbase + ic * (H * W) + pj + c) : 0.0f;
        const VF xv = NN_CAT(vload, V)(0, t);
#pragma unroll
        for (int a = 0; a < OCB; a++) {
          const VF wv = (VF)(LOAD(TW, w, wbase + ic * OCB + a));
          if (j == 0)
            acc[a] = fma(xv, wv, acc[a]);
          else
            acc2[a] = fma(xv, wv, acc2[a]);
        }
      }
    }
  }
#endif
#else
  for (int ic = 0; ic < CG; ic++) {
    for (int kh = 0; kh < KH; kh++) {
      const int ih = oh * SH - PH + kh * DH;
      if (ih < 0 || ih >= H)
        continue;
      const int row = xbase + (ic * H + ih) * W;
      for (int kw = 0; kw < KW; kw++) {
        const int iw0 = p0 * SW - PW + kw * DW;
        VF xv;
        if (SW == 1 && iw0 >= 0 && iw0 + V <= W) {
          xv = LOADV(TX, V, x, row + iw0);
#if V <= 8
        } else if (SW == 2 && iw0 >= 0 && iw0 + 2 * V <= W) {
          xv = LOADV(TX, V2, x, row + iw0).even;
#else
        } else if (SW == 2 && iw0 >= 0 && iw0 + 2 * V <= W) {
          // No 32-wide vectors: the even lanes of two 16-wide loads.
          xv = (VF)(LOADV(TX, V, x, row + iw0).even, LOADV(TX, V, x, row + iw0 + V).even);
#endif
        } else if (SW == 2 && iw0 >= 1 && iw0 + 2 * V - 1 <= W) {
          // The right edge: the last lane of a load at iw0 is past the row but not needed; the
          // odd lanes of a load one value earlier are the same inputs.
          xv = NN_CAT(nn_odd_lanes, V)(x, row + iw0 - 1);
        } else if (SW == 2 && iw0 == -1 && 2 * V <= W) {
          // The left edge with one column of padding: a zero, then the odd lanes of a load at 0.
          xv = NN_CAT(nn_zero_then, V)(NN_CAT(nn_odd_lanes, V)(x, row));
        } else {
          float t[V];
          for (int c = 0; c < V; c++) {
            const int iw = iw0 + c * SW;
            t[c] = (iw >= 0 && iw < W) ? LOAD(TX, x, row + iw) : 0.0f;
          }
          xv = NN_CAT(vload, V)(0, t);
        }
        const int wi = wbase + ((ic * KH + kh) * KW + kw) * OCB;
#pragma unroll
        for (int a = 0; a < OCB; a++)
          acc[a] = fma(xv, (VF)(LOAD(TW, w, wi + a)), acc[a]);
      }
    }
  }
#endif

  // The epilogue is a loop over a copy of the accumulators (indexed by constants only, they
  // stay in registers in the loop above), four vectors at a time: unrolled whole, the
  // activation chain was repeated PV x OCB times, which made the kernel half again slower to
  // build; one vector at a time, the chains ran one after another and the full vision model's
  // GELU-fused 1x1 convolutions took 43 % longer.
  VF out[PV][OCB];
#pragma unroll
  for (int a = 0; a < OCB; a++) {
    out[0][a] = acc[a];
    out[PV - 1][a] = PV == 2 ? acc2[a] : acc[a];
  }
#pragma unroll 1
  for (int j = 0; j < PV; j++) {
    const int pj = p0 + j * V;
    if (PV > 1 && pj >= PIXELS)
      break;
    const int ybase = (n * OC) * (OH * OW) + oh * OW + pj;
#ifdef ACTV
    // A whole vector of pixels: the epilogue as vector code (activations included).
    if (pj + V <= PIXELS) {
#pragma unroll 4
      for (int a = 0; a < OCB; a++) {
        const int oc = oc0 + a;
        if (OCG % OCB != 0 && oc >= g * OCG + OCG)
          break;
#if HAS_BIAS
        const VF v = out[j][a] + LOAD(TB, b, b_off + oc);
#else
        const VF v = out[j][a];
#endif
        const int yi = ybase + oc * (OH * OW);
        NN_STORE_EPILOGUE_V(V, v, yi, yi);
      }
      continue;
    }
#endif
#if EDGE || !defined(ACTV)
    // Epilogue, lane by lane (the edge, or an activation without a vector form).
#pragma unroll 1
    for (int a = 0; a < OCB; a++) {
      const int oc = oc0 + a;
      if (oc >= g * OCG + OCG)
        break;
#if HAS_BIAS
      const float bias = LOAD(TB, b, b_off + oc);
#else
      const float bias = 0.0f;
#endif
      float t[V];
      NN_CAT(vstore, V)(out[j][a], 0, t);
      // A whole vector in range runs a loop without exits, which the compiler vectorises
      // (activations included); the edge keeps its bounds.
      const int lanes = pj + V <= PIXELS ? V : PIXELS - pj;
      for (int c = 0; c < (lanes == V ? V : lanes); c++) {
        const int yi = ybase + oc * (OH * OW) + c;
        float v = t[c] + bias;
        NN_STORE_EPILOGUE(v, yi, yi);
      }
    }
#endif
  }
}
