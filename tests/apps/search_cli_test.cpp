// `kvshift search`: probes printed, an answer (exit 0), no answer (exit 3),
// malformed objectives and knobs (exit 2); both ends of the range checked,
// --want most, and the fallbacks and unfinished moves of every probe.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
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
  EXPECT_NE(r.out.find("no answer: not met at any of the 5 values probed in [1.000 Gbps, 2.000 "
                       "Gbps] (ends included)"),
            std::string::npos)
      << r.out;
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

TEST(SearchCli, ConflictingFlagsAreExitTwoNamingThem) {
  const auto want = run_kvshift("search " + tiny() +
                                " --vary /cluster/star/bandwidth=1Gbps..2Gbps "
                                "--objective 'recovery.p99<=1s' --want max");
  EXPECT_EQ(want.exit_code, 2) << want.err;
  EXPECT_NE(want.err.find("--want: must be least or most (got \"max\")"), std::string::npos)
      << want.err;
  const auto strategy = run_kvshift("search " + tiny() +
                                    " --vary /cluster/star/bandwidth=1Gbps..2Gbps "
                                    "--objective 'recovery.p99<=1s' --strategy fast");
  EXPECT_EQ(strategy.exit_code, 2) << strategy.err;
  EXPECT_NE(strategy.err.find("--strategy: expected one of"), std::string::npos) << strategy.err;
  EXPECT_EQ(strategy.out.find("probe"), std::string::npos) << strategy.out;
  const auto seed = run_kvshift("search " + tiny() +
                                " --vary /seed=1..9 --objective 'recovery.p99<=1s' --seed 5");
  EXPECT_EQ(seed.exit_code, 2) << seed.err;
  EXPECT_NE(seed.err.find("--seed and --vary /seed=1..9: both set the seed"), std::string::npos)
      << seed.err;
}

std::string search_base() {
  return std::string(KVSHIFT_SOURCE_DIR) + "/tests/sweep/data/search_base.json";
}

// A knob where smaller is better: the search used to give up because HI failed (exit 3),
// though LO meets the objective.
TEST(SearchCli, ChecksBothEndsAndPointsTheOtherWay) {
  const auto r = run_kvshift("search " + search_base() +
                             " --vary /cluster/star/latency=1us..100ms "
                             "--objective 'recovery.p99<=200ms' --strategy full_kv");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("answer: /cluster/star/latency = 0.001 ms (1000ns); LO itself meets it"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("note: met at 0.001 ms but not at 100.000 ms: larger values make it "
                       "harder; --want most finds the largest value that still meets it"),
            std::string::npos)
      << r.out;
}

double cell(const std::string& header, const std::string& row, const std::string& column) {
  auto split = [](const std::string& line) {
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
  const auto h = split(header), v = split(row);
  const auto at = std::find(h.begin(), h.end(), column);
  if (at == h.end() || v.size() != h.size()) return std::nan("");
  return std::stod(v[at - h.begin()]);
}

// The most traffic that meets a TTFT SLO, checked against a sweep of the same knob and seed:
// the answer meets it there and the next rate up does not.
TEST(SearchCli, WantMostAgreesWithASweepOnTheSameKnob) {
  const auto se = run_kvshift("search " + search_base() +
                              " --vary /workload/rate=1..400 --objective 'ttft.p99<=100ms' "
                              "--strategy full_kv --want most");
  ASSERT_EQ(se.exit_code, 0) << se.out << se.err;
  EXPECT_NE(se.out.find("search: largest /workload/rate in [1, 400]"), std::string::npos);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      se.out, m, std::regex(R"(answer: /workload/rate = (\d+) .*; (\d+) does not meet it)")))
      << se.out;
  const int answer = std::stoi(m[1].str());
  EXPECT_EQ(std::stoi(m[2].str()), answer + 1);
  EXPECT_GT(answer, 1) << "the old search answered LO";
  const std::string dir =
      ::testing::TempDir() + "kvshift-search-most-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const auto sw =
      run_kvshift("sweep " + search_base() + " --set /workload/rate=" + std::to_string(answer) +
                  "," + std::to_string(answer + 1) +
                  " --set '/policies/strategies=[\"full_kv\"]' --quiet --no-report"
                  " --jobs 1 --out " +
                  dir);
  ASSERT_EQ(sw.exit_code, 0) << sw.err;
  std::ifstream in(dir + "/sweep.csv");
  std::string header, at_answer, above;
  std::getline(in, header);
  std::getline(in, at_answer);
  std::getline(in, above);
  const double p99 = cell(header, at_answer, "full_kv.ttft_p99_s");
  const double p99_above = cell(header, above, "full_kv.ttft_p99_s");
  EXPECT_LE(p99, 0.1);
  EXPECT_GT(p99_above, 0.1);
  // The probes printed the same values (to 6 digits).
  for (const auto& [rate, value] : {std::pair{answer, p99}, std::pair{answer + 1, p99_above}}) {
    std::smatch probe;
    ASSERT_TRUE(std::regex_search(se.out, probe,
                                  std::regex("probe +\\d+: " + std::to_string(rate) +
                                             R"( +(not )?met +ttft\.p99=([0-9.e+-]+))")))
        << rate << "\n"
        << se.out;
    EXPECT_NEAR(std::stod(probe[2].str()), value, 1e-6 * value) << rate;
  }
  std::filesystem::remove_all(dir);
}

// Where full_kv's moves fell back to another strategy, each probe says how many and what ran,
// on the console and in search.csv; an answer reached with fallbacks says so.
TEST(SearchCli, ReportsFallbacksPerProbe) {
  const std::string dir = ::testing::TempDir() + "kvshift-search-fb-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const auto r = run_kvshift("search " + search_base() +
                             " --vary /cluster/star/latency=1us..100ms "
                             "--objective 'recovery.p99<=200ms' --strategy full_kv --want most "
                             "--out " +
                             dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(
          R"(probe  1: 100\.000 ms +not met +recovery\.p99=\S+  fallbacks=\d+ \(done moves ran [a-z_]+ \d+)")))
      << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(R"(note: at the answer \d+ of full_kv's moves fell back to another strategy)")))
      << r.out;
  std::ifstream in(dir + "/search.csv");
  std::string header, first;
  std::getline(in, header);
  std::getline(in, first);
  EXPECT_EQ(header,
            "probe,value,met,recovery.p99,grid,fallbacks,executed,unfinished_moves,failed_moves");
  EXPECT_GT(cell(header, first, "fallbacks"), 0) << first;
  EXPECT_EQ(first.find("full_kv:"), std::string::npos) << first;  // every done move fell back
  EXPECT_NE(first.find("prefix_recompute:"), std::string::npos) << first;
  std::filesystem::remove_all(dir);
}

// Quickstart at 1 Gbps: full_kv "meets" recovery.p99<=100ms only because its recoveries fell
// back. The answer says so, and the suggested clause makes the search size full_kv itself:
// on the quickstart with replicas streamed every token (a replica streamed every 16 lags by the
// tokens since its last flush, which a recovery must recompute: prefix_recompute at any rate).
TEST(SearchCli, AnAnswerReachedThroughFallbacksSaysSo) {
  const std::string args =
      " --vary /cluster/star/bandwidth=1Gbps..100Gbps --strategy full_kv --objective ";
  const auto r = run_kvshift("search" + args + "'recovery.p99<=100ms'");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("answer: /cluster/star/bandwidth = 1.000 Gbps"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(note: at the answer [1-9]\d* of full_kv's moves fell back)")))
      << r.out;
  const std::filesystem::path current =
      std::filesystem::temp_directory_path() / ("kvshift-search-" + std::to_string(::getpid()));
  std::filesystem::create_directories(current);
  std::ifstream in(std::string(KVSHIFT_SOURCE_DIR) + "/scenarios/quickstart.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("\"./schema.json\""), 15,
               "\"" + std::string(KVSHIFT_SOURCE_DIR) + "/scenarios/schema.json\"");
  text.replace(text.find("\"stream_every_tokens\": 16"), 25, "\"stream_every_tokens\": 1");
  std::ofstream(current / "quickstart.json") << text;
  const auto strict = run_kvshift("search " + (current / "quickstart.json").string() + args +
                                  "'recovery.p99<=100ms && moves.fallbacks<=0'");
  std::filesystem::remove_all(current);
  ASSERT_EQ(strict.exit_code, 0) << strict.out << strict.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(strict.out, m,
                                std::regex(R"(answer: /cluster/star/bandwidth = ([0-9.]+) Gbps)")))
      << strict.out;
  EXPECT_GT(std::stod(m[1].str()), 2.0) << strict.out;
  EXPECT_EQ(strict.out.find("fell back"), std::string::npos) << strict.out;
}

// The objective holds only inside a window of rates: the search says it is not monotone and
// reports what its grid found.
TEST(SearchCli, NonMonotoneObjectiveFallsBackToAGrid) {
  const auto r = run_kvshift("search " + search_base() +
                             " --vary /workload/rate=1..400 --objective "
                             "'ttft.p99<=100ms && requests.completed>=150' --strategy full_kv "
                             "--max-probes 9");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("not monotone: in knob order the probes switch between met and not met"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(grid: met at \d+\.\.\d+ \(9 values probed)")))
      << r.out;
  EXPECT_NE(r.out.find("answer (grid, not monotone): /workload/rate = "), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace kvshift::testing
