#include "testbed/wire_format.hpp"

#include <gtest/gtest.h>

namespace kvshift::testbed {
namespace {

FrameHeader sample() {
  FrameHeader h;
  h.kind = FrameKind::kData;
  h.dtype = WireDType::kF16;
  h.flags = 0;
  h.transfer = 0x0102030405060708ull;
  h.layer_begin = 2;
  h.layer_end = 4;
  h.token_begin = 17;
  h.token_end = 512;
  h.offset = 1ull << 33;
  h.length = 65536;
  h.total = 3ull << 32;
  h.payload_crc = 0xDEADBEEF;
  return h;
}

TEST(WireFormat, HeaderRoundTripsEveryField) {
  const FrameHeader h = sample();
  const HeaderBytes b = encode_header(h);
  const DecodedHeader d = decode_header(b);
  ASSERT_TRUE(d.header) << d.error;
  EXPECT_EQ(d.header->kind, h.kind);
  EXPECT_EQ(d.header->dtype, h.dtype);
  EXPECT_EQ(d.header->transfer, h.transfer);
  EXPECT_EQ(d.header->layer_begin, 2);
  EXPECT_EQ(d.header->layer_end, 4);
  EXPECT_EQ(d.header->token_begin, 17u);
  EXPECT_EQ(d.header->token_end, 512u);
  EXPECT_EQ(d.header->offset, h.offset);
  EXPECT_EQ(d.header->length, h.length);
  EXPECT_EQ(d.header->total, h.total);
  EXPECT_EQ(d.header->payload_crc, h.payload_crc);
}

TEST(WireFormat, IsLittleEndianWithTheMagicFirst) {
  const HeaderBytes b = encode_header(sample());
  EXPECT_EQ(b[0], 'K');
  EXPECT_EQ(b[1], 'V');
  EXPECT_EQ(b[2], 'S');
  EXPECT_EQ(b[3], 'F');
  EXPECT_EQ(b[4], kWireVersion);
  EXPECT_EQ(b[8], 0x08);  // transfer id, low byte first
}

TEST(WireFormat, AnyFlippedHeaderBitIsRejected) {
  const HeaderBytes good = encode_header(sample());
  for (std::size_t bit = 0; bit < kHeaderBytes * 8; ++bit) {
    HeaderBytes b = good;
    b[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    ASSERT_FALSE(decode_header(b).header) << "bit " << bit;
  }
}

TEST(WireFormat, OversizedLengthIsRejected) {
  FrameHeader h = sample();
  h.length = kMaxFramePayload + 1;
  const DecodedHeader d = decode_header(encode_header(h));
  EXPECT_FALSE(d.header);
  EXPECT_NE(d.error.find("length"), std::string::npos);
}

}  // namespace
}  // namespace kvshift::testbed
