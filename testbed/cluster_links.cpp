// Shapers per link direction and least-latency routes.
#include "testbed/cluster_links.hpp"

#include <limits>
#include <queue>
#include <stdexcept>
#include <tuple>

namespace kvshift::testbed {
ClusterLinks::ClusterLinks(const sim::ClusterSpec& cluster) : cluster_(cluster) {
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    index_[cluster.nodes[i].name] = static_cast<int>(i);
  }
  out_.resize(cluster.nodes.size());
  for (std::size_t i = 0; i < cluster.links.size(); ++i) {
    const sim::ClusterLink& l = cluster.links[i];
    const auto a = static_cast<int>(l.a), b = static_cast<int>(l.b);
    const std::string& an = cluster.nodes[l.a].name;
    const std::string& bn = cluster.nodes[l.b].name;
    shapers_.push_back(std::make_unique<LinkShaper>(an + "->" + bn, l.bandwidth, kBurst));
    LinkShaper* ab = shapers_.back().get();
    LinkShaper* ba = ab;
    if (l.duplex == sim::Duplex::kFull) {
      shapers_.push_back(std::make_unique<LinkShaper>(bn + "->" + an, l.bandwidth, kBurst));
      ba = shapers_.back().get();
    }
    out_[static_cast<std::size_t>(a)].push_back({b, i, ab});
    out_[static_cast<std::size_t>(b)].push_back({a, i, ba});
  }
}

std::vector<ClusterLinks::Hop> ClusterLinks::route(const std::string& src,
                                                   const std::string& dst) const {
  const auto s = index_.find(src), d = index_.find(dst);
  if (s == index_.end() || d == index_.end()) throw std::invalid_argument("route: unknown node");
  using Cost = std::tuple<std::int64_t, int, std::size_t>;  // latency ns, hops, link index
  const std::size_t n = out_.size();
  std::vector<Cost> best(n, {std::numeric_limits<std::int64_t>::max(), 0, 0});
  std::vector<Hop> via(n);
  std::vector<int> from(n, -1);
  std::priority_queue<std::pair<Cost, int>, std::vector<std::pair<Cost, int>>, std::greater<>> q;
  best[static_cast<std::size_t>(s->second)] = {0, 0, 0};
  q.push({best[static_cast<std::size_t>(s->second)], s->second});
  while (!q.empty()) {
    auto [cost, u] = q.top();
    q.pop();
    if (cost > best[static_cast<std::size_t>(u)]) continue;
    for (const Hop& h : out_[static_cast<std::size_t>(u)]) {
      const Cost c{std::get<0>(cost) + cluster_.links[h.link].latency.ns, std::get<1>(cost) + 1,
                   h.link};
      if (c < best[static_cast<std::size_t>(h.to)]) {
        best[static_cast<std::size_t>(h.to)] = c;
        via[static_cast<std::size_t>(h.to)] = h;
        from[static_cast<std::size_t>(h.to)] = u;
        q.push({c, h.to});
      }
    }
  }
  if (d->second != s->second && from[static_cast<std::size_t>(d->second)] < 0) {
    throw std::invalid_argument("route: " + src + " cannot reach " + dst);
  }
  std::vector<Hop> hops;
  for (int v = d->second; v != s->second; v = from[static_cast<std::size_t>(v)]) {
    hops.insert(hops.begin(), via[static_cast<std::size_t>(v)]);
  }
  return hops;
}

ShapedPath ClusterLinks::path(const std::string& src, const std::string& dst) const {
  ShapedPath p;
  std::int64_t latency_ns = 0;
  for (const Hop& h : route(src, dst)) {
    p.links.push_back(h.shaper);
    latency_ns += cluster_.links[h.link].latency.ns;
  }
  p.latency = std::chrono::nanoseconds(latency_ns);
  return p;
}

std::vector<std::string> ClusterLinks::path_names(const std::string& src,
                                                  const std::string& dst) const {
  std::vector<std::string> names;
  for (const Hop& h : route(src, dst)) names.push_back(h.shaper->name());
  return names;
}

}  // namespace kvshift::testbed
