# Refuse in-source builds: they litter the tree and break `git status`.
if(CMAKE_SOURCE_DIR STREQUAL CMAKE_BINARY_DIR)
  message(FATAL_ERROR
    "In-source builds are not supported. Use `make` (builds in build/) or\n"
    "  cmake -S . -B build && cmake --build build\n"
    "and remove the CMakeCache.txt and CMakeFiles/ just created here.")
endif()
