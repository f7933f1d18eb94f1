// The transport between real agents on 127.0.0.1: integrity, resumption,
// failure with a reason, shaping, and >= 10,000 transfers under injected faults.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>

#include "tests/testbed/transport_fixture.hpp"

namespace kvshift::testbed {
namespace {

using testing::Collector;
using testing::random_payload;

TEST(Transport, AgentsListenOnLoopbackOnly) {
  Collector c;
  Agent a("a", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
  EXPECT_GT(a.port(), 0);
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket s(io);
  boost::system::error_code ec;
  s.connect({boost::asio::ip::address_v4::loopback(), a.port()}, ec);
  EXPECT_FALSE(ec) << ec.message();
}

TEST(Transport, DeliversAMultiSegmentPayloadByteIdentical) {
  Collector c;
  Agent a("a", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
  Agent b("b", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
  TransferRequest r;
  r.id = 42;
  r.payload = random_payload(1'000'003, 1);
  r.segments = {{0, 400'000, 0, 1, 0, 100, WireDType::kF16},
                {400'000, 600'003, 1, 2, 0, 100, WireDType::kF16}};
  r.port = b.port();
  r.options.frame_payload = 7000;  // not a divisor of the segments: frames split at their ends
  a.send(r, [&](const TransferResult& res) { c.on_done(res); });
  ASSERT_TRUE(c.wait_for(1, std::chrono::seconds(20)));
  std::lock_guard lock(c.mu_);
  const TransferResult& res = c.results_.at(42);
  ASSERT_EQ(res.state, TransferState::kCompleted) << res.reason;
  ASSERT_EQ(c.deliveries_count_[42], 1);
  const Delivery& d = c.deliveries_.at(42);
  EXPECT_EQ(d.bytes, *r.payload);
  ASSERT_EQ(d.segments.size(), 2u);
  EXPECT_EQ(d.segments[1].offset, 400'000u);
  EXPECT_EQ(d.segments[1].layer_begin, 1);
  EXPECT_EQ(d.segments[1].dtype, WireDType::kF16);
}

TEST(Transport, FailsWithAReasonWhenNobodyListens) {
  Collector c;
  Agent a("a", [](Delivery&&) {});
  std::uint16_t dead_port = 0;
  {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor acc(io, {boost::asio::ip::address_v4::loopback(), 0});
    dead_port = acc.local_endpoint().port();
  }  // closed: connecting is refused
  TransferRequest r;
  r.id = 7;
  r.payload = random_payload(1000, 2);
  r.port = dead_port;
  r.options.max_connections = 3;
  a.send(r, [&](const TransferResult& res) { c.on_done(res); });
  ASSERT_TRUE(c.wait_for(1, std::chrono::seconds(10)));
  std::lock_guard lock(c.mu_);
  EXPECT_EQ(c.results_.at(7).state, TransferState::kFailed);
  EXPECT_NE(c.results_.at(7).reason.find("connect"), std::string::npos) << c.results_.at(7).reason;
  EXPECT_EQ(c.results_.at(7).connections, 3);
}

TEST(Transport, ShapedTransferTakesLatencyPlusSerialisation) {
  Collector c;
  Agent a("a", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
  Agent b("b", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
  LinkShaper link("a-b", BitsPerSecond{200e6}, std::chrono::microseconds(200));
  TransferRequest r;
  r.id = 1;
  r.payload = random_payload(2'500'000, 3);  // 100 ms at 200 Mbps
  r.port = b.port();
  r.path.links = {&link};
  r.path.latency = std::chrono::milliseconds(20);
  a.send(r, [&](const TransferResult& res) { c.on_done(res); });
  ASSERT_TRUE(c.wait_for(1, std::chrono::seconds(20)));
  std::lock_guard lock(c.mu_);
  ASSERT_EQ(c.results_.at(1).state, TransferState::kCompleted);
  const Delivery& d = c.deliveries_.at(1);
  const double measured =
      std::chrono::duration<double>(d.completed - c.results_.at(1).started).count();
  const double predicted = 0.020 + 8.0 * 2'500'000 / 200e6;
  // Headers add 0.09 %; a loaded 2-core machine adds scheduling delay: allow 15 %.
  EXPECT_GT(measured, predicted * 0.99);
  EXPECT_LT(measured, predicted * 1.15);
}

TEST(Transport, TwoFlowsShareALinkFairly) {
  Collector c;
  Agent a("a", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
  Agent b("b", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
  LinkShaper link("a-b", BitsPerSecond{200e6}, std::chrono::microseconds(200));
  for (std::uint64_t id : {1, 2}) {
    TransferRequest r;
    r.id = id;
    r.payload = random_payload(1'250'000, static_cast<unsigned>(id));  // 50 ms alone
    r.port = b.port();
    r.path.links = {&link};
    a.send(r, [&](const TransferResult& res) { c.on_done(res); });
  }
  ASSERT_TRUE(c.wait_for(2, std::chrono::seconds(20)));
  std::lock_guard lock(c.mu_);
  for (std::uint64_t id : {1, 2}) ASSERT_EQ(c.results_.at(id).state, TransferState::kCompleted);
  // The second flow may start a few ms after the first on a loaded machine; the first then runs
  // alone for that long. Measure from the earlier start and allow that skew between the ends.
  const auto first_start = std::min(c.results_.at(1).started, c.results_.at(2).started);
  const auto skew = std::chrono::duration<double>(
                        std::max(c.results_.at(1).started, c.results_.at(2).started) - first_start)
                        .count();
  const auto since_first = [&](std::uint64_t id) {
    return std::chrono::duration<double>(c.deliveries_.at(id).completed - first_start).count();
  };
  // Shared fairly, both end together at twice the time alone (100 ms), not at 50 and 100.
  const double last = std::max(since_first(1), since_first(2));
  const double first = std::min(since_first(1), since_first(2));
  EXPECT_GT(last, 0.099);
  EXPECT_LT(last, 0.120);
  EXPECT_LT(last - first, skew + 0.015) << "an unfair link would end them ~50 ms apart";
}

TEST(Transport, TenThousandTransfersUnderFaultsLoseNothing) {
  constexpr std::uint64_t kTransfers = 10'000;
  constexpr std::size_t kInFlight = 48;
  Collector c;
  std::vector<std::shared_ptr<std::vector<std::uint8_t>>> payloads(kTransfers);
  for (std::uint64_t i = 0; i < kTransfers; ++i) {
    payloads[i] = random_payload(1 + (i * 7919) % 6000, static_cast<unsigned>(i));
  }
  Agent a("a", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
  Agent b("b", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
  SendOptions o;
  o.frame_payload = 1024;
  o.retransmit_after = std::chrono::milliseconds(10);
  o.deadline = std::chrono::milliseconds(20000);
  o.faults = parse_faults(
      "drop=0.01,corrupt=0.01,disconnect=0.005,delay=2ms,delay_p=0.01,stall=2ms,stall_p=0.002,"
      "seed=11");
  std::atomic<std::uint64_t> next{0};
  std::function<void()> launch;
  launch = [&] {
    const std::uint64_t i = next.fetch_add(1);
    if (i >= kTransfers) return;
    TransferRequest r;
    r.id = i;
    r.payload = payloads[i];
    r.port = (i % 2 == 0) ? b.port() : a.port();
    r.options = o;
    Agent& from = (i % 2 == 0) ? a : b;
    from.send(std::move(r), [&](const TransferResult& res) {
      c.on_done(res);
      launch();
    });
  };
  for (std::size_t k = 0; k < kInFlight; ++k) launch();
  ASSERT_TRUE(c.wait_for(kTransfers, std::chrono::seconds(50))) << "did not finish in time";
  a.stop();
  b.stop();

  std::lock_guard lock(c.mu_);
  std::uint64_t completed = 0, bytes_sent = 0, bytes_delivered = 0;
  std::uint64_t drops = 0, corruptions = 0, disconnects = 0, crc_failures = 0;
  for (std::uint64_t i = 0; i < kTransfers; ++i) {
    ASSERT_EQ(c.ends_[i], 1) << "transfer " << i << " ended " << c.ends_[i] << " times";
    const TransferResult& r = c.results_.at(i);
    drops += r.drops;
    corruptions += r.corruptions;
    disconnects += r.disconnects;
    if (r.state == TransferState::kFailed) {
      EXPECT_FALSE(r.reason.empty()) << i;
      // What a failure looked like (it should not happen; seen once under a loaded ctest -j2).
      ADD_FAILURE() << "transfer " << i << " failed: " << r.reason << " (connections "
                    << r.connections << ", timeouts " << r.timeouts << ", nacks " << r.nacks
                    << ", drops " << r.drops << ", disconnects " << r.disconnects << ")";
      continue;
    }
    ++completed;
    ASSERT_EQ(c.deliveries_count_[i], 1) << i;
    const Delivery& d = c.deliveries_.at(i);
    crc_failures += d.crc_failures;
    bytes_sent += payloads[i]->size();
    bytes_delivered += d.bytes.size();
    ASSERT_EQ(d.bytes, *payloads[i]) << "transfer " << i << " delivered different bytes";
  }
  EXPECT_EQ(completed, kTransfers);
  EXPECT_EQ(bytes_delivered, bytes_sent);
  // The faults really happened (the test would prove nothing otherwise).
  EXPECT_GT(drops, 100u);
  EXPECT_GT(corruptions, 100u);
  EXPECT_GT(disconnects, 50u);
  EXPECT_GT(crc_failures, 0u);
  std::printf(
      "transfers %llu completed %llu; faults: drops %llu corruptions %llu disconnects %llu;"
      " receiver CRC failures %llu\n",
      (unsigned long long)kTransfers, (unsigned long long)completed, (unsigned long long)drops,
      (unsigned long long)corruptions, (unsigned long long)disconnects,
      (unsigned long long)crc_failures);
}

}  // namespace
}  // namespace kvshift::testbed

namespace kvshift::testbed {
namespace {

TEST(Transport, AOneFrameTransferOverALongPathIsSentOnceAndWaitsOutTheLatency) {
  Collector c;
  Agent a("a", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
  Agent b("b", [&](Delivery&& d) { c.on_delivery(std::move(d)); });
  LinkShaper l1("a->s", BitsPerSecond{10e9}, std::chrono::microseconds(1000));
  LinkShaper l2("s->b", BitsPerSecond{1e9}, std::chrono::microseconds(1000));
  TransferRequest r;
  r.id = 3;
  r.payload = random_payload(916, 4);
  r.port = b.port();
  r.path.links = {&l1, &l2};
  r.path.latency = std::chrono::microseconds(20100);
  a.send(r, [&](const TransferResult& res) { c.on_done(res); });
  ASSERT_TRUE(c.wait_for(1, std::chrono::seconds(10)));
  std::lock_guard lock(c.mu_);
  const TransferResult& res = c.results_.at(3);
  ASSERT_EQ(res.state, TransferState::kCompleted);
  EXPECT_EQ(res.frames_sent, 1u);
  EXPECT_EQ(res.bytes_resent, 0u);
  EXPECT_EQ(res.timeouts, 0u);
  EXPECT_EQ(res.nacks, 0u);
  const double t =
      std::chrono::duration<double>(c.deliveries_.at(3).completed - res.started).count();
  EXPECT_GE(t, 0.0201);
}

}  // namespace
}  // namespace kvshift::testbed
