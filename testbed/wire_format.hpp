// The testbed's wire format (WIRE_FORMAT.md): every message is one frame, a
// fixed 56-byte little-endian header followed by `length` payload bytes. The
// header carries its own CRC32C (so a corrupted length is caught before it
// desynchronises the stream) and the payload's CRC32C. Sender -> receiver:
// HELLO (open or resume a transfer), DATA. Receiver -> sender: ACK (bytes
// verified in order so far), NACK (a frame failed its CRC, or a gap: resend
// from `offset`). Leaves out: encryption, compression, multiplexing several
// transfers on one connection (the testbed opens one connection per transfer).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace kvshift::testbed {

inline constexpr std::uint32_t kFrameMagic = 0x4653564Bu;  // "KVSF" little-endian
inline constexpr std::uint8_t kWireVersion = 1;
inline constexpr std::size_t kHeaderBytes = 56;
/// Largest payload a frame may announce; anything larger is a corrupt header.
inline constexpr std::uint32_t kMaxFramePayload = 16u << 20;

enum class FrameKind : std::uint8_t { kHello = 1, kData = 2, kAck = 3, kNack = 4 };

/// Element type of the payload bytes (what `dtype` in the header says).
enum class WireDType : std::uint8_t { kBytes = 0, kF32 = 1, kF16 = 2, kI32 = 3 };

/// ACK flag: every byte of the transfer is verified and delivered.
inline constexpr std::uint8_t kAckComplete = 1;
/// NACK reasons (in `flags`).
inline constexpr std::uint8_t kNackCrc = 1;
inline constexpr std::uint8_t kNackGap = 2;

struct FrameHeader {
  FrameKind kind = FrameKind::kData;
  WireDType dtype = WireDType::kBytes;
  std::uint8_t flags = 0;
  std::uint64_t transfer = 0;                    ///< request / transfer id
  std::uint16_t layer_begin = 0, layer_end = 0;  ///< layers the payload's segment covers
  std::uint32_t token_begin = 0, token_end = 0;  ///< tokens it covers
  std::uint64_t offset = 0;  ///< DATA: byte offset in the transfer; ACK/NACK: see kinds
  std::uint32_t length = 0;  ///< payload bytes that follow the header
  std::uint64_t total = 0;   ///< bytes of the whole transfer
  std::uint32_t payload_crc = 0;
};

using HeaderBytes = std::array<std::uint8_t, kHeaderBytes>;

/// The header's bytes, with its own CRC in the last four.
HeaderBytes encode_header(const FrameHeader& h);

/// Why a header cannot be read, or the header. A bad magic, version, kind, header CRC or a
/// length over kMaxFramePayload all mean the stream cannot be trusted from here on.
struct DecodedHeader {
  std::optional<FrameHeader> header;
  std::string error;
};
DecodedHeader decode_header(std::span<const std::uint8_t, kHeaderBytes> bytes);

}  // namespace kvshift::testbed
