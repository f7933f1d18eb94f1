// What a move did to the request's text. After a move the request keeps
// decoding on the receiver from the KV it rebuilt; the source, had it kept the
// request, would have decoded from its own. Both continue from the same next
// token for the same number of steps:
//   greedy    each side takes its most likely token (free-running: after a
//             difference each follows its own text);
//   sampled   each side samples at temperature 1 with the same seeded uniform
//             draws, so equal distributions give equal tokens;
// and the receiver scores the source's greedy text teacher-forced: its mean NLL
// minus the source's is the move's real ΔNLL on that text (nats/token). Given
// the text that really follows the context (a corpus), both also score it: the
// ΔNLL on real text, what `kvshift quality` measures and the simulator charges.
#pragma once

#include <cstdint>
#include <span>

#include "backend/model.hpp"

namespace kvshift::testbed {

struct ContinuationQuality {
  int steps = 0;
  double greedy_agreement = 0;      ///< share of the steps whose greedy token equals the source's
  int greedy_first_difference = 0;  ///< step of the first different greedy token (steps: none)
  double sampled_agreement = 0;     ///< the same for the seeded samples
  double delta_nll = 0;  ///< receiver's mean NLL of the source's greedy text minus the source's
  /// The same on the text that follows the context (its 2nd token on: the caches give no
  /// logits for the 1st); NaN without one.
  double text_delta_nll = 0;
};

/// Continues `source` and `received` (caches of the same request's context) from
/// `next_token` for `steps` (>= 1) tokens each way; `seed` draws the samples. `following`:
/// the text after the context, when known (at least 2 tokens, else text_delta_nll is NaN).
ContinuationQuality compare_continuations(const backend::Model& model,
                                          const backend::KvCache& source,
                                          const backend::KvCache& received, std::int32_t next_token,
                                          int steps, std::uint64_t seed,
                                          std::span<const std::int32_t> following = {});

}  // namespace kvshift::testbed
