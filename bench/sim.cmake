# sim/ benchmarks: the event engine (Google Benchmark), the network model
# against SimGrid on the same flow sets (a plain program; SimGrid allows one
# engine per process, so bench/network_vs_simgrid.sh drives it), and the heap
# a flows file costs to read (flows_file_memory).
if(TARGET kvshift_sim)
  kvshift_add_benchmark(sim_event_bench SOURCES sim_event_bench.cpp LIBS kvshift_sim)
  if(NOT TARGET kvshift_simgrid_runner)
    find_package(PkgConfig QUIET)
    if(PkgConfig_FOUND)
      pkg_check_modules(SIMGRID QUIET IMPORTED_TARGET simgrid)
    endif()
    if(SIMGRID_FOUND)
      add_library(kvshift_simgrid_runner STATIC
        ${PROJECT_SOURCE_DIR}/tests/sim/simgrid/net_case.cpp
        ${PROJECT_SOURCE_DIR}/tests/sim/simgrid/simgrid_runner.cpp)
      target_include_directories(kvshift_simgrid_runner PUBLIC ${PROJECT_SOURCE_DIR})
      target_link_libraries(kvshift_simgrid_runner PUBLIC kvshift_sim PkgConfig::SIMGRID
        PRIVATE kvshift_warnings)
    endif()
  endif()
  if(TARGET kvshift_simgrid_runner)
    add_executable(sim_network_vs_simgrid sim_network_vs_simgrid.cpp sim_network_workloads.cpp
      heap_meter.cpp)
    target_link_libraries(sim_network_vs_simgrid PRIVATE kvshift_simgrid_runner kvshift_warnings)
  endif()
  if(TARGET kvshift_scenarios)
    add_executable(flows_file_memory flows_file_memory.cpp heap_meter.cpp)
    target_link_libraries(flows_file_memory PRIVATE kvshift_scenarios kvshift_warnings)
    target_include_directories(flows_file_memory PRIVATE ${PROJECT_SOURCE_DIR})
  endif()
endif()
