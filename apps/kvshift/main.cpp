// kvshift: thin glue. Parse the command line, run the chosen sub-command, map
// errors to exit codes: 0 ok, 2 bad input or usage, 1 runtime fault.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "apps/kvshift/command.hpp"
#include "cost_model/input_error.hpp"

int main(int argc, char** argv) {
  using kvshift::app::Action;
  CLI::App app{
      "kvshift: what does it cost to move or rebuild a request's KV cache, and which strategy\n"
      "wins on my cluster? (full transfer, token replay, RISK-KV, ProxyKV)"};
  app.set_version_flag("--version", "kvshift " KVSHIFT_VERSION);  // CMake's PROJECT_VERSION
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, Action>> actions;
  for (const auto& cmd : kvshift::app::registered_commands()) {
    CLI::App* sub = app.add_subcommand(cmd.name, cmd.description);
    actions.emplace_back(sub, cmd.setup(*sub));
  }
  std::string known;
  bool is_command = false;
  for (const auto& [sub, action] : actions) {
    known += (known.empty() ? "" : ", ") + sub->get_name();
    is_command |= argc > 1 && sub->get_name() == argv[1];
  }
  if (argc > 1 && argv[1][0] != '-' && !is_command) {
    std::fprintf(stderr, "kvshift: error: unknown command \"%s\" (known: %s)\n", argv[1],
                 known.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    for (auto& [sub, action] : actions) {
      if (sub->parsed()) return action();
    }
  } catch (const kvshift::InputError& e) {
    std::fprintf(stderr, "kvshift: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvshift: runtime error: %s\n", e.what());
    return 1;
  }
  return 2;
}
