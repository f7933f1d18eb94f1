// The control channel between `kvshift replay` and one of its node processes:
// newline-delimited JSON messages over one end of a socketpair made before the
// node was forked. A closed channel is how either side learns the other is gone
// (a killed node, or a coordinator that exited): no heartbeat is needed.
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kvshift::testbed {

class Channel {
 public:
  /// Takes ownership of `fd` (a connected stream socket).
  explicit Channel(int fd);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int fd() const { return fd_; }
  /// Sends one message whole; safe from several threads. False when the peer is gone.
  bool send(const nlohmann::json& message);
  /// Blocks for the next message; empty once the peer has closed its end.
  std::optional<nlohmann::json> receive();
  /// Reads what one read() returns (call when poll() says readable) and appends the
  /// complete messages to `out`; false once the peer has closed its end.
  bool read_available(std::vector<nlohmann::json>& out);

 private:
  bool take_line(std::vector<nlohmann::json>& out);

  int fd_;
  std::string buffer_;
  std::mutex write_mutex_;
};

}  // namespace kvshift::testbed
