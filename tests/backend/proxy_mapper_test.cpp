// HybridAxialMapper: factored cross-attention vs the direct computation, the
// sliding-window receptive field, loading weights from safetensors, and the
// proxy attention features it consumes.
#include <gtest/gtest.h>

#include <cmath>

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/proxy_mapper.hpp"
#include "backend/proxy_scoring.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend {
namespace {

Matrix random_features(Eigen::Index rows, Eigen::Index cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(0.0f, 3.0f);
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
  return m;
}

const MapperConfig kConfig{.in_channels = 10,
                           .targets = 6,
                           .width = 16,
                           .layers = 2,
                           .heads = 4,
                           .ffn = 24,
                           .kernel = 3,
                           .window = 8};

TEST(HybridAxialMapper, FactoredForwardEqualsTheDirectCrossAttention) {
  const auto m = HybridAxialMapper::random(kConfig, 11);
  const Matrix x = random_features(10, 41, 1);
  const Matrix fast = m.forward(x), direct = m.forward_direct(x);
  ASSERT_EQ(fast.rows(), 6);
  ASSERT_EQ(fast.cols(), 41);
  ASSERT_GT(direct.norm(), 0.0f);
  EXPECT_LT((fast - direct).norm() / direct.norm(), 1e-5);
}

TEST(HybridAxialMapper, SlidingWindowBoundsTheReceptiveField) {
  const auto m = HybridAxialMapper::random(kConfig, 12);
  const Matrix x = random_features(10, 60, 2);
  Matrix y = x;
  y.col(0).array() += 5.0f;
  const Matrix a = m.forward(x), b = m.forward(y);
  // stem radius 1 + two encoder layers of radius window/2 = 4 each: columns > 9 unaffected.
  EXPECT_GT((a.col(0) - b.col(0)).norm(), 1e-4f);
  EXPECT_GT((a.col(9) - b.col(9)).norm(), 0.0f);
  EXPECT_EQ(a.rightCols(50), b.rightCols(50));
}

std::vector<std::uint8_t> write_image(const HybridAxialMapper& shape_of, float bias) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<float> data;
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 0.3f);
  for (const auto& [name, shape] : shape_of.tensor_shapes()) {
    std::int64_t n = 1;
    for (auto s : shape) n *= s;
    header[name] = {{"dtype", "F32"},
                    {"shape", shape},
                    {"data_offsets", {data.size() * 4, (data.size() + n) * 4}}};
    for (std::int64_t i = 0; i < n; ++i) data.push_back(name == "head.out.bias" ? bias : d(rng));
  }
  const std::string h = header.dump();
  std::vector<std::uint8_t> out(8 + h.size() + data.size() * 4);
  const std::uint64_t len = h.size();
  std::memcpy(out.data(), &len, 8);
  std::memcpy(out.data() + 8, h.data(), h.size());
  std::memcpy(out.data() + 8 + h.size(), data.data(), data.size() * 4);
  return out;
}

TEST(HybridAxialMapper, LoadsWeightsFromSafetensors) {
  const auto shape_of = HybridAxialMapper::random(kConfig, 1);
  const auto a = HybridAxialMapper::load(
      SafetensorsFile::from_bytes(write_image(shape_of, 0.0f), "a"), kConfig);
  const auto b = HybridAxialMapper::load(
      SafetensorsFile::from_bytes(write_image(shape_of, 1.5f), "b"), kConfig);
  const Matrix x = random_features(10, 12, 3);
  const Matrix diff = b.forward(x) - a.forward(x);
  EXPECT_NEAR(diff.minCoeff(), 1.5f, 1e-5f);
  EXPECT_NEAR(diff.maxCoeff(), 1.5f, 1e-5f);
}

TEST(HybridAxialMapper, ShapeMismatchNamesTheTensor) {
  const auto shape_of = HybridAxialMapper::random(kConfig, 1);
  MapperConfig other = kConfig;
  other.targets = 7;
  try {
    HybridAxialMapper::load(SafetensorsFile::from_bytes(write_image(shape_of, 0.0f), "m"), other);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"head.target_queries\": expected shape [7, 16]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvshift::backend

namespace kvshift::backend {
namespace {

TEST(ProxyScoring, FeaturesAreTheLogMeanAttentionEachKeyReceives) {
  const Model proxy(load_hf_model(std::string(KVSHIFT_SOURCE_DIR) + "/tests/fixtures/tiny_qwen2"));
  const std::vector<std::int32_t> tokens{3, 14, 15, 92, 65, 35, 89, 79, 32, 38};
  const Matrix x = proxy_features(proxy, tokens, MapperFeatures::kLogMeanAttention);
  const auto& p = proxy.spec();
  ASSERT_EQ(x.rows(), p.layers * p.q_heads);
  ASSERT_EQ(x.cols(), 10);
  // Undo the transform: mass[t] = (exp(x) − eps)·(T − t). Every query's weights sum to one,
  // so each (layer, head) row of the mass sums to the query count, and the last key is seen
  // only by the last query.
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    double sum = 0.0;
    for (Eigen::Index t = 0; t < 10; ++t) {
      sum += (std::exp(double{x(r, t)}) - kLogMeanAttentionEps) * static_cast<double>(10 - t);
    }
    EXPECT_NEAR(sum, 10.0, 1e-4);
    const double last = std::exp(double{x(r, 9)}) - kLogMeanAttentionEps;
    EXPECT_GT(last, 0.0);
    EXPECT_LE(last, 1.0 + 1e-6);
  }
  const HybridAxialMapper mapper = random_mapper_for(p, p, 4);
  const Matrix y = proxykv_scores(proxy, mapper, tokens);
  EXPECT_EQ(y.rows(), p.layers * p.kv_heads);
  EXPECT_EQ(y.cols(), 10);
  EXPECT_TRUE(y.allFinite());
}

}  // namespace
}  // namespace kvshift::backend
