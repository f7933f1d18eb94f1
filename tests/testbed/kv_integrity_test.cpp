// Integrity of each strategy's real payload over real agents: the receiver's KV is the
// sender's, byte for byte, and RISK-KV's reconstructed layers are exactly what the CPU
// backend reconstructs from the same anchors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/pruning.hpp"
#include "backend/reconstruct.hpp"
#include "backend/weights.hpp"
#include "testbed/kv_payload.hpp"
#include "testbed/receiver_work.hpp"
#include "tests/backend/tiny_spec.hpp"
#include "tests/testbed/transport_fixture.hpp"

namespace kvshift::testbed {
namespace {

using backend::KvCache;

bool same_bits(const backend::Matrix& a, const backend::Matrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<std::size_t>(a.size())) == 0;
}

void expect_same_cache(const KvCache& got, const KvCache& want) {
  ASSERT_EQ(got.k.size(), want.k.size());
  EXPECT_EQ(got.evicted, want.evicted);
  for (std::size_t l = 0; l < want.k.size(); ++l) {
    EXPECT_TRUE(same_bits(got.k[l], want.k[l])) << "K of layer " << l;
    EXPECT_TRUE(same_bits(got.v[l], want.v[l])) << "V of layer " << l;
  }
}

class KvIntegrity : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = kvshift::testing::tiny_spec("tiny-testbed");
    model_ = std::make_unique<backend::Model>(backend::random_weights(spec_, 5));
    std::mt19937 rng(3);
    tokens_.resize(37);  // not a multiple of anything the kernels tile by
    for (auto& t : tokens_) t = static_cast<std::int32_t>(rng() % spec_.vocab);
    cache_ = model_->new_cache();
    backend::ForwardOptions o;
    o.logits = backend::LogitsMode::kNone;
    model_->forward(tokens_, cache_, o);
  }

  /// Sends `p` from one agent to another and returns what the receiver delivered.
  Delivery send(const KvPayload& p) {
    testing::Collector c;
    Agent a("src", [](Delivery&&) {});
    Agent b("dst", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
    TransferRequest r;
    r.id = 1;
    r.payload = std::make_shared<std::vector<std::uint8_t>>(p.bytes);
    r.segments = p.segments;
    r.port = b.port();
    r.options.frame_payload = 700;  // many frames, cut at segment ends
    r.options.faults = parse_faults("drop=0.05,corrupt=0.05,disconnect=0.01,seed=3");
    r.options.retransmit_after = std::chrono::milliseconds(10);
    a.send(r, [&](const TransferResult& res) { c.on_done(res); });
    EXPECT_TRUE(c.wait_for(1, std::chrono::seconds(20)));
    std::lock_guard lock(c.mu_);
    EXPECT_EQ(c.results_.at(1).state, TransferState::kCompleted) << c.results_.at(1).reason;
    EXPECT_EQ(c.deliveries_count_[1], 1);
    Delivery d = std::move(c.deliveries_.at(1));
    EXPECT_EQ(d.bytes, p.bytes);
    return d;
  }

  RebuildContext context(std::span<const backend::GroupPredictor> predictors = {}) const {
    return {model_.get(), predictors, static_cast<std::int64_t>(tokens_.size())};
  }

  cost_model::ModelSpec spec_;
  std::unique_ptr<backend::Model> model_;
  std::vector<std::int32_t> tokens_;
  KvCache cache_;
};

TEST_F(KvIntegrity, FullKvInFp32IsByteIdentical) {
  std::vector<int> all(static_cast<std::size_t>(spec_.layers));
  for (int l = 0; l < spec_.layers; ++l) all[static_cast<std::size_t>(l)] = l;
  const Delivery d = send(layers_payload(cache_, all, WireDType::kF32));
  expect_same_cache(rebuild(cost_model::Strategy::kFullKv, d, context()).cache, cache_);
}

TEST_F(KvIntegrity, FullKvInFp16IsTheSendersFp16Cache) {
  std::vector<int> all(static_cast<std::size_t>(spec_.layers));
  for (int l = 0; l < spec_.layers; ++l) all[static_cast<std::size_t>(l)] = l;
  const KvPayload p = layers_payload(cache_, all, WireDType::kF16);
  EXPECT_EQ(p.bytes.size(), static_cast<std::size_t>(spec_.layers) * tokens_.size() *
                                static_cast<std::size_t>(spec_.kv_width()) * 2);
  const Delivery d = send(p);
  expect_same_cache(rebuild(cost_model::Strategy::kFullKv, d, context()).cache,
                    round_trip(cache_, WireDType::kF16));
}

TEST_F(KvIntegrity, KeptLayersArriveAndReconstructionEqualsTheBackendsExactly) {
  const auto topo = cost_model::OmissionPlan::from_groups(spec_.layers, {2});  // layers 2-3 omitted
  std::vector<backend::GroupPredictor> predictors;
  for (const auto& g : topo.groups()) predictors.push_back(backend::random_predictor(spec_, g, 9));
  std::vector<int> kept;
  for (int l = 0; l < spec_.layers; ++l) {
    if (l != 2 && l != 3) kept.push_back(l);
  }
  const Delivery d = send(layers_payload(cache_, kept, WireDType::kF32));
  const Rebuilt got = rebuild(cost_model::Strategy::kRiskKv, d, context(predictors));
  KvCache want = cache_;  // the backend's reconstruction of the same anchors, on the sender
  KvCache* caches[] = {&want};
  backend::reconstruct(predictors, caches, spec_);
  expect_same_cache(got.cache, want);
  EXPECT_FALSE(same_bits(got.cache.k[2], cache_.k[2]));  // layer 2 really was rebuilt
  EXPECT_EQ(got.work, "reconstruct");
}

TEST_F(KvIntegrity, KeptTokensArriveAsTheBackendsCompactCache) {
  const int rows = spec_.layers * spec_.kv_heads;
  backend::Matrix scores(rows, static_cast<Eigen::Index>(tokens_.size()));
  std::mt19937 rng(8);
  for (Eigen::Index i = 0; i < scores.size(); ++i) scores.data()[i] = float(rng() % 1000);
  backend::KeepPolicy keep;
  keep.retention = 0.4;
  keep.sink_tokens = 2;
  keep.recent_window = 4;
  const auto kept = backend::top_k_per_head(scores, keep);
  const Delivery d =
      send(kept_tokens_payload(cache_, kept, spec_.kv_heads, spec_.head_dim, WireDType::kF32));
  expect_same_cache(rebuild(cost_model::Strategy::kProxyKv, d, context()).cache,
                    backend::compact(cache_, kept, spec_.kv_heads, spec_.head_dim));
}

TEST_F(KvIntegrity, TokenIdsReplayToTheSendersCache) {
  const Delivery d = send(token_ids_payload(tokens_));
  const Rebuilt got = rebuild(cost_model::Strategy::kTokenReplay, d, context());
  EXPECT_EQ(got.work, "prefill");
  expect_same_cache(got.cache, cache_);
}

TEST(KvPayload, RejectsALayoutThatDoesNotFit) {
  std::vector<std::uint8_t> bytes(100);
  const Segment s{0, 100, 0, 1, 0, 3, WireDType::kF32};
  EXPECT_THROW(decode_layers(bytes, std::span(&s, 1), 2, 8), std::invalid_argument);
}

}  // namespace
}  // namespace kvshift::testbed
