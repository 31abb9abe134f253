// The accumulation of the CPU profile's depthwise convolutions (conv2d_dw.cl, qconv_dw.cl): one
// input channel per group, M output channels of it, stride SH x SW (1 or 2), no dilation. A
// work-item computes M channels x R output rows of V adjacent output pixels, holding M x R
// vectors of V floats. Each input row the R rows need is read once as KW shifted vectors, which
// feed up to M x R accumulators (one per output channel and output row the input row falls
// in), so a 7x7 window costs (SH (R - 1) + KH) x KW vector loads for M x R x KH x KW FMAs
// instead of one load per FMA. With SW = 2 the shifted vectors are the even and odd lanes of
// ceil(KW / 2) loads of 2V inputs (tap kw at offset kw, tap kw + 1 the odd lanes of the same
// load). Interior rows load straight from the input. A row whose window leaves the image on the
// left or right takes its taps as shuffles of the three aligned vectors around its pixels where
// code generation defined NN_DW_EDGE_TAPS (stride 1), the width is a multiple of V and the
// pixels' own vector lies in the image; otherwise it copies its segment once, with zeros outside,
// into a private array and reads the shifted vectors from there.
//
// The includer defines NN_DW_LOADV(i) (V inputs from element i of x, as floats) and
// NN_DW_LOAD(i) (one), in terms of this function's parameters x and xzp.
// Defines: TX TW; KH KW SH SW PH PW M; R V. The image's height and width are arguments (in_h,
// in_w), so one program serves every image size. Weights w[C * M][KH][KW] (float or half).

#define VF NN_CAT(float, V)
#define SEG (SW * V + KW - 1)
#define IROWS (SH * (R - 1) + KH)

// A row's KW shifted vectors, LOADER(o) giving V inputs from offset o of the row (the input, or
// its private copy); stride 2 takes the even and odd lanes of pairs of them.
#define NN_DW_SEG_TAPS(LOADER)                                               \
  do {                                                                       \
    if (SW == 1) {                                                           \
      _Pragma("unroll") for (int kw = 0; kw < KW; kw++) xv[kw] = LOADER(kw); \
    } else {                                                                 \
      _Pragma("unroll") for (int kw = 0; kw < KW; kw += 2) {                 \
        const VF lo = LOADER(kw), hi = LOADER(kw + V);                       \
        xv[kw] = (VF)(lo.even, hi.even);                                     \
        if (kw + 1 < KW)                                                     \
          xv[kw + 1] = (VF)(lo.odd, hi.odd);                                 \
      }                                                                      \
    }                                                                        \
  } while (0)

// acc[j][a] += the window of output channel j, output row oh0 + a, pixels from the input
// column iw0 on (the left edge of the first pixel's window), over image channel base xbase.
static inline void nn_dw_rows(__global const STYPE(TX) * x, const int xbase, const float xzp,
                              __global const STYPE(TW) * w, const int wbase, const int in_h,
                              const int in_w, const int oh0, const int iw0, VF acc[M][R]) {
  const bool interior = (iw0 >= 0) & (iw0 + SEG <= in_w);
  // The loop over input rows is not unrolled (the taps of a row, and the output rows and
  // channels it feeds, are): unrolled, its IROWS copies of the row's loads and of the edge path
  // made the kernel three to four times slower to build, for no measurable speed.
#pragma unroll 1
  for (int i = 0; i < IROWS; i++) {
    // Input row i of the block is tap row kh = i - SH a of output row a.
    const int ih = oh0 * SH - PH + i;
    if (ih < 0 || ih >= in_h)
      continue;
    const int row = xbase + ih * in_w + iw0;
    VF xv[KW];
    if (interior) {
#define NN_DW_FROM_INPUT(o) NN_DW_LOADV(row + (o))
      NN_DW_SEG_TAPS(NN_DW_FROM_INPUT);
#undef NN_DW_FROM_INPUT
    }
#ifdef NN_DW_EDGE_TAPS
    else if (in_w % V == 0 && iw0 + PW + V <= in_w) {
      // iw0 + PW is the first output pixel, a multiple of V, and its vector is in the image (not
      // so past the image's width, where pads wider than the window's half put output pixels).
      const int at = row + PW;
      const VF zero = (VF)(0.0f);
      const VF before = iw0 + PW > 0 ? NN_DW_LOADV(at - V) : zero;
      const VF after = iw0 + PW + V < in_w ? NN_DW_LOADV(at + V) : zero;
      NN_DW_EDGE_TAPS(xv, before, NN_DW_LOADV(at), after);
    }
#endif
    else {
      float seg[SEG];
      for (int c = 0; c < SEG; c++)
        seg[c] = (iw0 + c >= 0 && iw0 + c < in_w) ? NN_DW_LOAD(row + c) : 0.0f;
#define NN_DW_FROM_SEG(o) NN_CAT(vload, V)(0, seg + (o))
      NN_DW_SEG_TAPS(NN_DW_FROM_SEG);
#undef NN_DW_FROM_SEG
    }
#pragma unroll
    for (int a = 0; a < R; a++) {
      const int kh = i - SH * a;
      if (kh < 0 || kh >= KH)
        continue;
#pragma unroll
      for (int j = 0; j < M; j++)
#pragma unroll
        for (int kw = 0; kw < KW; kw++)
          acc[j][a] = fma(xv[kw], (VF)(LOAD(TW, w, wbase + (j * KH + kh) * KW + kw)), acc[j][a]);
    }
  }
}
