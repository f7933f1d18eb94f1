// TransferEngine: what a KV transfer engine (NIXL, Mooncake TE) adds to a link,
// priced the same way by the closed form and by the simulator.
#pragma once

#include <cstdint>

#include "cost_model/units.hpp"

namespace kvshift::cost_model {

/// What a KV transfer engine adds to a link (NIXL, Mooncake TE): a setup per transfer and
/// a cost per block descriptor — one per paged block, layer and K/V tensor, so small
/// blocks turn one pull into tens of thousands of descriptors. Zeros: an ideal link.
struct TransferEngine {
  Seconds setup{};                 ///< per transfer (descriptor build, handshake)
  Seconds per_block{};             ///< per descriptor posted
  std::int64_t block_tokens = 16;  ///< paged KV block size (the serving block size)

  bool ideal() const { return setup.value == 0 && per_block.value == 0; }
};

/// Descriptors of `tokens` tokens' KV over `layers` layers: blocks × layers × {K, V}.
inline std::int64_t kv_descriptors(const TransferEngine& engine, std::int64_t tokens, int layers) {
  if (tokens <= 0 || layers <= 0) return 0;
  const std::int64_t blocks = (tokens + engine.block_tokens - 1) / engine.block_tokens;
  return blocks * layers * 2;
}

/// The engine's time for one transfer of `descriptors` descriptors (0 for none), in ns.
inline std::int64_t engine_ns(const TransferEngine& engine, std::int64_t descriptors) {
  if (descriptors <= 0) return 0;
  return round_to_ns(engine.setup.value +
                     static_cast<double>(descriptors) * engine.per_block.value);
}

}  // namespace kvshift::cost_model
