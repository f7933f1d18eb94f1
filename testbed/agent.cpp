// Agent: bind, accept, run; senders live on the same io_context.
#include "testbed/agent.hpp"

#include <boost/asio/post.hpp>

#include "testbed/sender.hpp"

namespace kvshift::testbed {

namespace asio = boost::asio;

Agent::Agent(std::string name, DeliveryHandler on_delivery)
    : name_(std::move(name)),
      work_(asio::make_work_guard(io_)),
      acceptor_(io_),
      inbox_(std::move(on_delivery)) {
  const asio::ip::tcp::endpoint at(asio::ip::address_v4::loopback(), 0);
  acceptor_.open(at.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(at);
  acceptor_.listen(asio::socket_base::max_listen_connections);
  port_ = acceptor_.local_endpoint().port();
  accept();
  thread_ = std::thread([this] { io_.run(); });
}

Agent::~Agent() { stop(); }

void Agent::accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;  // stopped
    // Any other error (a connection reset while it queued, a descriptor limit reached) is
    // that one connection's loss, whose sender reconnects: the agent keeps accepting.
    if (!ec) std::make_shared<RecvSession>(std::move(socket), inbox_)->start();
    accept();
  });
}

void Agent::send(TransferRequest request, TransferDone done) {
  asio::post(io_, [this, request = std::move(request), done = std::move(done)]() mutable {
    std::make_shared<Sender>(io_, std::move(request), std::move(done))->start();
  });
}

void Agent::post(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

void Agent::compute(std::function<void()> fn) { asio::post(compute_, std::move(fn)); }

void Agent::stop() {
  if (!thread_.joinable()) return;
  compute_.join();  // finish the work already handed over
  work_.reset();
  io_.stop();
  thread_.join();
  boost::system::error_code ignored;
  acceptor_.close(ignored);  // the thread is gone: nothing else touches it now
}

}  // namespace kvshift::testbed
