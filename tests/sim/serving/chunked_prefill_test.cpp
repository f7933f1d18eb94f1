// Chunked prefill (serving.prefill_chunk_tokens): a prompt is computed a chunk
// at a time, each chunk on the KV of the ones before it, with one decode step of
// the GPU's batch carried in each chunk's pass. Closed form alone on a GPU, the
// exact mixed passes on the trace, and metamorphic: without decoders, a chunk
// as long as the prompt changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "cost_model/compute_costs.hpp"
#include "input/scenario_loader.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sim/time.hpp"

namespace kvshift::sim {
namespace {

std::int64_t ttft(const RequestRecord& r) { return r.first_token_ns - r.arrival_ns; }

std::string scenario(std::int64_t prompt, std::int64_t output, int requests, double rate,
                     const std::string& chunk) {
  return R"({
    "name": "chunked", "model": "qwen2.5-1.5b", "gpu": "h100",
    "cluster": {"nodes": [{"name": "gpu0"}]},
    "workload": {"arrival": "poisson", "rate": )" +
         std::to_string(rate) + R"(, "max_requests": )" + std::to_string(requests) + R"(,
                 "prompt_tokens": )" +
         std::to_string(prompt) + R"(, "output_tokens": )" + std::to_string(output) + R"(},
    "serving": {"max_batch": 8)" +
         chunk + R"(},
    "policies": {"strategies": ["full_kv"]},
    "seed": 3, "duration": "300s"})";
}

RunResult run(const std::string& text, bool trace = false) {
  const input::ScenarioSpec spec = input::load_scenario_text(text, "t");
  const cost_model::RooflineCosts compute(spec.gpu);
  RunOptions o;
  o.record_trace = trace;
  return run_scenario(spec, compute, o).at(0);
}

TEST(ChunkedPrefill, AloneAPromptCostsTheSumOfItsChunksOnTheirPrefixes) {
  const input::ScenarioSpec spec = input::load_scenario_text(scenario(5000, 1, 1, 1, ""), "t");
  const cost_model::RooflineCosts c(spec.gpu);
  const auto ns = [](Seconds s) { return from_seconds(s).ns; };
  struct Case {
    std::int64_t chunk, expected;
  };
  for (const Case k :
       {Case{2048, ns(c.prefill(spec.model, 2048)) + ns(c.extend(spec.model, 2048, 2048)) +
                       ns(c.extend(spec.model, 4096, 904))},
        Case{5000, ns(c.prefill(spec.model, 5000))}, Case{9999, ns(c.prefill(spec.model, 5000))},
        Case{4999, ns(c.prefill(spec.model, 4999)) + ns(c.extend(spec.model, 4999, 1))}}) {
    const RunResult r =
        run(scenario(5000, 1, 1, 1, R"(, "prefill_chunk_tokens": )" + std::to_string(k.chunk)));
    ASSERT_EQ(r.requests.size(), 1u);
    EXPECT_EQ(ttft(r.requests[0]), k.expected) << "chunk " << k.chunk;
    EXPECT_EQ(r.gpu_time.prefill, k.expected) << "each chunk is prefill time";
    EXPECT_EQ(r.gpu_time.decode, 0) << "alone: no decode step rides along";
  }
}

TEST(ChunkedPrefill, WithoutDecodersToCarryAChunkAsLongAsThePromptChangesNothing) {
  // Requests far apart: no prefill ever meets a decoding batch.
  const std::string whole = scenario(3000, 20, 30, 0.1, "");
  const std::string chunked = scenario(3000, 20, 30, 0.1, R"(, "prefill_chunk_tokens": 3000)");
  const RunResult a = run(whole), b = run(chunked);
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    ASSERT_LT(a.requests[i].finish_ns,
              i + 1 < a.requests.size() ? a.requests[i + 1].arrival_ns : a.duration_ns);
    EXPECT_EQ(a.requests[i].first_token_ns, b.requests[i].first_token_ns) << i;
    EXPECT_EQ(a.requests[i].finish_ns, b.requests[i].finish_ns) << i;
  }
}

TEST(ChunkedPrefill, EachChunkCarriesOneDecodeStepOfTheBatch) {
  // A long-running decoder, then (2 s later) a 12,000-token prompt in chunks of 1,024.
  const std::string trace = ::testing::TempDir() + "chunked-prefill-trace.csv";
  std::ofstream(trace) << "arrival_s,prompt_tokens,output_tokens\n0,256,100000\n2,12000,1\n";
  const std::string text = R"({
    "name": "interleave", "model": "qwen2.5-1.5b", "gpu": "h100",
    "cluster": {"nodes": [{"name": "gpu0"}]},
    "workload": {"arrival": "trace", "trace": ")" +
                           trace + R"("},
    "serving": {"max_batch": 8, "prefill_chunk_tokens": 1024},
    "policies": {"strategies": ["full_kv"]},
    "seed": 3, "duration": "10s"})";
  const input::ScenarioSpec spec = input::load_scenario_text(text, "t");
  const cost_model::RooflineCosts c(spec.gpu);
  const RunResult r = run(text, true);
  std::filesystem::remove(trace);
  std::vector<const TraceSpan*> mixed;
  for (const TraceSpan& s : r.trace) {
    if (s.track.rfind("gpu:", 0) == 0 && s.name == "prefill+decode") mixed.push_back(&s);
  }
  std::sort(mixed.begin(), mixed.end(),
            [](const TraceSpan* a, const TraceSpan* b) { return a->start_ns < b->start_ns; });
  ASSERT_EQ(mixed.size(), 12u) << "12 chunks, each with the decoder's step in its pass";
  // Chunk k on the 1,024·k tokens before it, plus the decoder's step beyond the weight pass
  // both share, at the context the decoder had reached (one more each chunk).
  const double shared = c.decode_step(spec.model, 1, 0).value;
  std::int64_t ctx = -1;
  for (std::int64_t k = 0; k < 12; ++k) {
    const std::int64_t tokens = std::min<std::int64_t>(1024, 12000 - 1024 * k);
    const double chunk =
        (k == 0 ? c.prefill(spec.model, 1024) : c.extend(spec.model, 1024 * k, tokens)).value;
    auto expected = [&](std::int64_t context) {
      return from_seconds(Seconds{chunk + c.decode_step(spec.model, 1, context).value - shared}).ns;
    };
    if (ctx < 0) {  // the decoder's context when the prompt came in
      for (std::int64_t x = 256; x < 256 + 100'000 && ctx < 0; ++x) {
        if (expected(x) == mixed[0]->duration_ns) ctx = x;
      }
      ASSERT_GE(ctx, 256);
    }
    EXPECT_EQ(mixed[k]->duration_ns, expected(ctx + k)) << "chunk " << k;
    if (k > 0) {
      EXPECT_EQ(mixed[k]->start_ns, mixed[k - 1]->start_ns + mixed[k - 1]->duration_ns)
          << "back to back: nothing runs between two chunks";
    }
  }
  ASSERT_EQ(r.requests.size(), 2u);
  EXPECT_EQ(r.requests[1].first_token_ns, mixed[11]->start_ns + mixed[11]->duration_ns);
}

}  // namespace
}  // namespace kvshift::sim
