#include "sim/serving/predictor_cache.hpp"

#include <stdexcept>
#include <utility>

namespace kvshift::sim {

PredictorCache::PredictorCache(std::size_t nodes, bool cacheable)
    : nodes_(nodes), cacheable_(cacheable) {}

void PredictorCache::preload(int node) {
  Node& n = nodes_[static_cast<std::size_t>(node)];
  if (n.state == State::kAbsent) n.state = State::kResident;
}

void PredictorCache::begin_fetch(int node, std::int64_t eta_ns) {
  Node& n = nodes_[static_cast<std::size_t>(node)];
  if (n.state != State::kAbsent) throw std::logic_error("invariant: a second predictor fetch");
  n.state = State::kFetching;
  n.eta_ns = eta_ns;
}

void PredictorCache::wait(int node, std::uint64_t move) {
  Node& n = nodes_[static_cast<std::size_t>(node)];
  if (n.state != State::kFetching) throw std::logic_error("invariant: waiting for no fetch");
  n.waiting.push_back(move);
}

std::vector<std::uint64_t> PredictorCache::end_fetch(int node, bool delivered) {
  Node& n = nodes_[static_cast<std::size_t>(node)];
  n.state = delivered && cacheable_ ? State::kResident : State::kAbsent;
  return std::exchange(n.waiting, {});
}

void PredictorCache::drop(int node) {
  Node& n = nodes_[static_cast<std::size_t>(node)];
  if (n.state == State::kResident) n.state = State::kAbsent;
}

std::int64_t PredictorCache::copies() const {
  std::int64_t c = 0;
  for (const Node& n : nodes_) c += n.state == State::kResident ? 1 : 0;
  return c;
}

}  // namespace kvshift::sim
