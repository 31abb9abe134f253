// Normalisation over rows: LayerNormalization (rows = the leading dims, the row = the trailing
// dims from `axis`) and InstanceNormalization (rows = (n, c), the row = the spatial dims).
//   y = (x - mean) / sqrt(var + EPS) * scale + bias
// One work-item per row, two passes (mean, then variance of the centred values: no catastrophic
// cancellation). Defines: TX TS TB TY (tags); ROWS ROW_LEN EPS; generated SC_IDX(row, j) and
// B_IDX(row, j) (the index of the scale and of the bias for element j of the row); HAS_BIAS.
#include "nn_common.cl"

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
) {
  const uint row = get_global_id(0);
  if (row >= ROWS)
    return;
  const uint base = row * ROW_LEN;
  float mean = 0.0f;
  for (uint j = 0; j < ROW_LEN; j++)
    mean += LOAD(TX, x, x_off + base + j);
  mean /= ROW_LEN;
  float var = 0.0f;
  for (uint j = 0; j < ROW_LEN; j++) {
    const float d = LOAD(TX, x, x_off + base + j) - mean;
    var = fma(d, d, var);
  }
  var /= ROW_LEN;
  const float inv = 1.0f / sqrt(var + EPS);
#if HAS_MEAN
  STORE(TM, mo, mo_off + row, mean);
#endif
#if HAS_INVSTD
  STORE(TI, io, io_off + row, inv);
#endif
  for (uint j = 0; j < ROW_LEN; j++) {
    float v = (LOAD(TX, x, x_off + base + j) - mean) * inv * LOAD(TS, s, s_off + SC_IDX(row, j));
#if HAS_BIAS
    v += LOAD(TB, b, b_off + B_IDX(row, j));
#endif
    STORE(TY, y, y_off + base + j, v);
  }
}
