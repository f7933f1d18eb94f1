// What each strategy puts on the wire, and how the receiver turns it back
// into a KV cache. Layouts (one Segment per layer, or one for token ids):
//   full KV / kept layers  layer l: K rows [T, kv_heads·head_dim], then V rows
//   kept tokens (ProxyKV)  layer l: per KV head h: the kept token indices (int32, K of
//                          them, ascending), K rows [K, head_dim], V rows [K, head_dim]
//   token ids (replay)     int32 per token
// Elements are little-endian fp32 or fp16 (Eigen::half: round to nearest even); the
// header's dtype says which (kept-token segments say the element dtype; their indices
// are always int32). The receiver's kept-token cache is the one backend::compact()
// makes of the sender's full cache (compaction happens on the receiver).
// Leaves out: bf16, quantised KV.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/model.hpp"
#include "testbed/transfer.hpp"

namespace kvshift::testbed {

struct KvPayload {
  std::vector<std::uint8_t> bytes;
  std::vector<Segment> segments;
};

/// `layers` of `cache` (every layer for a full-KV move), K then V per layer, in `dtype`;
/// the tokens from `first_token` on (a hybrid move ships the back of the KV).
KvPayload layers_payload(const backend::KvCache& cache, const std::vector<int>& layers,
                         WireDType dtype, std::int64_t first_token = 0);
/// The tokens `kept[l·kv_heads + h]` of every layer and KV head (equal counts, ascending).
KvPayload kept_tokens_payload(const backend::KvCache& cache,
                              const std::vector<std::vector<std::int64_t>>& kept, int kv_heads,
                              int head_dim, WireDType dtype);
/// Token ids, int32.
KvPayload token_ids_payload(std::span<const std::int32_t> tokens);

/// Receiver: a cache of `layers` layers with the received layers filled and the rest empty
/// (0 rows); a segment from token t on fills rows for its tokens t.. only. std::invalid_argument
/// on a layout that does not fit.
backend::KvCache decode_layers(std::span<const std::uint8_t> bytes,
                               std::span<const Segment> segments, int layers, int width);
/// Receiver: the compact cache of the kept tokens (as backend::compact makes it), `tokens`
/// being the request's full context (so `evicted` = tokens − kept).
backend::KvCache decode_kept_tokens(std::span<const std::uint8_t> bytes,
                                    std::span<const Segment> segments, int layers, int kv_heads,
                                    int head_dim, std::int64_t tokens);
/// Receiver: the token ids.
std::vector<std::int32_t> decode_token_ids(std::span<const std::uint8_t> bytes);

/// The cache as the receiver will see it after a round trip through `dtype` (identity for fp32).
backend::KvCache round_trip(const backend::KvCache& cache, WireDType dtype);

}  // namespace kvshift::testbed
