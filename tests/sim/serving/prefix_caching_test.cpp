// Prefix caching in the serving model: the closed form of a hit, the metamorphic
// checks (no shared prefix: the run of a model without a cache; shared prefixes
// leave arrivals and lengths alone), and the books under HBM pressure and
// failures (every inserted block is evicted, lost or resident at the end).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cost_model/compute_costs.hpp"
#include "cost_model/storage.hpp"
#include "input/scenario_loader.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sim/time.hpp"
#include "sim/workload.hpp"
#include "tests/sim/serving/pressure_scenario.hpp"

namespace kvshift::sim {
namespace {

// Two requests far apart on an idle GPU, both opening with the same prefix.
std::string two_requests(std::int64_t prompt, std::int64_t prefix, const std::string& cache) {
  return R"({
    "name": "prefix", "model": "qwen2.5-1.5b", "gpu": "h100",
    "cluster": {"nodes": [{"name": "gpu0"}, {"name": "gpu1"}],
                "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": "100Gbps", "latency": "1us"}]},
    "workload": {"arrival": "poisson", "rate": 0.2, "max_requests": 2,
                 "prompt_tokens": )" +
         std::to_string(prompt) + R"(, "output_tokens": 1,
                 "shared_prefix": {"share": 1, "groups": 1, "tokens": )" +
         std::to_string(prefix) + R"(}},
    "serving": {"max_batch": 1)" +
         cache + R"(},
    "policies": {"strategies": ["full_kv"]},
    "seed": 5, "duration": "120s"})";
}

std::int64_t ttft(const RequestRecord& r) { return r.first_token_ns - r.arrival_ns; }

TEST(PrefixCaching, AHitSavesExactlyPrefillMinusTheTailOnThePrefix) {
  struct Case {
    std::int64_t prompt, prefix, reused;
  };
  // Whole 512-token blocks of the prefix are reused, never the prompt's last token.
  for (const Case c : {Case{2048, 1024, 1024}, Case{2048, 1100, 1024}, Case{1024, 1024, 512},
                       Case{513, 4096, 512}, Case{512, 512, 0}, Case{3000, 100, 0}}) {
    const input::ScenarioSpec spec = input::load_scenario_text(
        two_requests(c.prompt, c.prefix, R"(, "prefix_cache": {"block_tokens": 512})"), "t");
    const cost_model::RooflineCosts compute(spec.gpu);
    const RunResult run = run_scenario(spec, compute, {false, {}}).at(0);
    ASSERT_EQ(run.requests.size(), 2u);
    const RequestRecord& first = run.requests[0];
    const RequestRecord& second = run.requests[1];
    ASSERT_GT(second.arrival_ns, first.first_token_ns);  // uncontended
    const std::int64_t full = from_seconds(compute.prefill(spec.model, c.prompt)).ns;
    EXPECT_EQ(ttft(first), full);
    const std::int64_t expected =
        c.reused == 0 ? full
                      : from_seconds(compute.extend(spec.model, c.reused, c.prompt - c.reused)).ns;
    EXPECT_EQ(ttft(second), expected) << c.prompt << " " << c.prefix;
    const PrefixCacheStats& st = run.prefix_cache;
    EXPECT_EQ(st.prefills, 2);
    EXPECT_EQ(st.hits, c.reused > 0 ? 1 : 0);
    EXPECT_EQ(st.hit_tokens, c.reused);
    EXPECT_EQ(st.saved_prefill_ns, full - expected);
    EXPECT_EQ(st.prompt_tokens, 2 * c.prompt);
  }
}

TEST(PrefixCaching, WithoutSharedPrefixesACacheChangesNothing) {
  const char* base = R"({
    "name": "m", "model": "qwen2.5-1.5b", "gpu": "h100",
    "cluster": {"node": {"gpus": 2, "hbm": "24GiB"},
                "star": {"nodes": 3, "bandwidth": "25Gbps", "latency": "5us"}},
    "workload": {"arrival": "poisson", "rate": 40,
                 "prompt_tokens": {"distribution": "lognormal", "mean": 1500, "cv": 1},
                 "output_tokens": {"distribution": "uniform", "min": 1, "max": 300})";
  const std::string tail = R"(,
    "protection": {"mode": "full"},
    "events": [{"type": "node_failure", "at": "6s", "node": "gpu1"}],
    "policies": {"strategies": ["full_kv", "token_replay"]},
    "seed": 11, "duration": "15s"})";
  const input::ScenarioSpec off = input::load_scenario_text(std::string(base) + "}" + tail, "off");
  const input::ScenarioSpec on = input::load_scenario_text(
      std::string(base) + R"(, "shared_prefix": {"share": 0, "tokens": 512}},
      "serving": {"prefix_cache": {"block_tokens": 256}})" +
          tail,
      "on");
  const cost_model::RooflineCosts compute(off.gpu);
  const auto a = run_scenario(off, compute, {false, {}});
  const auto b = run_scenario(on, compute, {false, {}});
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tally, b[i].tally) << a[i].strategy;
    EXPECT_EQ(a[i].gpu_time.prefill, b[i].gpu_time.prefill);
    EXPECT_EQ(b[i].prefix_cache.hits, 0);
    EXPECT_EQ(b[i].prefix_cache.inserted_blocks, 0);
    EXPECT_GT(b[i].prefix_cache.prefills, 0);
  }
}

TEST(PrefixCaching, SharedPrefixesLeaveArrivalsAndLengthsAlone) {
  WorkloadSpec w;
  w.rate_per_s = 50;
  w.prompt_tokens = {TokenDistKind::kUniform, 0, 10, 4000};
  w.output_tokens = {TokenDistKind::kUniform, 0, 1, 100};
  const auto plain = generate_requests(w, 9, Seconds{20});
  w.shared_prefix = SharedPrefixSpec{0.6, 4, 1000};
  const auto shared = generate_requests(w, 9, Seconds{20});
  ASSERT_EQ(plain.size(), shared.size());
  std::int64_t sharing = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].arrival_ns, shared[i].arrival_ns);
    EXPECT_EQ(plain[i].prompt_tokens, shared[i].prompt_tokens);
    EXPECT_EQ(plain[i].output_tokens, shared[i].output_tokens);
    EXPECT_EQ(plain[i].prefix_group, -1);
    if (shared[i].prefix_group >= 0) {
      ++sharing;
      EXPECT_LT(shared[i].prefix_group, 4);
      EXPECT_EQ(shared[i].prefix_tokens, std::min<std::int64_t>(1000, shared[i].prompt_tokens));
    }
  }
  const double share = static_cast<double>(sharing) / static_cast<double>(plain.size());
  EXPECT_NEAR(share, 0.6, 0.05) << plain.size() << " requests";
}

// Random scenarios under HBM pressure (up to 720 prefixes of 57 MiB each), failures and drains: the
// router and the cache check their capacity on every booking (a breach throws), every request ends
// once, and every block inserted is evicted, lost with a GPU, or resident at the end.
TEST(PrefixCaching, BooksBalanceUnderPressureAndFailures) {
  std::int64_t evicted = 0, lost = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const std::string text = testing::pressure_scenario(seed, false);
    const input::ScenarioSpec spec = input::load_scenario_text(text, "p");
    const cost_model::RooflineCosts compute(spec.gpu);
    const std::int64_t block = cost_model::kv_bytes(spec.model, 128).count;
    for (const RunResult& run : run_scenario(spec, compute, {false, {}})) {
      const PrefixCacheStats& st = run.prefix_cache;
      const RunTally& t = run.tally;
      EXPECT_EQ(t.arrived, t.completed + t.failed + t.unfinished) << run.strategy;
      EXPECT_EQ(static_cast<std::int64_t>(run.requests.size()), t.arrived);
      EXPECT_GT(st.hits, 0) << run.strategy << " seed " << seed;
      EXPECT_LE(st.hits, st.lookups);
      EXPECT_LE(st.lookups, st.prefills);
      EXPECT_LE(st.hit_tokens, st.lookup_tokens);
      EXPECT_LE(st.lookup_tokens, st.prompt_tokens);
      EXPECT_GT(st.saved_prefill_ns, 0);
      EXPECT_EQ(st.resident_bytes % block, 0);
      EXPECT_EQ(st.inserted_blocks, st.evicted_blocks + st.lost_blocks + st.resident_bytes / block)
          << run.strategy << " seed " << seed;
      evicted += st.evicted_blocks;
      lost += st.lost_blocks;
    }
  }
  EXPECT_GT(evicted, 0) << "no run put the cache under HBM pressure";
  EXPECT_GT(lost, 0) << "no run lost a cache to a failure";
}

// Two single-GPU nodes; the second request arrives while the first (same prefix) still
// decodes. Least loaded sends it to the idle GPU, which lacks the prefix; prefix-aware
// sends it where its first token comes sooner: behind the decoder's step, on the prefix.
TEST(PrefixCaching, PrefixAwareRoutingGoesWhereTheFirstTokenComesSoonest) {
  for (const char* router : {"least_loaded", "prefix_aware"}) {
    const std::string text = R"({
      "name": "route", "model": "qwen2.5-1.5b", "gpu": "h100",
      "cluster": {"nodes": [{"name": "gpu0"}, {"name": "gpu1"}],
                  "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": "100Gbps", "latency": "1us"}]},
      "workload": {"arrival": "poisson", "rate": 2, "max_requests": 2,
                   "prompt_tokens": 6000, "output_tokens": 4000,
                   "shared_prefix": {"share": 1, "groups": 1, "tokens": 5120}},
      "serving": {"max_batch": 8, "prefix_cache": {"block_tokens": 512}},
      "policies": {"strategies": ["full_kv"], "router": ")" +
                             std::string(router) + R"("},
      "seed": 5, "duration": "120s"})";
    const input::ScenarioSpec spec = input::load_scenario_text(text, "t");
    const cost_model::RooflineCosts compute(spec.gpu);
    const RunResult run = run_scenario(spec, compute, {false, {}}).at(0);
    ASSERT_EQ(run.requests.size(), 2u);
    const RequestRecord &a = run.requests[0], &b = run.requests[1];
    ASSERT_GT(b.arrival_ns, a.first_token_ns);
    ASSERT_LT(b.arrival_ns, a.finish_ns) << "the case needs the first still decoding";
    const bool aware = std::string(router) == "prefix_aware";
    EXPECT_EQ(b.first_node, aware ? a.first_node : std::string("gpu1")) << router;
    EXPECT_EQ(run.prefix_cache.hits, aware ? 1 : 0) << router;
    const std::int64_t full = from_seconds(compute.prefill(spec.model, 6000)).ns;
    const std::int64_t tail = from_seconds(compute.extend(spec.model, 5120, 880)).ns;
    if (aware) {
      EXPECT_GE(ttft(b), tail);
      EXPECT_LT(ttft(b), full) << "the step in flight plus the tail beats a whole prefill";
    } else {
      EXPECT_EQ(ttft(b), full);
    }
  }
}

TEST(PrefixCaching, PrefixAwareRoutingNeedsTheCache) {
  const std::string text = R"({
    "name": "route", "model": "qwen2.5-1.5b", "gpu": "h100",
    "cluster": {"nodes": [{"name": "gpu0"}]},
    "workload": {"arrival": "poisson", "rate": 2, "prompt_tokens": 600, "output_tokens": 40},
    "policies": {"strategies": ["full_kv"], "router": "prefix_aware"},
    "duration": "10s"})";
  try {
    input::load_scenario_text(text, "t");
    FAIL() << "loaded";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/policies/router: prefix_aware routes by cached prefix: "
                                         "it needs serving.prefix_cache"),
              std::string::npos)
        << e.what();
  }
}

// A drain moves request A (prompt 6,000 tokens, a 5,120-token shared prefix) from gpu0 to
// gpu1, whose cache holds that prefix from request B (round robin put B there; it finished).
// Every strategy moves or rebuilds only the tokens after the prefix: the closed form.
TEST(PrefixCaching, AMoveShipsOnlyWhatTheDestinationLacks) {
  for (const char* strategy : {"full_kv", "token_replay"}) {
    const std::string text = R"({
      "name": "move", "model": "qwen2.5-1.5b", "gpu": "h100",
      "cluster": {"nodes": [{"name": "gpu0"}, {"name": "gpu1"}],
                  "links": [{"a": "gpu0", "b": "gpu1", "bandwidth": "10Gbps", "latency": "1ms"}]},
      "workload": {"arrival": "trace", "trace": "TRACE"},
      "serving": {"max_batch": 8, "prefix_cache": {"block_tokens": 512}},
      "events": [{"type": "drain", "at": "5s", "node": "gpu0"}],
      "policies": {"strategies": [")" +
                             std::string(strategy) + R"("], "router": "round_robin"},
      "seed": 5, "duration": "60s"})";
    const std::string trace = ::testing::TempDir() + "move-reuse-trace.jsonl";
    // Mooncake-style: the same hash_ids name the same prefix blocks.
    std::ofstream(trace)
        << R"({"timestamp": 0, "input_length": 6000, "output_length": 4000, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]})"
        << "\n"
        << R"({"timestamp": 1000, "input_length": 6000, "output_length": 2, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]})"
        << "\n";
    std::string t = text;
    t.replace(t.find("TRACE"), 5, trace);
    const input::ScenarioSpec spec = input::load_scenario_text(t, "t");
    const cost_model::RooflineCosts compute(spec.gpu);
    const RunResult run = run_scenario(spec, compute, {false, {}}).at(0);
    std::filesystem::remove(trace);
    ASSERT_EQ(run.moves.size(), 1u) << strategy;
    const MoveRecord& m = run.moves[0];
    ASSERT_EQ(m.outcome, MoveOutcome::kDone);
    EXPECT_EQ(m.to, "gpu1");
    EXPECT_EQ(m.cached_tokens, 5120) << "ten 512-token blocks, short of the whole prompt";
    const std::int64_t rest = m.context_tokens - 5120;
    if (std::string(strategy) == "full_kv") {
      EXPECT_EQ(m.kv_bytes, cost_model::kv_bytes(spec.model, rest).count);
      EXPECT_EQ(m.end_ns - m.start_ns,
                1'000'000 + from_seconds(8.0 * static_cast<double>(m.kv_bytes) / 10e9).ns);
    } else {
      EXPECT_EQ(m.tail_tokens, rest);
      EXPECT_EQ(m.token_bytes, 4 * rest) << "only the ids after the prefix";
      const std::int64_t ids = 1'000'000 + from_seconds(8.0 * 4.0 * rest / 10e9).ns;
      EXPECT_EQ(m.end_ns - m.start_ns,
                ids + from_seconds(compute.extend(spec.model, 5120, rest)).ns);
    }
    EXPECT_EQ(m.estimated_ns, m.end_ns - m.start_ns) << "the plan's own estimate";
    ASSERT_EQ(run.requests.size(), 2u);
    EXPECT_EQ(run.requests[0].outcome, RequestOutcome::kCompleted);
    EXPECT_EQ(run.prefix_cache.inserted_blocks,
              run.prefix_cache.evicted_blocks + run.prefix_cache.lost_blocks +
                  run.prefix_cache.resident_bytes / cost_model::kv_bytes(spec.model, 512).count);
  }
}

}  // namespace
}  // namespace kvshift::sim
