// Rotary position embedding in the Hugging Face half-split convention: within
// each head, dimension i rotates with dimension i + head_dim/2 by the angle
// position·theta^(-2i/head_dim). `invert` rotates by the negative angle, so
// rope(invert) ∘ rope = identity (up to fp32 rounding). llama.cpp's adjacent-
// pair layout is not supported here: convert weights before using them.
#pragma once

#include <cstdint>
#include <span>

#include "backend/tensor.hpp"

namespace kvshift::backend {

struct RopeDesc {
  int heads = 0;     ///< heads packed side by side in each row
  int head_dim = 0;  ///< even
  double theta = 10000.0;
};

/// Rotates x [tokens, heads·head_dim] in place; row r sits at position first_position + r.
void apply_rope(Matrix& x, const RopeDesc& d, std::int64_t first_position, bool invert = false);

/// Same, with an explicit position per row (positions.size() == x.rows()).
void apply_rope(Matrix& x, const RopeDesc& d, std::span<const std::int64_t> positions,
                bool invert = false);

}  // namespace kvshift::backend
