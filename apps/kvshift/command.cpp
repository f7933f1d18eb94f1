#include "apps/kvshift/command.hpp"

#include <algorithm>
#include <charconv>

#include "cost_model/input_error.hpp"

namespace kvshift::app {
namespace {

std::vector<CommandInfo>& table() {
  static std::vector<CommandInfo> commands;  // function-local: safe during static init
  return commands;
}

}  // namespace

RegisterCommand::RegisterCommand(CommandInfo info) { table().push_back(std::move(info)); }

std::vector<CommandInfo> registered_commands() {
  std::vector<CommandInfo> out = table();
  std::stable_sort(out.begin(), out.end(),
                   [](const CommandInfo& a, const CommandInfo& b) { return a.order < b.order; });
  return out;
}

std::uint64_t parse_seed(const std::string& text, const std::string& flag) {
  const bool digits =
      !text.empty() && text.size() <= 20 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!digits || ec != std::errc() || end != text.data() + text.size()) {
    throw InputError(flag + ": must be a whole number from 0 to 18446744073709551615 (got \"" +
                     text + "\")");
  }
  return value;
}

}  // namespace kvshift::app
