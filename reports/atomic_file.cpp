#include "reports/atomic_file.hpp"

#include <unistd.h>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "cost_model/input_error.hpp"

namespace kvshift::reports {

namespace fs = std::filesystem;

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec) throw std::runtime_error(path.string() + ": cannot create folder: " + ec.message());
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      throw std::runtime_error(path.string() + ": cannot write file");
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(path.string() + ": cannot rename into place: " + ec.message());
  }
}

std::filesystem::path staging_folder(const std::filesystem::path& out, bool force) {
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out) && fs::is_empty(out)) && !force) {
    throw InputError("--out: " + out.string() +
                     " already exists (choose another folder, or --force to replace it)");
  }
  fs::path tmp = out;
  tmp += ".partial-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  return tmp;
}

void publish_folder(const std::filesystem::path& staged, const std::filesystem::path& out) {
  std::error_code ec;
  fs::path old = out;
  old += ".old-" + std::to_string(::getpid());
  if (fs::exists(out)) fs::rename(out, old, ec);
  if (ec) {
    throw std::runtime_error(out.string() + ": cannot move the old folder aside: " + ec.message());
  }
  fs::rename(staged, out, ec);
  if (ec) {
    throw std::runtime_error(out.string() +
                             ": cannot move the new folder into place: " + ec.message());
  }
  fs::remove_all(old, ec);
}

}  // namespace kvshift::reports
