#include "apps/kvshift/support_out_folder.hpp"

#include <unistd.h>
#include <ctime>
#include <stdexcept>
#include <system_error>

#include "reports/atomic_file.hpp"

namespace kvshift::app {

namespace fs = std::filesystem;

std::string default_dir_base(const std::string& name) {
  char stamp[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
  return "kvshift-out/" + name + "-" + stamp;
}

fs::path fresh_default_dir(const std::string& name) {
  const std::string base = default_dir_base(name);
  std::error_code ec;
  fs::create_directories("kvshift-out", ec);
  for (int n = 1; n < 1000; ++n) {
    const fs::path dir = n == 1 ? base : base + "-" + std::to_string(n);
    if (fs::create_directory(dir, ec)) return dir;  // false: it existed
    if (ec) throw std::runtime_error(dir.string() + ": cannot create folder: " + ec.message());
  }
  throw std::runtime_error(base + ": no free folder name (-2 .. -999 taken)");
}

ReplacedFolder::ReplacedFolder(const fs::path& dir, bool force, const std::vector<fs::path>& inputs)
    : dir_(dir) {
  // The refusal `kvshift run` uses (its staging folder name is not needed here).
  reports::staging_folder(dir, force, inputs);
  std::error_code ec;
  if (force && fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    aside_ = dir;
    aside_ += ".old-" + std::to_string(::getpid());
    fs::remove_all(aside_, ec);
    fs::rename(dir, aside_, ec);
    if (ec) throw std::runtime_error(dir.string() + ": cannot move it aside: " + ec.message());
  }
}

void ReplacedFolder::keep() {
  std::error_code ec;
  if (!aside_.empty()) fs::remove_all(aside_, ec);
  aside_.clear();
}

ReplacedFolder::~ReplacedFolder() {
  if (aside_.empty()) return;
  std::error_code ec;
  fs::remove_all(dir_, ec);
  fs::rename(aside_, dir_, ec);
}

}  // namespace kvshift::app
