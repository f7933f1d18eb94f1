// Shared helpers for the sweep tests: the tiny scenario and scratch folders.
#pragma once

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kvshift::sweep::testing {

/// The small scenario these tests simulate (3 nodes, one failure, 12 s).
inline std::string tiny_scenario() {
  return std::string(KVSHIFT_SOURCE_DIR) + "/tests/sweep/data/tiny.json";
}

/// A fresh, empty folder under the build tree.
inline std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::path(KVSHIFT_BINARY_DIR) / "test-out" / "sweep" /
                   (name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace kvshift::sweep::testing
