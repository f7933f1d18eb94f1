// The paper's own figures (Tables I and III), reproduced to the printed precision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "cost_model/input_error.hpp"
#include "cost_model/storage.hpp"

namespace kvshift::cost_model {
namespace {

std::string mib3(Bytes b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", b.mib());
  return buf;
}

StorageReport paper(const char* model, DType dtype = DType::kF32, std::int64_t tokens = 512,
                    std::int64_t sharing = 1) {
  const ModelSpec& m = find_model(model);
  return storage(m, OmissionPlan::parse("paper", m), tokens, {dtype, sharing});
}

TEST(Storage, ReproducesTableIOmittedKv) {
  const StorageReport q05 = paper("qwen2.5-0.5b"), q15 = paper("qwen2.5-1.5b"),
                      tl = paper("tinyllama-1.1b");
  EXPECT_EQ(q05.kv_saved.count, 2 * 1048576);
  EXPECT_EQ(q15.kv_saved.count, 4 * 1048576);
  EXPECT_EQ(tl.kv_saved.count, 2 * 1048576);
  EXPECT_EQ(std::round(q05.omitted_fraction * 1000), 333);
  EXPECT_EQ(std::round(q15.omitted_fraction * 1000), 286);
  EXPECT_EQ(std::round(tl.omitted_fraction * 1000), 182);
  EXPECT_EQ(q05.kv_full.count, 6 * 1048576);
  EXPECT_EQ(q05.kv_kept.count, 4 * 1048576);
}

TEST(Storage, ReproducesTableIIIPredictorSizes) {
  EXPECT_EQ(mib3(paper("qwen2.5-0.5b").predictor_bytes_per_group), "2.002");
  EXPECT_EQ(mib3(paper("qwen2.5-1.5b").predictor_bytes_per_group), "8.004");
  EXPECT_EQ(mib3(paper("tinyllama-1.1b").predictor_bytes_per_group), "8.004");
  EXPECT_EQ(paper("qwen2.5-0.5b").predictor_bytes_per_group.count, 2'099'200);
  // fp16 halves them exactly.
  for (const char* m : {"qwen2.5-0.5b", "qwen2.5-1.5b", "tinyllama-1.1b"}) {
    EXPECT_EQ(2 * paper(m, DType::kF16).predictor_bytes_per_group.count,
              paper(m).predictor_bytes_per_group.count);
  }
  EXPECT_EQ(mib3(paper("tinyllama-1.1b").unfolded_bytes_per_group), "32.016");
}

TEST(Storage, BreakEvenForQwen05B) {
  const StorageReport fp32 = paper("qwen2.5-0.5b");
  EXPECT_EQ(fp32.predictor_bytes_total.count, 4 * 2'099'200);
  EXPECT_NEAR(fp32.predictor_to_saved_ratio, 4.004, 5e-4);  // "about 4x" in the paper
  EXPECT_EQ(fp32.break_even_requests, 5);                   // least N with N·saved ≥ predictor
  EXPECT_EQ(paper("qwen2.5-0.5b", DType::kF16).break_even_requests, 3);
  EXPECT_LT(paper("qwen2.5-0.5b", DType::kF32, 512, 4).net_saving_bytes, 0);
  EXPECT_GT(paper("qwen2.5-0.5b", DType::kF32, 512, 5).net_saving_bytes, 0);
}

TEST(Storage, SavedNeverExceedsFullAndScalesLinearlyInTokens) {
  for (const auto& m : known_models()) {
    const OmissionPlan t = OmissionPlan::from_groups(m.layers, {2, 4});
    for (std::int64_t tokens : {1, 7, 512, 4096, 32768}) {
      const StorageReport a = storage(m, t, tokens, {});
      const StorageReport b = storage(m, t, 2 * tokens, {});
      EXPECT_LE(a.kv_saved, a.kv_full) << m.name;
      EXPECT_EQ(a.kv_saved + a.kv_kept, a.kv_full);
      EXPECT_EQ(b.kv_full.count, 2 * a.kv_full.count);
      EXPECT_EQ(b.kv_saved.count, 2 * a.kv_saved.count);
      EXPECT_EQ(b.predictor_bytes_total, a.predictor_bytes_total);  // independent of T
    }
  }
}

TEST(Storage, NothingOmittedMeansNothingSavedAndNoBreakEven) {
  const ModelSpec& m = find_model("smollm2-135m");
  const StorageReport r = storage(m, OmissionPlan::from_groups(m.layers, {}), 512, {});
  EXPECT_EQ(r.kv_saved.count, 0);
  EXPECT_EQ(r.predictor_bytes_total.count, 0);
  EXPECT_EQ(r.break_even_requests, 0);
}

TEST(Storage, SmolLm2GroupMatchesHandArithmetic) {
  // w = 384: folded (4·384)·(2·384) + 2·384 = 1,180,416 params.
  const ModelSpec& m = find_model("smollm2-135m");
  const OmissionPlan t = OmissionPlan::from_groups(m.layers, {5});
  EXPECT_EQ(folded_params(m, t.groups()[0]), 1'180'416);
  EXPECT_EQ(unfolded_params(m, t.groups()[0]), 1536LL * 1152 + 1152);
}

TEST(Storage, SinkRowsOfTheOmittedLayersAreSentAllTheSame) {
  const ModelSpec& m = find_model("smollm2-135m");
  const OmissionPlan plain = OmissionPlan::from_groups(m.layers, {3, 5, 9});
  const std::int64_t row = plain.omitted_layers() * m.kv_bytes_per_layer_token();
  for (const std::int64_t tokens : {0, 1, 3, 4, 512}) {
    for (const int sink : {0, 1, 4}) {
      const StorageReport a = storage(m, plain, tokens, {});
      const StorageReport b = storage(m, plain.with_sink_rows(sink), tokens, {});
      const std::int64_t sent = std::min<std::int64_t>(sink, tokens);
      EXPECT_EQ(b.kv_saved.count, a.kv_saved.count - sent * row) << tokens << " " << sink;
      EXPECT_EQ(b.kv_kept.count, a.kv_kept.count + sent * row);
      EXPECT_EQ(b.kv_full, a.kv_full);
      EXPECT_EQ(b.predictor_bytes_total, a.predictor_bytes_total);
    }
  }
  EXPECT_THROW(plain.with_sink_rows(-1), InputError);
}

}  // namespace
}  // namespace kvshift::cost_model
