// RoPE apply/invert; see rope.hpp. Angles are computed in double and rounded
// once, so long positions (32k) keep fp32 accuracy.
#include "backend/rope.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

namespace kvshift::backend {
namespace {

void rotate_row(float* row, const RopeDesc& d, std::int64_t pos, bool invert,
                const std::vector<double>& inv_freq, std::vector<float>& cs,
                std::vector<float>& sn) {
  const int half = d.head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq[i];
    cs[i] = static_cast<float>(std::cos(angle));
    sn[i] = static_cast<float>(invert ? -std::sin(angle) : std::sin(angle));
  }
  for (int h = 0; h < d.heads; ++h) {
    float* x = row + static_cast<std::ptrdiff_t>(h) * d.head_dim;
    for (int i = 0; i < half; ++i) {
      const float a = x[i], b = x[i + half];
      x[i] = a * cs[i] - b * sn[i];
      x[i + half] = b * cs[i] + a * sn[i];
    }
  }
}

template <typename PosFn>
void rope_rows(Matrix& x, const RopeDesc& d, bool invert, PosFn pos_of) {
  if (d.head_dim <= 0 || d.head_dim % 2 != 0 || d.heads <= 0 ||
      x.cols() != static_cast<Eigen::Index>(d.heads) * d.head_dim) {
    throw std::invalid_argument("apply_rope: x has " + std::to_string(x.cols()) +
                                " columns, expected heads·head_dim with an even head_dim");
  }
  const int half = d.head_dim / 2;
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(d.theta, -2.0 * i / d.head_dim);
  }
  std::vector<float> cs(half), sn(half);
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    rotate_row(x.row(r).data(), d, pos_of(r), invert, inv_freq, cs, sn);
  }
}

}  // namespace

void apply_rope(Matrix& x, const RopeDesc& d, std::int64_t first_position, bool invert) {
  rope_rows(x, d, invert, [&](Eigen::Index r) { return first_position + r; });
}

void apply_rope(Matrix& x, const RopeDesc& d, std::span<const std::int64_t> positions,
                bool invert) {
  if (positions.size() != static_cast<std::size_t>(x.rows())) {
    throw std::invalid_argument("apply_rope: one position per row needed");
  }
  rope_rows(x, d, invert, [&](Eigen::Index r) { return positions[r]; });
}

}  // namespace kvshift::backend
