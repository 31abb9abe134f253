// Softmax, LogSoftmax and Hardmax along one axis of a tensor viewed as (OUTER, AXIS, INNER):
// one work-item per (outer, inner) pair walks the axis three times (max, sum, write), so the
// maximum is subtracted before exp and nothing overflows.
// Defines: TX TY (tags); OUTER AXIS INNER; MODE 0 softmax, 1 log-softmax, 2 hardmax.
#include "nn_common.cl"

__kernel void softmax(__global const STYPE(TX) * x, uint x_off, __global STYPE(TY) * y,
                      uint y_off) {
  const uint p = get_global_id(0);
  if (p >= OUTER * INNER)
    return;
  const uint base = (p / INNER) * AXIS * INNER + p % INNER;
  float mx = -INFINITY;
  uint arg = 0;
  for (uint j = 0; j < AXIS; j++) {
    const float v = LOAD(TX, x, x_off + base + j * INNER);
    if (v > mx) {
      mx = v;
      arg = j;
    }
  }
#if MODE == 2
  for (uint j = 0; j < AXIS; j++)
    STORE(TY, y, y_off + base + j * INNER, j == arg ? 1.0f : 0.0f);
#else
  float sum = 0.0f;
  for (uint j = 0; j < AXIS; j++)
    sum += exp(LOAD(TX, x, x_off + base + j * INNER) - mx);
#if MODE == 1
  const float lse = log(sum);
  for (uint j = 0; j < AXIS; j++)
    STORE(TY, y, y_off + base + j * INNER, LOAD(TX, x, x_off + base + j * INNER) - mx - lse);
#else
  const float inv = 1.0f / sum;
  for (uint j = 0; j < AXIS; j++)
    STORE(TY, y, y_off + base + j * INNER, exp(LOAD(TX, x, x_off + base + j * INNER) - mx) * inv);
#endif
#endif
}
