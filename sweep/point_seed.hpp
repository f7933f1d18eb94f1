// Per-point seeds. Each sweep point gets a seed derived from the scenario's
// base seed and the point itself (its swept values, not its position), so a
// point keeps its seed when other values are added to a sweep and two runs of
// one sweep - on threads or MPI ranks, in any order - simulate the same thing:
//
//   key(point) = FNV-1a 64 of "POINTER=LABEL\n" for each axis, in axis order
//   seed(point) = splitmix64(base_seed XOR splitmix64(key(point)))
//
// splitmix64 is Steele, Lea and Flood's finaliser (the one java.util.SplittableRandom
// and xoshiro seeding use): one 64-bit add and three xor-shift-multiply rounds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvshift::sweep {

/// splitmix64 of x: x + golden gamma, then the mixing finaliser.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// FNV-1a, 64-bit.
constexpr std::uint64_t fnv1a64(std::string_view text, std::uint64_t hash = 0xCBF29CE484222325ULL) {
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001B3ULL;
  }
  return hash;
}

/// The seed of a point with these (pointer, label) settings, from the base seed.
inline std::uint64_t point_seed(std::uint64_t base_seed,
                                const std::vector<std::pair<std::string, std::string>>& settings) {
  std::uint64_t key = 0xCBF29CE484222325ULL;
  for (const auto& [pointer, label] : settings) {
    key = fnv1a64(pointer, key);
    key = fnv1a64("=", key);
    key = fnv1a64(label, key);
    key = fnv1a64("\n", key);
  }
  return splitmix64(base_seed ^ splitmix64(key));
}

}  // namespace kvshift::sweep
