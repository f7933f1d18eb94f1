// One transfer: a payload of bytes cut into segments (what the bytes are: a
// layer range × token range of one dtype), sent from one agent to another
// over a shaped path, and its single outcome. Shared by the sender, the
// receiver and whoever asked for the transfer.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "testbed/faults.hpp"
#include "testbed/shaper.hpp"
#include "testbed/wire_format.hpp"

namespace kvshift::testbed {

/// A contiguous run of payload bytes and what it holds (copied into each frame's header).
struct Segment {
  std::uint64_t offset = 0, length = 0;
  std::uint16_t layer_begin = 0, layer_end = 0;
  std::uint32_t token_begin = 0, token_end = 0;
  WireDType dtype = WireDType::kBytes;
};

/// How a sender behaves; the defaults suit loopback.
struct SendOptions {
  std::uint32_t frame_payload = 64 << 10;  ///< bytes per DATA frame (segments split frames too)
  std::uint64_t window = 16 << 20;         ///< unacknowledged bytes in flight at most
  std::chrono::milliseconds retransmit_after{50};  ///< no ACK progress this long: go back
  int max_connections = 64;                        ///< connection attempts before failing
  std::chrono::milliseconds deadline{60000};       ///< the whole transfer
  FaultSpec faults;
};

struct TransferRequest {
  std::uint64_t id = 0;
  std::shared_ptr<const std::vector<std::uint8_t>> payload;
  std::vector<Segment> segments;  ///< cover [0, payload size) in order; empty: one kBytes segment
  std::uint16_t port = 0;         ///< the receiving agent's port on 127.0.0.1
  ShapedPath path;
  SendOptions options;
};

enum class TransferState { kCompleted, kFailed };

/// How a transfer ended (reported exactly once).
struct TransferResult {
  std::uint64_t id = 0;
  TransferState state = TransferState::kFailed;
  std::string reason;  ///< kFailed: why
  std::uint64_t bytes = 0;
  Clock::time_point started{}, finished{};
  std::uint64_t frames_sent = 0, bytes_resent = 0;
  std::uint64_t drops = 0, corruptions = 0, disconnects = 0, stalls = 0, delays = 0;
  std::uint64_t nacks = 0, timeouts = 0;
  int connections = 0;
  double seconds() const { return std::chrono::duration<double>(finished - started).count(); }
};

using TransferDone = std::function<void(const TransferResult&)>;

/// What a receiver hands over once every byte of a transfer is verified.
struct Delivery {
  std::uint64_t id = 0;
  std::vector<std::uint8_t> bytes;
  std::vector<Segment> segments;  ///< as the frames' headers described them
  Clock::time_point first_byte{}, completed{};
  std::uint64_t crc_failures = 0, gaps = 0, duplicates = 0, bad_headers = 0;
};

using DeliveryHandler = std::function<void(Delivery&&)>;

}  // namespace kvshift::testbed
