// Reductions over any set of axes: one work-item per output element walks the reduced elements.
// Defines: TX TY (tags); OUT_N (output elements); RED_N (elements reduced into each);
// generated OUT_BASE(o) (input offset of output o's first element) and RED_OFF(r) (offset of the
// r-th reduced element from it); the reduction: RED_INIT, RED_STEP(acc, v), RED_FINAL(acc)
// (e.g. sum: 0, acc + v, acc / RED_N for a mean). ARG_MODE (ArgMax/ArgMin): the output is the
// first index of the extreme value, with RED_BETTER(v, best) choosing.
#include "nn_common.cl"

__kernel void reduce(__global const STYPE(TX) * x, uint x_off, __global STYPE(TY) * y, uint y_off) {
  const uint o = get_global_id(0);
  if (o >= OUT_N)
    return;
  const uint base = x_off + OUT_BASE(o);
#ifdef ARG_MODE
  float best = LOAD(TX, x, base + RED_OFF(0));
  long at = 0;
  for (uint r = 1; r < RED_N; r++) {
    const float v = LOAD(TX, x, base + RED_OFF(r));
    if (RED_BETTER(v, best)) {
      best = v;
      at = r;
    }
  }
  STORE(TY, y, y_off + o, at);
#else
#ifdef RED_NEEDS_MAX
  // log-sum-exp: subtract the maximum first so exp never overflows.
  float mx = -INFINITY;
  for (uint r = 0; r < RED_N; r++)
    mx = fmax(mx, (float)LOAD(TX, x, base + RED_OFF(r)));
#endif
  RED_ACC_T acc = RED_INIT;
  for (uint r = 0; r < RED_N; r++) {
    const RED_ACC_T v = LOAD(TX, x, base + RED_OFF(r));
    acc = RED_STEP(acc, v);
  }
  STORE(TY, y, y_off + o, RED_FINAL(acc));
#endif
}
