// `kvshift report DIR`: a self-contained page for a run folder; bad folders are exit 2.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>

#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

TEST(ReportCli, WritesOneSelfContainedPageForARunFolder) {
  const auto dir = std::filesystem::path(KVSHIFT_BINARY_DIR) / "test-out" / "report-cli" /
                   std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  auto r = run_kvshift("run " + std::string(KVSHIFT_SOURCE_DIR) +
                       "/tests/sweep/data/tiny.json --quiet --out " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_kvshift("report " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = slurp((dir / "report.html").string());
  EXPECT_NE(page.find("Chart.js v"), std::string::npos);   // the bundle is inlined
  EXPECT_EQ(page.find("<script src"), std::string::npos);  // nothing loaded from elsewhere
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_NE(page.find("Recovery latency CDF"), std::string::npos);
  EXPECT_NE(page.find("\"scenario\":\"sweep-tiny\""), std::string::npos);
}

TEST(ReportCli, AFolderWithNothingToReportIsExitTwo) {
  auto r = run_kvshift("report /nonexistent-folder");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is not a folder"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "an error prints nothing on stdout";
  r = run_kvshift("report " + std::string(KVSHIFT_SOURCE_DIR) + "/tests/sweep");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nothing to report"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "no \"wrote \" before the error";
}

}  // namespace
}  // namespace kvshift::testing
