// Test helpers: an owning host tensor with a view, seeded random fills
// (never zeros), and the relative-error measure the twin tests use.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/tensor.hpp"

namespace kvshift::kernels::testing {

/// Host-owned contiguous tensor.
class HostTensor {
 public:
  HostTensor(DType dtype, std::initializer_list<std::int64_t> shape)
      : view_(make_view(nullptr, dtype, Device::kHost, shape)) {
    bytes_.resize(static_cast<std::size_t>(std::max<std::int64_t>(view_.numel(), 1)) *
                  dtype_size(dtype));
    view_.data = bytes_.data();
  }
  /// A deep copy whose view points at its own bytes.
  HostTensor(const HostTensor& other) : bytes_(other.bytes_), view_(other.view_) {
    view_.data = bytes_.data();
  }
  HostTensor& operator=(const HostTensor& other) {
    bytes_ = other.bytes_;
    view_ = other.view_;
    view_.data = bytes_.data();
    return *this;
  }
  HostTensor(HostTensor&&) noexcept = default;  // the buffer moves, so the view stays valid
  HostTensor& operator=(HostTensor&&) noexcept = default;
  ~HostTensor() = default;
  const TensorView& view() const { return view_; }
  std::int64_t numel() const { return view_.numel(); }
  void* data() { return bytes_.data(); }
  std::size_t bytes() const { return bytes_.size(); }
  float get(std::int64_t i) const { return load_float(view_, i); }
  void set(std::int64_t i, float v) { store_float(view_, i, v); }
  std::int32_t geti(std::int64_t i) const {
    return static_cast<const std::int32_t*>(view_.data)[i];
  }
  void seti(std::int64_t i, std::int32_t v) { static_cast<std::int32_t*>(view_.data)[i] = v; }
  /// Normal(0, sigma) values, re-drawn until non-zero.
  void randomize(std::mt19937_64& rng, float sigma = 1.0f) {
    std::normal_distribution<float> dist(0.0f, sigma);
    for (std::int64_t i = 0; i < numel(); ++i) {
      float v = 0;
      while (v == 0) v = dist(rng);
      set(i, v);
    }
  }
  void fill(float v) {
    for (std::int64_t i = 0; i < numel(); ++i) set(i, v);
  }
  std::vector<float> values() const {
    std::vector<float> out(numel());
    for (std::int64_t i = 0; i < numel(); ++i) out[i] = get(i);
    return out;
  }

 private:
  std::vector<unsigned char> bytes_;
  TensorView view_;
};

/// ||a - b|| / ||b||; NaN anywhere gives +inf. `report` receives the first mismatches.
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b,
                             std::string* report = nullptr, double element_tol = 0) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  bool nan = false;
  std::ostringstream s;
  int shown = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) nan = true;
    const double e = static_cast<double>(a[i]) - b[i];
    diff += e * e;
    norm += static_cast<double>(b[i]) * b[i];
    if ((std::isnan(a[i]) || std::abs(e) > element_tol + 1e-3 * std::abs(b[i])) && shown < 8) {
      s << "  [" << i << "] got " << a[i] << " want " << b[i] << "\n";
      ++shown;
    }
  }
  if (report) *report = s.str();
  if (nan) return std::numeric_limits<double>::infinity();
  return norm > 0 ? std::sqrt(diff / norm) : std::numeric_limits<double>::infinity();
}

/// ||b|| (the guard that a comparison is not against all zeros).
inline double norm_of(const std::vector<float>& b) {
  double n = 0;
  for (float x : b) n += static_cast<double>(x) * x;
  return std::sqrt(n);
}

}  // namespace kvshift::kernels::testing
