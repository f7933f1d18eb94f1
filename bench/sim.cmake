# sim/ benchmarks: the event engine (Google Benchmark), the network model
# against SimGrid on the same flow sets (a plain program; SimGrid allows one
# engine per process, so bench/network_vs_simgrid.sh drives it), and the heap
# a flows file costs to read (flows_file_memory).
kvshift_add_benchmark(sim_event_bench SOURCES sim_event_bench.cpp LIBS kvshift_sim)
add_executable(sim_network_vs_simgrid sim_network_vs_simgrid.cpp sim_network_workloads.cpp
  heap_meter.cpp)
target_link_libraries(sim_network_vs_simgrid PRIVATE kvshift_simgrid_runner kvshift_warnings)
add_executable(flows_file_memory flows_file_memory.cpp heap_meter.cpp)
target_link_libraries(flows_file_memory PRIVATE kvshift_input kvshift_warnings)
target_include_directories(flows_file_memory PRIVATE ${PROJECT_SOURCE_DIR})
# The process-level comparison (bench/flows_vs_simgrid.sh): the flow sets as
# `kvshift flows` files, and SimGrid's counterpart of `kvshift flows` as a command.
add_executable(network_flows_file network_flows_file.cpp sim_network_workloads.cpp)
target_link_libraries(network_flows_file PRIVATE kvshift_simgrid_runner kvshift_warnings)
add_executable(simgrid_flows simgrid_flows.cpp)
target_link_libraries(simgrid_flows PRIVATE kvshift_simgrid_runner kvshift_input kvshift_warnings)
