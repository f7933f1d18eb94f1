#include "reports/atomic_file.hpp"

#include <fstream>
#include <stdexcept>
#include <system_error>
#include <unistd.h>

namespace kvshift::reports {

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  namespace fs = std::filesystem;
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

}  // namespace kvshift::reports
