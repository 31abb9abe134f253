/* The synthetic drive's per-pixel work in C: the ground (road, markings, textures, shadows,
 * haze) and the image's last steps (vignette, glare, lighting, sensor noise, NV12). Loaded by
 * raster.py with ctypes; raster.py's numpy code is the reference this must reproduce.
 *
 * Same images: every step is the numpy path's float32 operation, in the same order (a + b + c is
 * (a + b) + c), with the same float32 constants (passed in from Python, rounded there exactly as
 * numpy rounds them). Only +, -, *, /, floor, min/max and round-to-nearest-even are used, which
 * IEEE 754 rounds exactly, and the build forbids fused multiply-adds (-ffp-contract=off), so the
 * result does not depend on the vector width the compiler picks. Pixels are independent, so the
 * loops are split between threads (OpenMP) without changing any value.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SD_MAX_LINES 8
#define SD_MAX_TRACKS 16
#define SD_LAYERS 3

/* Everything the ground needs for one camera and one frame; laid out like raster.py's
 * _GroundArgs (ctypes.Structure), field for field. */
typedef struct {
  /* The camera's ground pixels: flat indices into the image and per-pixel constants. */
  int64_t n;
  const int64_t *idx;
  const float *gx, *gy, *foot_l, *foot_s, *haze;
  /* The centre line near the car (ego frame), on a uniform grid in arc length. */
  int64_t n_tab;
  const float *tcx, *tcy, *tcos, *tsin;
  float s_base, inv_step, pos_max, pose_s;
  /* Texture layers: n×n tiles (n a power of two), 1/texel size, contrast. */
  const float *tex[SD_LAYERS];
  int64_t tex_n;
  float inv_texel[SD_LAYERS], contrast[SD_LAYERS];
  /* Road surface: on_road = cover(lat - edge_mid, edge_half). */
  float edge_mid, edge_half;
  float verge[3], asphalt_minus_verge[3];
  int32_t n_tracks;
  float track_off[SD_MAX_TRACKS];
  float track_half, track_dark;
  /* Shadows across the road (has_shadows): periodic along the road, a band across it. */
  int32_t has_shadows;
  float sh_period, sh_length, sh_ratio, sh_dark, sh_centre, sh_half;
  /* Worn paint (has_wear): clip(wear_base + (shade - 1) * wear_k, 0, 1). */
  int32_t has_wear;
  float wear_base, wear_k;
  /* Lane lines. */
  int32_t n_lines;
  float line_off[SD_MAX_LINES];
  int32_t line_double[SD_MAX_LINES], line_dashed[SD_MAX_LINES];
  float paint[SD_MAX_LINES][3];
  float line_half, line_gap;
  float dash_period, dash_length, dash_ratio;
  /* The lead car's shadow (has_lead). */
  int32_t has_lead;
  float lead_s, lead_mid, lead_half, lead_centre, lead_across;
  float sky_horizon[3];
  /* Output: three full float32 planes, written at idx. */
  float *img[3];
  int32_t threads;
} sd_ground_args;

static inline float minf(float a, float b) {
  return b < a ? b : a;
}
static inline float maxf(float a, float b) {
  return b > a ? b : a;
}

/* raster._cover: fraction of [d - foot/2, d + foot/2] inside [-half, half]. */
static inline float cover(float d, float half, float foot) {
  float lo = maxf(d - foot * 0.5f, -half);
  float hi = minf(d + foot * 0.5f, half);
  return minf(maxf((hi - lo) / foot, 0.0f), 1.0f);
}

/* raster._periodic_cover: fraction of the footprint on [0, dash) of every period. */
static inline float periodic_cover(float s, float foot, float period, float dash, float ratio) {
  float m = s - floorf(s / period) * period;
  float half = foot * 0.5f;
  float cov = 0.0f;
  for (int k = -1; k <= 1; k++) {
    float a = (float)k * period;
    float lo = maxf(m - half, a);
    float hi = minf(m + half, a + dash);
    cov = cov + maxf(hi - lo, 0.0f);
  }
  cov = cov / foot;
  return foot > period ? ratio : minf(cov, 1.0f);
}

/* The ground is drawn in blocks of BLOCK pixels, one simple loop per step over the block (like
 * the numpy code's whole-array steps, but in cache): loops the compiler turns into vector code,
 * gathers included. */
#define BLOCK 256

/* Centre-line look-up at srel (raster.Renderer._ground's lookup()). Indices fit in int32: the
 * table holds a few thousand samples. */
static inline void lookup_block(const sd_ground_args *a, int m, const float *srel, float *px,
                                float *py, float *tx, float *ty) {
  const float *restrict t0 = a->tcx, *restrict t1 = a->tcy, *restrict t2 = a->tcos,
                        *restrict t3 = a->tsin;
  const float s_base = a->s_base, inv_step = a->inv_step, pos_max = a->pos_max;
  for (int j = 0; j < m; j++) {
    float pos = (srel[j] - s_base) * inv_step;
    pos = minf(maxf(pos, 0.0f), pos_max);
    int32_t i = (int32_t)pos;
    float fr = pos - (float)i;
    float l0 = t0[i], l1 = t1[i], l2 = t2[i], l3 = t3[i];
    px[j] = l0 + (t0[i + 1] - l0) * fr;
    py[j] = l1 + (t1[i + 1] - l1) * fr;
    tx[j] = l2 + (t2[i + 1] - l2) * fr;
    ty[j] = l3 + (t3[i + 1] - l3) * fr;
  }
}

/* One texture layer added to shade (raster.Textures.sample). The texture coordinates fit in
 * int32 for roads shorter than 100,000 km; masking wraps like numpy's int64 masking. */
static inline void texture_block(const float *restrict tex, int32_t n, float inv_texel,
                                 float contrast, int m, const float *s, const float *l,
                                 const float *foot, float *shade) {
  const int32_t mask = n - 1, mask2 = mask * n + mask;
  for (int j = 0; j < m; j++) {
    float u = s[j] * inv_texel;
    float v = l[j] * inv_texel;
    float u0 = floorf(u), v0 = floorf(v);
    float fu = u - u0, fv = v - v0;
    int32_t iu = ((int32_t)u0 & mask) * n;
    int32_t iv = (int32_t)v0 & mask;
    int32_t iu1 = (iu + n) & mask2;
    int32_t iv1 = (iv + 1) & mask;
    float t00 = tex[iu + iv], t10 = tex[iu1 + iv], t01 = tex[iu + iv1], t11 = tex[iu1 + iv1];
    float ra = t00 + (t10 - t00) * fu;
    float rb = t01 + (t11 - t01) * fu;
    float val = ra + (rb - ra) * fv;
    float q = foot[j] * inv_texel;
    float fade = 1.0f / (1.0f + q * q);
    shade[j] = shade[j] + val * fade * contrast;
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* The vector width is chosen when the library loads; the values do not depend on it. */
#define SD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SD_CLONES
#endif

SD_CLONES static void ground_block(const sd_ground_args *a, int64_t p0, int m) {
  const float *X = a->gx + p0, *Y = a->gy + p0, *fl = a->foot_l + p0, *fs = a->foot_s + p0;
  float srel[BLOCK], px[BLOCK], py[BLOCK], tx[BLOCK], ty[BLOCK], lat[BLOCK], sabs[BLOCK];
  float on_road[BLOCK], shade[BLOCK], tracks[BLOCK], wear[BLOCK], dash[BLOCK], cov[BLOCK];
  float r[BLOCK], g[BLOCK], b[BLOCK];
  /* Newton's iteration for the foot point on the centre line: s <- s + (P - c(s)).t(s). */
  for (int j = 0; j < m; j++)
    srel[j] = X[j];
  for (int it = 0; it < 2; it++) {
    lookup_block(a, m, srel, px, py, tx, ty);
    for (int j = 0; j < m; j++)
      srel[j] = srel[j] + (X[j] - px[j]) * tx[j] + (Y[j] - py[j]) * ty[j];
  }
  lookup_block(a, m, srel, px, py, tx, ty);
  const float pose_s = a->pose_s;
  for (int j = 0; j < m; j++) {
    lat[j] = (Y[j] - py[j]) * tx[j] - (X[j] - px[j]) * ty[j];
    sabs[j] = srel[j] + pose_s;
  }
  {
    const float mid = a->edge_mid, half = a->edge_half;
    for (int j = 0; j < m; j++) {
      on_road[j] = cover(lat[j] - mid, half, fl[j]);
      shade[j] = 1.0f;
      tracks[j] = 0.0f;
    }
  }
  for (int k = 0; k < SD_LAYERS; k++)
    texture_block(a->tex[k], (int32_t)a->tex_n, a->inv_texel[k], a->contrast[k], m, sabs, lat, fl,
                  shade);
  for (int k = 0; k < a->n_tracks; k++) {
    const float off = a->track_off[k], half = a->track_half;
    for (int j = 0; j < m; j++)
      tracks[j] = tracks[j] + cover(lat[j] - off, half, fl[j]);
  }
  {
    const float td = a->track_dark;
    const float v0 = a->verge[0], v1 = a->verge[1], v2 = a->verge[2];
    const float d0 = a->asphalt_minus_verge[0], d1 = a->asphalt_minus_verge[1],
                d2 = a->asphalt_minus_verge[2];
    for (int j = 0; j < m; j++) {
      float dark = 1.0f - td * tracks[j] * on_road[j];
      r[j] = (v0 + d0 * on_road[j]) * shade[j] * dark;
      g[j] = (v1 + d1 * on_road[j]) * shade[j] * dark;
      b[j] = (v2 + d2 * on_road[j]) * shade[j] * dark;
    }
  }
  if (a->has_shadows) {
    const float period = a->sh_period, length = a->sh_length, ratio = a->sh_ratio;
    const float dark = a->sh_dark, centre = a->sh_centre, half = a->sh_half;
    for (int j = 0; j < m; j++) {
      float band = periodic_cover(sabs[j], fs[j], period, length, ratio) *
                   cover(lat[j] - centre, half, fl[j]);
      float f = 1.0f - dark * band;
      r[j] = r[j] * f;
      g[j] = g[j] * f;
      b[j] = b[j] * f;
    }
  }
  if (a->has_wear) {
    const float base = a->wear_base, wk = a->wear_k;
    for (int j = 0; j < m; j++)
      wear[j] = minf(maxf(base + (shade[j] - 1.0f) * wk, 0.0f), 1.0f);
  }
  int any_dashed = 0;
  for (int k = 0; k < a->n_lines; k++)
    any_dashed |= a->line_dashed[k];
  if (any_dashed) {
    const float period = a->dash_period, length = a->dash_length, ratio = a->dash_ratio;
    for (int j = 0; j < m; j++)
      dash[j] = periodic_cover(sabs[j], fs[j], period, length, ratio);
  }
  for (int k = 0; k < a->n_lines; k++) {
    const float off = a->line_off[k], half = a->line_half, gap = a->line_gap;
    if (a->line_double[k]) {
      for (int j = 0; j < m; j++)
        cov[j] = minf(
            cover(lat[j] - off - gap, half, fl[j]) + cover(lat[j] - off + gap, half, fl[j]), 1.0f);
    } else {
      for (int j = 0; j < m; j++)
        cov[j] = cover(lat[j] - off, half, fl[j]);
    }
    if (a->line_dashed[k])
      for (int j = 0; j < m; j++)
        cov[j] = cov[j] * dash[j];
    if (a->has_wear)
      for (int j = 0; j < m; j++)
        cov[j] = cov[j] * wear[j];
    const float p0c = a->paint[k][0], p1c = a->paint[k][1], p2c = a->paint[k][2];
    for (int j = 0; j < m; j++) {
      r[j] = r[j] + (p0c * shade[j] - r[j]) * cov[j];
      g[j] = g[j] + (p1c * shade[j] - g[j]) * cov[j];
      b[j] = b[j] + (p2c * shade[j] - b[j]) * cov[j];
    }
  }
  if (a->has_lead) {
    const float ls = a->lead_s, mid = a->lead_mid, half = a->lead_half;
    const float centre = a->lead_centre, across_half = a->lead_across;
    for (int j = 0; j < m; j++) {
      float along = cover(srel[j] - ls - mid, half, fs[j]);
      float across = cover(lat[j] - centre, across_half, fl[j]);
      float sh = 1.0f - 0.55f * along * across;
      r[j] = r[j] * sh;
      g[j] = g[j] * sh;
      b[j] = b[j] * sh;
    }
  }
  const float h0 = a->sky_horizon[0], h1 = a->sky_horizon[1], h2 = a->sky_horizon[2];
  const float *haze = a->haze + p0;
  const int64_t *idx = a->idx + p0;
  float *restrict o0 = a->img[0], *restrict o1 = a->img[1], *restrict o2 = a->img[2];
  for (int j = 0; j < m; j++) {
    int64_t q = idx[j];
    o0[q] = r[j] + (h0 - r[j]) * haze[j];
    o1[q] = g[j] + (h1 - g[j]) * haze[j];
    o2[q] = b[j] + (h2 - b[j]) * haze[j];
  }
}

void sd_ground(const sd_ground_args *a) {
  int64_t blocks = (a->n + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) num_threads(a->threads)
  for (int64_t k = 0; k < blocks; k++) {
    int64_t p0 = k * BLOCK;
    int m = (int)(a->n - p0 < BLOCK ? a->n - p0 : BLOCK);
    ground_block(a, p0, m);
  }
}

/* The image's last steps, laid out like raster.py's _FinishArgs. */
typedef struct {
  int64_t width, height;
  float *img[3]; /* full planes, read only here */
  const float *vignette;
  const float *glare; /* NULL: no glare */
  float glare_w[3];
  int32_t has_gain;
  float gain[3];
  float noise;              /* sigma; 0: no noise */
  const float *noise_table; /* standard normal values, at least max(row_start) + width */
  const int64_t *row_start; /* 3 × height: where each plane's row takes its noise */
  uint8_t *out;             /* NV12, width × height × 3/2 */
  int32_t threads;
} sd_finish_args;

static inline uint8_t q8(float x) {
  float r = rintf(x);
  return (uint8_t)minf(maxf(r, 0.0f), 255.0f);
}

/* One row's colour after vignette, glare and the look, columns [c0, c0 + m). */
static inline void look_row(const sd_finish_args *a, int k, int64_t row, int64_t c0, int m,
                            float *x) {
  const int64_t i0 = row * a->width + c0;
  const float *img = a->img[k] + i0, *vig = a->vignette + i0;
  for (int j = 0; j < m; j++)
    x[j] = img[j] * vig[j];
  if (a->glare) {
    const float *gl = a->glare + i0, w = a->glare_w[k];
    for (int j = 0; j < m; j++)
      x[j] = x[j] + gl[j] * w;
  }
  if (a->has_gain) {
    const float gain = a->gain[k];
    for (int j = 0; j < m; j++)
      x[j] = x[j] * gain;
    if (a->noise > 0.0f) {
      const float sigma = a->noise;
      const float *n = a->noise_table + a->row_start[k * a->height + row] + c0;
      for (int j = 0; j < m; j++)
        x[j] = x[j] + sigma * n[j];
    }
  }
}

/* Rows 2r and 2r + 1 of the frame, columns [c0, c0 + m) (m even): Y of both rows, and the
 * interleaved U, V of the 2×2 blocks (raster.to_nv12). */
SD_CLONES static void finish_block(const sd_finish_args *a, int64_t r, int64_t c0, int m) {
  float c[3][BLOCK], y[BLOCK], u[2][BLOCK], v[2][BLOCK];
  const int64_t w = a->width;
  for (int h = 0; h < 2; h++) {
    const int64_t row = 2 * r + h;
    for (int k = 0; k < 3; k++)
      look_row(a, k, row, c0, m, c[k]);
    for (int j = 0; j < m; j++) {
      y[j] = 16.0f + 219.0f * (0.299f * c[0][j] + 0.587f * c[1][j] + 0.114f * c[2][j]);
      u[h][j] = 128.0f + 224.0f * (-0.168736f * c[0][j] + -0.331264f * c[1][j] + 0.5f * c[2][j]);
      v[h][j] = 128.0f + 224.0f * (0.5f * c[0][j] + -0.418688f * c[1][j] + -0.081312f * c[2][j]);
    }
    uint8_t *yo = a->out + row * w + c0;
    for (int j = 0; j < m; j++)
      yo[j] = q8(y[j]);
  }
  /* numpy's down(): x[0::2, 0::2] + x[1::2, 0::2] + x[0::2, 1::2] + x[1::2, 1::2]. */
  uint8_t *uvo = a->out + w * a->height + r * w + c0;
  for (int j = 0; j < m / 2; j++) {
    uvo[2 * j] = q8((u[0][2 * j] + u[1][2 * j] + u[0][2 * j + 1] + u[1][2 * j + 1]) * 0.25f);
    uvo[2 * j + 1] = q8((v[0][2 * j] + v[1][2 * j] + v[0][2 * j + 1] + v[1][2 * j + 1]) * 0.25f);
  }
}

void sd_finish(const sd_finish_args *a) {
  const int64_t w = a->width, h2 = a->height / 2;
#pragma omp parallel for schedule(static) num_threads(a->threads)
  for (int64_t r = 0; r < h2; r++)
    for (int64_t c0 = 0; c0 < w; c0 += BLOCK)
      finish_block(a, r, c0, (int)(w - c0 < BLOCK ? w - c0 : BLOCK));
}

/* Fills the three planes with the sky before the ground is drawn over them. */
void sd_fill(float *const img[3], const float *const sky[3], int64_t n, int32_t threads) {
  (void)threads; /* used by OpenMP only */
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int k = 0; k < 3; k++)
    memcpy(img[k], sky[k], (size_t)n * sizeof(float));
}

/* The ABI version raster.py checks before using this library. */
int sd_version(void) {
  return 1;
}
