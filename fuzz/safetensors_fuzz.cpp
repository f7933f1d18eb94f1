// Feeds arbitrary bytes to the safetensors reader: header parsing, every
// consistency check, and fp32 conversion of every tensor the header declares.
// The only acceptable failure is an InputError; ASan catches any read outside
// the input.
#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/safetensors.hpp"
#include "cost_model/input_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using kvshift::backend::SafetensorsFile;
  try {
    const SafetensorsFile f = SafetensorsFile::from_bytes(std::span(data, size), "fuzz");
    for (const auto& t : f.tensors()) {
      try {
        const auto m = f.read(t.name, t.shape);
        if (m.size() != t.elements()) __builtin_trap();
      } catch (const kvshift::InputError&) {
      }
    }
  } catch (const kvshift::InputError&) {
  }
  return 0;
}
