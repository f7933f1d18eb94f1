// Link probe: measured transfers on loopback beside the closed form and the network model.
#include "testbed/probe.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <sstream>

#include "cost_model/latency.hpp"
#include "input/flows_file.hpp"
#include "testbed/agent.hpp"

namespace kvshift::testbed {
namespace {

struct Finish {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Clock::time_point> at;
  std::vector<TransferResult> results;
  std::size_t done = 0;
};

/// Runs `flows` transfers of `bytes` through `path` together; seconds from start to verified.
std::vector<double> transfer_together(int flows, std::uint64_t bytes, const ShapedPath& path,
                                      const SendOptions& options) {
  Finish f;
  f.at.resize(static_cast<std::size_t>(flows));
  f.results.resize(static_cast<std::size_t>(flows));
  Agent src("src", [](Delivery&&) {});
  Agent dst("dst", [&](Delivery&& d) {
    std::lock_guard lock(f.mu);
    f.at[d.id] = d.completed;
  });
  auto payload = std::make_shared<std::vector<std::uint8_t>>(bytes);
  for (std::size_t i = 0; i < payload->size(); ++i)
    (*payload)[i] = static_cast<std::uint8_t>(i * 131);
  for (int i = 0; i < flows; ++i) {
    TransferRequest r;
    r.id = static_cast<std::uint64_t>(i);
    r.payload = payload;
    r.port = dst.port();
    r.path = path;
    r.options = options;
    src.send(r, [&f](const TransferResult& res) {
      std::lock_guard lock(f.mu);
      f.results[res.id] = res;
      ++f.done;
      f.cv.notify_all();
    });
  }
  std::unique_lock lock(f.mu);
  f.cv.wait(lock, [&] { return f.done == static_cast<std::size_t>(flows); });
  std::vector<double> seconds;
  for (int i = 0; i < flows; ++i) {
    const TransferResult& r = f.results[static_cast<std::size_t>(i)];
    if (r.state != TransferState::kCompleted) throw std::runtime_error("probe: " + r.reason);
    seconds.push_back(
        std::chrono::duration<double>(f.at[static_cast<std::size_t>(i)] - r.started).count());
  }
  return seconds;
}

/// The network model's finish times for `flows` transfers that start together on one link.
std::vector<double> simulated(const ProbeCase& c) {
  nlohmann::json doc;
  doc["cluster"]["nodes"] = {{{"name", "src"}}, {{"name", "dst"}}};
  doc["cluster"]["links"] = {{{"name", "L"},
                              {"a", "src"},
                              {"b", "dst"},
                              {"bandwidth", std::to_string(c.bandwidth.value) + "bps"},
                              {"latency", std::to_string(c.latency.value * 1e9) + "ns"}}};
  doc["transfers"] = nlohmann::json::array();
  for (int i = 0; i < c.flows; ++i) {
    doc["transfers"].push_back({{"id", "t" + std::to_string(i)},
                                {"src", "src"},
                                {"dst", "dst"},
                                {"bytes", c.bytes.count}});
  }
  input::FlowsFile flows = input::parse_flows(doc, "<probe>");
  std::vector<double> out;
  for (const auto& o : input::simulate_flows(flows)) out.push_back(o.finish.seconds());
  return out;
}

SendOptions probe_options(BitsPerSecond rate, Seconds latency, const FaultSpec& faults) {
  SendOptions o;
  const double frame = rate.value > 0 ? rate.value / 8.0 * 250e-6 : 1048576.0;
  o.frame_payload = static_cast<std::uint32_t>(std::clamp(frame, 8192.0, 1048576.0));
  o.window = std::max<std::uint64_t>(
      16u << 20, static_cast<std::uint64_t>(rate.value / 8.0 * latency.value * 2));
  o.deadline = std::chrono::milliseconds(600'000);
  o.faults = faults;
  return o;
}

}  // namespace

double loopback_ceiling(Bytes bytes, int repeats) {
  double best = 0;
  const SendOptions o = probe_options(BitsPerSecond{0}, Seconds{0}, FaultSpec{});
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const double s = transfer_together(1, static_cast<std::uint64_t>(bytes.count), {}, o).front();
    best = std::max(best, bytes.bits() / s);
  }
  return best;
}

std::vector<ProbeRow> run_probe(const std::vector<ProbeCase>& cases, int repeats,
                                const FaultSpec& faults) {
  std::vector<ProbeRow> rows;
  for (const ProbeCase& c : cases) {
    const std::vector<double> sim = simulated(c);
    const double closed = cost_model::transfer_time(c.bytes, {c.bandwidth, c.latency}).value;
    for (int r = 0; r < repeats; ++r) {
      LinkShaper link("src->dst", c.bandwidth, kBurst);
      ShapedPath path;
      path.links = {&link};
      path.latency = std::chrono::nanoseconds(static_cast<std::int64_t>(c.latency.value * 1e9));
      const SendOptions o = probe_options(c.bandwidth, c.latency, faults);
      const auto measured =
          transfer_together(c.flows, static_cast<std::uint64_t>(c.bytes.count), path, o);
      for (int i = 0; i < c.flows; ++i) {
        rows.push_back({c, r, i, measured[static_cast<std::size_t>(i)], closed,
                        sim[static_cast<std::size_t>(i)], o.frame_payload});
      }
    }
  }
  return rows;
}

std::string probe_csv(const std::vector<ProbeRow>& rows) {
  std::ostringstream out;
  out.precision(9);
  out << "bytes,bandwidth_bps,latency_s,flows,repeat,flow,frame_payload,measured_s,closed_form_s,"
         "simulator_s,error_vs_simulator\n";
  for (const ProbeRow& r : rows) {
    out << r.c.bytes.count << ',' << r.c.bandwidth.value << ',' << r.c.latency.value << ','
        << r.c.flows << ',' << r.repeat << ',' << r.flow << ',' << r.frame_payload << ','
        << r.measured_s << ',' << r.closed_form_s << ',' << r.simulator_s << ','
        << (r.measured_s - r.simulator_s) / r.simulator_s << '\n';
  }
  return out.str();
}

}  // namespace kvshift::testbed
