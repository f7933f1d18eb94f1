// `kvshift search`: probes printed, an answer (exit 0), no answer (exit 3),
// malformed objectives and knobs (exit 2).
#include <gtest/gtest.h>

#include <regex>

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
