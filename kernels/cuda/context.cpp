// Device discovery, owning device buffers and the stream + cuBLAS context.
// Host code only (compiled by the C++ compiler against the CUDA runtime).
#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda.hpp"
#include "kernels/cuda/check.cuh"

namespace kvshift::kernels::cuda {
namespace {
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are not confused
    return 0;
  }
  return n;
}

std::string device_unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device: ") + cudaGetErrorString(e);
  }
  return n > 0 ? std::string() : std::string("no CUDA device present");
}

void device_synchronize() { KVSHIFT_CUDA_CHECK(cudaDeviceSynchronize()); }

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) KVSHIFT_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > bytes_)
    throw std::invalid_argument("DeviceBuffer::upload: more bytes than allocated");
  KVSHIFT_CUDA_CHECK(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_)
    throw std::invalid_argument("DeviceBuffer::download: more bytes than allocated");
  KVSHIFT_CUDA_CHECK(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::fill_bytes(unsigned char value) {
  KVSHIFT_CUDA_CHECK(cudaMemset(data_, value, bytes_));
}

TensorView DeviceBuffer::view(DType dtype, std::initializer_list<std::int64_t> shape) const {
  TensorView v = make_view(data_, dtype, Device::kCuda, shape);
  if (static_cast<std::size_t>(v.numel()) * dtype_size(dtype) > bytes_) {
    throw std::invalid_argument("DeviceBuffer::view: " + v.describe() + " exceeds " +
                                std::to_string(bytes_) + " bytes");
  }
  return v;
}

Stream::Stream() { KVSHIFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}

Context::Context(CUstream_st* stream) : stream_(stream), workspace_(kCublasWorkspaceBytes) {
  KVSHIFT_CUBLAS_CHECK(cublasCreate(&cublas_));
  KVSHIFT_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  KVSHIFT_CUBLAS_CHECK(cublasSetWorkspace(cublas_, workspace_.data(), workspace_.bytes()));
}

Context::~Context() {
  if (cublas_) cublasDestroy(cublas_);
}

void Context::synchronize() const { KVSHIFT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

}  // namespace kvshift::kernels::cuda
