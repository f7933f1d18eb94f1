// TensorView helpers and the host-side bf16/fp16 conversions.
#include "kernels/tensor.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace kvshift::kernels {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
  }
  return "?";
}

std::int64_t TensorView::numel() const {
  if (rank == 0) return data ? 1 : 0;
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

bool TensorView::contiguous() const {
  std::int64_t expected = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (shape[i] != 1 && stride[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::int64_t TensorView::offset(std::initializer_list<std::int64_t> index) const {
  std::int64_t off = 0;
  int i = 0;
  for (std::int64_t x : index) off += x * stride[i++];
  return off;
}

std::string TensorView::describe() const {
  std::string s(dtype_name(dtype));
  s += "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  s += device == Device::kHost ? "] host" : "] cuda";
  return s;
}

TensorView make_view(void* data, DType dtype, Device device,
                     std::initializer_list<std::int64_t> shape) {
  if (shape.size() > static_cast<std::size_t>(kMaxRank)) {
    throw std::invalid_argument("make_view: rank above " + std::to_string(kMaxRank));
  }
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.rank = static_cast<int>(shape.size());
  int i = 0;
  for (std::int64_t s : shape) v.shape[i++] = s;
  std::int64_t stride = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    v.stride[d] = stride;
    stride *= v.shape[d];
  }
  return v;
}

TensorView slice(const TensorView& v, int dim, std::int64_t begin, std::int64_t count) {
  if (dim < 0 || dim >= v.rank || begin < 0 || count < 0 || begin + count > v.shape[dim]) {
    throw std::invalid_argument("slice: range [" + std::to_string(begin) + ", " +
                                std::to_string(begin + count) + ") out of dim " +
                                std::to_string(dim) + " of " + v.describe());
  }
  TensorView s = v;
  s.data = static_cast<char*>(v.data) + begin * v.stride[dim] * dtype_size(v.dtype);
  s.shape[dim] = count;
  return s;
}

std::uint16_t float_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

std::uint16_t float_to_f16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000;
  const std::uint32_t absu = u & 0x7FFFFFFF;
  if (absu > 0x7F800000) return static_cast<std::uint16_t>(sign | 0x7E00);   // NaN
  if (absu >= 0x477FF000) return static_cast<std::uint16_t>(sign | 0x7C00);  // overflow -> inf
  if (absu < 0x38800000) {  // subnormal half (or zero): scale into units of 2^-24
    const float a = std::bit_cast<float>(absu);
    const float scaled = std::nearbyint(a * 16777216.0f);  // ties to even (default rounding)
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(scaled));
  }
  std::uint32_t rebased = absu - 0x38000000;  // exponent bias 127 -> 15
  rebased += 0xFFF + ((rebased >> 13) & 1);
  return static_cast<std::uint16_t>(sign | (rebased >> 13));
}

float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1F;
  const std::uint32_t mant = h & 0x3FF;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000 | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

float load_float(const TensorView& v, std::int64_t offset) {
  switch (v.dtype) {
    case DType::kF32:
      return static_cast<const float*>(v.data)[offset];
    case DType::kBF16:
      return bf16_to_float(static_cast<const std::uint16_t*>(v.data)[offset]);
    case DType::kF16:
      return f16_to_float(static_cast<const std::uint16_t*>(v.data)[offset]);
    case DType::kI32:
      return static_cast<float>(static_cast<const std::int32_t*>(v.data)[offset]);
  }
  return 0;
}

void store_float(const TensorView& v, std::int64_t offset, float value) {
  switch (v.dtype) {
    case DType::kF32:
      static_cast<float*>(v.data)[offset] = value;
      return;
    case DType::kBF16:
      static_cast<std::uint16_t*>(v.data)[offset] = float_to_bf16(value);
      return;
    case DType::kF16:
      static_cast<std::uint16_t*>(v.data)[offset] = float_to_f16(value);
      return;
    case DType::kI32:
      static_cast<std::int32_t*>(v.data)[offset] = static_cast<std::int32_t>(value);
      return;
  }
}

}  // namespace kvshift::kernels
