// FNV-1a 64 of a file's bytes as "fnv1a64:<16 hex>", computed here and not by kvshift: what
// the tests check kvshift's digests of topology.json and quality.json files against.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace kvshift::testing {

inline std::string fnv1a64_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint64_t h = 0xCBF29CE484222325ULL;
  for (auto it = std::istreambuf_iterator<char>(in); it != std::istreambuf_iterator<char>(); ++it)
    h = (h ^ static_cast<unsigned char>(*it)) * 0x100000001B3ULL;
  char text[32];
  std::snprintf(text, sizeof text, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace kvshift::testing
