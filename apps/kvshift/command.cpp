#include "apps/kvshift/command.hpp"

#include <algorithm>

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

}  // namespace kvshift::app
