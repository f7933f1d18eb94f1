// The storage-node prefix tier (serving.prefix_cache.storage_tier): blocks the
// host tier evicts go to a storage node over the network; a prefill that finds
// them only there fetches them over the path, then the host link, and prefills
// the tail (exact to the ns on an idle path); a fetch lost with the storage node
// prefills everything; a fetch that would not beat prefilling is not made.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "cost_model/compute_costs.hpp"
#include "cost_model/storage.hpp"
#include "input/scenario_loader.hpp"
#include "sim/serving/scenario_run.hpp"
#include "tests/sim/serving/pressure_scenario.hpp"

namespace kvshift::sim {
namespace {

// One H100 node serving Llama-3.1-8B whose host tier holds one 512-token block, and a storage
// node behind a link of `link`. r0 caches a 3-block prefix: HBM keeps all three, the host tier
// the last one, and the first two go to the storage node. A GPU failure empties HBM; r1, on
// the same prefix, finds blocks 1-2 only in the storage tier.
struct Store {
  // One file per test: ctest runs the tests of this file in parallel processes.
  std::string trace = ::testing::TempDir() + "storage-tier-" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl";
  Store() {
    std::ofstream(trace)
        << R"({"timestamp": 0, "input_length": 1537, "output_length": 1, "hash_ids": [1, 2, 3]})"
        << "\n"
        << R"({"timestamp": 10000, "input_length": 1537, "output_length": 1, "hash_ids": [1, 2, 3]})"
        << "\n";
  }
  ~Store() { std::filesystem::remove(trace); }
  RunResult run(const std::string& link, const std::string& extra_event = "") const {
    const std::string text = R"({
      "name": "store", "model": "llama-3.1-8b", "gpu": "h100",
      "cluster": {"nodes": [{"name": "gpu0", "host_memory": 67108864},
                            {"name": "store", "kind": "storage", "capacity": "1TiB"}],
                  "links": [{"a": "gpu0", "b": "store", "bandwidth": ")" +
                             link + R"(", "latency": "5us"}]},
      "workload": {"arrival": "trace", "trace": ")" +
                             trace + R"("},
      "serving": {"max_batch": 4,
                  "prefix_cache": {"block_tokens": 512, "host_offload": true,
                                   "storage_tier": {"node": "store"}}},
      "protection": {"mode": "none"},
      "events": [{"type": "gpu_failure", "at": "5s", "node": "gpu0", "gpu": 0,
                  "repair_after": "1s"})" +
                             extra_event + R"(],
      "policies": {"strategies": ["full_kv"]},
      "seed": 1, "duration": "20s"})";
    spec = input::load_scenario_text(text, "t");
    const cost_model::RooflineCosts compute(spec.gpu);
    return run_scenario(spec, compute, {false, {}}).at(0);
  }
  mutable input::ScenarioSpec spec;
};

std::int64_t ttft(const RequestRecord& r) { return r.first_token_ns - r.arrival_ns; }

TEST(StorageTier, AFetchCrossesThePathThenTheHostLinkThenPrefillsTheTail) {
  const Store s;
  const RunResult run = s.run("400Gbps");
  const cost_model::RooflineCosts c(s.spec.gpu);
  ASSERT_EQ(run.requests.size(), 2u);
  const std::int64_t bytes = cost_model::kv_bytes(s.spec.model, 1024).count;
  const std::int64_t path =
      5000 + from_seconds(Seconds{8.0 * static_cast<double>(bytes) / 400e9}).ns;
  const std::int64_t link =
      from_seconds(Seconds{8.0 * static_cast<double>(bytes) / s.spec.gpu.host_link.value}).ns;
  EXPECT_EQ(ttft(run.requests[0]), from_seconds(c.prefill(s.spec.model, 1537)).ns);
  EXPECT_EQ(ttft(run.requests[1]),
            path + link + from_seconds(c.extend(s.spec.model, 1024, 513)).ns);
  const PrefixCacheStats::Tier& t = run.prefix_cache.storage;
  EXPECT_EQ(t.written_blocks, 2) << "the two blocks the one-block host tier evicted";
  EXPECT_EQ(t.written_bytes, bytes);
  EXPECT_EQ(t.hits, 1);
  EXPECT_EQ(t.hit_tokens, 1024);
  EXPECT_EQ(t.read_bytes, bytes);
  EXPECT_EQ(t.failed_reads, 0);
  EXPECT_EQ(t.resident_bytes, bytes);
  EXPECT_EQ(run.prefix_cache.host.hits, 0) << "the host tier's block comes after the gap";
}

TEST(StorageTier, AFetchLostWithTheStorageNodePrefillsEverything) {
  const Store s;
  const RunResult run =
      s.run("400Gbps", R"(, {"type": "node_failure", "at": "10.000001s", "node": "store"})");
  const cost_model::RooflineCosts c(s.spec.gpu);
  ASSERT_EQ(run.requests.size(), 2u);
  EXPECT_EQ(ttft(run.requests[1]), 1000 + from_seconds(c.prefill(s.spec.model, 1537)).ns);
  EXPECT_EQ(run.prefix_cache.storage.failed_reads, 1);
  EXPECT_EQ(run.prefix_cache.storage.lost_blocks, 2);
  EXPECT_EQ(run.prefix_cache.storage.resident_bytes, 0);
}

TEST(StorageTier, AFetchThatWouldNotBeatPrefillingIsNotMade) {
  // At 1 Gbps the 128 MiB take about a second: prefilling them is far faster.
  const Store s;
  const RunResult run = s.run("1Gbps");
  const cost_model::RooflineCosts c(s.spec.gpu);
  ASSERT_EQ(run.requests.size(), 2u);
  EXPECT_EQ(ttft(run.requests[1]), from_seconds(c.prefill(s.spec.model, 1537)).ns);
  EXPECT_EQ(run.prefix_cache.storage.hits, 0);
  EXPECT_EQ(run.prefix_cache.storage.written_blocks, 2);
}

TEST(StorageTier, AMigrationFetchesItsPrefixFromTheStoreWhileTheRestTravels) {
  // gpu0 caches a 3-block prefix; its one-block host tier sends the first two blocks to the
  // store. gpu0 drains at 2 s while the request decodes: its migration to gpu1 ships what the
  // store lacks over gpu0-gpu1 and fetches the two blocks over store-gpu1 at the same time.
  const std::string trace = ::testing::TempDir() + "storage-tier-migration.jsonl";
  std::ofstream(trace)
      << R"({"timestamp": 0, "input_length": 1537, "output_length": 2000, "hash_ids": [1, 2, 3]})"
      << "\n";
  const std::string text = R"({
    "name": "store-move", "model": "llama-3.1-8b", "gpu": "h100",
    "cluster": {"nodes": [{"name": "gpu0", "host_memory": 67108864},
                          {"name": "gpu1", "host_memory": 67108864},
                          {"name": "store", "kind": "storage", "capacity": "1TiB"}],
                "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": "400Gbps", "latency": "5us"},
                          {"a": "gpu0", "b": "store", "bandwidth": "100Gbps", "latency": "5us"},
                          {"a": "gpu1", "b": "store", "bandwidth": "100Gbps", "latency": "5us"}]},
    "workload": {"arrival": "trace", "trace": ")" +
                           trace + R"("},
    "serving": {"max_batch": 4,
                "prefix_cache": {"block_tokens": 512, "host_offload": true,
                                 "storage_tier": {"node": "store"}}},
    "protection": {"mode": "none"},
    "events": [{"type": "drain", "at": "2s", "node": "gpu0"}],
    "policies": {"strategies": ["full_kv"]},
    "seed": 1, "duration": "30s"})";
  const input::ScenarioSpec spec = input::load_scenario_text(text, "t");
  const cost_model::RooflineCosts compute(spec.gpu);
  const RunResult run = run_scenario(spec, compute, {false, {}}).at(0);
  std::filesystem::remove(trace);
  ASSERT_EQ(run.moves.size(), 1u);
  const MoveRecord& m = run.moves[0];
  EXPECT_EQ(m.outcome, MoveOutcome::kDone);
  EXPECT_EQ(m.cached_tokens, 1024) << "the store's two blocks";
  EXPECT_EQ(m.end_ns - m.start_ns, m.estimated_ns) << "an idle network: the plan's own estimate";
  // The fetch is the longer leg: the store's path, then gpu1's host link.
  const std::int64_t bytes = cost_model::kv_bytes(spec.model, 1024).count;
  const std::int64_t fetch =
      5000 + from_seconds(Seconds{8.0 * static_cast<double>(bytes) / 100e9}).ns +
      from_seconds(Seconds{8.0 * static_cast<double>(bytes) / spec.gpu.host_link.value}).ns;
  EXPECT_EQ(m.end_ns - m.start_ns, fetch);
  const PrefixCacheStats::Tier& t = run.prefix_cache.storage;
  EXPECT_EQ(t.move_loads, 1);
  EXPECT_EQ(t.move_tokens, 1024);
  EXPECT_EQ(t.read_bytes, cost_model::kv_bytes(spec.model, 1024).count);
  EXPECT_EQ(run.requests.at(0).outcome, RequestOutcome::kCompleted);
}

TEST(StorageTier, BooksBalanceBesideReplicasUnderPressureAndFailures) {
  // The host-tier pressure scenario with a storage node of 3 GiB as the last tier, holding
  // half the runs' replicas too, failing at 6 s and back at 8 s.
  std::int64_t hits = 0, evicted = 0, lost = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    nlohmann::json j = nlohmann::json::parse(testing::pressure_scenario(seed, true));
    j["cluster"]["nodes"] = {{{"name", "store"}, {"kind", "storage"}, {"capacity", "3GiB"}}};
    j["cluster"]["links"] = {{{"a", "store"}, {"b", "hub"}, {"bandwidth", "200Gbps"}}};
    j["serving"]["prefix_cache"]["storage_tier"] = {{"node", "store"}};
    if (seed % 2 == 0)
      j["protection"] = {{"mode", "full"}, {"placement", "storage"}, {"store", "store"}};
    j["events"].push_back(
        {{"type", "node_failure"}, {"at", "6s"}, {"node", "store"}, {"repair_after", "2s"}});
    const input::ScenarioSpec spec = input::load_scenario_text(j.dump(), "p");
    const cost_model::RooflineCosts compute(spec.gpu);
    const std::int64_t block = cost_model::kv_bytes(spec.model, 128).count;
    for (const RunResult& run : run_scenario(spec, compute, {false, {}})) {
      const PrefixCacheStats::Tier& t = run.prefix_cache.storage;
      const std::string where = run.strategy + " seed " + std::to_string(seed);
      EXPECT_EQ(t.written_blocks, t.evicted_blocks + t.lost_blocks + t.resident_bytes / block)
          << where;
      EXPECT_EQ(t.written_bytes, t.written_blocks * block) << where;
      EXPECT_LE(t.peak_bytes, 3LL << 30) << where << ": never over the node's capacity";
      EXPECT_LE(t.hit_tokens, run.prefix_cache.hit_tokens) << where;
      EXPECT_EQ(t.read_bytes, (t.hit_tokens + t.move_tokens) / 128 * block) << where;
      hits += t.hits;
      evicted += t.evicted_blocks;
      lost += t.lost_blocks;
    }
  }
  EXPECT_GT(hits, 0) << "no prefill fetched from the storage tier";
  // A move's fetch from the storage tier is rare here (a recovery mostly ships its replica,
  // a few tokens behind); AMigrationFetchesItsPrefixFromTheStoreWhileTheRestTravels pins one.
  EXPECT_GT(evicted, 0) << "no run filled it";
  EXPECT_GT(lost, 0) << "no run lost it with its node";
}

}  // namespace
}  // namespace kvshift::sim
