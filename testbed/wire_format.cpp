// Header encoding: explicit little-endian byte order, field by field, so the
// format does not depend on struct layout or the host's endianness.
#include "testbed/wire_format.hpp"

#include "testbed/crc32c.hpp"

namespace kvshift::testbed {
namespace {

constexpr std::size_t kHeaderCrcAt = kHeaderBytes - 4;

class Writer {
 public:
  explicit Writer(HeaderBytes& b) : b_(b) {}
  template <class T>
  void put(T v) {
    for (std::size_t i = 0; i < sizeof(T); ++i) b_[at_++] = static_cast<std::uint8_t>(v >> (8 * i));
  }

 private:
  HeaderBytes& b_;
  std::size_t at_ = 0;
};

class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t, kHeaderBytes> b) : b_(b) {}
  template <class T>
  T get() {
    T v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(T{b_[at_++]} << (8 * i));
    return v;
  }

 private:
  std::span<const std::uint8_t, kHeaderBytes> b_;
  std::size_t at_ = 0;
};

}  // namespace

HeaderBytes encode_header(const FrameHeader& h) {
  HeaderBytes b{};
  Writer w(b);
  w.put(kFrameMagic);
  w.put(kWireVersion);
  w.put(static_cast<std::uint8_t>(h.kind));
  w.put(static_cast<std::uint8_t>(h.dtype));
  w.put(h.flags);
  w.put(h.transfer);
  w.put(h.layer_begin);
  w.put(h.layer_end);
  w.put(h.token_begin);
  w.put(h.token_end);
  w.put(h.offset);
  w.put(h.length);
  w.put(h.total);
  w.put(h.payload_crc);
  const std::uint32_t crc = crc32c(std::span<const std::uint8_t>(b.data(), kHeaderCrcAt));
  for (std::size_t i = 0; i < 4; ++i)
    b[kHeaderCrcAt + i] = static_cast<std::uint8_t>(crc >> (8 * i));
  return b;
}

DecodedHeader decode_header(std::span<const std::uint8_t, kHeaderBytes> bytes) {
  Reader r(bytes);
  if (r.get<std::uint32_t>() != kFrameMagic) return {std::nullopt, "bad magic"};
  if (r.get<std::uint8_t>() != kWireVersion) return {std::nullopt, "unknown wire version"};
  FrameHeader h;
  const auto kind = r.get<std::uint8_t>();
  if (kind < 1 || kind > 4) return {std::nullopt, "unknown frame kind"};
  h.kind = static_cast<FrameKind>(kind);
  const auto dtype = r.get<std::uint8_t>();
  if (dtype > 3) return {std::nullopt, "unknown dtype"};
  h.dtype = static_cast<WireDType>(dtype);
  h.flags = r.get<std::uint8_t>();
  h.transfer = r.get<std::uint64_t>();
  h.layer_begin = r.get<std::uint16_t>();
  h.layer_end = r.get<std::uint16_t>();
  h.token_begin = r.get<std::uint32_t>();
  h.token_end = r.get<std::uint32_t>();
  h.offset = r.get<std::uint64_t>();
  h.length = r.get<std::uint32_t>();
  h.total = r.get<std::uint64_t>();
  h.payload_crc = r.get<std::uint32_t>();
  const auto stored = r.get<std::uint32_t>();
  if (stored != crc32c(bytes.first(kHeaderCrcAt))) return {std::nullopt, "header CRC mismatch"};
  if (h.length > kMaxFramePayload) return {std::nullopt, "frame length over the limit"};
  return {h, ""};
}

}  // namespace kvshift::testbed
