// Preemption (serving.preemption): admission books the prompt, decoding books
// the blocks it grows into, and a pass without room preempts the latest arrival.
// Exact on two requests sharing one GPU (recompute costs prefill of what the
// request held; a swap costs the host link both ways; the two runs differ by
// exactly that), metamorphic (nothing preempted: the same run as booking the
// final size), and properties over pressure scenarios with failures, drains,
// prefix caching and chunked prefill: every request ends once, the books add up.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "cost_model/compute_costs.hpp"
#include "cost_model/move_plan.hpp"
#include "cost_model/storage.hpp"
#include "input/scenario_loader.hpp"
#include "sim/serving/scenario_run.hpp"
#include "sim/time.hpp"
#include "tests/sim/serving/pressure_scenario.hpp"

namespace kvshift::sim {
namespace {

constexpr std::int64_t kBlock = 16;  // serving.kv_block_tokens

RunResult run(const std::string& text, bool trace = false) {
  const input::ScenarioSpec spec = input::load_scenario_text(text, "t");
  const cost_model::RooflineCosts compute(spec.gpu);
  RunOptions o;
  o.record_trace = trace;
  return run_scenario(spec, compute, o).at(0);
}

// One GPU whose KV room is `blocks` paged blocks of qwen2.5-1.5b; two requests from a trace:
// A (1,600 + 1,000 tokens) at 0 and B (800 + 1,000) at 0.2 s.
struct TwoRequests {
  // One file per test: ctest runs the tests of this file in parallel processes.
  std::string trace = ::testing::TempDir() + "preemption-" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".csv";
  TwoRequests() {
    std::ofstream(trace) << "arrival_s,prompt_tokens,output_tokens\n0,1600,1000\n0.2,800,1000\n";
  }
  ~TwoRequests() { std::filesystem::remove(trace); }
  std::string scenario(std::int64_t blocks, const std::string& preemption) const {
    const auto probe = input::load_scenario_text(text("80GB", preemption), "t");
    const std::int64_t weights =
        probe.model.parameter_count() * cost_model::dtype_bytes(probe.model.weight_dtype);
    const std::int64_t block = cost_model::kv_bytes(probe.model, kBlock).count;
    return text(std::to_string(weights + blocks * block), preemption);
  }
  std::string text(const std::string& hbm, const std::string& preemption) const {
    return R"({
      "name": "two", "model": "qwen2.5-1.5b", "gpu": "h100",
      "cluster": {"nodes": [{"name": "gpu0", "hbm": )" +
           (hbm.back() == 'B' ? "\"" + hbm + "\"" : hbm) + R"(, "host_memory": "64GiB"}]},
      "workload": {"arrival": "trace", "trace": ")" +
           trace + R"("},
      "serving": {"max_batch": 8, "kv_block_tokens": 16)" +
           preemption + R"(},
      "policies": {"strategies": ["full_kv"]},
      "seed": 1, "duration": "60s"})";
  }
};

std::int64_t ns(Seconds s) { return from_seconds(s).ns; }

TEST(Preemption, TheLatestArrivalIsPreemptedAndRecomputedOrSwappedAtExactlyTheirCost) {
  const TwoRequests two;
  // 180 blocks: both prompts fit, their growth does not; a 5 % watermark (9 blocks) keeps B
  // out until A is done.
  const std::string wm = R"(, "watermark": 0.05})";
  const RunResult rc = run(two.scenario(180, R"(, "preemption": {"mode": "recompute")" + wm), true);
  const RunResult sw = run(two.scenario(180, R"(, "preemption": {"mode": "swap")" + wm), true);
  for (const RunResult* r : {&rc, &sw}) {
    ASSERT_EQ(r->requests.size(), 2u);
    for (const RequestRecord& q : r->requests) EXPECT_EQ(q.outcome, RequestOutcome::kCompleted);
    EXPECT_EQ(r->requests[0].preemptions, 0);
    EXPECT_EQ(r->requests[1].preemptions, 1) << "B, the latest arrival, leaves once";
    EXPECT_EQ(r->preemption.preemptions, 1);
    EXPECT_EQ(r->preemption.preempted_requests, 1);
  }
  // Until B leaves the runs are the same: A's whole record and B's first token.
  EXPECT_EQ(rc.requests[0], sw.requests[0]);
  EXPECT_EQ(rc.requests[1].first_token_ns, sw.requests[1].first_token_ns);

  const input::ScenarioSpec spec = input::load_scenario_text(two.scenario(180, ""), "t");
  const cost_model::RooflineCosts c(spec.gpu);
  // Recompute: one prefill of every token B held, started when A's end gave the room back.
  EXPECT_EQ(rc.preemption.recomputes, 1);
  EXPECT_EQ(rc.preemption.swap_outs, 0);
  const std::int64_t held = rc.preemption.recompute_tokens;
  EXPECT_GT(held, 800);
  EXPECT_LT(held, 800 + 1000);
  const auto span = std::find_if(rc.trace.begin(), rc.trace.end(),
                                 [](const TraceSpan& s) { return s.name == "recompute"; });
  ASSERT_NE(span, rc.trace.end());
  EXPECT_EQ(span->start_ns, rc.requests[0].finish_ns);
  EXPECT_EQ(span->duration_ns, ns(c.prefill(spec.model, held)));
  EXPECT_EQ(rc.gpu_time.recompute, span->duration_ns);
  // Swap: the same blocks out to host DRAM and back over the host link, no recompute.
  const std::int64_t bytes =
      cost_model::kv_bytes(spec.model, (held + kBlock - 1) / kBlock * kBlock).count;
  EXPECT_EQ(sw.preemption.recomputes, 0);
  EXPECT_EQ(sw.preemption.swap_outs, 1);
  EXPECT_EQ(sw.preemption.swap_ins, 1);
  EXPECT_EQ(sw.preemption.swap_out_bytes, bytes);
  EXPECT_EQ(sw.preemption.swap_in_bytes, bytes);
  EXPECT_EQ(sw.preemption.swapped_peak_bytes, bytes);
  EXPECT_EQ(sw.gpu_time.recompute, 0);
  const std::int64_t copy =
      cost_model::leg_ns(cost_model::MoveRoute::Leg::kLocal, {}, spec.gpu.host_link, Bytes{bytes});
  // From the moment B rejoins, both runs decode it alone alike: its end differs by exactly
  // the recompute against the copy back.
  EXPECT_EQ(rc.requests[1].finish_ns - sw.requests[1].finish_ns, span->duration_ns - copy);
}

TEST(Preemption, NothingPreemptedIsTheSameRunAsBookingTheFinalSize) {
  const TwoRequests two;
  // 400 blocks hold both requests' final KV: nothing waits and nothing is preempted.
  const RunResult final_size = run(two.scenario(400, ""));
  for (const char* mode : {"recompute", "swap"}) {
    const RunResult r = run(two.scenario(
        400, std::string(R"(, "preemption": {"mode": ")") + mode + R"(", "watermark": 0})"));
    EXPECT_EQ(r.preemption.preemptions, 0) << mode;
    EXPECT_EQ(r.requests, final_size.requests) << mode;
    EXPECT_EQ(r.gpu_time.decode, final_size.gpu_time.decode) << mode;
  }
  // At 180 blocks, booking the final size makes B wait for A; preemption starts it at once.
  const RunResult waits = run(two.scenario(180, ""));
  const RunResult pre = run(two.scenario(180, R"(, "preemption": {"mode": "swap"})"));
  EXPECT_GE(waits.requests[1].first_token_ns, waits.requests[0].finish_ns);
  EXPECT_LT(pre.requests[1].first_token_ns, pre.requests[0].finish_ns);
}

TEST(Preemption, ARequestThatOutgrowsTheGpuAloneFailsOnceInsteadOfLooping) {
  // 120 blocks (1,920 tokens) of KV room; lognormal prompts (the loader cannot bound them) and
  // 1,500 output tokens: some requests outgrow the GPU on their own.
  const TwoRequests two;
  std::string text = two.scenario(120, R"(, "preemption": {"mode": "recompute"})");
  const std::string trace = R"("arrival": "trace", "trace": ")" + two.trace + "\"";
  text.replace(text.find(trace), trace.size(),
               R"("arrival": "poisson", "rate": 2, "max_requests": 40,
                  "prompt_tokens": {"distribution": "lognormal", "mean": 600, "cv": 1},
                  "output_tokens": 1500)");
  const RunResult r = run(text);
  ASSERT_EQ(r.requests.size(), 40u);
  int outgrown = 0;
  for (const RequestRecord& q : r.requests) {
    if (q.outcome == RequestOutcome::kCompleted) {
      EXPECT_LE(q.prompt_tokens + q.output_tokens - 1, 120 * kBlock) << q.id;
    }
    if (q.outcome != RequestOutcome::kFailed) continue;  // (or waits behind a huge prompt)
    ++outgrown;
    EXPECT_NE(q.reason.find("outgrows the GPU's KV room"), std::string::npos) << q.reason;
    EXPECT_GT(q.prompt_tokens + q.output_tokens - 1, 120 * kBlock) << q.id;
  }
  EXPECT_GT(outgrown, 0);
  EXPECT_GT(r.tally.completed, 0);
}

// ------------------------------------------------------------ properties

// The pressure scenario with preemption, and outputs up to 3,000 tokens: decoding outgrows
// HBM.
std::string with_preemption(std::string text, const std::string& mode, bool chunked) {
  const std::string output = R"("max": 400)";
  const auto out = text.find(output);
  EXPECT_NE(out, std::string::npos);
  text.replace(out, output.size(), R"("max": 3000)");
  const std::string at = R"("serving": {"max_batch": 16,)";
  const auto pos = text.find(at);
  EXPECT_NE(pos, std::string::npos);
  text.insert(pos + at.size(), R"( "preemption": {"mode": ")" + mode + R"("},)" +
                                   (chunked ? R"( "prefill_chunk_tokens": 1024,)" : ""));
  return text;
}

TEST(PreemptionProperties, EveryRequestEndsOnceAndTheBooksAddUpUnderPressureAndFailures) {
  std::int64_t preempted = 0, swapped = 0;
  for (const std::string mode : {"recompute", "swap"}) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      for (const bool tiers : {false, true}) {
        const std::string text =
            with_preemption(testing::pressure_scenario(seed, tiers), mode, seed == 2);
        const input::ScenarioSpec spec = input::load_scenario_text(text, "t");
        const cost_model::RooflineCosts compute(spec.gpu);
        // Every HBM booking and host-DRAM swap is checked as it happens (a logic_error).
        const std::vector<RunResult> runs = run_scenario(spec, compute, {});
        for (const RunResult& r : runs) {
          const std::string where =
              mode + " seed " + std::to_string(seed) + (tiers ? " tiers " : " ") + r.strategy;
          const PreemptionStats& p = r.preemption;
          std::int64_t by_request = 0, waiting = 0, outgrown = 0;
          for (std::size_t i = 0; i < r.requests.size(); ++i) {
            const RequestRecord& q = r.requests[i];
            ASSERT_EQ(q.id, i) << where << ": every request recorded once, in order";
            by_request += q.preemptions;
            if (q.outcome == RequestOutcome::kCompleted) {
              EXPECT_GE(q.first_token_ns, q.arrival_ns) << where;
              EXPECT_GE(q.finish_ns, q.first_token_ns) << where;
            } else {
              EXPECT_FALSE(q.reason.empty()) << where << " request " << q.id;
            }
            if (q.outcome == RequestOutcome::kUnfinished && q.reason.rfind("preempted", 0) == 0) {
              ++waiting;
            }
            if (q.reason.find("outgrows") != std::string::npos) ++outgrown;
          }
          EXPECT_EQ(r.tally.arrived, static_cast<std::int64_t>(r.requests.size())) << where;
          EXPECT_EQ(by_request, p.preemptions) << where;
          EXPECT_LE(p.preempted_requests, p.preemptions) << where;
          // Each preemption resumes (a resumption lost with its GPU runs again), is still
          // waiting at the end, or failed for outgrowing its GPU.
          EXPECT_GE(p.recomputes + p.swap_ins + waiting + outgrown, p.preemptions) << where;
          EXPECT_LE(p.swap_ins, p.swap_outs) << where;
          EXPECT_LE(p.swap_in_bytes, p.swap_out_bytes) << where;
          EXPECT_LE(p.swap_outs, p.preemptions) << where;
          if (mode == "recompute") {
            EXPECT_EQ(p.swap_outs + p.swap_fallbacks, 0) << where;
          } else {
            EXPECT_LE(p.swapped_peak_bytes, p.swap_out_bytes) << where;
          }
          if (p.recomputes == 0) {
            EXPECT_EQ(r.gpu_time.recompute, 0) << where;
          }
          preempted += p.preemptions;
          swapped += p.swap_outs;
        }
      }
    }
  }
  EXPECT_GT(preempted, 0) << "the pressure scenarios preempt";
  EXPECT_GT(swapped, 0) << "and swap";
}

}  // namespace
}  // namespace kvshift::sim
