// `kvshift validate FILE...`: loads each scenario with every check the run
// would apply (schema rules, units, unknown keys, cross-references) and says
// "FILE: ok (summary)" or lists every problem as "FILE: /json/pointer:
// message". Exit 0 when all files are valid, 2 otherwise. Writes nothing.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/kvshift/command.hpp"
#include "input/scenario_loader.hpp"

namespace kvshift::app {
namespace {

struct ValidateOptions {
  std::vector<std::string> files;
  bool embedded = false;
  bool quiet = false;
};

int validate_one(const std::string& label, const input::ScenarioLoad& load, bool quiet) {
  if (load.spec) {
    if (!quiet) std::printf("%s: ok (%s)\n", label.c_str(), input::summarize(*load.spec).c_str());
    for (const std::string& n : load.spec->notes) {
      if (!quiet) std::printf("%s: note: %s\n", label.c_str(), n.c_str());
    }
    return 0;
  }
  for (const std::string& p : load.problems)
    std::fprintf(stderr, "%s: %s\n", label.c_str(), p.c_str());
  return 2;
}

int run(const ValidateOptions& o) {
  int code = 0;
  if (o.embedded) {
    const auto load = input::try_load_scenario_text(input::embedded_quickstart_text(),
                                                    "<embedded quickstart.json>");
    code = std::max(code, validate_one("<embedded quickstart.json>", load, o.quiet));
  }
  for (const std::string& f : o.files) {
    code = std::max(code, validate_one(f, input::try_load_scenario_file(f), o.quiet));
  }
  if (!o.embedded && o.files.empty()) {
    std::fprintf(stderr,
                 "kvshift: error: validate: give one or more scenario files (or --embedded)\n");
    return 2;
  }
  return code;
}

Action setup(CLI::App& sub) {
  auto o = std::make_shared<ValidateOptions>();
  sub.add_option("files", o->files, "Scenario files to check");
  sub.add_flag("--embedded", o->embedded, "Also check the embedded quickstart scenario");
  sub.add_flag("-q,--quiet", o->quiet, "Print only problems");
  return [o] { return run(*o); };
}

const RegisterCommand kRegister{
    {"validate", "Check scenario files (schema, units, cross-references) without running them", 15,
     setup}};

}  // namespace
}  // namespace kvshift::app
