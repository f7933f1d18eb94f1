# kvshift_add_test(): one GoogleTest executable, its tests discovered into ctest.
include(GoogleTest)

# kvshift_add_test(NAME SOURCES... LIBS... [LABELS...] [GPU_FILTER filter])
# GPU_FILTER: a --gtest_filter pattern of the tests that need a GPU; they get the label gpu,
# the executable's other tests LABELS (default unit).
function(kvshift_add_test name)
  cmake_parse_arguments(arg "" "GPU_FILTER" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE ${arg_LIBS} GTest::gtest GTest::gtest_main kvshift_warnings)
  target_compile_definitions(${name} PRIVATE
    KVSHIFT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    KVSHIFT_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # gtest_discover_tests cannot pass a list-valued LABELS: one label per test.
  if(arg_LABELS)
    set(labels ${arg_LABELS})
  else()
    set(labels unit)
  endif()
  if(arg_GPU_FILTER)
    gtest_discover_tests(${name}
      TEST_FILTER "${arg_GPU_FILTER}"
      DISCOVERY_TIMEOUT 60
      PROPERTIES LABELS gpu)
    set(rest TEST_FILTER "-${arg_GPU_FILTER}")
  endif()
  gtest_discover_tests(${name}
    ${rest}
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${labels}")
endfunction()
