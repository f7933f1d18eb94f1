#include "testbed/crc32c.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string_view>
#include <vector>

namespace kvshift::testbed {
namespace {

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

TEST(Crc32c, MatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32c(bytes_of("123456789")), 0xE3069283u);
  EXPECT_EQ(crc32c_software(bytes_of("123456789")), 0xE3069283u);
}

TEST(Crc32c, EmptyInputIsZero) { EXPECT_EQ(crc32c({}), 0u); }

TEST(Crc32c, KnownVectorsFromRfc3720) {
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros and 32 bytes of 0xFF.
  const std::vector<std::uint8_t> zeros(32, 0), ones(32, 0xFF);
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
}

TEST(Crc32c, HardwareAndSoftwareAgreeAndExtendInPieces) {
  std::mt19937 rng(7);
  for (std::size_t n : {1u, 7u, 8u, 9u, 63u, 1000u, 65537u}) {
    std::vector<std::uint8_t> data(n);
    for (auto& b : data) b = static_cast<std::uint8_t>(rng());
    const std::uint32_t whole = crc32c(data);
    EXPECT_EQ(whole, crc32c_software(data)) << n;
    const std::size_t cut = n / 3;
    const std::span<const std::uint8_t> all(data);
    EXPECT_EQ(crc32c(all.subspan(cut), crc32c(all.first(cut))), whole) << n;
  }
}

TEST(Crc32c, DetectsEverySingleBitFlip) {
  std::vector<std::uint8_t> data(256);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 31);
  const std::uint32_t good = crc32c(data);
  for (std::size_t bit = 0; bit < data.size() * 8; ++bit) {
    data[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    ASSERT_NE(crc32c(data), good) << bit;
    data[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
  }
}

}  // namespace
}  // namespace kvshift::testbed
