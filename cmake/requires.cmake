# kvshift_requires(FILE OUT_LIBS OUT_AVAILABLE): reads FILE's first
# `// requires: a b` line. OUT_LIBS gets the targets it names; OUT_AVAILABLE is
# ON when every one of them exists in this build (apps and fuzz targets whose
# libraries are left out of a build are left out too).
function(kvshift_requires file out_libs out_available)
  file(STRINGS ${file} requires_line REGEX "^// requires:" LIMIT_COUNT 1)
  string(REGEX REPLACE "^// requires:[ ]*" "" requires "${requires_line}")
  separate_arguments(requires)
  set(available ON)
  foreach(lib IN LISTS requires)
    if(NOT TARGET ${lib})
      set(available OFF)
    endif()
  endforeach()
  set(${out_libs} ${requires} PARENT_SCOPE)
  set(${out_available} ${available} PARENT_SCOPE)
endfunction()
