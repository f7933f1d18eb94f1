// A node agent: one cluster node brought up for real. Each agent owns a
// boost::asio::io_context run by its own thread (plus one compute thread for
// the receiver's kernels), a TCP acceptor on
// 127.0.0.1 (port 0: the kernel picks a free port), an Inbox for what it
// receives, and the Senders of what it sends. Threads rather than processes:
// agents share the link shapers (a link is crossed by flows from several
// agents), start in microseconds, cannot outlive the test that made them, and
// a 2-core machine runs them without the cost of process switches; the bytes
// still cross the kernel's TCP stack on loopback. Leaves out: agents on
// other machines (only loopback addresses are ever used).
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "testbed/receiver.hpp"
#include "testbed/transfer.hpp"

namespace kvshift::testbed {

class Agent {
 public:
  /// `on_delivery` runs on this agent's thread for every transfer it receives in full.
  Agent(std::string name, DeliveryHandler on_delivery);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  const std::string& name() const { return name_; }
  /// The port it listens on (127.0.0.1).
  std::uint16_t port() const { return port_; }
  /// Sends `request` from this agent; `done` runs once, on this agent's thread.
  void send(TransferRequest request, TransferDone done);
  /// Runs `fn` on this agent's thread.
  void post(std::function<void()> fn);
  /// Runs `fn` on this agent's compute thread (the receiver's work: reconstruction, prefill),
  /// so that long work never holds up its sockets (an ACK waiting behind a prefill would make
  /// the sender retransmit).
  void compute(std::function<void()> fn);
  /// Stops accepting, ends the thread (pending work is abandoned). Idempotent.
  void stop();

 private:
  void accept();

  std::string name_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  boost::asio::ip::tcp::acceptor acceptor_;
  Inbox inbox_;
  std::uint16_t port_ = 0;
  boost::asio::thread_pool compute_{1};
  std::thread thread_;
};

}  // namespace kvshift::testbed
