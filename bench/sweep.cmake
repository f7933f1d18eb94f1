# Sweep benchmarks: per-point cost of the analytic closed forms (Google
# Benchmark). The end-to-end figures (1,000 simulated points at --jobs 1 and 2,
# 10 million analytic points) come from bench/sweep_points.sh.
kvshift_add_benchmark(sweep_bench SOURCES sweep_bench.cpp LIBS kvshift_sweep)
