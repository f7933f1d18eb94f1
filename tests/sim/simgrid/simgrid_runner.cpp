// SimGrid side of the differential test and benchmark (see simgrid_runner.hpp).
#include "tests/sim/simgrid/simgrid_runner.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <numeric>
#include <simgrid/s4u.hpp>
#include <stdexcept>
#include <string>

namespace kvshift::sim::testing {
namespace sg = simgrid::s4u;

namespace {

struct Launch {
  std::size_t c = 0, f = 0;
  double at = 0;  ///< start + route latency, seconds
};

}  // namespace

SimgridRun run_simgrid(const std::vector<NetCase>& cases, const SimgridOptions& options) {
  auto phase = [&](std::size_t c, SimgridPhase p) {
    if (options.on_phase) options.on_phase(c, p);
  };
  int argc = 2;
  char arg0[] = "kvshift-simgrid";
  char arg1[] = "--log=root.thres:critical";
  char* argv[] = {arg0, arg1, nullptr};
  sg::Engine engine(&argc, argv);
  sg::Engine::set_config("network/model:CM02");
  sg::Engine::set_config("network/latency-factor:1");
  sg::Engine::set_config("network/bandwidth-factor:1");
  sg::Engine::set_config("network/weight-S:0");
  sg::Engine::set_config("network/crosstraffic:0");
  sg::Engine::set_config("network/TCP-gamma:0");
  sg::Engine::set_config("contexts/stack-size:64");

  auto* zone = sg::create_full_zone("world");
  std::vector<std::vector<sg::Host*>> hosts(cases.size());
  std::vector<std::vector<const sg::Link*>> links(cases.size());
  std::vector<std::vector<sg::Host*>> senders(cases.size());  // per flow
  for (std::size_t c = 0; c < cases.size(); ++c) {
    phase(c, SimgridPhase::kPlatformBegin);
    const std::string p = "c" + std::to_string(c) + "/";
    for (int i = 0; i < cases[c].nodes; ++i) {
      hosts[c].push_back(zone->create_host(p + "n" + std::to_string(i), 1e9)->seal());
    }
    for (std::size_t j = 0; j < cases[c].links.size(); ++j) {
      const NetLink& l = cases[c].links[j];
      const std::string name = p + "l" + std::to_string(j);
      const double bytes_per_s = l.bandwidth_bps / 8;
      if (l.half_duplex) {
        links[c].push_back(zone->create_link(name, bytes_per_s)->set_latency(0)->seal());
      } else {
        links[c].push_back(
            zone->create_split_duplex_link(name, bytes_per_s)->set_latency(0)->seal());
      }
    }
    std::map<std::pair<int, int>, bool> declared;
    senders[c].assign(cases[c].flows.size(), nullptr);
    for (std::size_t k = 0; k < cases[c].flows.size(); ++k) {
      const NetFlow& f = cases[c].flows[k];
      std::vector<sg::LinkInRoute> route;
      sg::Host* from = hosts[c][f.src];
      if (f.cap_bps > 0) {
        // SimGrid 3.32 ignores Comm::set_rate() on host-to-host comms, so a cap is a
        // private link of that capacity from a private sender host: the same constraint.
        const std::string name = p + "cap" + std::to_string(k);
        from = zone->create_host(name, 1e9)->seal();
        route.emplace_back(
            zone->create_link(name + "/link", f.cap_bps / 8)->set_latency(0)->seal());
      } else if (!declared.emplace(std::make_pair(f.src, f.dst), true).second) {
        senders[c][k] = from;
        continue;
      }
      senders[c][k] = from;
      for (const auto& [link, forward] : f.route) {
        if (cases[c].links[link].half_duplex) {
          route.emplace_back(links[c][link]);
        } else {
          route.emplace_back(links[c][link], forward ? sg::LinkInRoute::Direction::UP
                                                     : sg::LinkInRoute::Direction::DOWN);
        }
      }
      zone->add_route(from->get_netpoint(), hosts[c][f.dst]->get_netpoint(), nullptr, nullptr,
                      route, false);
    }
    phase(c, SimgridPhase::kPlatformEnd);
  }
  zone->seal();

  SimgridRun out;
  out.finish_s.resize(cases.size());
  // One batch of launches per case when they run one at a time, else one for all.
  const std::size_t batches = options.one_case_at_a_time ? cases.size() : 1;
  std::vector<std::vector<Launch>> launches(batches);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    out.finish_s[c].assign(cases[c].flows.size(), -1);
    for (std::size_t f = 0; f < cases[c].flows.size(); ++f) {
      const NetFlow& flow = cases[c].flows[f];
      launches[batches == 1 ? 0 : c].push_back(
          {c, f, 1e-9 * static_cast<double>(flow.start_ns + flow.route_latency_ns)});
    }
  }
  for (auto& batch : launches) {
    std::stable_sort(batch.begin(), batch.end(),
                     [](const Launch& a, const Launch& b) { return a.at < b.at; });
  }
  out.case_cpu_s.assign(options.one_case_at_a_time ? cases.size() : 0, 0);
  out.case_wall_s.assign(out.case_cpu_s.size(), 0);

  sg::Actor::create("driver", hosts.front().front(), [&] {
    for (std::size_t b = 0; b < batches; ++b) {
      const double offset = sg::Engine::get_clock();
      if (options.one_case_at_a_time) phase(b, SimgridPhase::kRunBegin);
      const auto w0 = std::chrono::steady_clock::now();
      const std::clock_t c0 = std::clock();
      std::vector<std::pair<sg::CommPtr, const Launch*>> comms;
      std::vector<sg::CommPtr> live;  // release_finished: the comms in flight (as comms)
      // Waits up to `timeout` s (< 0: no limit) for one comm in flight; books and drops it.
      auto reap = [&](double timeout) {
        const ssize_t i = sg::Comm::wait_any_for(live, timeout);
        if (i < 0) return false;
        const Launch* l = comms[static_cast<std::size_t>(i)].second;
        out.finish_s[l->c][l->f] = live[static_cast<std::size_t>(i)]->get_finish_time() - offset;
        comms[static_cast<std::size_t>(i)] = std::move(comms.back());
        comms.pop_back();
        live[static_cast<std::size_t>(i)] = std::move(live.back());
        live.pop_back();
        return true;
      };
      if (!options.release_finished) comms.reserve(launches[b].size());
      for (const Launch& l : launches[b]) {
        if (options.release_finished) {
          while (!live.empty() && offset + l.at > sg::Engine::get_clock() &&
                 reap(offset + l.at - sg::Engine::get_clock())) {
          }
        }
        if (offset + l.at > sg::Engine::get_clock()) sg::this_actor::sleep_until(offset + l.at);
        const NetFlow& f = cases[l.c].flows[l.f];
        if (f.bytes == 0) {
          out.finish_s[l.c][l.f] = l.at;
          continue;
        }
        sg::CommPtr comm = sg::Comm::sendto_init();
        comm->set_source(senders[l.c][l.f]);
        comm->set_destination(hosts[l.c][f.dst]);
        comm->set_payload_size(static_cast<std::uint64_t>(f.bytes));
        comm->start();
        if (options.release_finished) live.push_back(comm);
        comms.emplace_back(std::move(comm), &l);
      }
      while (!live.empty()) reap(-1);
      for (auto& [comm, l] : comms) {
        comm->wait();
        out.finish_s[l->c][l->f] = comm->get_finish_time() - offset;
      }
      comms.clear();
      if (options.one_case_at_a_time) {
        out.case_cpu_s[b] = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
        out.case_wall_s[b] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
        phase(b, SimgridPhase::kRunEnd);
      }
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  engine.run();
  out.cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace kvshift::sim::testing
