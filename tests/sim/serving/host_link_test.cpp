// Host links take turns: a CopyQueue serves one copy at a time in the order
// asked (exact arithmetic), and in a run two prefills that load their prefixes
// from the host tier onto one GPU at the same instant load one after the other.
#include "sim/serving/copy_queue.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cost_model/compute_costs.hpp"
#include "cost_model/storage.hpp"
#include "input/scenario_loader.hpp"
#include "sim/serving/scenario_run.hpp"

namespace kvshift::sim {
namespace {

TEST(CopyQueue, CopiesTakeTurnsInTheOrderAsked) {
  CopyQueue q;
  EXPECT_EQ(q.copy(SimTime{10}, SimTime{10}, SimTime{5}), SimTime{15}) << "alone: its length";
  EXPECT_EQ(q.backlog(SimTime{12}), SimTime{3});
  EXPECT_EQ(q.copy(SimTime{12}, SimTime{12}, SimTime{5}), SimTime{20}) << "behind the first";
  EXPECT_EQ(q.waited_ns(), 3);
  // Its data is ready only at 40: it starts then, and waited for nobody.
  EXPECT_EQ(q.copy(SimTime{20}, SimTime{40}, SimTime{5}), SimTime{45});
  EXPECT_EQ(q.waited_ns(), 3);
  // One asked while that one waits for its data queues behind it.
  EXPECT_EQ(q.copy(SimTime{21}, SimTime{21}, SimTime{1}), SimTime{46});
  EXPECT_EQ(q.waited_ns(), 3 + (45 - 21));
  EXPECT_EQ(q.busy_ns(), 16);
  q.clear(SimTime{30});  // its end failed: what was queued is gone
  EXPECT_EQ(q.backlog(SimTime{30}), SimTime{});
  EXPECT_EQ(q.copy(SimTime{30}, SimTime{30}, SimTime{2}), SimTime{32});
}

TEST(HostLink, TwoTierLoadsOntoOneGpuAtOnceLoadOneAfterTheOther) {
  // One H100 serving Llama-3.1-8B with a host tier. Two requests cache prefixes A and B
  // (16 blocks of 512 tokens each); a GPU failure empties HBM, the host tier keeps them;
  // then two requests on A and B arrive together and both load from the host tier.
  const std::string trace = ::testing::TempDir() + "host-link-trace.jsonl";
  auto row = [](int ms, int first) {
    std::string ids;
    for (int b = 0; b < 16; ++b) ids += (b ? ", " : "") + std::to_string(first + b);
    return R"({"timestamp": )" + std::to_string(ms) +
           R"(, "input_length": 8193, "output_length": 1, "hash_ids": [)" + ids + "]}\n";
  };
  std::ofstream(trace) << row(0, 1) << row(1000, 101) << row(10000, 1) << row(10000, 101);
  const std::string text = R"({
    "name": "host-link", "model": "llama-3.1-8b", "gpu": "h100",
    "cluster": {"nodes": [{"name": "gpu0"}]},
    "workload": {"arrival": "trace", "trace": ")" +
                           trace + R"("},
    "serving": {"max_batch": 4, "prefix_cache": {"block_tokens": 512, "host_offload": true}},
    "events": [{"type": "gpu_failure", "at": "5s", "node": "gpu0", "gpu": 0,
                "repair_after": "1s"}],
    "policies": {"strategies": ["full_kv"]},
    "seed": 1, "duration": "20s"})";
  const input::ScenarioSpec spec = input::load_scenario_text(text, "t");
  const cost_model::RooflineCosts compute(spec.gpu);
  const RunResult run = run_scenario(spec, compute, {false, {}}).at(0);
  std::filesystem::remove(trace);
  ASSERT_EQ(run.requests.size(), 4u);
  const std::int64_t bytes = cost_model::kv_bytes(spec.model, 8192).count;
  const std::int64_t load =
      from_seconds(8.0 * static_cast<double>(bytes) / spec.gpu.host_link.value).ns;
  const std::int64_t tail = from_seconds(compute.extend(spec.model, 8192, 1)).ns;
  ASSERT_GT(load, tail) << "the regime where the link, not the GPU, orders them";
  auto ttft = [&](int i) { return run.requests[i].first_token_ns - run.requests[i].arrival_ns; };
  EXPECT_EQ(ttft(2), load + tail);
  EXPECT_EQ(ttft(3), 2 * load + tail) << "its load waited for the first on the host link";
  EXPECT_EQ(run.prefix_cache.host.hits, 2);
  EXPECT_EQ(run.host_links.to_gpu_bytes, 2 * bytes);
  EXPECT_EQ(run.host_links.from_gpu_bytes, 2 * bytes) << "A and B written through once each";
  EXPECT_EQ(run.host_links.waited_ns, load);
}

}  // namespace
}  // namespace kvshift::sim
