// cuBLAS is opened on first use, not at start-up (kernels/cuda/cublas_loader.cpp): a process
// that links the CUDA kernels maps no cuBLAS until it calls one, then every call reaches the
// real library. Needs the CUDA toolkit's libraries, not a GPU.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string maps() {
  std::ifstream in("/proc/self/maps");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CublasLoader, NothingIsMappedUntilTheFirstCallThenItForwardsToTheLibrary) {
  ASSERT_EQ(maps().find("libcublas"), std::string::npos) << "cuBLAS mapped before any call";
  // The library's own text for the status, not the loader's "could not be loaded".
  EXPECT_STREQ(cublasGetStatusString(CUBLAS_STATUS_SUCCESS), "success");
  EXPECT_STREQ(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE),
               "an unsupported value or parameter was passed to the function");
  const std::string after = maps();
  EXPECT_NE(after.find("libcublas.so"), std::string::npos);
  EXPECT_NE(after.find("libcublasLt.so"), std::string::npos);
}

TEST(CublasLoader, CreateReachesTheLibraryWithOrWithoutADevice) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  cublasHandle_t handle = nullptr;
  const cublasStatus_t s = cublasCreate(&handle);
  if (devices == 0) {
    // The library's answer without a GPU; the loader's own failure would say it was not loaded.
    EXPECT_NE(s, CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(std::string(cublasGetStatusString(s)).find("could not be loaded"), std::string::npos);
  } else {
    ASSERT_EQ(s, CUBLAS_STATUS_SUCCESS) << cublasGetStatusString(s);
    EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  }
}

}  // namespace
