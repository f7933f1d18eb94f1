// The architecture's dependency rules (ARCHITECTURE.md, "Dependency rules"),
// checked on every source file's #include lines: which project folders a folder
// may include, and which outside headers. A new include that breaks a rule fails
// here with the file, the line and the rule.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
const fs::path kRoot = KVSHIFT_SOURCE_DIR;

// Project folders each folder may include (its own is always allowed). util/ (percentiles,
// CSV: no domain meaning) is below everything and includes nothing of the project; every
// folder but cost_model/ (pure equations) and kernels/ (device code) may use it. The executable
// (apps/) is glue and may include everything; tests are not checked.
const std::map<std::string, std::set<std::string>> kMayInclude = {
    {"util", {}},
    {"cost_model", {}},
    {"sim", {"cost_model", "util"}},
    {"input", {"cost_model", "sim", "util"}},
    {"kernels", {}},
    {"backend", {"cost_model", "kernels", "input", "util"}},  // input: its JSON reader
    {"reports", {"cost_model", "sim", "input", "util"}},      // input: the scenario's name, SLOs
    {"sweep", {"cost_model", "sim", "input", "reports", "util"}},
    {"testbed", {"cost_model", "sim", "input", "backend", "util"}},
};
const std::set<std::string> kProjectFolders = {"util",    "cost_model", "sim",     "input",
                                               "kernels", "backend",    "reports", "sweep",
                                               "testbed", "apps",       "tests",   "bench"};

struct Include {
  fs::path file;
  int line;
  std::string header;
  bool quoted;
};

std::vector<Include> includes_of(const std::string& folder) {
  static const std::regex re(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<Include> out;
  if (!fs::exists(kRoot / folder)) return out;
  for (const auto& e : fs::recursive_directory_iterator(kRoot / folder)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh") continue;
    std::ifstream in(e.path());
    std::string text;
    for (int n = 1; std::getline(in, text); ++n) {
      std::smatch m;
      if (std::regex_search(text, m, re)) out.push_back({e.path(), n, m[2], m[1] == "\""});
    }
  }
  return out;
}

std::string where(const Include& i) {
  return fs::relative(i.file, kRoot).string() + ":" + std::to_string(i.line) + " includes " +
         (i.quoted ? "\"" + i.header + "\"" : "<" + i.header + ">");
}

// A standard library header: no folder and no extension (<vector>, <cstdint>).
bool standard(const std::string& h) {
  return h.find('/') == std::string::npos && h.find('.') == std::string::npos;
}

TEST(IncludeRules, EachFolderIncludesOnlyTheFoldersBelowIt) {
  int checked = 0;
  for (const auto& [folder, allowed] : kMayInclude) {
    for (const Include& i : includes_of(folder)) {
      if (!i.quoted) continue;
      ++checked;
      const std::string top = i.header.substr(0, i.header.find('/'));
      ASSERT_TRUE(kProjectFolders.count(top)) << where(i) << ": not a path from the project root";
      EXPECT_TRUE(top == folder || allowed.count(top))
          << where(i) << ": " << folder << "/ may include only " << folder << "/" << [&] {
               std::string s;
               for (const auto& a : allowed) s += ", " + a + "/";
               return s;
             }();
    }
  }
  EXPECT_GT(checked, 300);  // the rules saw the code base, not an empty folder
}

TEST(IncludeRules, TheCostModelUsesTheStandardLibraryOnly) {
  for (const Include& i : includes_of("cost_model")) {
    if (!i.quoted) {
      EXPECT_TRUE(standard(i.header)) << where(i) << ": cost_model/ is pure C++";
    }
  }
}

TEST(IncludeRules, UtilUsesTheStandardLibraryOnly) {
  for (const Include& i : includes_of("util")) {
    if (!i.quoted) {
      EXPECT_TRUE(standard(i.header)) << where(i) << ": util/ is plain C++";
    }
  }
}

TEST(IncludeRules, TheSimulatorSeesNoCudaNoBackendNoJson) {
  for (const Include& i : includes_of("sim")) {
    if (i.quoted) continue;
    EXPECT_TRUE(standard(i.header) || i.header.rfind("boost/", 0) == 0)
        << where(i) << ": sim/ uses the standard library and Boost only";
  }
}

// Scenario files, traces and the schema (data a user edits) sit in scenarios/; the code that
// reads them in input/.
TEST(IncludeRules, ScenariosHoldsDataAndNoCode) {
  int data = 0;
  for (const auto& e : fs::recursive_directory_iterator(kRoot / "scenarios")) {
    const std::string ext = e.path().extension().string();
    EXPECT_TRUE(ext != ".cpp" && ext != ".hpp" && ext != ".in" &&
                e.path().filename() != "CMakeLists.txt")
        << fs::relative(e.path(), kRoot).string() << ": code belongs in input/";
    data += ext == ".json";
  }
  EXPECT_GT(data, 10);
}

TEST(IncludeRules, OnlyKernelsAndBackendCudaTouchCuda) {
  for (const auto& [folder, allowed] : kMayInclude) {
    for (const Include& i : includes_of(folder)) {
      const bool cuda = !i.quoted && (i.header.rfind("cuda", 0) == 0 ||
                                      i.header.rfind("cublas", 0) == 0 || i.header == "mma.h");
      if (!cuda) continue;
      const std::string rel = fs::relative(i.file, kRoot).string();
      EXPECT_TRUE(rel.rfind("kernels/", 0) == 0 || rel.rfind("backend/cuda/", 0) == 0) << where(i);
    }
  }
}

}  // namespace
