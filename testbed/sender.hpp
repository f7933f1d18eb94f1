// The sending half of the transport: one Sender per transfer, on the sending
// agent's io_context. It opens a connection, says HELLO and resumes from the
// offset the receiver reports verified; then it paces DATA frames through the
// shaped path (one frame booked at a time, see shaper.hpp), holds each for the
// path's latency (a delay line), and writes them in order. The receiver's ACKs
// move the window; a NACK (CRC failure or gap) or no ACK progress for a while
// makes it go back to the last acknowledged offset (go-back-N). A broken
// connection is reopened and resumed, up to a limit. Faults (faults.hpp) are
// injected here, in the send path. The transfer ends exactly once: completed
// when the receiver says every byte is verified, else failed with a reason
// (connection attempts or the deadline exhausted).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <memory>
#include <optional>

#include "testbed/transfer.hpp"

namespace kvshift::testbed {

class Sender : public std::enable_shared_from_this<Sender> {
 public:
  Sender(boost::asio::io_context& io, TransferRequest request, TransferDone done);
  /// Starts the transfer; `done` is called once, on the io_context's thread.
  void start();

 private:
  struct Outgoing {
    Clock::time_point release;
    std::shared_ptr<std::vector<std::uint8_t>> bytes;
  };
  void connect();
  void on_connected();
  void lose_connection(const std::string& reason);
  void read_control();
  void on_control(const FrameHeader& h);
  void pump();
  void emit(std::uint64_t offset, std::uint32_t length, Clock::time_point left, const FrameFate& f);
  void flush();
  void go_back(std::uint64_t offset);
  void watch_progress();
  void finish(TransferState state, const std::string& reason);
  const Segment& segment_at(std::uint64_t offset) const;
  std::shared_ptr<std::vector<std::uint8_t>> frame(const FrameHeader& h,
                                                   std::span<const std::uint8_t> payload) const;

  boost::asio::io_context& io_;
  TransferRequest req_;
  TransferDone done_;
  TransferResult result_;
  std::uint64_t total_ = 0;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer pace_timer_, line_timer_, progress_timer_, deadline_timer_,
      retry_timer_;
  std::optional<FaultDice> dice_;
  HeaderBytes control_{};
  std::deque<Outgoing> line_;     // frames waiting out the path latency, then written in order
  std::uint64_t generation_ = 0;  // one per connection: stale handlers see it changed
  std::uint64_t epoch_ = 0;       // one per go-back: a frame booked before it is discarded
  std::uint64_t acked_ = 0, next_ = 0, written_ = 0, high_water_ = 0;
  Clock::time_point last_left_{}, last_release_{}, last_progress_{};
  bool connected_ = false, resumed_ = false, pacing_ = false, writing_ = false,
       line_waiting_ = false, ended_ = false;
};

}  // namespace kvshift::testbed
