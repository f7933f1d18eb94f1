// Progress printer; see support_progress.hpp.
#include "apps/kvshift/support_progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

namespace kvshift::app {

std::function<void(const std::string&, std::int64_t, std::int64_t)> progress_printer(
    const std::string& command) {
  struct State {
    int last_pct = -1;
    std::string stage;
    std::chrono::steady_clock::time_point stage_start;
  };
  const bool tty = ::isatty(::fileno(stderr)) != 0;
  auto st = std::make_shared<State>();
  return [tty, st, command](const std::string& stage, std::int64_t done, std::int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    const bool new_stage = stage != st->stage;
    if (new_stage) st->stage_start = now;
    const int pct = total > 0 ? static_cast<int>(100 * done / total) : 100;
    if (!new_stage && (tty ? pct == st->last_pct : pct / 10 == st->last_pct / 10)) return;
    // Rate and ETA from this stage's own pace (the first units of a stage have none).
    const double elapsed = std::chrono::duration<double>(now - st->stage_start).count();
    char pace[64] = "";
    if (done > 0 && done < total && elapsed > 0) {
      std::snprintf(pace, sizeof pace, " %.2f/min, ETA %.0f s", 60.0 * done / elapsed,
                    elapsed * static_cast<double>(total - done) / static_cast<double>(done));
    }
    if (tty) {
      const int filled = pct * 30 / 100;
      std::fprintf(stderr, "\r[%.*s%.*s] %3d%% %s %lld/%lld%s   ", filled,
                   "##############################", 30 - filled, "..............................",
                   pct, stage.c_str(), static_cast<long long>(done), static_cast<long long>(total),
                   pace);
      if (done >= total) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "%s: %3d%% %s %lld/%lld%s\n", command.c_str(), pct, stage.c_str(),
                   static_cast<long long>(done), static_cast<long long>(total), pace);
    }
    std::fflush(stderr);
    st->last_pct = pct;
    st->stage = stage;
  };
}

}  // namespace kvshift::app
