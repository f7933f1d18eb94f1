// libFuzzer target: arbitrary bytes -> the scenario loader. The loader must
// answer with a spec or a list of problems for every input — never crash,
// hang, leak or throw anything but InputError. Relative paths in inputs
// resolve against a folder that does not exist, so no real file is read.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cost_model/input_error.hpp"
#include "input/scenario_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto load = kvshift::input::try_load_scenario_text(text, "fuzz.json", "/nonexistent");
  if (load.spec.has_value() == !load.problems.empty()) __builtin_trap();  // exactly one of the two
  try {
    (void)kvshift::input::load_scenario_text(text, "fuzz.json", "/nonexistent");
  } catch (const kvshift::InputError&) {
  }
  return 0;
}
