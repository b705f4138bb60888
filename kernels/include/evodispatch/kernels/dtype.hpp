#pragma once
// Host-side bf16 / fp16 (and fp8 e4m3 to float) conversions, round-to-nearest-even, bit-exact with the GPU's
// cvt.rn (NaN stays NaN, overflow goes to infinity, fp16 subnormals are kept).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include <evodispatch/heuristics/contract.hpp>

namespace evodispatch {

inline std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // ties to even
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

inline float bf16_bits_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

inline std::uint16_t float_to_fp16_bits(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;            // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;           // rounds to >= 65520: infinity
  if (abs < 0x38800000u) {                                 // below 2^-14: subnormal or zero
    // Value / 2^-24 rounded to an integer, ties to even (nearbyint under the default mode).
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // exact: a power-of-two scale
    return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  const std::uint32_t rebased = abs - (112u << 23);
  const std::uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  return sign | static_cast<std::uint16_t>((rebased + rounding) >> 13);
}

inline float fp16_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = static_cast<float>(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

// An fp8 e4m3 value (s eeee mmm, bias 7, subnormals at exponent 0, S.1111.111 NaN, no
// infinity), exactly.
inline float e4m3_bits_to_float(std::uint8_t x) {
  const int e = (x >> 3) & 15, m = x & 7;
  float v;
  if (e == 15 && m == 7) v = std::numeric_limits<float>::quiet_NaN();
  else if (e == 0) v = std::ldexp(static_cast<float>(m), -9);
  else v = std::ldexp(static_cast<float>(8 + m), e - 10);
  return (x & 0x80) ? -v : v;
}

inline std::uint16_t float_to_bits(Dtype d, float f) {
  return d == Dtype::fp16 ? float_to_fp16_bits(f) : float_to_bf16_bits(f);
}
inline float bits_to_float(Dtype d, std::uint16_t b) { return d == Dtype::fp16 ? fp16_bits_to_float(b) : bf16_bits_to_float(b); }

// `f` rounded to the nearest value of the 16-bit type.
inline float round_to(Dtype d, float f) { return bits_to_float(d, float_to_bits(d, f)); }

}  // namespace evodispatch
