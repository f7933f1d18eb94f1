// `kvshift search`: probes printed, an answer (exit 0), no answer (exit 3),
// malformed objectives and knobs (exit 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <vector>

#include "tests/testing/run_command.hpp"

namespace kvshift::testing {
namespace {

std::string tiny() { return std::string(KVSHIFT_SOURCE_DIR) + "/tests/sweep/data/tiny.json"; }

TEST(SearchCli, FindsTheLeastBandwidthAndPrintsEveryProbe) {
  const auto r =
      run_kvshift("search " + tiny() +
                  " --vary /cluster/star/bandwidth=1Gbps..100Gbps "
                  "--objective 'recovery.p99<=100ms' --strategy risk_kv --tolerance 0.3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("probe  1:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("answer: /cluster/star/bandwidth = "), std::string::npos) << r.out;
  // Every probe line says met or not met with the measured value.
  const std::regex probe(R"(probe +\d+: .* (met|not met) +recovery\.p99=[0-9.e+-]+)");
  EXPECT_GE(std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), probe),
                          std::sregex_iterator()),
            3);
}

// A WAN drain: on slow links the moves are still running when the run ends. They count at
// their lower bound (end − start), so the search must not answer the slowest link.
TEST(SearchCli, UnfinishedMovesCountAgainstTheObjective) {
  const std::string wan = std::string(KVSHIFT_SOURCE_DIR) + "/scenarios/wan-migration.json";
  const auto r = run_kvshift("search " + wan +
                             " --vary /cluster/multi_site/wan_bandwidth=10Mbps..100Gbps "
                             "--objective 'migration.p99<=2s' --strategy full_kv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("probe  2: 10.000 Mbps    not met  migration.p99=60"), std::string::npos)
      << r.out;  // 60 s = 90 s run − drain at 30 s: unfinished, at its lower bound
  const std::smatch m = [&] {
    std::smatch out;
    std::regex_search(r.out, out, std::regex(R"(answer: \S+ = ([0-9.]+) Mbps)"));
    return out;
  }();
  ASSERT_EQ(m.size(), 2u) << r.out;
  EXPECT_GT(std::stod(m[1].str()), 100.0) << "at 100 Mbps the drained requests take 17 s";
}

// Common random numbers: a sweep point and a search probe at the same value simulate the same
// workload, so they report the same metric.
TEST(SearchCli, AgreesWithASweepAtTheSamePoint) {
  const std::string wan = std::string(KVSHIFT_SOURCE_DIR) + "/scenarios/wan-migration.json";
  const std::string dir =
      ::testing::TempDir() + "kvshift-search-sweep-" + std::to_string(::getpid());
  const auto sw = run_kvshift("sweep " + wan +
                              " --set /cluster/multi_site/wan_bandwidth=1Gbps --quiet --no-report"
                              " --jobs 1 --out " +
                              dir);
  ASSERT_EQ(sw.exit_code, 0) << sw.err;
  const auto se = run_kvshift("search " + wan +
                              " --vary /cluster/multi_site/wan_bandwidth=10Mbps..100Gbps "
                              "--objective 'migration.p99<=2s' --strategy full_kv");
  ASSERT_EQ(se.exit_code, 0) << se.err;
  std::smatch probe;
  ASSERT_TRUE(std::regex_search(
      se.out, probe, std::regex(R"(1\.000 Gbps +\S+( met)? +migration\.p99=([0-9.e+-]+))")))
      << se.out;
  std::ifstream in(dir + "/sweep.csv");
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  auto cells = [](const std::string& line) {
    std::vector<std::string> out(1);
    for (char c : line) {
      if (c == ',') {
        out.emplace_back();
      } else {
        out.back().push_back(c);
      }
    }
    return out;
  };
  const auto h = cells(header), v = cells(row);
  const auto at = std::find(h.begin(), h.end(), "full_kv.migration_p99_s");
  ASSERT_NE(at, h.end()) << header;
  EXPECT_NEAR(std::stod(v[at - h.begin()]), std::stod(probe[2].str()), 1e-5);
  std::filesystem::remove_all(dir);
}

TEST(SearchCli, NoValueInRangeIsExitThree) {
  const auto r = run_kvshift("search " + tiny() +
                             " --vary /cluster/star/bandwidth=1Gbps..2Gbps "
                             "--objective 'recovery.p99<=1ms' --strategy risk_kv");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.out.find("not met even at"), std::string::npos) << r.out;
}

TEST(SearchCli, MalformedObjectiveOrKnobIsExitTwo) {
  for (const std::string& args :
       {std::string("--vary /cluster/star/bandwidth=1Mbps..1Gbps --objective 'recovery.p99=2s'"),
        std::string(
            "--vary /cluster/star/bandwidth=1Mbps..1Gbps --objective 'recovery.p99<=2 lightyears'"),
        std::string("--vary /cluster/star/bandwidth=1Mbps..1Gbps --objective 'latency<=2s'"),
        std::string("--vary /cluster/star/bandwidth=1Gbps --objective 'recovery.p99<=2s'"),
        std::string(
            "--vary /cluster/nope/bandwidth=1Mbps..1Gbps --objective 'recovery.p99<=2s'")}) {
    const auto r = run_kvshift("search " + tiny() + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("kvshift: error: "), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace kvshift::testing
