#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "cost_model/latency.hpp"
#include "cost_model/storage.hpp"
#include "input/scenario_loader.hpp"
#include "reports/run_report.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sim/time.hpp"

namespace kvshift::sim {
namespace {

// One Qwen2.5-0.5B request (512-token prompt, long output) on gpu0, drained at
// 1 s to gpu1 over an otherwise idle 100 Mbps / 10 ms link.
std::string single_drain_scenario(const std::string& strategies) {
  return R"({
    "name": "single-drain", "model": "qwen2.5-0.5b", "gpu": "rtx3060-laptop",
    "cluster": {"nodes": [{"name": "gpu0"}, {"name": "gpu1"}],
                "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": "100Mbps", "latency": "10ms"}]},
    "workload": {"arrival": "poisson", "rate": 10, "max_requests": 1,
                 "prompt_tokens": {"distribution": "fixed", "value": 512},
                 "output_tokens": {"distribution": "fixed", "value": 4000}},
    "serving": {"max_batch": 1},
    "events": [{"type": "drain", "at": "1s", "node": "gpu0"}],
    "policies": {"strategies": [)" +
         strategies + R"(]},
    "risk_kv": {"topology": "paper", "delta_nll": 0.002},
    "seed": 7, "duration": "30s"})";
}

std::int64_t transfer_ns(std::int64_t bytes) {
  // The network's rounding: latency (whole ns) + round(8·S/B) in ns.
  return 10'000'000 + from_seconds(8.0 * static_cast<double>(bytes) / 100e6).ns;
}

TEST(ServingModel, UncontendedMigrationsMatchTheClosedForm) {
  const input::ScenarioSpec spec = input::load_scenario_text(
      single_drain_scenario(R"("full_kv", "token_replay", "risk_kv")"), "test");
  const cost_model::RooflineCosts compute(spec.gpu);
  const std::vector<RunResult> runs = run_scenario(spec, compute, {false, {}});
  ASSERT_EQ(runs.size(), 3u);
  for (const RunResult& run : runs) {
    ASSERT_EQ(run.moves.size(), 1u) << run.strategy;
    const MoveRecord& m = run.moves[0];
    EXPECT_EQ(m.outcome, MoveOutcome::kDone);
    EXPECT_EQ(m.strategy, run.strategy);
    EXPECT_EQ(m.start_ns, 1'000'000'000);
    const std::int64_t c = m.context_tokens;
    EXPECT_GT(c, 512);
    std::int64_t expected = 0;
    if (run.strategy == "full_kv") {
      expected = transfer_ns(cost_model::kv_bytes(spec.model, c).count);
    } else if (run.strategy == "token_replay") {
      expected = transfer_ns(4 * c) + from_seconds(compute.prefill(spec.model, c)).ns;
    } else {
      const auto kept = cost_model::storage(spec.model, spec.risk_kv->omission, c, {}).kv_kept;
      expected = transfer_ns(kept.count) +
                 from_seconds(compute.reconstruct(spec.model, spec.risk_kv->omission, c, 1,
                                                  cost_model::DType::kF32))
                     .ns;
    }
    EXPECT_EQ(m.end_ns - m.start_ns, expected) << run.strategy;
    // The request keeps every token across the move.
    ASSERT_EQ(run.requests.size(), 1u);
    EXPECT_EQ(run.requests[0].outcome, RequestOutcome::kCompleted);
    EXPECT_EQ(run.requests[0].moves, 1);
    EXPECT_EQ(run.requests[0].final_node, "gpu1");
  }
}

std::map<std::string, std::string> read_dir(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    files[e.path().filename().string()] = s.str();
  }
  return files;
}

TEST(ServingModel, SameScenarioAndSeedGiveByteIdenticalFiles) {
  const input::ScenarioSpec spec = input::load_embedded_quickstart();
  const cost_model::RooflineCosts compute(spec.gpu);
  const std::filesystem::path base = std::filesystem::path(KVSHIFT_BINARY_DIR) / "test-out";
  std::filesystem::remove_all(base / "det-a");
  std::filesystem::remove_all(base / "det-b");
  reports::write_run_outputs(base / "det-a", spec, run_scenario(spec, compute), compute.sources());
  reports::write_run_outputs(base / "det-b", spec, run_scenario(spec, compute), compute.sources());
  const auto a = read_dir(base / "det-a"), b = read_dir(base / "det-b");
  ASSERT_EQ(a.size(), 5u);
  EXPECT_TRUE(a == b);
}

// A link degraded for a while: links.csv's samples carry the capacity each direction had,
// and the repair restores the link as declared (the topology's own copy).
TEST(ServingModel, LinkSamplesCarryTheCapacityADegradeLowersAndARepairRestores) {
  std::string text = single_drain_scenario(R"("full_kv")");
  text.replace(text.find(R"("events": [)"), std::string(R"("events": [)").size(),
               R"("outputs": {"link_sample_interval": "250ms"},
    "events": [{"type": "link_degrade", "at": "1100ms", "link": "gpu0-gpu1",
                "bandwidth": "20Mbps", "repair_after": "1s"},)");
  const input::ScenarioSpec spec = input::load_scenario_text(text, "test");
  const cost_model::RooflineCosts compute(spec.gpu);
  const std::vector<RunResult> runs = run_scenario(spec, compute, {false, {}});
  ASSERT_EQ(runs.size(), 1u);
  int degraded = 0, repaired = 0;
  for (const LinkSample& s : runs[0].link_samples) {
    const bool during = s.t_ns > 1'100'000'000 && s.t_ns < 2'100'000'000;
    EXPECT_EQ(s.capacity_bps, during ? 20e6 : 100e6) << s.link << " at " << s.t_ns;
    degraded += during;
    repaired += s.t_ns > 2'100'000'000;
  }
  EXPECT_GT(degraded, 0);
  EXPECT_GT(repaired, 0) << "the move outlasts the degrade";
}

// links.csv's utilisation is the mean over each sample's interval: a token replay's ids
// cross the idle link in well under one interval (the instant of the sample sees none of
// it), and that interval reads 8·bytes / (capacity·interval); the samples add up to what the
// move sent.
TEST(ServingModel, LinkUtilisationIsTheMeanOverEachInterval) {
  std::string text = single_drain_scenario(R"("token_replay")");
  text.replace(text.find(R"("events": [)"), std::string(R"("events": [)").size(),
               R"("outputs": {"link_sample_interval": "250ms"}, "events": [)");
  const input::ScenarioSpec spec = input::load_scenario_text(text, "test");
  const cost_model::RooflineCosts compute(spec.gpu);
  const RunResult run = run_scenario(spec, compute, {false, {}}).at(0);
  ASSERT_EQ(run.moves.size(), 1u);
  const MoveRecord& m = run.moves[0];
  ASSERT_GT(m.token_bytes, 0);
  std::int64_t carried = 0;
  for (const LinkSample& s : run.link_samples) {
    if (s.link != "gpu0->gpu1") continue;
    carried += s.bytes;
    EXPECT_DOUBLE_EQ(s.utilisation, 8.0 * static_cast<double>(s.bytes) / (100e6 * 0.25)) << s.t_ns;
    EXPECT_GT(s.utilisation, 0) << s.t_ns << ": a sample with bytes reads busy";
  }
  EXPECT_EQ(carried, m.token_bytes);
}

// cluster.ecmp in a scenario: with it the drained leaf's moves spread over both spines;
// without it every one takes the first. Bad values are named.
TEST(ServingModel, EcmpFromTheScenarioSpreadsMovesOverEqualCostSpines) {
  auto scenario = [](const std::string& ecmp) {
    return R"({
      "name": "ecmp", "model": "qwen2.5-0.5b", "gpu": "rtx3060-laptop",
      "cluster": {"leaf_spine": {"leaves": 2, "spines": 2, "nodes_per_leaf": 2,
                                 "node_bandwidth": "10Gbps", "latency": "5us"})" +
           ecmp + R"(},
      "workload": {"arrival": "poisson", "rate": 40, "max_requests": 24,
                   "prompt_tokens": {"distribution": "fixed", "value": 1024},
                   "output_tokens": {"distribution": "fixed", "value": 4000}},
      "serving": {"max_batch": 16},
      "outputs": {"link_sample_interval": "1s"},
      "events": [{"type": "drain", "at": "2s", "node": "gpu0"},
                 {"type": "drain", "at": "2s", "node": "gpu1"}],
      "policies": {"strategies": ["full_kv"]},
      "seed": 5, "duration": "20s"})";
  };
  auto spine_bytes = [&](const std::string& ecmp) {
    const input::ScenarioSpec spec = input::load_scenario_text(scenario(ecmp), "test");
    const cost_model::RooflineCosts compute(spec.gpu);
    const RunResult run = run_scenario(spec, compute, {false, {}}).at(0);
    EXPECT_GT(run.tally.migrations, 4);
    std::map<std::string, std::int64_t> by_spine;
    for (const LinkSample& s : run.link_samples) {
      if (s.link.rfind("leaf0->spine", 0) == 0) by_spine[s.link] += s.bytes;
    }
    return by_spine;
  };
  const auto single = spine_bytes("");
  EXPECT_EQ(single.size(), 1u) << "one path for every transfer";
  const auto spread = spine_bytes(R"(, "ecmp": {"seed": 3})");
  EXPECT_EQ(spread.size(), 2u) << "both spines carry moves";
  EXPECT_EQ(spine_bytes(R"(, "ecmp": false)"), single);
  try {
    input::load_scenario_text(scenario(R"(, "ecmp": {"seed": -1})"), "test");
    ADD_FAILURE() << "a negative seed was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/cluster/ecmp/seed"), std::string::npos) << e.what();
  }
}

// Random small clusters under load with failures, repairs and drains: nothing
// lost, nothing duplicated, time never backwards, HBM never over capacity (the
// model throws on that), every move accounted for.
std::string random_scenario(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int nodes = pick(2, 5);
  const char* protections[] = {"none", "full", "risk_kv", "proxy_kv"};
  std::ostringstream events;
  const int failures = pick(0, 2);
  for (int i = 0; i < failures; ++i) {
    events << (i ? "," : "") << R"({"type": "node_failure", "at": ")" << pick(1, 8)
           << R"(s", "node": "gpu)" << pick(0, nodes - 1) << R"(", "detection_delay": ")"
           << pick(0, 800) << R"(ms", "repair_after": ")" << pick(1, 5) << R"(s"})";
  }
  if (pick(0, 1)) {
    events << (failures ? "," : "") << R"({"type": "drain", "at": ")" << pick(1, 9)
           << R"(s", "node": "gpu)" << pick(0, nodes - 1) << R"("})";
  }
  std::ostringstream s;
  s << R"({"name": "random", "model": "qwen2.5-1.5b", "gpu": "a100-80gb",
    "cluster": {"star": {"nodes": )"
    << nodes << R"(, "bandwidth": ")" << pick(1, 100) << R"(Gbps", "latency": "50us"}},
    "workload": {"arrival": "gamma", "rate": )"
    << pick(5, 60) << R"(, "cv": 2,
                 "prompt_tokens": {"distribution": "lognormal", "mean": 800, "cv": 1, "min": 8, "max": 8000},
                 "output_tokens": {"distribution": "uniform", "min": 1, "max": 600}},
    "serving": {"max_batch": )"
    << pick(1, 32) << R"(},
    "protection": {"mode": ")"
    << protections[pick(0, 3)] << R"("},
    "events": [)"
    << events.str() << R"(],
    "policies": {"strategies": ["full_kv", "token_replay", "risk_kv", "proxy_kv", "adaptive"]},
    "risk_kv": {"topology": "paper", "delta_nll": 0.01},
    "proxy_kv": {"proxy_model": "qwen2.5-0.5b", "retention": 0.4, "delta_nll": 0.02},
    "seed": )"
    << pick(1, 1000000) << R"(, "duration": "10s"})";
  return s.str();
}

TEST(ServingModel, RandomScenariosKeepEveryInvariant) {
  std::mt19937_64 rng(2026);
  int moves = 0, failed_requests = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::string text = random_scenario(rng);
    const input::ScenarioSpec spec = input::load_scenario_text(text, "random");
    const cost_model::RooflineCosts compute(spec.gpu);
    std::vector<RunResult> runs;
    ASSERT_NO_THROW(runs = run_scenario(spec, compute, {false, {}})) << text;
    for (const RunResult& run : runs) {
      // Same workload under every strategy.
      EXPECT_EQ(run.requests.size(), runs[0].requests.size());
      std::map<std::uint64_t, int> ok_moves;
      for (const MoveRecord& m : run.moves) {
        EXPECT_GE(m.end_ns, m.start_ns) << text;
        EXPECT_GE(m.stall_ns, m.end_ns - m.start_ns);
        EXPECT_LE(m.end_ns, run.duration_ns);
        if (m.outcome == MoveOutcome::kDone) ++ok_moves[m.request];
        ++moves;
      }
      for (std::size_t i = 0; i < run.requests.size(); ++i) {
        const RequestRecord& r = run.requests[i];
        ASSERT_EQ(r.id, i);  // every request exactly once, in order
        EXPECT_EQ(r.moves, ok_moves[r.id]) << run.strategy << " request " << r.id << "\n" << text;
        if (r.outcome == RequestOutcome::kCompleted) {
          EXPECT_GE(r.first_token_ns, r.arrival_ns);
          EXPECT_GE(r.finish_ns, r.first_token_ns);
          EXPECT_LE(r.finish_ns, run.duration_ns);
        }
        if (r.outcome == RequestOutcome::kFailed) ++failed_requests;
      }
    }
  }
  EXPECT_GT(moves, 100);  // the trials did exercise moves
  (void)failed_requests;
}

}  // namespace
}  // namespace kvshift::sim
