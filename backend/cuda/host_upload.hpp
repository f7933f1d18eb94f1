// Host -> device copies of the CPU backend's fp32 weights: each value is
// rounded on the host to the device dtype (bf16/f16 with round-to-nearest-even,
// as kernels/tensor.hpp does, so a GPU model rounds its weights exactly as the
// twins do) and the bytes are copied synchronously. Several host arrays can be
// concatenated into one buffer, which is how GpuModel fuses q|k|v and gate|up
// weights ([out, in] row-major blocks stacked along `out`). Pinned staging for
// timed copies lives here too.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <span>
#include <vector>

#include "kernels/cuda.hpp"

namespace kvshift::backend::gpu {

/// `values` rounded to `dtype`, as raw bytes in the device layout.
std::vector<unsigned char> to_device_bytes(kernels::DType dtype, std::span<const float> values);

/// One device buffer holding the parts, in order, converted to `dtype`.
kernels::cuda::DeviceBuffer upload_as(kernels::DType dtype,
                                      std::initializer_list<std::span<const float>> parts);

/// Page-locked host memory (cudaMallocHost), so timed host -> device copies run at the
/// link's DMA rate rather than through the driver's pageable staging.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::span<const unsigned char> bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  const void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace kvshift::backend::gpu
