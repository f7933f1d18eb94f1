# Build switches. CUDA defaults to "whatever this machine can compile".
option(KVSHIFT_BUILD_TESTS "Build the GoogleTest suites" ON)
option(KVSHIFT_BUILD_BENCHMARKS "Build the Google Benchmark programs" ON)
option(KVSHIFT_BUILD_FUZZERS "Build libFuzzer targets (needs clang)" OFF)
option(KVSHIFT_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" OFF)
option(KVSHIFT_CLANG_TIDY "Run clang-tidy (.clang-tidy) on every C++ file as it compiles" OFF)
option(KVSHIFT_GPU_CHECK "Build only the GPU parts and their tests (bench/gpu_check.sh)" OFF)
set(KVSHIFT_ENABLE_CUDA "AUTO" CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set_property(CACHE KVSHIFT_ENABLE_CUDA PROPERTY STRINGS AUTO ON OFF)
# On by default: kvshift is built where it runs, and the CPU backend (calibration, profiling)
# is 2-2.5x faster with the build machine's vector units. Turn it off for a binary that moves.
option(KVSHIFT_NATIVE "Compile for this CPU (-march=native: Eigen uses AVX2/AVX-512 and FMA); OFF for binaries that move to other machines" ON)
