// Shared helpers of the network kernels: storage tags and activations.
//
// Every tensor operand of a kernel has a storage tag, chosen by code generation from the
// tensor's dtype and the model's storage precision:
//   f32 float buffers            f16 half storage through vload_half/vstore_half (no extension)
//   h16 half buffers with cl_khr_fp16 (direct half loads, for fp16 compute)
//   i64 long   i32 int   u8 uchar   i8 char   b8 bool as uchar 0/1
// LOAD gives the value in its compute type (float for f32/f16/h16); STORE converts back.
//
// Helpers here and in the kernel sources are `static inline`: a plain `inline` function gets
// an external definition, so every program kept every helper (and the library functions they
// call) whether its kernel used them or not. Static, the unused ones are dropped at compile
// time, and a cached program's bitcode, which PoCL parses again at each load, is 30 %
// smaller.
#ifndef NN_COMMON_CL
#define NN_COMMON_CL

#ifdef NN_FP16_COMPUTE
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#endif

#define NN_CAT_(a, b) a##b
#define NN_CAT(a, b) NN_CAT_(a, b)

#define ST_f32 float
#define ST_f16 half
#define ST_h16 half
#define ST_i64 long
#define ST_i32 int
#define ST_u8 uchar
#define ST_i8 char
#define ST_b8 uchar

#define LD_f32(p, i) ((p)[i])
#define LD_f16(p, i) vload_half((i), (p))
#define LD_h16(p, i) convert_float((p)[i])
#define LD_i64(p, i) ((p)[i])
#define LD_i32(p, i) ((p)[i])
#define LD_u8(p, i) ((p)[i])
#define LD_i8(p, i) ((p)[i])
#define LD_b8(p, i) ((p)[i] != 0)

#define SV_f32(p, i, v) ((p)[i] = (float)(v))
#define SV_f16(p, i, v) vstore_half((float)(v), (i), (p))
#define SV_h16(p, i, v) ((p)[i] = convert_half((float)(v)))
#define SV_i64(p, i, v) ((p)[i] = (long)(v))
#define SV_i32(p, i, v) ((p)[i] = (int)(v))
#define SV_u8(p, i, v) ((p)[i] = (uchar)(v))
#define SV_i8(p, i, v) ((p)[i] = (char)(v))
#define SV_b8(p, i, v) ((p)[i] = (uchar)((v) != 0))

// Vector loads of n consecutive elements as floatn (n = 2, 4, 8, 16), for the float tags.
#define LDV_f32(n, p, i) NN_CAT(vload, n)(0, (p) + (i))
#define LDV_f16(n, p, i) NN_CAT(nn_vload_half, n)((p) + (i))
#define nn_vload_half2(p) vload_half2(0, p)
#define nn_vload_half4(p) vload_half4(0, p)
#define nn_vload_half8(p) vload_half8(0, p)
#if defined(__AVX512F__) && !defined(NN_FP16_COMPUTE)
// Sixteen halves in one vcvtph2ps to a 512-bit register. PoCL's vload_half16 converts two
// halves of eight and joins them: one more instruction per vector, on the port that the
// products' FMAs share (the float16 weights of matmul_vec's panels go through here).
static inline float16 nn_vload_half16(__global const half *p) {
  // Typedefs in here: a program compiling several kernel sources together holds this file
  // once per source, and a repeated file-scope typedef is a warning before C11.
  typedef short nn_v16hi __attribute__((__vector_size__(32), __aligned__(2)));
  typedef float nn_v16sf __attribute__((__vector_size__(64)));
  const nn_v16hi h = *(__global const nn_v16hi *)p;
  return __builtin_astype(
      __builtin_ia32_vcvtph2ps512_mask(h, (nn_v16sf){}, (ushort)0xffff, 4 /* current rounding */),
      float16);
}
#else
#define nn_vload_half16(p) vload_half16(0, p)
#endif
#define LDV_h16(n, p, i) NN_CAT(convert_float, n)(NN_CAT(vload, n)(0, (p) + (i)))

// Vector stores of a floatn to n consecutive elements, for the float tags without cl_khr_fp16.
#define SVV_f32(n, p, i, v) NN_CAT(vstore, n)((v), 0, (p) + (i))
#define SVV_f16(n, p, i, v) NN_CAT(vstore_half, n)((v), 0, (p) + (i))

// The C type of a buffer of tag t, and element access.
#define STYPE(t) NN_CAT(ST_, t)
#define LOAD(t, p, i) NN_CAT(LD_, t)(p, i)
#define STORE(t, p, i, v) NN_CAT(SV_, t)(p, i, v)
#define LOADV(t, n, p, i) NN_CAT(LDV_, t)(n, p, i)
#define STOREV(t, n, p, i, v) NN_CAT(SVV_, t)(n, p, i, v)

// Activations of fused epilogues: ACT is defined by code generation as one of these (with its
// alpha/beta as literals), or as nn_identity.
static inline float nn_identity(float x) {
  return x;
}
static inline float nn_relu(float x) {
  return fmax(x, 0.0f);
}
static inline float nn_leaky_relu(float x, float a) {
  return x >= 0.0f ? x : a * x;
}
static inline float nn_elu(float x, float a) {
  return x >= 0.0f ? x : a * (exp(x) - 1.0f);
}
static inline float nn_sigmoid(float x) {
  return 1.0f / (1.0f + exp(-x));
}
static inline float nn_hard_sigmoid(float x, float a, float b) {
  return clamp(a * x + b, 0.0f, 1.0f);
}
static inline float nn_hard_swish(float x) {
  return x * clamp(x / 6.0f + 0.5f, 0.0f, 1.0f);
}
static inline float nn_clip(float x, float lo, float hi) {
  return fmin(fmax(x, lo), hi);
}
static inline float nn_softplus(float x) {
  return x > 20.0f ? x : log1p(exp(x));
}

// e^y for y <= 0 (NaN stays NaN, r being NaN whatever k converts to; below -87 it is e^-87,
// about 1.6e-38), within 1.06 ulps on every device (a float32 simulation on three million points
// of [-24, -1.1]): OpenCL lets a driver's exp be 3 ulps off. y = k ln2 + r with |r| <= ln2/2 (ln2
// in two parts: k * hi is exact for |k| < 512), e^r = 1 + (r + r^2 P(r)) with P the Taylor series
// of (e^r - 1 - r) / r^2 to r^5 (truncation below 0.1 ulp), scaled by 2^k built in the exponent
// bits (exact: k >= -126).
#define NN_DEFINE_EXP_NONPOSITIVE(T, IT)                                  \
  static inline T __attribute__((overloadable)) nn_exp_nonpositive(T y) { \
    y = y < -87.0f ? (T)(-87.0f) : y;                                     \
    const T k = rint(y * 1.4426950408889634f);                            \
    T r = fma(k, (T)(-0.693145751953125f), y);                            \
    r = fma(k, (T)(-1.4286068203094173e-6f), r);                          \
    T p = fma(r, (T)(1.0f / 5040.0f), (T)(1.0f / 720.0f));                \
    p = fma(r, p, (T)(1.0f / 120.0f));                                    \
    p = fma(r, p, (T)(1.0f / 24.0f));                                     \
    p = fma(r, p, (T)(1.0f / 6.0f));                                      \
    p = fma(r, p, (T)(0.5f));                                             \
    const T q = fma(r * r, p, r);                                         \
    return (1.0f + q) * as_##T((convert_##IT(k) + 127) << 23);            \
  }
NN_DEFINE_EXP_NONPOSITIVE(float, int)
NN_DEFINE_EXP_NONPOSITIVE(float2, int2)
NN_DEFINE_EXP_NONPOSITIVE(float4, int4)
NN_DEFINE_EXP_NONPOSITIVE(float8, int8)
NN_DEFINE_EXP_NONPOSITIVE(float16, int16)

// tanh for scalars and float vectors. Below 0.55, tanh(a) = a + a^3 P(a^2) with P a degree-4
// least-squares fit of (tanh(a) - a) / a^3 under relative weights (0.74 ulps at worst). Above,
// (1 - e) / (1 + e) with e = e^-2a, two forms (NN_TANH_BIG):
// - on the CPU profile, the compiler's exp and one division: within 1.5 ulps with PoCL's exp
//   (1.49 at worst on the test's 277,000 points of [-12, 12]); the exact form below cost a
//   393K-output GELU stem 0.05 ms of 0.77, the full-size vision network about 1 ms per run;
// - elsewhere, within one ulp on any device (0.84 at worst on PoCL, same points; a float32
//   simulation on three million points puts it at 0.86): our exponential (a driver's may be 3
//   ulps off; NVIDIA's 2 made the first form 1.68 ulps off), 1 - e and 1 + e as rounded sums plus
//   their exact errors, and the quotient corrected by its exact residual (fma), so that neither the
//   sums' roundings nor a driver's inexact division reach the result; the residual is divided by d
//   as a product with (1 + q) / 2, which is 1 / d since n + d = 2.
// PoCL's builtin tanh is slow on AVX2: the full-size vision network's GELUs took 61.5 ms per run
// with it, 53.8 ms with the first form (an AVX2 EPYC). NaN stays NaN, +-inf gives +-1, -0 stays
// -0.
#ifdef NN_CPU_PROFILE
#define NN_TANH_BIG(T, a)     \
  const T e = exp(-2.0f * a); \
  const T big = (1.0f - e) / (1.0f + e);
#else
#define NN_TANH_BIG(T, a)                                               \
  const T e = nn_exp_nonpositive(-2.0f * a);                            \
  const T n = 1.0f - e, n_err = (1.0f - n) - e; /* 1 - e = n + n_err */ \
  const T d = 1.0f + e, d_err = e - (d - 1.0f); /* 1 + e = d + d_err */ \
  const T q = n / d;                                                    \
  const T residual = fma(-q, d_err, fma(-q, d, n) + n_err);             \
  const T big = fma(residual, fma(q, 0.5f, 0.5f), q); /* 1/d = (1+q)/2 */
#endif
#define NN_DEFINE_TANH(T)                                                   \
  static inline T __attribute__((overloadable)) nn_tanh(T x) {              \
    const T a = fabs(x);                                                    \
    NN_TANH_BIG(T, a)                                                       \
    const T a2 = a * a;                                                     \
    T p = fma(a2, (T)(-0.006264368072152138f), (T)(0.021064136177301407f)); \
    p = fma(a2, p, (T)(-0.05385029688477516f));                             \
    p = fma(a2, p, (T)(0.13332565128803253f));                              \
    p = fma(a2, p, (T)(-0.33333316445350647f));                             \
    const T small = fma(a * a2, p, a);                                      \
    return copysign(a < 0.55f ? small : big, x);                            \
  }
// 1 + tanh(x) as 2 / (1 + e^-2x), for code generation's chains (GELU's tanh form): NaN stays NaN,
// +inf gives 2, -inf 0. By its error analysis (not measured), with the compiler's exp k ulps off
// it is within about k + 1 ulps everywhere: the exponential's error passes scaled by
// e / (1 + e) <= 1, plus the sum's and the quotient's roundings; tanh plus one loses every digit
// as tanh nears -1.
#define NN_DEFINE_ONE_PLUS_TANH(T)                                      \
  static inline T __attribute__((overloadable)) nn_one_plus_tanh(T x) { \
    return 2.0f / (1.0f + exp(-2.0f * x));                              \
  }
NN_DEFINE_ONE_PLUS_TANH(float)
NN_DEFINE_ONE_PLUS_TANH(float2)
NN_DEFINE_ONE_PLUS_TANH(float4)
NN_DEFINE_ONE_PLUS_TANH(float8)
NN_DEFINE_ONE_PLUS_TANH(float16)

NN_DEFINE_TANH(float)
NN_DEFINE_TANH(float2)
NN_DEFINE_TANH(float4)
NN_DEFINE_TANH(float8)
NN_DEFINE_TANH(float16)

// Integer division and modulo that never trap (a zero divisor gives 0, as a GPU would rather
// than a CPU's SIGFPE): ONNX leaves it undefined, we keep it harmless.
static inline long nn_idiv(long a, long b) {
  return b == 0 ? 0 : a / b;
}
// Mod with fmod = 0: the result takes the divisor's sign (Python's %).
static inline long nn_imod(long a, long b) {
  if (b == 0)
    return 0;
  long r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline float nn_fmod_floor(float a, float b) {
  float r = fmod(a, b);
  return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}
// Round half to even (ONNX Round); rint does this in the default rounding mode.
static inline float nn_round(float x) {
  return rint(x);
}
static inline float nn_sign(float x) {
  return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
}
static inline long nn_isign(long x) {
  return x > 0 ? 1 : (x < 0 ? -1 : 0);
}

// x rounded to the nearest float16 (ties to even), as a float: a Cast to float16 whose result
// is held in float32 storage. Bit arithmetic, as half variables need cl_khr_fp16: subnormal
// halves are multiples of 2^-24, normal ones keep 10 of float's 23 mantissa bits, and from
// 65520 up the nearest half is infinity.
static inline float nn_round_half(float x) {
  const float a = fabs(x);
  if (isnan(x))
    return x;
  if (a >= 65520.0f)
    return copysign(INFINITY, x);
  if (a < 6.103515625e-05f)
    return rint(x * 16777216.0f) * 5.9604644775390625e-08f;
  const uint u = as_uint(x);
  return as_float((u + 0x0FFFu + ((u >> 13) & 1u)) & ~0x1FFFu);
}

// nn_round_half on 16 lanes, the same values (NaN as given): the CPU profile's Cast to float16
// at float32 storage takes 16 elements per work-item (PoCL left the scalar one unvectorised).
// On x86 the processor's own conversions there and back (F16C's vcvtps2ph, rounding to nearest
// even, and vcvtph2ps: two instructions for 16 lanes against about fifteen for the bit
// arithmetic below; the small policy's Cast of 13,000 values before a Concat took 6-8 us).
#if defined(__AVX512F__)
static inline float16 nn_round_half16(float16 x) {
  typedef float nn_v16sf __attribute__((__vector_size__(64)));
  typedef short nn_v16hi __attribute__((__vector_size__(32)));
  const nn_v16hi h = __builtin_ia32_vcvtps2ph512_mask(
      __builtin_astype(x, nn_v16sf), 0 /* nearest even */, (nn_v16hi){}, (ushort)0xffff);
  const float16 r = __builtin_astype(
      __builtin_ia32_vcvtph2ps512_mask(h, (nn_v16sf){}, (ushort)0xffff, 4 /* current rounding */),
      float16);
  return select(r, x, isnan(x));
}
#elif defined(__F16C__)
static inline float16 nn_round_half16(float16 x) {
  typedef float nn_v8sf __attribute__((__vector_size__(32)));
  const float8 lo = __builtin_astype(
      __builtin_ia32_vcvtph2ps256(__builtin_ia32_vcvtps2ph256(__builtin_astype(x.lo, nn_v8sf), 0)),
      float8);
  const float8 hi = __builtin_astype(
      __builtin_ia32_vcvtph2ps256(__builtin_ia32_vcvtps2ph256(__builtin_astype(x.hi, nn_v8sf), 0)),
      float8);
  return select((float16)(lo, hi), x, isnan(x));
}
#else
static inline float16 nn_round_half16(float16 x) {
  const float16 a = fabs(x);
  const uint16 u = as_uint16(x);
  const float16 normal =
      as_float16((u + (uint16)(0x0FFFu) + ((u >> 13) & (uint16)(1u))) & (uint16)(~0x1FFFu));
  const float16 sub = rint(x * 16777216.0f) * 5.9604644775390625e-08f;
  float16 r = select(normal, sub, isless(a, (float16)(6.103515625e-05f)));
  r = select(r, copysign((float16)(INFINITY), x), isgreaterequal(a, (float16)(65520.0f)));
  return select(r, x, isnan(x));
}
#endif

// The mean of `count` values `stride` apart from p (16 lanes, or one), summed from 0 in order and
// divided by `divisor` (the count), as reduce.cl computes a ReduceMean: the CPU profile's
// Concat computes a ReduceMean it alone reads this way (codegen.cpp, FoldIntoConcats).
static inline float16 nn_mean16(__global const float *p, const uint stride, const uint count,
                                const float divisor) {
  float16 acc = (float16)(0.0f);
  for (uint t = 0; t < count; t++)
    acc = acc + vload16(0, p + t * stride);
  return acc / divisor;
}
static inline float nn_mean1(__global const float *p, const uint stride, const uint count,
                             const float divisor) {
  float acc = 0.0f;
  for (uint t = 0; t < count; t++)
    acc = acc + p[t * stride];
  return acc / divisor;
}

// n / d for n < 2^31, with d's magic number and shift from code generation (SpaceDivisor in
// codegen_eltwise.cpp): the index maps whose iteration space is an argument.
static inline uint nn_udiv_magic(uint n, int magic, int shift) {
  return (uint)(((ulong)n * (ulong)(uint)magic) >> shift);
}

// An element-wise chain fused into a convolution's or product's epilogue: code generation
// defines its statements on v (which starts as the pre-activation value x0) as NN_ACT_CHAIN.
#ifdef NN_ACT_CHAIN
static inline float nn_act_chain(float x0) NN_ACT_CHAIN
#endif

#ifndef ACT
#define ACT(x) nn_identity(x)
#endif

// The fused epilogue of conv2d, conv2d_vec, matmul and matmul_vec: v (the accumulated value with
// its bias or C added) gets the residual at r[ri] before the activation ACT, or after it when
// RES_AFTER, and goes to y[yi]. Those kernels name the residual r/r_off (storage TR) and the
// output y/y_off (storage TY). HAS_RES = 0 reads no residual.
// With EPI_SWITCH (code generation's MergeEpilogues: kernels that differ only in their epilogue
// share one program) the kernel's arguments epi_res and epi_act say at run time whether it adds
// its residual (with HAS_RES; r is then any buffer where it does not, never read) and whether
// ACT, defined by code generation as (epi_act ? <activation> : (x)), applies the activation.
#if EPI_SWITCH && HAS_RES && RES_AFTER
#define NN_EPILOGUE(v, ri) (epi_res ? ACT(v) + LOAD(TR, r, r_off + (ri)) : ACT(v))
#elif EPI_SWITCH && HAS_RES
#define NN_EPILOGUE(v, ri) ACT(epi_res ? (v) + LOAD(TR, r, r_off + (ri)) : (v))
#elif HAS_RES && RES_AFTER
#define NN_EPILOGUE(v, ri) (ACT(v) + LOAD(TR, r, r_off + (ri)))
#elif HAS_RES
#define NN_EPILOGUE(v, ri) ACT((v) + LOAD(TR, r, r_off + (ri)))
#else
#define NN_EPILOGUE(v, ri) ACT(v)
#endif
#define NN_STORE_EPILOGUE(v, ri, yi) STORE(TY, y, y_off + (yi), NN_EPILOGUE(v, ri))
// The switches' arguments, last in the kernel's parameter list.
#if EPI_SWITCH
#define NN_EPI_SWITCH_PARAMS , const int epi_act, const int epi_res
#else
#define NN_EPI_SWITCH_PARAMS
#endif

// The same epilogue on a whole vector VF of n consecutive outputs (and residuals), where code
// generation defined ACTV (DefineVectorActivation): built-ins like tanh then run as vector code
// instead of once per lane. The kernel defines VF and includes this after nn_common.cl.
#ifdef NN_ACT_CHAIN_V
#define NN_DEFINE_ACT_CHAIN_V static inline VF nn_act_chain_v(VF x0) NN_ACT_CHAIN_V
#else
#define NN_DEFINE_ACT_CHAIN_V
#endif
#if EPI_SWITCH && HAS_RES && RES_AFTER
#define NN_EPILOGUE_V(n, v, ri) (epi_res ? ACTV(v) + LOADV(TR, n, r, r_off + (ri)) : ACTV(v))
#elif EPI_SWITCH && HAS_RES
#define NN_EPILOGUE_V(n, v, ri) ACTV(epi_res ? (v) + LOADV(TR, n, r, r_off + (ri)) : (v))
#elif HAS_RES && RES_AFTER
#define NN_EPILOGUE_V(n, v, ri) (ACTV(v) + LOADV(TR, n, r, r_off + (ri)))
#elif HAS_RES
#define NN_EPILOGUE_V(n, v, ri) ACTV((v) + LOADV(TR, n, r, r_off + (ri)))
#else
#define NN_EPILOGUE_V(n, v, ri) ACTV(v)
#endif
#define NN_STORE_EPILOGUE_V(n, v, ri, yi) STOREV(TY, n, y, y_off + (yi), NN_EPILOGUE_V(n, v, ri))

#endif  // NN_COMMON_CL
