// The run's answer in one sentence: summary.json's "answer", the console's last line and
// report.html's headline. Strategies are ranked by failed requests, then moves unfinished at
// the end of the run, then the p99 of all moves (recoveries and migrations together; TTFT with
// the handoff in a disaggregated run), then ΔNLL per move. A strategy is put ahead only when no
// other failed fewer requests or left fewer moves unfinished. A latency that counts unfinished
// moves is a lower bound: it is printed with '>' and never called a tie or "% lower" as if it
// were exact. With one strategy nothing is ranked. The sentence also says what the strategy put
// ahead costs in quality (with where its ΔNLL comes from), how many of its moves were
// unfinished, and whether its moves fell back to another strategy.
#pragma once

#include <string>
#include <vector>

#include "reports/strategy_metrics.hpp"

namespace kvshift::reports {

/// The sentence and the strategies it puts first (empty when it ranks none ahead).
struct RunAnswer {
  std::vector<std::string> ahead;
  std::string text;
};

/// The answer for the strategies of one run, in run order.
RunAnswer run_answer(const std::vector<NamedMetrics>& all);

/// A latency the way a person reads it: ms below a second (µs-scale moves stay visible).
std::string format_latency(double s);

}  // namespace kvshift::reports
