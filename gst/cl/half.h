// IEEE binary16 → float, the one conversion every layer uses (network outputs kept in float16,
// weights, the reference interpreter). Exact for every half value; NaN payloads are kept.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace op::cl {

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    // Zero or subnormal: the value is mant * 2^-24, exactly representable in float.
    float v = std::ldexp(static_cast<float>(mant), -24);
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace op::cl
