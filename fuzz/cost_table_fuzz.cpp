// Feeds arbitrary bytes to the cost-table reader (JSON text → strict parse)
// and, when a table is accepted, to the interpolating TableCosts built from it.
// The only acceptable failure is an InputError.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cost_model/input_error.hpp"
#include "input/cost_table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace sc = kvshift::input;
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const sc::CostTable table = sc::parse_cost_table_text(text, "fuzz");
    const auto costs = sc::make_table_costs(table, "fuzz");
    for (const char* op : {"prefill", "decode", "reconstruct", "proxy_score", "prune"}) {
      if (!costs.has(op)) continue;
      for (std::int64_t t : {1, 100, 4096, 1 << 20}) {
        const double s = costs.interpolate(op, t, 3);
        if (std::isnan(s) || s < 0) __builtin_trap();
      }
    }
  } catch (const kvshift::InputError&) {
  }
  return 0;
}
