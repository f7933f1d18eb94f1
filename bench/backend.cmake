# CPU backend benchmarks: SmolLM2-135M-shaped prefill at 512 tokens, the RISK-KV
# reconstruction op, and Eigen's own large SGEMM in the same run (the yardstick:
# prefill should reach >= 50 % of its GFLOP/s). Medians over repetitions:
#   build/bench/backend_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
kvshift_add_benchmark(backend_bench
  SOURCES backend_prefill_bench.cpp backend_reconstruct_bench.cpp
  LIBS kvshift_backend)
find_package(OpenMP COMPONENTS CXX)
if(OpenMP_CXX_FOUND)
  target_link_libraries(backend_bench PRIVATE OpenMP::OpenMP_CXX)
endif()

kvshift_add_benchmark(calibrate_bench SOURCES calibrate_bench.cpp LIBS kvshift_calibrate)
