// `kvshift check`: a tolerance that is not a finite share >= 0 is refused before anything is
// written, and a golden file with a bad tolerance or metrics is reported as a bad golden
// (exit 2 naming the file and the field), never as a crash.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

namespace fs = std::filesystem;

fs::path regression_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("kvshift-check-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  fs::copy(fs::path(KVSHIFT_SOURCE_DIR) / "tests/sweep/data/tiny.json", d / "tiny.json");
  return d;
}

TEST(CheckCli, ANegativeOrNanToleranceIsRefusedAndWritesNoGolden) {
  const fs::path d = regression_dir("tolerance");
  for (const char* tol : {"-1", "nan", "inf"}) {
    const auto r = run_kvshift("check " + d.string() + " --update --tolerance " + tol);
    EXPECT_EQ(r.exit_code, 2) << tol;
    EXPECT_NE(r.err.find("--tolerance"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d / "tiny.golden")) << tol;
  }
  fs::remove_all(d);
}

TEST(CheckCli, AGoldenWithANullOrNegativeToleranceIsABadGolden) {
  const fs::path d = regression_dir("golden");
  for (const char* tol : {"null", "-1", "\"0.01\""}) {
    std::ofstream(d / "tiny.golden")
        << R"({"scenario": "sweep-tiny", "tolerance_rel": )" << tol << R"(, "metrics": {}})";
    const auto r = run_kvshift("check " + d.string());
    EXPECT_EQ(r.exit_code, 2) << tol;
    EXPECT_NE(r.err.find("bad golden file " + (d / "tiny.golden").string() +
                         ": /tolerance_rel: must be a finite number >= 0"),
              std::string::npos)
        << r.err;
  }
  std::ofstream(d / "tiny.golden")
      << R"({"tolerance_rel": 0.01, "metrics": {"full_kv": {"/moves/total": null}}})";
  const auto r = run_kvshift("check " + d.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/metrics/full_kv//moves/total: must be a number"), std::string::npos)
      << r.err;
  fs::remove_all(d);
}

}  // namespace
}  // namespace kvshift::testing
