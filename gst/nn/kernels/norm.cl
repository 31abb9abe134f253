// Normalisation over rows: LayerNormalization (rows = the leading dims, the row = the trailing
// dims from `axis`) and InstanceNormalization (rows = (n, c), the row = the spatial dims).
//   y = (x - mean) / sqrt(var + EPS) * scale + bias
// One work-item per row, or with NSPLIT (GPU profiles) one work-group of NSPLIT per row, each
// work-item taking every NSPLIT-th element and the group adding its partial sums in local
// memory. Two passes (mean, then variance of the centred values: no catastrophic cancellation).
// Defines: TX TS TB TY (tags); ROW_LEN EPS (the row count is the last argument, `rows`, so that
// norms of one row length share a program); generated SC_IDX(row, j) and B_IDX(row, j) (the
// index of the scale and of the bias for element j of the row); HAS_BIAS; NSPLIT (optional).
#include "nn_common.cl"

#if NSPLIT > 1
// The sum of the group's `v`s, in every work-item (all of the group must call it).
static float nn_group_sum(__local float *red, uint lid, float v) {
  red[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = NSPLIT / 2; s > 0; s >>= 1) {
    if (lid < s)
      red[lid] += red[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}
#define J0 get_local_id(0)
#define J_STEP NSPLIT
#else
#define J0 0
#define J_STEP 1
#endif

__kernel void norm(__global const STYPE(TX) * x, uint x_off, __global const STYPE(TS) * s,
                   uint s_off,
#if HAS_BIAS
                   __global const STYPE(TB) * b, uint b_off,
#endif
                   __global STYPE(TY) * y, uint y_off
#if HAS_MEAN
                   ,
                   __global STYPE(TM) * mo, uint mo_off
#endif
#if HAS_INVSTD
                   ,
                   __global STYPE(TI) * io, uint io_off
#endif
                   ,
                   const int rows) {
#if NSPLIT > 1
  // The grid is exactly `rows` groups: no work-item leaves before the barriers.
  const uint row = get_group_id(0);
  __local float red[NSPLIT];
#else
  const uint row = get_global_id(0);
  if (row >= (uint)rows)
    return;
#endif
  const uint base = row * ROW_LEN;
  float mean = 0.0f;
  for (uint j = J0; j < ROW_LEN; j += J_STEP)
    mean += LOAD(TX, x, x_off + base + j);
#if NSPLIT > 1
  mean = nn_group_sum(red, J0, mean);
#endif
  mean /= ROW_LEN;
  float var = 0.0f;
  for (uint j = J0; j < ROW_LEN; j += J_STEP) {
    const float d = LOAD(TX, x, x_off + base + j) - mean;
    var = fma(d, d, var);
  }
#if NSPLIT > 1
  var = nn_group_sum(red, J0, var);
#endif
  var /= ROW_LEN;
  const float inv = 1.0f / sqrt(var + EPS);
  if (J0 == 0) {
#if HAS_MEAN
    STORE(TM, mo, mo_off + row, mean);
#endif
#if HAS_INVSTD
    STORE(TI, io, io_off + row, inv);
#endif
  }
  for (uint j = J0; j < ROW_LEN; j += J_STEP) {
    float v = (LOAD(TX, x, x_off + base + j) - mean) * inv * LOAD(TS, s, s_off + SC_IDX(row, j));
#if HAS_BIAS
    v += LOAD(TB, b, b_off + B_IDX(row, j));
#endif
    STORE(TY, y, y_off + base + j, v);
  }
}
