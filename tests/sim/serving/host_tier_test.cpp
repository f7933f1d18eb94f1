// The host-DRAM prefix tier (serving.prefix_cache.host_offload): the closed form
// of a reload (the blocks cross the host link, then the tail prefills on them),
// a metamorphic check (a tier that is never needed changes nothing), and the
// books under pressure and failures (every block written is evicted, lost with
// its node, or resident; no node holds more than its host DRAM).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "cost_model/compute_costs.hpp"
#include "cost_model/storage.hpp"
#include "input/scenario_loader.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sim/time.hpp"
#include "tests/sim/serving/pressure_scenario.hpp"

namespace kvshift::sim {
namespace {

std::int64_t ttft(const RequestRecord& r) { return r.first_token_ns - r.arrival_ns; }

// Requests far apart, all with one 1,536-token prefix, dealt round robin to the two GPUs of
// one node: the second finds the prefix only in the node's host tier, the third in HBM.
std::string one_node(bool host_offload) {
  return std::string(R"({
    "name": "host-tier", "model": "qwen2.5-1.5b", "gpu": "h100",
    "cluster": {"nodes": [{"name": "gpu0", "gpus": 2}]},
    "workload": {"arrival": "poisson", "rate": 0.2, "max_requests": 4,
                 "prompt_tokens": 2048, "output_tokens": 1,
                 "shared_prefix": {"share": 1, "groups": 1, "tokens": 1536}},
    "serving": {"max_batch": 1,
                "prefix_cache": {"block_tokens": 512, "host_offload": )") +
         (host_offload ? "true" : "false") + R"(}},
    "policies": {"strategies": ["full_kv"], "router": "round_robin"},
    "seed": 5, "duration": "120s"})";
}

TEST(HostTier, AReloadCrossesTheHostLinkThenPrefillsTheTail) {
  for (bool offload : {true, false}) {
    const input::ScenarioSpec spec = input::load_scenario_text(one_node(offload), "t");
    const cost_model::RooflineCosts compute(spec.gpu);
    const RunResult run = run_scenario(spec, compute, {false, {}}).at(0);
    ASSERT_EQ(run.requests.size(), 4u);
    for (std::size_t i = 1; i < 4; ++i) {
      ASSERT_GT(run.requests[i].arrival_ns, run.requests[i - 1].finish_ns) << "uncontended";
    }
    const std::int64_t full = from_seconds(compute.prefill(spec.model, 2048)).ns;
    const std::int64_t tail = from_seconds(compute.extend(spec.model, 1536, 512)).ns;
    const std::int64_t bytes = cost_model::kv_bytes(spec.model, 1536).count;
    const std::int64_t load =
        from_seconds(8.0 * static_cast<double>(bytes) / spec.gpu.host_link.value).ns;
    EXPECT_EQ(ttft(run.requests[0]), full);
    EXPECT_EQ(ttft(run.requests[1]), offload ? load + tail : full)
        << "the other GPU: the host tier, or nothing";
    EXPECT_EQ(ttft(run.requests[2]), tail) << "back on the first GPU: its HBM";
    EXPECT_EQ(ttft(run.requests[3]), tail);
    const PrefixCacheStats::Tier& h = run.prefix_cache.host;
    EXPECT_EQ(h.hits, offload ? 1 : 0);
    EXPECT_EQ(h.hit_tokens, offload ? 1536 : 0);
    EXPECT_EQ(h.read_bytes, offload ? bytes : 0);
    EXPECT_EQ(h.written_blocks, offload ? 3 : 0) << "each block written once";
    EXPECT_EQ(h.written_bytes, offload ? bytes : 0);
    EXPECT_EQ(h.resident_bytes, h.written_bytes);
    EXPECT_EQ(h.peak_bytes, h.written_bytes);
    EXPECT_EQ(run.prefix_cache.hits, offload ? 3 : 2);
  }
}

TEST(HostTier, ATierThatIsNeverNeededChangesNothing) {
  // One GPU a node and HBM to spare: every prefix a GPU cached is still in its HBM.
  const std::string base = R"({
    "name": "m", "model": "qwen2.5-1.5b", "gpu": "h100",
    "cluster": {"star": {"nodes": 3, "bandwidth": "100Gbps", "latency": "5us"}},
    "workload": {"arrival": "poisson", "rate": 6, "max_requests": 200,
                 "prompt_tokens": {"distribution": "uniform", "min": 600, "max": 4000},
                 "output_tokens": {"distribution": "uniform", "min": 1, "max": 200},
                 "shared_prefix": {"share": 0.7, "groups": 3, "tokens": 1024}},
    "serving": {"max_batch": 8, "prefix_cache": {"block_tokens": 256, "host_offload": OFFLOAD}},
    "policies": {"strategies": ["full_kv"]},
    "seed": 9, "duration": "60s"})";
  std::vector<RunResult> runs;
  for (const char* offload : {"false", "true"}) {
    std::string text = base;
    text.replace(text.find("OFFLOAD"), 7, offload);
    const input::ScenarioSpec spec = input::load_scenario_text(text, "m");
    const cost_model::RooflineCosts compute(spec.gpu);
    runs.push_back(run_scenario(spec, compute, {false, {}}).at(0));
  }
  EXPECT_EQ(runs[1].prefix_cache.evicted_blocks, 0) << "the case needs HBM to spare";
  EXPECT_EQ(runs[1].prefix_cache.host.hits, 0);
  EXPECT_GT(runs[1].prefix_cache.host.written_blocks, 0);
  EXPECT_EQ(runs[0].requests, runs[1].requests);
  EXPECT_EQ(runs[0].prefix_cache.hits, runs[1].prefix_cache.hits);
}

// A drain moves request A (prompt 6,000 tokens, ten 512-token prefix blocks) from gpu0 to gpu1,
// whose host tier holds that prefix from request B but whose HBM lost it with a GPU failure (the
// GPU was repaired, empty). The move loads the prefix over gpu1's host link while the rest
// travels: the closed form, and the plan's own estimate, for every strategy. Without the tier
// the move has nothing cached.
TEST(HostTier, AMoveLoadsThePrefixFromTheDestinationsHostTier) {
  for (const char* strategy : {"full_kv", "token_replay", "hybrid"}) {
    for (bool offload : {true, false}) {
      std::string text = R"({
        "name": "move", "model": "qwen2.5-1.5b", "gpu": "h100",
        "cluster": {"nodes": [{"name": "gpu0"}, {"name": "gpu1"}],
                    "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": "1600Gbps",
                               "latency": "10us"}]},
        "workload": {"arrival": "trace", "trace": "TRACE"},
        "serving": {"max_batch": 8, "prefix_cache": {"block_tokens": 512,
                                                      "host_offload": OFFLOAD}},
        "events": [{"type": "gpu_failure", "at": "3s", "node": "gpu1", "gpu": 0,
                    "repair_after": "1s"},
                   {"type": "drain", "at": "5s", "node": "gpu0"}],
        "policies": {"strategies": ["STRATEGY"], "router": "round_robin"},
        "seed": 5, "duration": "60s"})";
      const std::string trace = ::testing::TempDir() + "host-tier-move-trace.jsonl";
      std::ofstream(trace)
          << R"({"timestamp": 0, "input_length": 6000, "output_length": 4000, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]})"
          << "\n"
          << R"({"timestamp": 1000, "input_length": 6000, "output_length": 2, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]})"
          << "\n";
      text.replace(text.find("TRACE"), 5, trace);
      text.replace(text.find("OFFLOAD"), 7, offload ? "true" : "false");
      text.replace(text.find("STRATEGY"), 8, strategy);
      const input::ScenarioSpec spec = input::load_scenario_text(text, "t");
      const cost_model::RooflineCosts compute(spec.gpu);
      const RunResult run = run_scenario(spec, compute, {false, {}}).at(0);
      std::filesystem::remove(trace);
      ASSERT_EQ(run.moves.size(), 1u) << strategy;
      const MoveRecord& m = run.moves[0];
      ASSERT_EQ(m.outcome, MoveOutcome::kDone) << strategy << ": " << m.note;
      EXPECT_EQ(m.to, "gpu1");
      EXPECT_EQ(m.estimated_ns, m.end_ns - m.start_ns) << strategy << ": the plan's own estimate";
      const PrefixCacheStats::Tier& h = run.prefix_cache.host;
      if (!offload) {
        EXPECT_EQ(m.cached_tokens, 0) << strategy << ": the prefix was lost with the GPU";
        continue;
      }
      EXPECT_EQ(m.cached_tokens, 5120) << strategy;
      EXPECT_EQ(h.move_loads, 1);
      EXPECT_EQ(h.move_tokens, 5120);
      const std::int64_t prefix_bytes = cost_model::kv_bytes(spec.model, 5120).count;
      EXPECT_EQ(h.read_bytes, prefix_bytes) << "the move's load is the tier's only read";
      const std::int64_t load =
          from_seconds(8.0 * static_cast<double>(prefix_bytes) / spec.gpu.host_link.value).ns;
      const std::int64_t rest = m.context_tokens - 5120;
      if (std::string(strategy) == "full_kv") {
        EXPECT_EQ(m.kv_bytes, cost_model::kv_bytes(spec.model, rest).count);
        const std::int64_t net =
            10'000 + from_seconds(8.0 * static_cast<double>(m.kv_bytes) / 1600e9).ns;
        ASSERT_GT(load, net) << "the case needs the load to take longest";
        EXPECT_EQ(m.end_ns - m.start_ns, load);
      } else if (std::string(strategy) == "token_replay") {
        EXPECT_EQ(m.token_bytes, 4 * rest);
        const std::int64_t ids = 10'000 + from_seconds(8.0 * 4.0 * rest / 1600e9).ns;
        ASSERT_GT(load, ids);
        EXPECT_EQ(m.end_ns - m.start_ns,
                  load + from_seconds(compute.extend(spec.model, 5120, rest)).ns);
      }
    }
  }
}

// Random scenarios with the tier under pressure (1 GiB of host DRAM a node, shared with
// replicas), GPU and node failures, prefix-aware routing or not: a breach of HBM or host DRAM
// throws; every request ends once; every block written is evicted, lost with its node, or resident
// at the end.
TEST(HostTier, BooksBalanceUnderPressureAndFailures) {
  std::int64_t hits = 0, evicted = 0, lost = 0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const std::string text = testing::pressure_scenario(seed, true);
    const input::ScenarioSpec spec = input::load_scenario_text(text, "p");
    const cost_model::RooflineCosts compute(spec.gpu);
    const std::int64_t block = cost_model::kv_bytes(spec.model, 128).count;
    for (const RunResult& run : run_scenario(spec, compute, {false, {}})) {
      const PrefixCacheStats::Tier& h = run.prefix_cache.host;
      const RunTally& t = run.tally;
      EXPECT_EQ(t.arrived, t.completed + t.failed + t.unfinished) << run.strategy;
      EXPECT_EQ(h.resident_bytes % block, 0);
      EXPECT_EQ(h.written_blocks, h.evicted_blocks + h.lost_blocks + h.resident_bytes / block)
          << run.strategy << " seed " << seed;
      EXPECT_EQ(h.written_bytes, h.written_blocks * block);
      EXPECT_LE(h.peak_bytes, 4LL << 30) << "four nodes of 1 GiB";
      EXPECT_LE(h.hit_tokens, run.prefix_cache.hit_tokens);
      EXPECT_LE(h.hits, run.prefix_cache.hits);
      hits += h.hits;
      evicted += h.evicted_blocks;
      lost += h.lost_blocks;
    }
  }
  EXPECT_GT(hits, 0) << "no run loaded from the host tier";
  EXPECT_GT(evicted, 0) << "no run put the host tier under pressure";
  EXPECT_GT(lost, 0) << "no run lost a host tier with its node";
}

}  // namespace
}  // namespace kvshift::sim
