// The SSD prefix tier (serving.prefix_cache.ssd_tier): the closed form of a
// reload from it (the SSD read into host DRAM, then the host link, then the
// tail's prefill), its capacity (LRU beyond it), a metamorphic check (an SSD
// that is never needed changes nothing), and the books under pressure and
// failures (every block written is evicted or resident; no node's SSD holds
// more than its capacity; the SSD keeps its blocks through a node failure).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include "cost_model/compute_costs.hpp"
#include "cost_model/storage.hpp"
#include "input/scenario_loader.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sim/time.hpp"
#include "tests/sim/serving/pressure_scenario.hpp"

namespace kvshift::sim {
namespace {

std::int64_t ttft(const RequestRecord& r) { return r.first_token_ns - r.arrival_ns; }

// Four requests 20 s apart on the two GPUs of one node (round robin), each a 2,048-token prompt
// whose first three 512-token blocks are named by a trace's hash_ids: A, B, C, then A again.
// The host tier holds `host_blocks` blocks, so B's write-through pushes A out (to the SSD, when
// there is one) and C's pushes B out. The last request lands on GPU 1, whose HBM holds only B;
// it arrives at `last_ms`.
RunResult run_abca(int host_blocks, const std::string& ssd, double last_ms = 60000) {
  // One file per test: ctest runs the tests of this file in parallel processes.
  const std::string trace = ::testing::TempDir() + "ssd-tier-" +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                            ".jsonl";
  std::ofstream out(trace);
  out.precision(17);
  for (int i = 0; i < 4; ++i) {
    const int group = i == 3 ? 0 : i;
    out << R"({"timestamp": )" << (i == 3 ? last_ms : i * 20000.0)
        << R"(, "input_length": 2048, "output_length": 1, "hash_ids": [)" << 3 * group + 1 << ", "
        << 3 * group + 2 << ", " << 3 * group + 3 << "]}\n";
  }
  out.close();
  const cost_model::ModelSpec model = cost_model::find_model("qwen2.5-1.5b");
  const std::int64_t host = host_blocks * cost_model::kv_bytes(model, 512).count;
  const std::string text = R"({
    "name": "ssd-tier", "model": "qwen2.5-1.5b", "gpu": "h100",
    "cluster": {"nodes": [{"name": "gpu0", "gpus": 2, "host_memory": )" +
                           std::to_string(host) + R"(}]},
    "workload": {"arrival": "trace", "trace": ")" +
                           trace + R"("},
    "serving": {"max_batch": 1,
                "prefix_cache": {"block_tokens": 512, "host_offload": true)" +
                           ssd + R"(}},
    "policies": {"strategies": ["full_kv"], "router": "round_robin"},
    "seed": 5, "duration": "120s"})";
  const input::ScenarioSpec spec = input::load_scenario_text(text, "t");
  const cost_model::RooflineCosts compute(spec.gpu);
  RunResult run = run_scenario(spec, compute, {false, {}}).at(0);
  std::filesystem::remove(trace);
  return run;
}

// The closed forms of run_abca's requests (qwen2.5-1.5b on an h100): a whole prefill, the
// tail's prefill after a 3-block hit, those blocks' bytes, and moving them at a rate in bits/s
// (an SSD) or over the host link, as the simulator prices it.
struct AbcaCosts {
  const cost_model::ModelSpec model = cost_model::find_model("qwen2.5-1.5b");
  const cost_model::GpuSpec gpu = cost_model::find_gpu("h100");
  const cost_model::RooflineCosts compute{gpu};
  const std::int64_t full = from_seconds(compute.prefill(model, 2048)).ns;
  const std::int64_t tail = from_seconds(compute.extend(model, 1536, 512)).ns;
  const std::int64_t bytes = cost_model::kv_bytes(model, 1536).count;
  const std::int64_t link = at(gpu.host_link.value);
  std::int64_t at(double bits_per_s) const {
    return from_seconds(8.0 * static_cast<double>(bytes) / bits_per_s).ns;
  }
};

TEST(SsdTier, AReloadReadsTheSsdThenCrossesTheHostLinkThenPrefillsTheTail) {
  const AbcaCosts c;
  const auto [full, tail, bytes, link] = std::tuple{c.full, c.tail, c.bytes, c.link};
  const std::int64_t read = c.at(56e9);  // 7 GB/s
  const std::string six_blocks = R"(, "ssd_tier": {"capacity": )" + std::to_string(2 * bytes) +
                                 R"(, "read_bandwidth": "7GB/s"})";

  const RunResult with_ssd = run_abca(3, six_blocks);
  ASSERT_EQ(with_ssd.requests.size(), 4u);
  for (std::size_t i = 1; i < 4; ++i) {
    ASSERT_GT(with_ssd.requests[i].arrival_ns, with_ssd.requests[i - 1].finish_ns) << "uncontended";
  }
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(ttft(with_ssd.requests[i]), full) << i;
  EXPECT_EQ(ttft(with_ssd.requests[3]), read + link + tail);
  const PrefixCacheStats::Tier& s = with_ssd.prefix_cache.ssd;
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.hit_tokens, 1536);
  EXPECT_EQ(s.read_bytes, bytes);
  // A, B, then C (pushed out of host DRAM when the last prefill writes A back) reach the SSD;
  // C pushes out B, which the SSD used least recently (A was just read).
  EXPECT_EQ(s.written_blocks, 9);
  EXPECT_EQ(s.written_bytes, 3 * bytes);
  EXPECT_EQ(s.evicted_blocks, 3);
  EXPECT_EQ(s.resident_bytes, 2 * bytes);
  EXPECT_EQ(s.peak_bytes, 2 * bytes);
  EXPECT_EQ(with_ssd.prefix_cache.host.hits, 0);

  // Without the SSD, A is gone: the last request prefills all of it.
  const RunResult host_only = run_abca(3, "");
  EXPECT_EQ(ttft(host_only.requests[3]), full);
  EXPECT_EQ(host_only.prefix_cache.ssd.written_blocks, 0);

  // An SSD of three blocks keeps only the last evicted: B pushes A out before A is asked for
  // (and C pushes B out at the end).
  const RunResult small = run_abca(3, R"(, "ssd_tier": {"capacity": )" + std::to_string(bytes) +
                                          R"(, "read_bandwidth": "7GB/s"})");
  EXPECT_EQ(ttft(small.requests[3]), full);
  EXPECT_EQ(small.prefix_cache.ssd.evicted_blocks, 6);
  EXPECT_EQ(small.prefix_cache.ssd.peak_bytes, bytes) << "never over its capacity";
  EXPECT_EQ(small.prefix_cache.ssd.hits, 0);

  // A host tier that keeps everything answers from DRAM: no SSD read, nothing spilled.
  const RunResult big_host = run_abca(9, six_blocks);
  EXPECT_EQ(ttft(big_host.requests[3]), link + tail);
  EXPECT_EQ(big_host.prefix_cache.ssd.written_blocks, 0);
  EXPECT_EQ(big_host.prefix_cache.host.hits, 1);
}

TEST(SsdTier, AReadWaitsForTheWriteAheadOfItOnTheSsd) {
  const AbcaCosts c;
  const auto [full, tail, bytes, link] = std::tuple{c.full, c.tail, c.bytes, c.link};
  const std::int64_t read = c.at(56e9), write = c.at(28e9);  // 7 and 3.5 GB/s
  const std::string ssd = R"(, "ssd_tier": {"capacity": )" + std::to_string(2 * bytes) +
                          R"(, "read_bandwidth": "7GB/s", "write_bandwidth": "3.5GB/s"})";
  // C's prefill ends at 40 s + full and its write-through pushes B out of host DRAM onto the
  // SSD; the second A, whose blocks only the SSD holds, arrives 1 ms into that write.
  const double c_done_ms = 40000.0 + static_cast<double>(full) * 1e-6;
  const RunResult r = run_abca(3, ssd, c_done_ms + 1.0);
  ASSERT_EQ(r.requests.size(), 4u);
  const std::int64_t c_done = r.requests[2].first_token_ns;
  ASSERT_EQ(c_done, r.requests[2].arrival_ns + full);
  const std::int64_t a = r.requests[3].arrival_ns;
  ASSERT_LT(a, c_done + write) << "the read is asked for while the write runs";
  EXPECT_EQ(r.requests[3].first_token_ns, c_done + write + read + link + tail);
  EXPECT_EQ(r.host_links.ssd_waited_ns, c_done + write - a);
  // Long after the write, the read alone: the closed form of the first test.
  const RunResult late = run_abca(3, ssd);
  EXPECT_EQ(ttft(late.requests[3]), read + link + tail);
  EXPECT_EQ(late.host_links.ssd_waited_ns, 0);
}

// The pressure scenarios (1 GiB of host DRAM a node, shared with replicas; GPU and node
// failures) with an SSD tier of 8 GiB a node: its blocks are written only when the host tier
// evicts them and leave only by eviction (a node failure keeps them), so written = evicted +
// resident; no node's SSD goes over capacity (the run throws otherwise); every request ends
// once; and the requests see what they would without the tier, or faster starts.
TEST(SsdTier, BooksBalanceUnderPressureAndFailures) {
  std::int64_t hits = 0, written = 0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    std::string text = testing::pressure_scenario(seed, true);
    const std::string offload = R"("host_offload": true)";
    const auto at = text.find(offload);
    ASSERT_NE(at, std::string::npos) << "the pressure scenario has a host tier";
    text.insert(at + offload.size(),
                R"(, "ssd_tier": {"capacity": "8GiB", "read_bandwidth": "6GB/s"})");
    const input::ScenarioSpec spec = input::load_scenario_text(text, "p");
    const cost_model::RooflineCosts compute(spec.gpu);
    const std::int64_t block = cost_model::kv_bytes(spec.model, 128).count;
    for (const RunResult& run : run_scenario(spec, compute, {false, {}})) {
      const PrefixCacheStats::Tier& s = run.prefix_cache.ssd;
      const RunTally& t = run.tally;
      EXPECT_EQ(t.arrived, t.completed + t.failed + t.unfinished) << run.strategy;
      EXPECT_EQ(s.resident_bytes % block, 0);
      EXPECT_EQ(s.written_blocks, s.evicted_blocks + s.resident_bytes / block)
          << run.strategy << " seed " << seed;
      EXPECT_EQ(s.written_bytes, s.written_blocks * block);
      EXPECT_LE(s.written_blocks, run.prefix_cache.host.evicted_blocks)
          << "only host-tier evictions reach the SSD";
      EXPECT_LE(s.peak_bytes, 4 * (8LL << 30)) << "four nodes of 8 GiB";
      EXPECT_EQ(s.read_bytes, (s.hit_tokens + s.move_tokens) / 128 * block);
      hits += s.hits;
      written += s.written_blocks;
    }
  }
  EXPECT_GT(written, 0) << "no run spilled to the SSD";
  EXPECT_GT(hits, 0) << "no run read from the SSD";
}

}  // namespace
}  // namespace kvshift::sim
