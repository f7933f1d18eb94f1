// A scenario's links as shapers, and the routes between its nodes. Every link
// direction of a full-duplex link gets its own LinkShaper; a half-duplex link
// has one, shared by both directions (as sim/ models it). Routes are the
// simulator's rule — least total latency, then fewest hops, then lowest link
// index — found here by Dijkstra over the scenario's links (switches forward;
// only GPU nodes run agents). Leaves out: ECMP, failed or degraded links.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/spec.hpp"
#include "testbed/shaper.hpp"

namespace kvshift::testbed {

class ClusterLinks {
 public:
  explicit ClusterLinks(const sim::ClusterSpec& cluster);
  /// The shaped path from node `src` to node `dst` (names); std::invalid_argument if none.
  ShapedPath path(const std::string& src, const std::string& dst) const;
  /// Names of the link directions on that path ("gpu0->sw0", ...).
  std::vector<std::string> path_names(const std::string& src, const std::string& dst) const;

 private:
  struct Hop {
    int to = 0;
    std::size_t link = 0;
    LinkShaper* shaper = nullptr;
  };
  std::vector<Hop> route(const std::string& src, const std::string& dst) const;

  const sim::ClusterSpec& cluster_;
  std::map<std::string, int> index_;
  std::vector<std::vector<Hop>> out_;  // per node
  std::vector<std::unique_ptr<LinkShaper>> shapers_;
};

}  // namespace kvshift::testbed
