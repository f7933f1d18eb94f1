// Host-side rounding and copies (see host_upload.hpp).
#include "backend/cuda/host_upload.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/cuda/check.cuh"

namespace kvshift::backend::gpu {

using kernels::DType;
namespace kc = kernels::cuda;

std::vector<unsigned char> to_device_bytes(DType dtype, std::span<const float> values) {
  std::vector<unsigned char> out(values.size() * kernels::dtype_size(dtype));
  switch (dtype) {
    case DType::kF32:
      if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
      break;
    case DType::kBF16:
    case DType::kF16:
      for (std::size_t i = 0; i < values.size(); ++i) {
        const std::uint16_t h = dtype == DType::kBF16 ? kernels::float_to_bf16(values[i])
                                                      : kernels::float_to_f16(values[i]);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      break;
    case DType::kI32:
      throw std::invalid_argument("to_device_bytes: weights cannot be i32");
  }
  return out;
}

kc::DeviceBuffer upload_as(DType dtype, std::initializer_list<std::span<const float>> parts) {
  std::size_t count = 0;
  for (const auto& p : parts) count += p.size();
  std::vector<unsigned char> bytes;
  bytes.reserve(count * kernels::dtype_size(dtype));
  for (const auto& p : parts) {
    const auto b = to_device_bytes(dtype, p);
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  kc::DeviceBuffer buffer(bytes.size());
  if (!bytes.empty()) buffer.upload(bytes.data(), bytes.size());
  return buffer;
}

PinnedBuffer::PinnedBuffer(std::span<const unsigned char> bytes) : bytes_(bytes.size()) {
  if (bytes_ == 0) return;
  KVSHIFT_CUDA_CHECK(cudaMallocHost(&data_, bytes_));
  std::memcpy(data_, bytes.data(), bytes_);
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}

}  // namespace kvshift::backend::gpu
