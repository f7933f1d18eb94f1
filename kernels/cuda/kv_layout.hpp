// Internal interface of kv_layout.cu for reconstruct.cpp (plain C++): a RoPE
// cos/sin table that a reconstruction computes once, in double like every RoPE
// here, and that the anchor gather and the epilogue of every group then read
// instead of evaluating pow/cos/sin in double per element.
#pragma once

#include <cstdint>

#include "kernels/ops.hpp"

struct CUstream_st;

namespace kvshift::kernels::cuda::detail {

/// A device table of (cos, sin) floats, [tokens, head_dim / 2] of float2, for positions
/// offset + t with `theta`. An empty table (cs == nullptr) means "compute per element".
struct RopeTable {
  const void* cs = nullptr;
  std::int64_t tokens = 0;
  int head_dim = 0;
  double theta = 0;
  std::int64_t offset = 0;
  /// Whether this table holds the angles of these parameters.
  bool matches(std::int64_t t, std::int64_t hd, double th, std::int64_t off) const {
    return cs != nullptr && tokens == t && head_dim == hd && theta == th && offset == off;
  }
};

/// Bytes of a table of `tokens` positions at `head_dim`.
inline std::int64_t rope_table_bytes(std::int64_t tokens, std::int64_t head_dim) {
  return tokens * (head_dim / 2) * 8;
}

/// Fills `table` (its cs pointing at rope_table_bytes() of device memory) on `stream`.
void fill_rope_table(const RopeTable& table, CUstream_st* stream);

/// The ops of cuda.hpp, reading RoPE angles from `table` where it matches the descriptor.
void anchor_gather(const AnchorGatherDesc& d, const RopeTable& table, CUstream_st* stream);
void bias_rope_scatter(const EpilogueDesc& d, const RopeTable& table, CUstream_st* stream);

}  // namespace kvshift::kernels::cuda::detail
