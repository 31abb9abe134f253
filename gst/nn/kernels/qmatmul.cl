// MatMulInteger and QLinearMatMul with MatMul's broadcasting of the batch dims: one work-item
// per output element, int32 accumulation of (a - azp) * (b - bzp). A's zero point is one value
// or one per row (AZP_N = M), B's one value or one per column (BZP_N = N), as are B's scales.
// QLINEAR requantizes: round((acc + bias[n]) * (as * bs[n] / ys)) + yzp, saturated to
// [QMIN, QMAX] (HAS_BIAS: the int32 bias FuseQuantizedMatMul adds).
// Defines: TA TB TY (tags), BATCH M N K, A_BOFF(b) B_BOFF(b) (element offsets of batch b),
// HAS_AZP TAZ AZP_N, HAS_BZP TBZ BZP_N, QLINEAR with TAS TBS TYS (scales) BS_N, TYZ, QMIN QMAX.
#include "quant.cl"

__kernel void qmatmul(__global const STYPE(TA) * a, uint a_off, __global const STYPE(TB) * b,
                      uint b_off,
#if HAS_AZP
                      __global const STYPE(TAZ) * az, uint az_off,
#endif
#if HAS_BZP
                      __global const STYPE(TBZ) * bz, uint bz_off,
#endif
#if QLINEAR
                      __global const STYPE(TAS) * as, uint as_off, __global const STYPE(TBS) * bs,
                      uint bs_off, __global const STYPE(TYS) * ys, uint ys_off,
                      __global const STYPE(TYZ) * yz, uint yz_off,
#if HAS_BIAS
                      __global const int *bias, uint bias_off,
#endif
#endif
                      __global STYPE(TY) * y, uint y_off) {
  const uint i = get_global_id(0);
  if (i >= BATCH * M * N)
    return;
  const uint col = i % N, row = (i / N) % M, bt = i / (N * M);
#if HAS_AZP
  const int azp = LOAD(TAZ, az, az_off + (AZP_N == 1 ? 0 : row));
#else
  const int azp = 0;
#endif
#if HAS_BZP
  const int bzp = LOAD(TBZ, bz, bz_off + (BZP_N == 1 ? 0 : col));
#else
  const int bzp = 0;
#endif
  const uint ar = a_off + A_BOFF(bt) + row * K, bc = b_off + B_BOFF(bt) + col;
  int acc = 0;
  for (uint k = 0; k < K; k++)
    acc += ((int)LOAD(TA, a, ar + k) - azp) * ((int)LOAD(TB, b, bc + k * N) - bzp);
#if QLINEAR
#if HAS_BIAS
  acc += bias[bias_off + col];
#endif
  const float mult = nn_div_rn(
      LOAD(TAS, as, as_off) * LOAD(TBS, bs, bs_off + (BS_N == 1 ? 0 : col)), LOAD(TYS, ys, ys_off));
  STORE(TY, y, y_off + i,
        nn_requantize((float)acc * mult, (float)LOAD(TYZ, yz, yz_off), QMIN, QMAX));
#else
  STORE(TY, y, y_off + i, acc);
#endif
}
