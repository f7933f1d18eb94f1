// RunBooks: where one run's request and move records go — the run's tally and
// its deployment's, the streaming sink, and the kept lists (RecordOptions).
#pragma once

#include <cstddef>

#include "sim/serving/results.hpp"

namespace kvshift::sim {

class RunBooks {
 public:
  RunBooks(RunResult& result, RecordOptions options) : result_(result), options_(options) {}

  const RecordOptions& options() const { return options_; }
  void add(const RequestRecord& r) {
    tally(r);
    if (options_.sink) options_.sink->request(r);
    if (options_.keep) result_.requests.push_back(r);
  }
  void add(const MoveRecord& m) {
    tally(m);
    if (options_.sink) options_.sink->move(m);
    if (options_.keep) result_.moves.push_back(m);
  }

 private:
  /// The run's tally and, with several deployments, the record's deployment's.
  template <typename Record>
  void tally(const Record& r) {
    result_.tally.add(r);
    if (!result_.deployments.empty()) {
      result_.deployments[static_cast<std::size_t>(r.deployment)].tally.add(r);
    }
  }

  RunResult& result_;
  RecordOptions options_;
};

}  // namespace kvshift::sim
