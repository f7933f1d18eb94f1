// fp16 on the wire is Eigen::half's round to nearest even, bit for bit, whichever path the
// build converts with (F16C eight at a time, or one by one), and back again: specials,
// subnormals, overflow, ties and a tail that is not a multiple of eight.
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "testbed/kv_payload.hpp"

namespace kvshift::testbed {
namespace {

TEST(KvPayload, Fp16IsEigenHalfBitForBitBothWays) {
  std::vector<float> values{0.0F,
                            -0.0F,
                            1.0F,
                            -2.5F,
                            65504.0F,        // the largest half
                            65520.0F,        // rounds to infinity
                            1e9F,            // overflow
                            6.1e-5F,         // near the smallest normal half
                            3e-8F,           // a subnormal half
                            1e-12F,          // flushes to zero
                            1.0009765625F,   // 1 + 2^-10: exact
                            1.00048828125F,  // 1 + 2^-11: a tie, to even
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0F, 4.0F);
  while (values.size() < 1003) values.push_back(normal(rng));  // 1003: an odd tail
  backend::KvCache cache = backend::KvCache::empty(1, static_cast<int>(values.size()));
  cache.k[0] =
      Eigen::Map<backend::Matrix>(values.data(), 1, static_cast<Eigen::Index>(values.size()));
  cache.v[0] = -cache.k[0];
  const KvPayload p = layers_payload(cache, {0}, WireDType::kF16);
  ASSERT_EQ(p.bytes.size(), 2 * 2 * values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint16_t got, want = Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(values[i]));
    std::memcpy(&got, p.bytes.data() + 2 * i, 2);
    EXPECT_EQ(got, want) << "value " << values[i];
  }
  const backend::KvCache back =
      decode_layers(p.bytes, p.segments, 1, static_cast<int>(values.size()));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float want = static_cast<float>(Eigen::half(values[i]));
    const float got = back.k[0](0, static_cast<Eigen::Index>(i));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got));
    } else {
      EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << "value " << values[i];
    }
  }
}

}  // namespace
}  // namespace kvshift::testbed
