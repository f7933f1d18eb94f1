#include "sim/serving/results.hpp"

namespace kvshift::sim {
namespace {

double s_of(std::int64_t ns) { return static_cast<double>(ns) * 1e-9; }

}  // namespace

void RunTally::add(const RequestRecord& r) {
  ++arrived;
  if (r.first_token_ns >= 0) {
    ttft_s.push_back(s_of(r.first_token_ns - r.arrival_ns));
  } else if (r.outcome == RequestOutcome::kUnfinished) {
    ttft_open_arrival_s.push_back(s_of(r.arrival_ns));
  }
  switch (r.outcome) {
    case RequestOutcome::kCompleted:
      ++completed;
      output_tokens += r.output_tokens;
      e2e_s.push_back(s_of(r.finish_ns - r.arrival_ns));
      if (r.output_tokens > 1 && r.first_token_ns >= 0) {
        tpot_s.push_back(s_of(r.finish_ns - r.first_token_ns) /
                         static_cast<double>(r.output_tokens - 1));
      }
      break;
    case RequestOutcome::kFailed:
      ++failed;
      break;
    case RequestOutcome::kUnfinished:
      ++unfinished;
      break;
  }
}

void RunTally::add(const MoveRecord& m) {
  const bool recovery = m.trigger == MoveTrigger::kFailure;
  const bool handoff = m.trigger == MoveTrigger::kHandoff;
  if (!m.fallback.empty()) ++fallbacks;  // whatever became of the move: one row, one count
  switch (m.outcome) {
    case MoveOutcome::kFailed:
      ++failed_moves;
      return;
    case MoveOutcome::kCancelled:
      ++cancelled_moves;
      return;
    case MoveOutcome::kUnfinished:
      ++(recovery ? open_recoveries : handoff ? open_handoffs : open_migrations);
      break;
    case MoveOutcome::kDone:
      ++by_strategy[m.strategy];
      ++(recovery ? recoveries : handoff ? handoffs : migrations);
      if (m.delta_nll != 0) ++lossy;
      delta_nll_sum += m.delta_nll;
      break;
  }
  if (recovery) {
    recovery_s.push_back(s_of(m.end_ns - m.start_ns));
    recovery_stall_s.push_back(s_of(m.stall_ns));
  } else if (handoff) {
    handoff_s.push_back(s_of(m.end_ns - m.start_ns));
  } else {
    migration_s.push_back(s_of(m.end_ns - m.start_ns));
  }
}

}  // namespace kvshift::sim
