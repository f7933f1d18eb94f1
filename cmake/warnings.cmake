# kvshift_warnings: an INTERFACE target every kvshift target links PRIVATE.
add_library(kvshift_warnings INTERFACE)
target_compile_options(kvshift_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor>
  # GCC 12 reports -Wrestrict false positives inside std::string concatenation.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>
  # Designated initializers name only the fields they set; the rest keep their default member
  # initializers, which is the point, yet GCC 12 reports each one under -Wextra.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-missing-field-initializers>
  # With AVX-512 (-march=native), GCC 12 flags the _mm512_undefined_ps lanes of Eigen's max
  # reductions as -Wmaybe-uninitialized: a false positive repeated in every Eigen file.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>,$<BOOL:${KVSHIFT_NATIVE}>>:-Wno-maybe-uninitialized>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${KVSHIFT_WARNINGS_AS_ERRORS}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>)
