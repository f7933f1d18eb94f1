// The receiving half of the transport. An Inbox holds, per transfer id, the
// bytes verified so far: a DATA frame is copied in only when its payload CRC
// matches and its offset is exactly the next expected byte, so nothing
// unverified ever reaches the buffer, and a transfer is delivered (once) when
// its last byte is verified. It survives connections: a sender that lost its
// connection says HELLO again and is told where to resume. A RecvSession
// reads one connection's frames and answers with ACK / NACK. Everything here
// runs on the receiving agent's io_context thread.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "testbed/transfer.hpp"

namespace kvshift::testbed {

class Inbox {
 public:
  explicit Inbox(DeliveryHandler on_delivery) : on_delivery_(std::move(on_delivery)) {}
  /// What the answer to a frame is.
  struct Reply {
    bool send = false;
    FrameHeader header;
  };
  /// HELLO: opens (or finds) the transfer; the reply says how many bytes are verified.
  Reply hello(const FrameHeader& h);
  /// DATA with its payload (checked against the header's payload CRC here).
  Reply data(const FrameHeader& h, std::span<const std::uint8_t> payload);
  std::uint64_t delivered() const { return delivered_; }

 private:
  struct Inbound {
    std::vector<std::uint8_t> bytes;
    std::vector<Segment> segments;
    std::uint64_t total = 0, verified = 0;
    std::uint64_t nacked_at = ~0ull;  ///< one NACK per stuck offset (no NACK storms)
    bool complete = false;
    Delivery stats;
  };
  Reply ack(const FrameHeader& h, const Inbound& in) const;
  Reply nack(const FrameHeader& h, Inbound& in, std::uint8_t reason);
  void note_segment(Inbound& in, const FrameHeader& h);
  /// Every byte verified: hand the transfer over (once) and keep a tombstone for late HELLOs.
  void complete(Inbound& in);

  DeliveryHandler on_delivery_;
  std::unordered_map<std::uint64_t, Inbound> transfers_;
  std::uint64_t delivered_ = 0;
};

class RecvSession : public std::enable_shared_from_this<RecvSession> {
 public:
  RecvSession(boost::asio::ip::tcp::socket socket, Inbox& inbox);
  void start() { read_header(); }

 private:
  void read_header();
  void read_payload(const FrameHeader& h);
  void handle(const FrameHeader& h);
  void send(const FrameHeader& h);
  void write_next();

  boost::asio::ip::tcp::socket socket_;
  Inbox& inbox_;
  HeaderBytes header_bytes_{};
  std::vector<std::uint8_t> payload_;
  std::deque<HeaderBytes> out_;
  bool writing_ = false;
};

}  // namespace kvshift::testbed
