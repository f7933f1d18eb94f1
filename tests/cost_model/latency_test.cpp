#include <gtest/gtest.h>

#include "cost_model/cost_record.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::cost_model {
namespace {

struct Fixture {
  const ModelSpec& model = find_model("qwen2.5-1.5b");
  OmissionPlan topology = OmissionPlan::parse("paper", model);
  GpuSpec gpu = find_gpu("rtx3060-laptop");
  RooflineCosts compute{gpu};

  CostRecord at(double bps, std::int64_t tokens = 512, double latency_s = 0.01) const {
    CostQuery q;
    q.model = &model;
    q.omission = &topology;
    q.gpu = &gpu;
    q.compute = &compute;
    q.tokens = tokens;
    q.path = Path{{bps}, {latency_s}};
    return evaluate(q);
  }
};

TEST(Latency, ClosedFormsFollowDesign) {
  // Each figure is latency + 8·bytes/B, then the receiver's GPU work, every term rounded to
  // the nanosecond as the simulator rounds it (so `kvshift cost` and a simulated move agree).
  const Fixture f;
  const CostRecord r = f.at(100e6);
  const auto& l = *r.latency;
  auto ns = [](double s) { return round_to_ns(s); };
  EXPECT_EQ(ns(l.move.at(Strategy::kFullKv).value), ns(0.01) + ns(8.0 * 14 * 1048576 / 100e6));
  EXPECT_EQ(ns(l.move.at(Strategy::kTokenReplay).value),
            ns(0.01) + ns(8.0 * 4 * 512 / 100e6) + ns(l.prefill.value));
  EXPECT_EQ(ns(l.move.at(Strategy::kRiskKv).value),
            ns(0.01) + ns(8.0 * 10 * 1048576 / 100e6) + ns(l.reconstruct.value));
  EXPECT_NEAR(l.risk_kv_with_predictor.value - l.move.at(Strategy::kRiskKv).value,
              8.0 * r.storage.predictor_bytes_total.count / 100e6, 2e-9);
  EXPECT_NEAR(l.move.at(Strategy::kProxyKv).value, 0.01 + 0.3 * 8.0 * 14 * 1048576 / 100e6,
              1e-7);  // whole bytes
}

TEST(Latency, TheTransferEngineAddsSetupAndDescriptorsToEachKvLegAndPdAddsThePrefill) {
  const Fixture f;
  CostQuery q;
  q.model = &f.model;
  q.omission = &f.topology;
  q.gpu = &f.gpu;
  q.compute = &f.compute;
  q.tokens = 5000;
  q.path = Path{{10e9}, {0.001}};
  const CostRecord ideal = evaluate(q);
  q.engine = {Seconds{0.003}, Seconds{4e-6}, 16};
  const RooflineCosts h200(find_gpu("h200"));
  q.prefill_compute = &h200;
  const CostRecord real = evaluate(q);
  const std::int64_t blocks = (5000 + 15) / 16;
  const int kept = f.model.layers - f.topology.omitted_layers();
  auto ns = [](Seconds s) { return round_to_ns(s.value); };
  EXPECT_EQ(
      ns(real.latency->move.at(Strategy::kFullKv)) - ns(ideal.latency->move.at(Strategy::kFullKv)),
      3'000'000 + blocks * f.model.layers * 2 * 4000);
  EXPECT_EQ(
      ns(real.latency->move.at(Strategy::kRiskKv)) - ns(ideal.latency->move.at(Strategy::kRiskKv)),
      3'000'000 + blocks * kept * 2 * 4000);
  EXPECT_EQ(ns(real.latency->move.at(Strategy::kTokenReplay)),
            ns(ideal.latency->move.at(Strategy::kTokenReplay)))
      << "ids are not KV blocks";
  ASSERT_TRUE(real.pd);
  EXPECT_DOUBLE_EQ(
      real.pd->ttft.at(Strategy::kFullKv).value,
      h200.prefill(f.model, 5000).value + real.latency->move.at(Strategy::kFullKv).value);
  EXPECT_DOUBLE_EQ(real.pd->decode_side_prefill.value, real.latency->prefill.value);
  EXPECT_FALSE(ideal.pd) << "no prefill GPU, no P/D figures";
}

TEST(Latency, CrossoverBandwidthsMakeBothSidesEqual) {
  const Fixture f;
  const CostRecord base = f.at(1e9);
  const LatencyReport& l = *base.latency;
  ASSERT_TRUE(l.crossover_full && l.crossover_replay);
  const auto full = *f.at(l.crossover_full->value).latency;
  EXPECT_NEAR(full.move.at(Strategy::kRiskKv).value, full.move.at(Strategy::kFullKv).value,
              1e-12 * full.move.at(Strategy::kFullKv).value + 1e-15);
  const auto replay = *f.at(l.crossover_replay->value).latency;
  EXPECT_NEAR(replay.move.at(Strategy::kRiskKv).value, replay.move.at(Strategy::kTokenReplay).value,
              1e-12);
  // Below the full-transfer crossover RISK-KV wins; above it, full transfer does.
  EXPECT_LT(f.at(0.5 * l.crossover_full->value).latency->move.at(Strategy::kRiskKv),
            f.at(0.5 * l.crossover_full->value).latency->move.at(Strategy::kFullKv));
  EXPECT_GT(f.at(2 * l.crossover_full->value).latency->move.at(Strategy::kRiskKv),
            f.at(2 * l.crossover_full->value).latency->move.at(Strategy::kFullKv));
}

TEST(Latency, MonotonicInBandwidth) {
  const Fixture f;
  double prev_full = 1e300, prev_risk = 1e300, prev_replay = 1e300;
  for (double bps = 1e6; bps <= 1e12; bps *= 3.7) {
    const auto l = *f.at(bps).latency;
    EXPECT_LT(l.move.at(Strategy::kFullKv).value, prev_full);
    EXPECT_LT(l.move.at(Strategy::kRiskKv).value, prev_risk);
    EXPECT_LT(l.move.at(Strategy::kTokenReplay).value, prev_replay);
    prev_full = l.move.at(Strategy::kFullKv).value;
    prev_risk = l.move.at(Strategy::kRiskKv).value;
    prev_replay = l.move.at(Strategy::kTokenReplay).value;
  }
}

TEST(Latency, PrefillGrowsFasterThanLinearInContext) {
  const Fixture f;
  const double p1 = f.at(1e9, 1024).latency->prefill.value;
  const double p8 = f.at(1e9, 8192).latency->prefill.value;
  EXPECT_GT(p8, 8 * p1 * 0.99);
  const double r1 = f.at(1e9, 1024).latency->reconstruct.value;
  const double r8 = f.at(1e9, 8192).latency->reconstruct.value;
  EXPECT_LT(r8, 8.5 * r1);  // reconstruction is linear in T (plus fixed launches)
}

// Analytic ProxyKV scoring is what the proxy does, not a factor on its prefill: the prefill,
// one more QKᵀ over the causal triangle for the attention mass, and the mapper, whose output
// grows with the target's layers·KV heads. Written out here for one case.
TEST(Latency, ProxyScoringIsThePrefillPlusTheMassPassPlusTheMapper) {
  const GpuSpec gpu = find_gpu("h100");
  const RooflineCosts c(gpu);
  const ModelSpec& proxy = find_model("qwen2.5-0.5b");
  const ModelSpec& small = find_model("qwen2.5-1.5b");
  const ModelSpec& large = find_model("qwen2.5-7b");
  const double t = 4096;
  const double prefill = c.prefill(proxy, 4096).value;
  const double peak = gpu.peak_dense_fp16.value;
  const double mass = proxy.layers * proxy.q_heads * proxy.head_dim * t * (t + 1) /
                      (peak * gpu.attention_efficiency);
  const double score = c.proxy_score(proxy, small, 4096).value;
  EXPECT_GT(score, prefill + mass);
  // The mapper at width 64: small GEMMs, far below the proxy's own prefill at 4k tokens.
  EXPECT_LT(score - prefill - mass, 0.2 * prefill);
  EXPECT_GT(c.proxy_score(proxy, large, 4096).value, score) << "more target heads to score";
  // The mass pass is quadratic: doubling the context more than doubles the scoring.
  EXPECT_GT(c.proxy_score(proxy, small, 8192).value, 2 * score);
}

TEST(Latency, RejectsNonPositiveInputsNamingTheFlag) {
  const Fixture f;
  auto expect_error = [&](auto mutate, const char* flag) {
    CostQuery q;
    q.model = &f.model;
    q.omission = &f.topology;
    q.gpu = &f.gpu;
    q.compute = &f.compute;
    q.path = Path{{1e9}, {0}};
    mutate(q);
    try {
      evaluate(q);
      FAIL() << flag;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  };
  expect_error([](CostQuery& q) { q.tokens = 0; }, "--tokens");
  expect_error([](CostQuery& q) { q.tokens = -5; }, "--tokens");
  expect_error([](CostQuery& q) { q.path->bandwidth = {0}; }, "--bandwidth");
  expect_error([](CostQuery& q) { q.path->bandwidth = {-1e6}; }, "--bandwidth");
  expect_error([](CostQuery& q) { q.sharing = 0; }, "--sharing");
  expect_error([](CostQuery& q) { q.retention = 1.5; }, "--retention");
}

}  // namespace
}  // namespace kvshift::cost_model
