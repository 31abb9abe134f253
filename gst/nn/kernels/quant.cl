// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear.
//
// quantize / dequantize: one work-item per element. The scale and zero point are buffers (they
// may be computed by the graph), indexed by the element's position along the quantization axis:
// k = (i / INNER) % COUNT (COUNT 1: per tensor).
// Defines: TX TS TY (tags), HAS_ZP and TZ, COUNT INNER NUM, MODE 0 quantize / 1 dequantize,
// QMIN QMAX (the output's range when quantizing).
//
// dynamic_quantize: one work-group of DQ_LOCAL work-items; the range of x (with 0) is reduced in
// local memory, then every work-item quantizes its share. Defines: TX NUM DQ_LOCAL.
#include "nn_common.cl"

// x / s rounded to nearest even as IEEE division does: OpenCL allows 2.5 ulp for a float
// division unless a build option asks for more, and a quotient one ulp off moves a value that
// should round to a tie. The exact residual x - q * s (fma) picks the neighbour nearest x / s.
static inline float nn_div_rn(float x, float s) {
  float q = x / s;
  for (int i = 0; i < 3; i++) {
    const float r = fabs(fma(-q, s, x));
    const float up = nextafter(q, INFINITY), dn = nextafter(q, -INFINITY);
    if (fabs(fma(-up, s, x)) < r)
      q = up;
    else if (fabs(fma(-dn, s, x)) < r)
      q = dn;
    else
      break;
  }
  return q;
}

// Whether rint(q) may differ from rint of the correctly rounded quotient q approximates: q lies
// within 8 ulp of a half-integer (a quotient is at most 2.5 ulp off). Elsewhere q rounds as the
// exact quotient does and needs no correction. q - floor(q) is exact below 2^23; NaN and
// infinity answer true (the correction steps keep them).
static inline int nn_near_tie(float q) {
  return !(fabs(fabs(q - floor(q)) - 0.5f) > 8.0f * FLT_EPSILON * fmax(fabs(q), 1.0f));
}

// x / s for a quantizer that rounds it to an integer next: nn_div_rn's value where that value
// could round differently from the plain quotient, else the plain quotient. Most quotients are
// far from a tie, and those of zero inputs would otherwise take the correction steps through
// subnormal neighbours, which x86 computes in microcode (a quantize of 98,304 mostly zero
// values took 3.3 times as long as one of the same size without: 0.70 against 0.21 ms).
static inline float nn_div_for_rint(float x, float s) {
  const float q = x / s;
  return nn_near_tie(q) ? nn_div_rn(x, s) : q;
}

// round(v) + zp, saturated to [lo, hi]; NaN gives 0 as the reference interpreter does.
static inline float nn_requantize(float v, float zp, float lo, float hi) {
  return isnan(v) ? 0.0f : clamp(rint(v) + zp, lo, hi);
}

// rint on 16 lanes, exactly (round half to even): below 2^23 the float adder rounds |v| + 2^23
// to an integer, ties to even, and subtracting 2^23 again is exact; from 2^23 up every float is
// an integer. A few vector instructions where PoCL's library rint and floor on float16 cost more.
static inline float16 nn_rint16(float16 v) {
  const float16 a = fabs(v);
  return select(copysign((a + 8388608.0f) - 8388608.0f, v), v, a >= 8388608.0f);
}

// Whether any lane of a vector comparison's result is true, by halving ORs (PoCL's any() on 16
// lanes cost about twelve times as much in a quantizer's loop).
static inline int nn_any16(int16 m) {
  const int8 a = m.lo | m.hi;
  const int4 b = a.lo | a.hi;
  const int2 c = b.lo | b.hi;
  return (c.x | c.y) < 0;
}

// nn_requantize on 16 lanes.
static inline float16 nn_requantize16(float16 v, float zp, float lo, float hi) {
  return select(clamp(nn_rint16(v) + zp, (float16)(lo), (float16)(hi)), (float16)(0.0f), isnan(v));
}

// A quantized convolution's float table that is only a DequantizeLinear of its output (LUT_DQ:
// FuseQuantizedLookup's table where the float value is read elsewhere, as a residual stream's):
// (q - DQ_ZP) * DQ_SCALE computed on the requantized vector r (its lanes the integers q), as the
// interpreter's DequantizeLinear computes it (the difference exact, one rounding in the
// product), instead of one table load and one store per lane. `lanes` of the n from y[yi].
#define NN_DQ_OUT(n, r, lanes, yi)                          \
  if ((lanes) == (n)) {                                     \
    STOREV(TY, n, y, (yi), ((r)-DQ_ZP) * DQ_SCALE);         \
  } else {                                                  \
    float t_[n];                                            \
    NN_CAT(vstore, n)((r), 0, t_);                          \
    for (int c_ = 0; c_ < (lanes); c_++)                    \
      STORE(TY, y, (yi) + c_, (t_[c_] - DQ_ZP) * DQ_SCALE); \
  }

#ifdef MODE
__kernel void quantize(__global const STYPE(TX) * x, uint x_off, __global const STYPE(TS) * s,
                       uint s_off,
#if HAS_ZP
                       __global const STYPE(TZ) * z, uint z_off,
#endif
                       __global STYPE(TY) * y, uint y_off) {
  const uint i = get_global_id(0);
  if (i >= NUM)
    return;
  const uint k = (i / INNER) % COUNT;
  const float sc = LOAD(TS, s, s_off + k);
#if HAS_ZP
  const int zp = (int)LOAD(TZ, z, z_off + k);
#else
  const int zp = 0;
#endif
#if MODE == 0
  const float v = nn_div_for_rint((float)LOAD(TX, x, x_off + i), sc);
  STORE(TY, y, y_off + i, nn_requantize(v, (float)zp, QMIN, QMAX));
#else
  STORE(TY, y, y_off + i, (float)((int)LOAD(TX, x, x_off + i) - zp) * sc);
#endif
}
#endif

#if defined(QV) || defined(ELT_QUANT)
// 16 lanes of nn_div_for_rint (quantize_vec, and an elementwise chain's fused quantizer).
static inline float16 nn_div_for_rint16(float16 x, float s) {
  const float16 sv = (float16)(s);
  float16 q = x / sv;
  // Only lanes near a tie need the steps (nn_div_for_rint); the others, zeros among them, keep
  // their quotient, and most vectors have no such lane at all.
  // (|q - rint(q)| is the distance to an integer, where |q - floor(q)| is to the integer below:
  // either is as far from 0.5 as q from a half-integer)
  const int16 near = !isgreater(fabs(fabs(q - nn_rint16(q)) - 0.5f),
                                8.0f * FLT_EPSILON * fmax(fabs(q), (float16)(1.0f)));
  if (!nn_any16(near))
    return q;
  for (int i = 0; i < 3; i++) {
    const float16 r = fabs(fma(-q, sv, x));
    // nextafter(q, +-INFINITY) from the bits: a positive float's successor is its bits + 1,
    // a negative one's its bits - 1, and from +-0 the smallest subnormals (bits 1 and
    // 0x80000001). Equal to nextafter except for NaN lanes, whose residual r is NaN, so that no
    // neighbour is taken either way.
    const int16 bits = as_int16(q), pos = q > 0.0f, neg = q < 0.0f;
    const float16 up = as_float16(select(select((int16)(1), bits - 1, neg), bits + 1, pos));
    const float16 dn =
        as_float16(select(select((int16)(-0x7fffffff), bits + 1, neg), bits - 1, pos));
    // lanes far from a tie compare q with itself and keep it (no subnormal neighbour of a zero)
    const float16 upn = select(q, up, near), dnn = select(q, dn, near);
    const int16 take_up = isless(fabs(fma(-upn, sv, x)), r);
    const int16 take_dn = isless(fabs(fma(-dnn, sv, x)), r) & ~take_up;
    q = select(select(q, upn, take_up), dnn, take_dn);
  }
  return q;
}
#endif

#if defined(MODE) && defined(QV)
// quantize_vec (CPU profile; float32 x, one scale and zero point): 16 elements per work-item
// as vector code. The same arithmetic as quantize: nn_div_for_rint on every lane (nn_div_rn's
// three correction steps on the lanes near a tie; a lane whose quotient is already nearest keeps
// it), then nn_requantize.
__kernel void quantize_vec(__global const float *x, uint x_off, __global const STYPE(TS) * s,
                           uint s_off,
#if HAS_ZP
                           __global const STYPE(TZ) * z, uint z_off,
#endif
                           __global STYPE(TY) * y, uint y_off) {
  const uint i0 = get_global_id(0) * 16;
  if (i0 >= NUM)
    return;
  const float sc = LOAD(TS, s, s_off);
#if HAS_ZP
  const float zp = (float)LOAD(TZ, z, z_off);
#else
  const float zp = 0.0f;
#endif
  if (i0 + 16 <= NUM) {
    const float16 v = nn_div_for_rint16(vload16(0, x + x_off + i0), sc);
    const float16 r = nn_requantize16(v, zp, QMIN, QMAX);
    vstore16(NN_CAT(convert_, NN_CAT(STYPE(TY), 16))(r), 0, y + y_off + i0);
  } else {
    for (uint i = i0; i < NUM; i++)
      STORE(TY, y, y_off + i, nn_requantize(nn_div_for_rint(x[x_off + i], sc), zp, QMIN, QMAX));
  }
}
#endif

#ifdef DQ_LOCAL
__kernel void dynamic_quantize(__global const STYPE(TX) * x, uint x_off, __global uchar *y,
                               uint y_off, __global float *ys, uint ys_off, __global uchar *yz,
                               uint yz_off) {
  __local float lo[DQ_LOCAL], hi[DQ_LOCAL];
  __local float scale_zp[2];
  const uint l = get_local_id(0);
  float mn = 0.0f, mx = 0.0f;
  for (uint i = l; i < NUM; i += DQ_LOCAL) {
    const float v = LOAD(TX, x, x_off + i);
    mn = fmin(mn, v);
    mx = fmax(mx, v);
  }
  lo[l] = mn;
  hi[l] = mx;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (l == 0) {
    for (uint j = 1; j < DQ_LOCAL; j++) {
      mn = fmin(mn, lo[j]);
      mx = fmax(mx, hi[j]);
    }
    const float sc = (mx - mn) / 255.0f;
    // An all-zero input has scale 0: zero point 0 and every value 0.
    const float zp = sc > 0.0f ? nn_requantize(nn_div_rn(0.0f - mn, sc), 0.0f, 0.0f, 255.0f) : 0.0f;
    scale_zp[0] = sc;
    scale_zp[1] = zp;
    ys[ys_off] = sc;
    yz[yz_off] = (uchar)zp;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const float sc = scale_zp[0], zp = scale_zp[1];
  for (uint i = l; i < NUM; i += DQ_LOCAL) {
    const float v = sc > 0.0f ? nn_div_for_rint(LOAD(TX, x, x_off + i), sc) : 0.0f;
    y[y_off + i] = (uchar)nn_requantize(v, zp, 0.0f, 255.0f);
  }
}
#endif
