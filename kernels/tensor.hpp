// Tensor views for the kernels: a non-owning pointer with a dtype, a device,
// a shape and strides (in elements), up to rank 6. The ops in ops.hpp take
// these views inside plain descriptor structs; nothing here allocates. The
// bf16 helpers convert on the host with round-to-nearest-even, bit-for-bit as
// the device's __float2bfloat16 does, so CPU twins and CUDA kernels round alike.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace kvshift::kernels {

/// Element type of a view. Index tensors use kI32.
enum class DType : std::uint8_t { kF32, kBF16, kF16, kI32 };
/// Where the data lives.
enum class Device : std::uint8_t { kHost, kCuda };

/// Bytes per element.
constexpr int dtype_size(DType t) { return t == DType::kF32 || t == DType::kI32 ? 4 : 2; }
/// "f32", "bf16", "f16", "i32".
std::string_view dtype_name(DType t);

inline constexpr int kMaxRank = 6;

/// Non-owning strided view. shape/stride are in elements; unused dims are 1/0.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kHost;
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<std::int64_t, kMaxRank> stride{};

  /// Number of elements (product of the shape; 0 for an empty view).
  std::int64_t numel() const;
  /// True when the strides are the row-major strides of the shape.
  bool contiguous() const;
  /// Element offset of a multi-index given in dims 0..n-1.
  std::int64_t offset(std::initializer_list<std::int64_t> index) const;
  /// "bf16[4, 2, 64] cuda".
  std::string describe() const;
  bool empty() const { return data == nullptr; }
};

/// A contiguous row-major view of `shape` at `data`.
TensorView make_view(void* data, DType dtype, Device device,
                     std::initializer_list<std::int64_t> shape);
/// The same view with dim `dim` restricted to [begin, begin + count).
TensorView slice(const TensorView& v, int dim, std::int64_t begin, std::int64_t count);

/// float -> bf16 bits, round to nearest even; NaN stays NaN.
std::uint16_t float_to_bf16(float f);
/// bf16 bits -> float (exact).
float bf16_to_float(std::uint16_t b);
/// float -> IEEE half bits, round to nearest even.
std::uint16_t float_to_f16(float f);
/// IEEE half bits -> float (exact).
float f16_to_float(std::uint16_t h);

/// Reads element `offset` of a host view as float (any float dtype; i32 converted).
float load_float(const TensorView& v, std::int64_t offset);
/// Writes `value` (rounded to the view's dtype) at element `offset` of a host view.
void store_float(const TensorView& v, std::int64_t offset, float value);

}  // namespace kvshift::kernels
