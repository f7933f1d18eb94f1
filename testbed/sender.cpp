// Sender: connection lifecycle, pacing, the delay line, ACK handling, faults.
#include "testbed/sender.hpp"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cstring>

#include "testbed/crc32c.hpp"

namespace kvshift::testbed {

namespace asio = boost::asio;
using boost::system::error_code;

Sender::Sender(asio::io_context& io, TransferRequest request, TransferDone done)
    : io_(io),
      req_(std::move(request)),
      done_(std::move(done)),
      socket_(io),
      pace_timer_(io),
      line_timer_(io),
      progress_timer_(io),
      deadline_timer_(io),
      retry_timer_(io) {
  total_ = req_.payload ? req_.payload->size() : 0;
  if (req_.segments.empty()) req_.segments.push_back({0, total_});
  result_.id = req_.id;
  result_.bytes = total_;
}

void Sender::start() {
  result_.started = Clock::now();
  deadline_timer_.expires_after(req_.options.deadline);
  deadline_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->ended_) return;
    self->finish(TransferState::kFailed,
                 "deadline of " + std::to_string(self->req_.options.deadline.count()) +
                     " ms exceeded with " + std::to_string(self->acked_) + " of " +
                     std::to_string(self->total_) + " bytes acknowledged");
  });
  watch_progress();
  connect();
}

void Sender::connect() {
  if (ended_) return;
  ++result_.connections;
  ++generation_;
  socket_ = asio::ip::tcp::socket(io_);
  const asio::ip::tcp::endpoint to(asio::ip::address_v4::loopback(), req_.port);
  socket_.async_connect(to, [self = shared_from_this(), g = generation_](error_code ec) {
    if (self->ended_ || g != self->generation_) return;
    if (ec) return self->lose_connection("connect: " + ec.message());
    self->on_connected();
  });
}

void Sender::on_connected() {
  error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  connected_ = true;
  resumed_ = false;
  last_progress_ = Clock::now();
  last_left_ = last_progress_;  // a new connection has saved no tokens from before it existed
  dice_.emplace(req_.options.faults, req_.id, static_cast<std::uint64_t>(result_.connections));
  FrameHeader h;
  h.kind = FrameKind::kHello;
  h.transfer = req_.id;
  h.total = total_;
  line_.push_back({Clock::now(), frame(h, {})});
  read_control();
  flush();
}

void Sender::lose_connection(const std::string& reason) {
  if (ended_) return;
  error_code ignored;
  socket_.close(ignored);
  connected_ = false;
  ++generation_;
  ++epoch_;
  line_.clear();
  pacing_ = writing_ = line_waiting_ = false;
  if (result_.connections >= req_.options.max_connections) {
    return finish(TransferState::kFailed, "gave up after " + std::to_string(result_.connections) +
                                              " connections (last: " + reason + ")");
  }
  const auto backoff = std::chrono::milliseconds(std::min(20, result_.connections));
  retry_timer_.expires_after(backoff);
  retry_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->connect();
  });
}

void Sender::read_control() {
  asio::async_read(socket_, asio::buffer(control_),
                   [self = shared_from_this(), g = generation_](error_code ec, std::size_t) {
                     if (self->ended_ || g != self->generation_) return;
                     if (ec) return self->lose_connection("read: " + ec.message());
                     const DecodedHeader d = decode_header(self->control_);
                     if (!d.header || d.header->length != 0) {
                       return self->lose_connection("bad control frame: " + d.error);
                     }
                     self->on_control(*d.header);
                     if (!self->ended_ && g == self->generation_) self->read_control();
                   });
}

void Sender::on_control(const FrameHeader& h) {
  if (h.transfer != req_.id) return lose_connection("control frame for another transfer");
  if (h.offset > acked_) {
    acked_ = h.offset;
    last_progress_ = Clock::now();
  }
  if (h.kind == FrameKind::kAck && (h.flags & kAckComplete)) {
    return finish(TransferState::kCompleted, "");
  }
  if (!resumed_) {  // the answer to HELLO: resume where the receiver is
    resumed_ = true;
    next_ = written_ = acked_;
    last_progress_ = Clock::now();
  } else if (h.kind == FrameKind::kNack) {
    ++result_.nacks;
    go_back(h.offset);
  }
  pump();
}

const Segment& Sender::segment_at(std::uint64_t offset) const {
  auto it = std::upper_bound(req_.segments.begin(), req_.segments.end(), offset,
                             [](std::uint64_t o, const Segment& s) { return o < s.offset; });
  return *std::prev(it);
}

void Sender::pump() {
  if (ended_ || !connected_ || !resumed_ || pacing_ || next_ >= total_) return;
  if (next_ - acked_ >= req_.options.window) return;  // an ACK will pump again
  const Segment& s = segment_at(next_);
  const auto length = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(req_.options.frame_payload, s.offset + s.length - next_));
  const FrameFate fate = dice_->next();
  if (fate.disconnect) {
    ++result_.disconnects;
    return lose_connection("injected disconnect");
  }
  const auto now = Clock::now();
  auto ready = std::max(last_left_, now - kBurst);
  if (fate.stall_s > 0) {
    ++result_.stalls;
    ready = std::max(ready, now + std::chrono::nanoseconds(std::int64_t(fate.stall_s * 1e9)));
  }
  const Clock::time_point left = req_.path.book(ready, std::int64_t{length} + kHeaderBytes);
  pacing_ = true;
  pace_timer_.expires_at(left);
  pace_timer_.async_wait([self = shared_from_this(), e = epoch_, g = generation_, offset = next_,
                          length, left, fate](error_code) {
    if (self->ended_ || g != self->generation_) return;
    self->pacing_ = false;
    self->last_left_ = left;
    if (e == self->epoch_) self->emit(offset, length, left, fate);
    self->pump();
  });
}

std::shared_ptr<std::vector<std::uint8_t>> Sender::frame(
    const FrameHeader& h, std::span<const std::uint8_t> payload) const {
  const HeaderBytes head = encode_header(h);
  auto bytes = std::make_shared<std::vector<std::uint8_t>>(kHeaderBytes + payload.size());
  std::memcpy(bytes->data(), head.data(), kHeaderBytes);
  if (!payload.empty()) std::memcpy(bytes->data() + kHeaderBytes, payload.data(), payload.size());
  return bytes;
}

void Sender::emit(std::uint64_t offset, std::uint32_t length, Clock::time_point left,
                  const FrameFate& fate) {
  const Segment& s = segment_at(offset);
  FrameHeader h;
  h.kind = FrameKind::kData;
  h.dtype = s.dtype;
  h.transfer = req_.id;
  h.layer_begin = s.layer_begin;
  h.layer_end = s.layer_end;
  h.token_begin = s.token_begin;
  h.token_end = s.token_end;
  h.offset = offset;
  h.length = length;
  h.total = total_;
  const std::span<const std::uint8_t> payload(req_.payload->data() + offset, length);
  h.payload_crc = crc32c(payload);
  next_ = offset + length;
  ++result_.frames_sent;
  if (offset < high_water_) result_.bytes_resent += length;
  high_water_ = std::max(high_water_, next_);
  written_ = std::max(written_, next_);  // a dropped frame is lost "on the wire"
  if (fate.drop) {
    ++result_.drops;
    return;
  }
  auto bytes = frame(h, payload);
  if (fate.corrupt) {
    ++result_.corruptions;
    const std::uint64_t bit = fate.corrupt_bit % (bytes->size() * 8);
    (*bytes)[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
  }
  auto release = left + req_.path.latency;
  if (fate.delay_s > 0) {
    ++result_.delays;
    release += std::chrono::nanoseconds(std::int64_t(fate.delay_s * 1e9));
  }
  last_release_ = std::max(last_release_, release);  // TCP keeps order: a delay holds the rest
  line_.push_back({last_release_, std::move(bytes)});
  flush();
}

void Sender::flush() {
  if (ended_ || !connected_ || writing_ || line_waiting_ || line_.empty()) return;
  if (line_.front().release > Clock::now()) {
    line_waiting_ = true;
    line_timer_.expires_at(line_.front().release);
    line_timer_.async_wait([self = shared_from_this(), g = generation_](error_code) {
      if (self->ended_ || g != self->generation_) return;
      self->line_waiting_ = false;
      self->flush();
    });
    return;
  }
  writing_ = true;
  auto bytes = line_.front().bytes;
  line_.pop_front();
  asio::async_write(
      socket_, asio::buffer(*bytes),
      [self = shared_from_this(), g = generation_, bytes](error_code ec, std::size_t) {
        if (self->ended_ || g != self->generation_) return;
        self->writing_ = false;
        if (ec) return self->lose_connection("write: " + ec.message());
        self->flush();
      });
}

void Sender::go_back(std::uint64_t offset) {
  ++epoch_;
  next_ = std::max(offset, acked_);
  // Frames still in the delay line come after the lost one: the receiver would drop them.
  line_.clear();
  last_progress_ = Clock::now();
}

void Sender::watch_progress() {
  progress_timer_.expires_after(req_.options.retransmit_after / 2);
  progress_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || self->ended_) return;
    const bool idle = !self->writing_ && self->line_.empty();
    const bool stuck = Clock::now() - self->last_progress_ > self->req_.options.retransmit_after;
    if (self->connected_ && self->resumed_ && idle && stuck && self->written_ > self->acked_) {
      ++self->result_.timeouts;
      self->go_back(self->acked_);
      self->pump();
    } else if (self->connected_ && !self->resumed_ && stuck) {
      self->lose_connection("no answer to HELLO");  // e.g. a corrupted HELLO was dropped
    }
    self->watch_progress();
  });
}

void Sender::finish(TransferState state, const std::string& reason) {
  if (ended_) return;
  ended_ = true;
  result_.state = state;
  result_.reason = reason;
  result_.finished = Clock::now();
  error_code ignored;
  // Abortive close: every byte is acknowledged (or the transfer failed), and a reset leaves
  // no TIME_WAIT behind, so thousands of transfers do not exhaust loopback ports.
  socket_.set_option(asio::socket_base::linger(true, 0), ignored);
  socket_.close(ignored);
  for (auto* t : {&pace_timer_, &line_timer_, &progress_timer_, &deadline_timer_, &retry_timer_}) {
    t->cancel();
  }
  line_.clear();
  done_(result_);
}

}  // namespace kvshift::testbed
