// Inbox bookkeeping and the receiving session's read / answer loop.
#include "testbed/receiver.hpp"

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "testbed/crc32c.hpp"

namespace kvshift::testbed {

namespace asio = boost::asio;

Inbox::Reply Inbox::ack(const FrameHeader& h, const Inbound& in) const {
  FrameHeader a;
  a.kind = FrameKind::kAck;
  a.transfer = h.transfer;
  a.offset = in.verified;
  a.total = in.total;
  a.flags = in.complete ? kAckComplete : 0;
  return {true, a};
}

Inbox::Reply Inbox::nack(const FrameHeader& h, Inbound& in, std::uint8_t reason) {
  if (in.nacked_at == in.verified) return {};
  in.nacked_at = in.verified;
  FrameHeader n;
  n.kind = FrameKind::kNack;
  n.transfer = h.transfer;
  n.offset = in.verified;
  n.total = in.total;
  n.flags = reason;
  return {true, n};
}

Inbox::Reply Inbox::hello(const FrameHeader& h) {
  auto [it, fresh] = transfers_.try_emplace(h.transfer);
  Inbound& in = it->second;
  if (fresh) {
    in.total = h.total;
    // Reserve, do not resize: zero-filling a 256 MB buffer here held the HELLO's answer
    // (and so the whole transfer) back by ~0.1 s; bytes are appended as they are verified.
    in.bytes.reserve(h.total);
    in.stats.id = h.transfer;
  }
  in.nacked_at = ~0ull;  // a new connection starts from `verified`: allow a fresh NACK
  if (fresh && in.total == 0) complete(in);
  return ack(h, in);
}

void Inbox::note_segment(Inbound& in, const FrameHeader& h) {
  if (!in.segments.empty()) {
    Segment& s = in.segments.back();
    if (s.layer_begin == h.layer_begin && s.layer_end == h.layer_end &&
        s.token_begin == h.token_begin && s.token_end == h.token_end && s.dtype == h.dtype &&
        s.offset + s.length == h.offset) {
      s.length += h.length;
      return;
    }
  }
  in.segments.push_back(
      {h.offset, h.length, h.layer_begin, h.layer_end, h.token_begin, h.token_end, h.dtype});
}

Inbox::Reply Inbox::data(const FrameHeader& h, std::span<const std::uint8_t> payload) {
  auto it = transfers_.find(h.transfer);
  if (it == transfers_.end()) return {};  // DATA before HELLO: the sender will time out
  Inbound& in = it->second;
  if (in.complete) return ack(h, in);
  if (crc32c(payload) != h.payload_crc) {
    ++in.stats.crc_failures;
    return nack(h, in, kNackCrc);
  }
  if (h.offset < in.verified) {
    ++in.stats.duplicates;
    return {};
  }
  if (h.offset > in.verified || h.offset + h.length > in.total || h.total != in.total) {
    ++in.stats.gaps;
    return nack(h, in, kNackGap);
  }
  if (in.verified == 0) in.stats.first_byte = Clock::now();
  in.bytes.insert(in.bytes.end(), payload.begin(), payload.end());  // offset == size: in order
  in.verified += h.length;
  note_segment(in, h);
  if (in.verified == in.total) complete(in);
  return ack(h, in);
}

void Inbox::complete(Inbound& in) {
  in.complete = true;
  in.stats.completed = Clock::now();
  Delivery d = std::move(in.stats);
  d.bytes = std::move(in.bytes);
  d.segments = std::move(in.segments);
  in.bytes = {};
  ++delivered_;
  on_delivery_(std::move(d));
}

RecvSession::RecvSession(asio::ip::tcp::socket socket, Inbox& inbox)
    : socket_(std::move(socket)), inbox_(inbox) {
  boost::system::error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
}

void RecvSession::read_header() {
  asio::async_read(socket_, asio::buffer(header_bytes_),
                   [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                     if (ec) return;  // the sender went away; the Inbox keeps what it verified
                     DecodedHeader d = decode_header(self->header_bytes_);
                     if (!d.header) {
                       // A header we cannot trust: its length may be wrong, so the rest of
                       // the stream is unframed. Drop the connection; the sender resumes.
                       boost::system::error_code ignored;
                       self->socket_.close(ignored);
                       return;
                     }
                     self->read_payload(*d.header);
                   });
}

void RecvSession::read_payload(const FrameHeader& h) {
  payload_.resize(h.length);
  asio::async_read(socket_, asio::buffer(payload_),
                   [self = shared_from_this(), h](boost::system::error_code ec, std::size_t) {
                     if (ec) return;
                     self->handle(h);
                     self->read_header();
                   });
}

void RecvSession::handle(const FrameHeader& h) {
  Inbox::Reply r;
  if (h.kind == FrameKind::kHello)
    r = inbox_.hello(h);
  else if (h.kind == FrameKind::kData)
    r = inbox_.data(h, payload_);
  if (r.send) send(r.header);
}

void RecvSession::send(const FrameHeader& h) {
  out_.push_back(encode_header(h));
  write_next();
}

void RecvSession::write_next() {
  if (writing_ || out_.empty()) return;
  writing_ = true;
  asio::async_write(socket_, asio::buffer(out_.front()),
                    [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                      self->writing_ = false;
                      if (ec) return;
                      self->out_.pop_front();
                      self->write_next();
                    });
}

}  // namespace kvshift::testbed
