// Line framing over a stream socket.
#include "testbed/replay_channel.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace kvshift::testbed {

Channel::Channel(int fd) : fd_(fd) {}

Channel::~Channel() { ::close(fd_); }

bool Channel::send(const nlohmann::json& message) {
  const std::string line = message.dump() + "\n";
  const std::lock_guard lock(write_mutex_);
  for (std::size_t sent = 0; sent < line.size();) {
    // MSG_NOSIGNAL: a peer that died is a false return, not a SIGPIPE.
    const ssize_t n = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

bool Channel::take_line(std::vector<nlohmann::json>& out) {
  const std::size_t end = buffer_.find('\n');
  if (end == std::string::npos) return false;
  out.push_back(nlohmann::json::parse(buffer_.substr(0, end)));
  buffer_.erase(0, end + 1);
  return true;
}

bool Channel::read_available(std::vector<nlohmann::json>& out) {
  char chunk[65536];
  ssize_t n;
  do {
    n = ::read(fd_, chunk, sizeof chunk);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  buffer_.append(chunk, static_cast<std::size_t>(n));
  while (take_line(out)) {
  }
  return true;
}

std::optional<nlohmann::json> Channel::receive() {
  std::vector<nlohmann::json> one;
  while (!take_line(one)) {
    char chunk[65536];
    ssize_t n;
    do {
      n = ::read(fd_, chunk, sizeof chunk);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return std::nullopt;
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
  return std::move(one.front());
}

}  // namespace kvshift::testbed
