// GPU-test support: skip with the runtime's reason when no CUDA device is
// usable, copy host tensors to the device and back, allocate NaN-poisoned outputs.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "host_tensor.hpp"
#include "kernels/cuda.hpp"

#define KVSHIFT_REQUIRE_GPU()                                                                  \
  do {                                                                                         \
    const std::string kvshift_reason_ = ::kvshift::kernels::cuda::device_unavailable_reason(); \
    if (!kvshift_reason_.empty()) GTEST_SKIP() << "needs a CUDA device: " << kvshift_reason_;  \
  } while (0)

namespace kvshift::kernels::testing {

/// A device copy of a host tensor, with a CUDA view of the same shape.
struct DeviceTensor {
  cuda::DeviceBuffer buffer;
  TensorView view;
};

inline DeviceTensor to_device(const HostTensor& h) {
  DeviceTensor d{cuda::DeviceBuffer(h.bytes()), h.view()};
  d.buffer.upload(h.view().data, h.bytes());
  d.view.data = d.buffer.data();
  d.view.device = Device::kCuda;
  return d;
}

/// Device tensor shaped like `h` with every byte 0xFF (NaN for floats, -1 for i32).
inline DeviceTensor poisoned_like(const HostTensor& h) {
  DeviceTensor d{cuda::DeviceBuffer(h.bytes()), h.view()};
  d.buffer.fill_bytes(0xFF);
  d.view.data = d.buffer.data();
  d.view.device = Device::kCuda;
  return d;
}

/// Copies a device tensor back into a host tensor of the same shape and dtype.
inline void download(const DeviceTensor& d, HostTensor& h) {
  cuda::device_synchronize();
  d.buffer.download(h.data(), h.bytes());
}

}  // namespace kvshift::kernels::testing
