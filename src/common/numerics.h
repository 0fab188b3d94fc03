// Scalar number formats used by gpt-oss checkpoints: bf16, MXFP4 (E2M1 values with one E8M0
// scale per 32 values). Host-side helpers; CUDA kernels carry their own device versions and are
// tested against these.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace gossamer {

inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round-to-nearest-even; NaN stays NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float round_to_bf16(float f) {
  return bf16_to_float(float_to_bf16(f));
}

// E2M1 code (4 bits: sign, 2 exponent, 1 mantissa) -> value. Magnitudes 0,.5,1,1.5,2,3,4,6.
inline float e2m1_to_float(uint8_t code) {
  static constexpr float kLut[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kLut[code & 0xf];
}

// E8M0 scale byte -> 2^(e-127). (255 is NaN in the OCP spec; gpt-oss never uses it.)
inline float e8m0_to_float(uint8_t e) {
  return std::ldexp(1.0f, static_cast<int>(e) - 127);
}

// gpt-oss MXFP4 packing: a byte holds two consecutive values, the low nibble first.
inline void dequant_mxfp4_block(const uint8_t* packed16, uint8_t scale, float* out32) {
  const float s = e8m0_to_float(scale);
  for (int i = 0; i < 16; ++i) {
    out32[2 * i] = e2m1_to_float(packed16[i] & 0xf) * s;
    out32[2 * i + 1] = e2m1_to_float(packed16[i] >> 4) * s;
  }
}

}  // namespace gossamer
