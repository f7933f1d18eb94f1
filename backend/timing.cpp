// Timing helpers; see timing.hpp.
#include "backend/timing.hpp"

#include <algorithm>
#include <stdexcept>

#include "util/percentile.hpp"

namespace kvshift::backend {

OpTiming time_op(const std::string& op, std::int64_t tokens, std::int64_t sharing, int warmup,
                 int repeats, const std::function<void()>& run,
                 const std::function<void()>& prepare) {
  if (repeats < 1) throw std::invalid_argument("time_op: repeats must be >= 1");
  for (int i = 0; i < warmup; ++i) {
    if (prepare) prepare();
    run();
  }
  std::vector<double> s;
  for (int i = 0; i < repeats; ++i) {
    if (prepare) prepare();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  OpTiming row{.op = op, .tokens = tokens, .sharing = sharing};
  summarise(s, row);
  return row;
}

}  // namespace kvshift::backend
