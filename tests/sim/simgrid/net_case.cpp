// NetCase -> Topology + Network, run to the end.
#include "tests/sim/simgrid/net_case.hpp"

#include <stdexcept>

namespace kvshift::sim::testing {

Topology make_topology(const NetCase& c) {
  Topology t;
  for (int i = 0; i < c.nodes; ++i) {
    ClusterNode n;
    n.name = "n" + std::to_string(i);
    n.kind = NodeKind::kGpu;
    t.add_node(n);
  }
  for (std::size_t j = 0; j < c.links.size(); ++j) {
    const NetLink& l = c.links[j];
    t.add_link(ClusterLink{"l" + std::to_string(j), static_cast<NodeId>(l.a),
                           static_cast<NodeId>(l.b), BitsPerSecond{l.bandwidth_bps},
                           SimTime{l.latency_ns}, l.half_duplex ? Duplex::kHalf : Duplex::kFull});
  }
  return t;
}

KvshiftRun run_kvshift(NetCase& c, bool record_utilisation) {
  Topology topo = make_topology(c);
  Simulator sim;
  Network net(sim, topo, NetworkOptions{record_utilisation});
  for (NetFlow& f : c.flows) {
    const Route* r = topo.route(static_cast<NodeId>(f.src), static_cast<NodeId>(f.dst));
    if (!r) throw std::runtime_error(c.name + ": flow without a route");
    f.route.clear();
    for (const Hop& h : r->hops) f.route.emplace_back(static_cast<int>(h.link), h.forward);
    f.route_latency_ns = r->latency.ns;
    TransferRequest req;
    req.src = static_cast<NodeId>(f.src);
    req.dst = static_cast<NodeId>(f.dst);
    req.size = Bytes{f.bytes};
    req.start = SimTime{f.start_ns};
    if (f.cap_bps > 0) req.rate_cap = BitsPerSecond{f.cap_bps};
    net.submit(std::move(req));
  }
  sim.run();
  KvshiftRun out;
  for (TransferId id = 0; id < net.transfer_count(); ++id) {
    const TransferInfo& info = net.info(id);
    if (info.state != TransferState::kFinished)
      throw std::runtime_error(c.name + ": unfinished flow");
    out.finish_s.push_back(info.finish.seconds());
  }
  out.events = sim.executed_count();
  out.reshares = net.reshare_count();
  out.reshared_flows = net.reshared_flows();
  return out;
}

}  // namespace kvshift::sim::testing
