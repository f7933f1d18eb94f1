# Every dependency comes from a Debian package (scripts/install-deps.sh);
# nothing is fetched at build time.
find_package(Boost 1.74 REQUIRED COMPONENTS graph)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
if(KVSHIFT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
# SimGrid: the reference max-min solver of the network differential test and benchmark.
if(KVSHIFT_BUILD_TESTS OR KVSHIFT_BUILD_BENCHMARKS)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(SIMGRID REQUIRED IMPORTED_TARGET simgrid)
endif()
if(KVSHIFT_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
