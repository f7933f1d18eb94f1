// Scalar math shared verbatim by the CPU twins and the CUDA kernels, so both
// backends compute RoPE angles, sinusoidal positions, GELU, random fills and
// top-K sort keys alike: RoPE angles and positions in double precision (float
// angles lose ~1e-3 rad at 32k positions), a splitmix64 hash for seeded fills,
// and an order-preserving float -> uint32 key.
#pragma once

#include <math.h>  // NOLINT: ::pow/::sin/::cos/::erff are what CUDA device code provides too

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define KVSHIFT_HD __host__ __device__
#else
#define KVSHIFT_HD
#endif

namespace kvshift::kernels {

/// Frequency of RoPE pair i (< head_dim/2): theta^(-2i/head_dim).
KVSHIFT_HD inline double rope_inv_freq(double theta, int i, int head_dim) {
  return ::pow(theta, -2.0 * i / head_dim);
}

/// cos/sin of the RoPE angle position·inv_freq.
KVSHIFT_HD inline void rope_cos_sin_of(double inv_freq, std::int64_t position, float* c, float* s) {
  const double angle = static_cast<double>(position) * inv_freq;
  *c = static_cast<float>(::cos(angle));
  *s = static_cast<float>(::sin(angle));
}

/// cos/sin of the Hugging Face RoPE angle for pair i (< head_dim/2) at `position`.
KVSHIFT_HD inline void rope_cos_sin(double theta, std::int64_t position, int i, int head_dim,
                                    float* c, float* s) {
  rope_cos_sin_of(rope_inv_freq(theta, i, head_dim), position, c, s);
}

/// Column i of row t of a sinusoidal position table of `width` columns: sin (even i) or cos
/// (odd i) of t / 10000^(2⌊i/2⌋ / width), in double.
KVSHIFT_HD inline float sinusoidal_position(std::int64_t t, int i, int width) {
  const int even = i - (i & 1);
  const double angle = static_cast<double>(t) / ::pow(10000.0, static_cast<double>(even) / width);
  return static_cast<float>((i & 1) != 0 ? ::cos(angle) : ::sin(angle));
}

/// Exact (erf) GELU in fp32.
KVSHIFT_HD inline float gelu_erf(float v) { return 0.5f * v * (1.0f + ::erff(v * 0.70710678f)); }

/// splitmix64 finaliser.
KVSHIFT_HD inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Uniform in [lo, hi) for element `i` of a fill seeded with `seed` (24-bit resolution).
KVSHIFT_HD inline float uniform_value(std::uint64_t seed, std::uint64_t i, float lo, float hi) {
  const float u =
      static_cast<float>(mix64(seed * 0xD1B54A32D192ED03ull + i) >> 40) * (1.0f / 16777216.0f);
#ifdef __CUDA_ARCH__
  return __fadd_rn(lo, __fmul_rn(hi - lo, u));
#else
  return lo + (hi - lo) * u;
#endif
}

/// Monotone map float -> uint32 (larger float, larger key).
KVSHIFT_HD inline std::uint32_t ordered_key(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// Key of a token that top-K must keep (sink or recent): above every score's key.
inline constexpr std::uint32_t kForcedKey = 0xFFFFFFFFu;

}  // namespace kvshift::kernels
