// The run's one-sentence answer: hand cases that the old recovery-p99-only sentence got
// wrong (a stranded drain called a tie, lower bounds compared as exact, one strategy "winning",
// "recoverys"), a run of a small site-drain scenario, and a property over random strategies:
// the strategies the sentence puts ahead never failed more requests or left more moves
// unfinished than any other, and every lower bound it prints carries '>'.
#include "reports/run_answer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "input/scenario_loader.hpp"
#include "reports/run_report.hpp"
#include "sim/serving/scenario_run.hpp"

namespace kvshift::reports {
namespace {

Distribution latency(std::int64_t count, double p99, std::int64_t unfinished) {
  Distribution d;
  d.count = count;
  d.p50_s = d.mean_s = p99 / 2;
  d.p90_s = d.p99_s = d.max_s = p99;
  d.unfinished = unfinished;
  d.includes_lower_bounds = unfinished > 0;
  return d;
}

// A strategy with `done` finished recoveries and `open` unfinished moves, whose moves' p99 is
// `p99` (a lower bound when open > 0).
NamedMetrics strategy(const std::string& name, std::int64_t failed, std::int64_t done,
                      std::int64_t open, double p99, double delta_nll = 0) {
  NamedMetrics n{name, {}};
  StrategyMetrics& m = n.metrics;
  m.requests = {100, 100 - failed, failed, 0};
  m.moves.recoveries = done;
  m.moves.unfinished = open;
  if (done > 0) m.moves.by_strategy[name] = done;
  m.all_moves = latency(done + open, p99, open);
  m.recovery = latency(done, p99, 0);
  m.quality.delta_nll_mean_per_move = delta_nll;
  return n;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RunAnswer, AStrandedDrainIsNeverAheadOfAFinishedOne) {
  // site-drain: risk_kv's one recovery is as fast as adaptive's, but 11 of its migrations never
  // finished; the old sentence read "risk_kv and adaptive tie on recovery p99".
  const std::vector<NamedMetrics> all = {strategy("risk_kv", 0, 1, 11, 20.0, 0.03),
                                         strategy("adaptive", 0, 12, 0, 0.0268)};
  const RunAnswer a = run_answer(all);
  EXPECT_EQ(a.ahead, std::vector<std::string>{"adaptive"});
  EXPECT_TRUE(
      a.text.starts_with("adaptive is ahead: fewest moves unfinished at the end (0 "
                         "against 11 for risk_kv)"))
      << a.text;
  EXPECT_TRUE(contains(a.text, ">20.000 s")) << a.text;
  EXPECT_FALSE(contains(a.text, "tie")) << a.text;
  EXPECT_TRUE(contains(a.text, "Ranked by failed requests, then moves unfinished at the end"));
}

TEST(RunAnswer, LowerBoundsAreNeitherATieNorPercentLower) {
  // All nodes fail with no repair: both strategies leave 23 moves open at 9.5 s.
  const std::vector<NamedMetrics> all = {strategy("full_kv", 0, 4, 23, 9.5),
                                         strategy("token_replay", 0, 4, 23, 9.5)};
  const RunAnswer a = run_answer(all);
  EXPECT_TRUE(contains(a.text, "cannot be ranked")) << a.text;
  EXPECT_TRUE(contains(a.text, "(>9.500 s and >9.500 s) are lower bounds")) << a.text;
  EXPECT_FALSE(contains(a.text, " tie ")) << a.text;
  EXPECT_FALSE(contains(a.text, "% lower")) << a.text;
  EXPECT_FALSE(contains(a.text, "recoverys")) << a.text;
}

TEST(RunAnswer, OneStrategyIsDescribedNotCrowned) {
  const RunAnswer a = run_answer({strategy("adaptive", 2, 26, 1, 0.77)});
  EXPECT_TRUE(a.ahead.empty());
  EXPECT_TRUE(
      a.text.starts_with("Only adaptive was run, so nothing is ranked: 26 finished moves "
                         "(26 recoveries, 0 migrations) and 1 unfinished, p99 of all "
                         "moves >770.0 ms, 2 failed requests"))
      << a.text;
  EXPECT_FALSE(contains(a.text, "wins")) << a.text;
  EXPECT_FALSE(contains(a.text, "ahead")) << a.text;
}

TEST(RunAnswer, WithNoMovesItSaysSoAndGivesTheFailedRequests) {
  // Every node fails with no repair: nothing moves, and every strategy loses the same requests.
  const RunAnswer a =
      run_answer({strategy("full_kv", 180, 0, 0, 0), strategy("risk_kv", 180, 0, 0, 0)});
  EXPECT_TRUE(a.ahead.empty());
  EXPECT_EQ(a.text,
            "No moves happened in this run (each strategy failed 180 requests): the strategies "
            "differ only in what they stream.");
}

TEST(RunAnswer, SaysWhenEveryMoveFellBackToAnotherStrategy) {
  // predictor-sharing: full_kv ties token_replay only because all 30 of its moves replayed.
  std::vector<NamedMetrics> all = {strategy("full_kv", 0, 30, 0, 0.0654),
                                   strategy("token_replay", 0, 30, 0, 0.0654)};
  all[0].metrics.moves.fallbacks = 30;
  all[0].metrics.moves.by_strategy = {{"token_replay", 30}};
  const RunAnswer a = run_answer(all);
  EXPECT_TRUE(a.text.starts_with("full_kv and token_replay tie on the p99 of all moves: 65.4 ms"))
      << a.text;
  EXPECT_TRUE(contains(a.text,
                       "all 30 of full_kv's finished moves fell back to another "
                       "strategy and ran as token_replay 30"))
      << a.text;
}

TEST(RunAnswer, FewerFailedRequestsComeFirstAndAFasterLoserIsNamed) {
  const std::vector<NamedMetrics> all = {strategy("fast", 3, 10, 0, 0.010),
                                         strategy("safe", 0, 10, 0, 0.200)};
  const RunAnswer a = run_answer(all);
  EXPECT_EQ(a.ahead, std::vector<std::string>{"safe"});
  EXPECT_TRUE(
      a.text.starts_with("safe is ahead: fewest failed requests (0 against 3 for fast); "
                         "its p99 of all moves is 200.0 ms against 10.0 ms for fast"))
      << a.text;
}

TEST(RunAnswer, NoStrategyIsAheadWhenOneFailsFewerAndAnotherFinishesMore) {
  const std::vector<NamedMetrics> all = {strategy("a", 0, 10, 5, 1.0),
                                         strategy("b", 1, 10, 0, 0.1)};
  const RunAnswer a = run_answer(all);
  EXPECT_TRUE(a.ahead.empty());
  EXPECT_TRUE(
      a.text.starts_with("No strategy is ahead on every count: a failed the fewest "
                         "requests (0 against 1 for b) but b left the fewest moves "
                         "unfinished at the end (0 against 5)"))
      << a.text;
}

TEST(RunAnswer, ATieOnLatencyIsBrokenByQualityAndTheCostIsSourced) {
  std::vector<NamedMetrics> all = {strategy("risk_kv", 0, 10, 0, 0.1000, 0.03),
                                   strategy("full_kv", 0, 10, 0, 0.1002)};
  all[0].metrics.quality.risk_kv_charge =
      Quality::Charge{0.03, "scenario constant, not measured (risk_kv.delta_nll written by hand)"};
  RunAnswer a = run_answer(all);
  EXPECT_TRUE(contains(a.text, "tie on the p99 of all moves")) << a.text;
  EXPECT_TRUE(contains(a.text,
                       "full_kv loses less quality (ΔNLL 0.00000 against 0.03000 "
                       "nats/token per move)"))
      << a.text;
  all[1].metrics.all_moves.p99_s = 0.5;  // no longer a tie: risk_kv ahead, at a quality cost
  a = run_answer(all);
  EXPECT_TRUE(
      a.text.starts_with("risk_kv is ahead on the p99 of all moves: 100.0 ms against "
                         "500.0 ms for full_kv (80 % lower)"))
      << a.text;
  EXPECT_TRUE(contains(a.text,
                       "risk_kv's moves cost ΔNLL 0.03000 nats/token on average "
                       "(risk_kv: scenario constant, not measured"))
      << a.text;
}

// A measured ΔNLL below 0 (a rebuild within noise of the exact KV) is no gain: with equal
// latency, the lossy strategy ties with the lossless one instead of winning on quality.
TEST(RunAnswer, AMeasuredDeltaBelowZeroRanksAsNoLoss) {
  const std::vector<NamedMetrics> all = {strategy("risk_kv", 0, 10, 0, 0.1000, -0.0003),
                                         strategy("full_kv", 0, 10, 0, 0.1000)};
  const RunAnswer a = run_answer(all);
  EXPECT_EQ(a.ahead, (std::vector<std::string>{"risk_kv", "full_kv"})) << a.text;
  EXPECT_TRUE(contains(a.text, "tie on the p99 of all moves")) << a.text;
  EXPECT_FALSE(contains(a.text, "loses less quality")) << a.text;
  EXPECT_FALSE(contains(a.text, "-0.0003")) << a.text;
}

TEST(RunAnswer, DisaggregatedRunsRankByTtftAndMarkItsLowerBounds) {
  std::vector<NamedMetrics> all = {strategy("full_kv", 0, 10, 0, 1.0),
                                   strategy("token_replay", 0, 10, 0, 1.0)};
  for (NamedMetrics& n : all) n.metrics.handoff = latency(10, 0.1, 0);
  all[0].metrics.ttft = latency(90, 23.616, 0);
  all[1].metrics.ttft = latency(90, 1.749, 0);
  all[0].metrics.ttft.includes_lower_bounds = all[1].metrics.ttft.includes_lower_bounds = true;
  const RunAnswer a = run_answer(all);
  EXPECT_TRUE(contains(a.text, "cannot be ranked")) << a.text;
  EXPECT_TRUE(contains(a.text, ">1.749 s and >23.616 s")) << a.text;
  EXPECT_FALSE(contains(a.text, "% lower")) << a.text;
}

// Whether every printing of `value` in `text` is (or is not) a lower bound: preceded by '>'.
// A printing inside a longer number ("8.5 ms" in "18.5 ms") is not one of them.
bool printed_with(const std::string& text, const std::string& value, bool bound) {
  for (std::size_t at = text.find(value); at != std::string::npos; at = text.find(value, at + 1)) {
    const char before = at == 0 ? ' ' : text[at - 1];
    if (std::isdigit(static_cast<unsigned char>(before)) || before == '.') continue;
    if ((before == '>') != bound) return false;
  }
  return true;
}

TEST(RunAnswer, PropertyAheadNeverFailsOrStrandsMoreAndBoundsCarryAMark) {
  std::mt19937_64 rng(20261205);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int ranked = 0, bounded = 0, single = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const bool pd = pick(0, 4) == 0;
    const int k = pick(1, 5);
    std::vector<NamedMetrics> all;
    std::set<std::string> printed;  // distinct values, so each printing is one strategy's
    for (int s = 0; s < k; ++s) {
      const std::int64_t open = pick(0, 3) == 0 ? pick(1, 3) : 0;
      const std::int64_t done = pick(0, 3) == 0 ? 0 : pick(1, 40);
      double p99 = 0;
      do {
        p99 = std::pow(10.0, std::uniform_real_distribution<double>(-4, 1.5)(rng));
        if (pick(0, 5) == 0 && !all.empty()) p99 = all.back().metrics.all_moves.p99_s * 1.001;
      } while (!printed.insert(format_latency(p99)).second);
      NamedMetrics n = strategy("s" + std::to_string(s), pick(0, 2), done, open, p99,
                                pick(0, 1) ? 0.0 : 0.01 * pick(1, 5));
      if (done > 0 && pick(0, 4) == 0) n.metrics.moves.fallbacks = pick(1, static_cast<int>(done));
      if (pd) {
        n.metrics.handoff = latency(done, p99, open);
        n.metrics.ttft = latency(done + open, p99, 0);
        n.metrics.ttft.includes_lower_bounds = pick(0, 2) == 0;
      }
      all.push_back(n);
    }
    const RunAnswer a = run_answer(all);
    SCOPED_TRACE(a.text);
    EXPECT_FALSE(contains(a.text, "recoverys"));
    EXPECT_FALSE(contains(a.text, "wins"));
    if (k == 1) {
      ++single;
      EXPECT_TRUE(a.ahead.empty());
      EXPECT_FALSE(contains(a.text, "ahead") || contains(a.text, " tie "));
    }
    for (const std::string& name : a.ahead) {
      const StrategyMetrics* m = find_strategy(all, name);
      ASSERT_NE(m, nullptr);
      for (const NamedMetrics& o : all) {
        EXPECT_LE(m->requests.failed, o.metrics.requests.failed) << name << " vs " << o.strategy;
        EXPECT_LE(m->moves.unfinished, o.metrics.moves.unfinished) << name << " vs " << o.strategy;
      }
    }
    if (!a.ahead.empty()) {
      ++ranked;
      EXPECT_TRUE(a.text.starts_with(a.ahead.front() + " "));
    }
    for (const NamedMetrics& n : all) {
      const Distribution& d = pd ? n.metrics.ttft : n.metrics.all_moves;
      if (d.count == 0) continue;
      bounded += d.includes_lower_bounds;
      EXPECT_TRUE(printed_with(a.text, format_latency(d.p99_s), d.includes_lower_bounds))
          << n.strategy << (d.includes_lower_bounds ? " is a lower bound" : " is exact");
    }
    // A tie or an exact "% lower" compares exact values only (the clause up to its first ';').
    const std::string clause =
        a.text.substr(0, std::min(a.text.find("; "), a.text.find(". Ranked")));
    if (contains(clause, " tie on ")) {
      EXPECT_FALSE(contains(clause, ">"));
    }
    const std::string head = a.text.substr(0, a.text.find("% lower"));
    if (contains(a.text, "% lower") && !contains(head, "at least")) {
      EXPECT_FALSE(contains(head, ">"));
    }
  }
  EXPECT_GT(ranked, 1000);
  EXPECT_GT(bounded, 500);
  EXPECT_GT(single, 200);
}

// A small site drain: two sites joined by a 5 Mbps WAN, both east nodes drained 20 s before
// the end. Shipping KV over the WAN cannot finish; the answer names a strategy that did.
TEST(RunAnswer, ASiteDrainOverASlowWanNamesAStrategyThatFinishedIt) {
  nlohmann::json j = nlohmann::json::parse(input::embedded_quickstart_text());
  j.erase("$schema");
  j["cluster"] = {
      {"node", {{"gpus", 1}, {"host_memory", "256GiB"}}},
      {"multi_site",
       {{"sites",
         {{{"name", "east"}, {"nodes", 2}, {"lan_bandwidth", "100Gbps"}, {"lan_latency", "5us"}},
          {{"name", "west"}, {"nodes", 2}, {"lan_bandwidth", "100Gbps"}, {"lan_latency", "5us"}}}},
        {"wan_bandwidth", "5Mbps"},
        {"wan_latency", "20ms"}}}};
  j["events"] = {{{"type", "node_failure"},
                  {"at", "10s"},
                  {"node", "west/gpu0"},
                  {"detection_delay", "500ms"},
                  {"repair_after", "5s"}},
                 {{"type", "drain"}, {"at", "40s"}, {"node", "east/gpu0"}},
                 {{"type", "drain"}, {"at", "40s"}, {"node", "east/gpu1"}}};
  j["workload"]["rate"] = 6;
  j["policies"].erase("rebalance");
  const input::ScenarioSpec spec = input::load_scenario_text(j.dump(), "site-drain");
  const cost_model::RooflineCosts compute(spec.gpu);
  sim::RunOptions options;
  options.record_trace = false;
  const auto runs = sim::run_scenario(spec, compute, options);
  const nlohmann::json summary = run_summary(spec, runs, compute.sources());
  const std::vector<NamedMetrics> all = strategies_from_json(summary);
  const RunAnswer a = run_answer(all);
  ASSERT_FALSE(a.ahead.empty()) << a.text;
  std::int64_t stranded = 0;
  for (const NamedMetrics& n : all) stranded = std::max(stranded, n.metrics.moves.unfinished);
  EXPECT_GT(stranded, 0) << "the drain should strand some strategy's moves";
  for (const std::string& name : a.ahead) EXPECT_EQ(find_strategy(all, name)->moves.unfinished, 0);
  EXPECT_EQ(summary["answer"], a.text);
}

}  // namespace
}  // namespace kvshift::reports
