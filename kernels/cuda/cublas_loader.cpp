// cuBLAS, opened when a GPU op first calls it. Linked as a library, libcublas brings cuBLASLt
// (about 540 MB with some 350,000 relocations) into every kvshift process at start-up: about
// 210 MB resident before main(), for the commands that never touch a GPU too (run, flows,
// check, sweep). These definitions stand in for the few cuBLAS entry points kvshift calls:
// each looks up the library's own on its first call and forwards to it. The library is looked
// for as the dynamic loader looks for any (the run path, LD_LIBRARY_PATH, the system's cache),
// then in the CUDA toolkit's library folder the build used. If it cannot be opened, every
// call returns CUBLAS_STATUS_NOT_INITIALIZED and cublasGetStatusString says why.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

namespace {

const std::string& soname() {
  static const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  return name;
}

struct Library {
  void* handle = nullptr;
  std::string why;  // dlerror() of the last attempt, when it failed
};

const Library& library() {
  static const Library lib = [] {
    Library l;
    l.handle = dlopen(soname().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!l.handle) {
      const std::string at = std::string(KVSHIFT_CUDA_LIBRARY_DIR) + "/" + soname();
      l.handle = dlopen(at.c_str(), RTLD_NOW | RTLD_LOCAL);
    }
    if (!l.handle) {
      const char* e = dlerror();
      l.why = "cuBLAS could not be loaded: " + std::string(e ? e : soname() + " not found");
    }
    return l;
  }();
  return lib;
}

/// The library's own `name`, or nullptr when the library or the symbol is missing.
template <class Fn>
Fn entry(const char* name) {
  const Library& lib = library();
  return lib.handle ? reinterpret_cast<Fn>(dlsym(lib.handle, name)) : nullptr;
}

}  // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  static const auto f = entry<decltype(&cublasCreate_v2)>("cublasCreate_v2");
  return f ? f(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  static const auto f = entry<decltype(&cublasDestroy_v2)>("cublasDestroy_v2");
  return f ? f(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static const auto f = entry<decltype(&cublasSetStream_v2)>("cublasSetStream_v2");
  return f ? f(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                                  size_t bytes) {
  static const auto f = entry<decltype(&cublasSetWorkspace_v2)>("cublasSetWorkspace_v2");
  return f ? f(handle, workspace, bytes) : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static const auto f = entry<decltype(&cublasGetStatusString)>("cublasGetStatusString");
  return f ? f(status) : library().why.c_str();
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const void* alpha, const void* A, cudaDataType Atype,
                                         int lda, const void* B, cudaDataType Btype, int ldb,
                                         const void* beta, void* C, cudaDataType Ctype, int ldc,
                                         cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  // cublasGemmEx is overloaded in C++ (its 64-bit forms): the C entry's type is spelled out.
  using Fn = cublasStatus_t(CUBLASWINAPI*)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
      cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
      cublasComputeType_t, cublasGemmAlgo_t);
  static const auto f = entry<Fn>("cublasGemmEx");
  return f ? f(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype,
               ldc, computeType, algo)
           : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI
cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                    int m, int n, int k, const void* alpha, const void* const Aarray[],
                    cudaDataType Atype, int lda, const void* const Barray[], cudaDataType Btype,
                    int ldb, const void* beta, void* const Carray[], cudaDataType Ctype, int ldc,
                    int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  using Fn = cublasStatus_t(CUBLASWINAPI*)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
      const void* const[], cudaDataType, int, const void* const[], cudaDataType, int, const void*,
      void* const[], cudaDataType, int, int, cublasComputeType_t, cublasGemmAlgo_t);
  static const auto f = entry<Fn>("cublasGemmBatchedEx");
  return f ? f(handle, transa, transb, m, n, k, alpha, Aarray, Atype, lda, Barray, Btype, ldb, beta,
               Carray, Ctype, ldc, batchCount, computeType, algo)
           : CUBLAS_STATUS_NOT_INITIALIZED;
}

}  // extern "C"
