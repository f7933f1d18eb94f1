// `kvshift report DIR`: writes DIR/report.html from what a run, sweep or
// analytic sweep left in DIR - one self-contained page with Chart.js inlined.
#include <CLI/CLI.hpp>
#include <iostream>

#include "apps/kvshift/command.hpp"
#include "cost_model/input_error.hpp"
#include "reports/html_report.hpp"

namespace kvshift::app {
namespace {

Action setup(CLI::App& sub) {
  auto dir = std::make_shared<std::string>();
  sub.add_option("dir", *dir, "Output folder of kvshift run or kvshift sweep")->required();
  return [dir] {
    if (!std::filesystem::is_directory(*dir)) throw InputError("DIR: " + *dir + " is not a folder");
    const std::filesystem::path page = reports::write_html_report(*dir);  // before any output
    std::cout << "wrote " << page.string() << "\n";
    return 0;
  };
}

const RegisterCommand kRegister{
    {"report", "Write DIR/report.html (tables and charts) for a run or sweep folder", 22, setup}};

}  // namespace
}  // namespace kvshift::app
