// Sub-command registry. Each cmd_<name>.cpp registers itself with a static
// RegisterCommand; main() adds them to the CLI in `order` and runs the one the
// user chose. Adding a command touches no other file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace kvshift::app {

/// What a chosen sub-command runs after parsing; returns the exit code.
using Action = std::function<int()>;

struct CommandInfo {
  std::string name;
  std::string description;
  int order = 0;  ///< position in --help
  /// Declares the command's options on `sub` and returns its action.
  std::function<Action(CLI::App& sub)> setup;
};

/// All registered commands, sorted by `order`.
std::vector<CommandInfo> registered_commands();

struct RegisterCommand {
  explicit RegisterCommand(CommandInfo info);
};

/// A seed as typed: a whole number in [0, 2^64), else InputError naming `flag`.
std::uint64_t parse_seed(const std::string& text, const std::string& flag);

}  // namespace kvshift::app
