#include "reports/atomic_file.hpp"

#include <unistd.h>
#include <cerrno>
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
    const std::string why = ec.message();  // before remove() reuses ec
    fs::remove(tmp, ec);
    throw std::runtime_error(path.string() + ": cannot rename into place: " + why);
  }
}

namespace {

/// The nearest folder of `path`'s parents that exists must be one we may write in; else
/// InputError naming `flag` (a read-only or foreign place fails now, not after the work).
void check_writable_parent(const fs::path& path, const std::string& flag) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec).parent_path();
  while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  if (p.empty()) return;
  if (!fs::is_directory(p, ec)) {
    throw InputError(flag + ": " + p.string() + " is a file, so " + path.string() +
                     " cannot be written");
  }
  if (::access(p.c_str(), W_OK) != 0) {
    throw InputError(flag + ": cannot write in " + p.string() + " (" +
                     std::error_code(errno, std::generic_category()).message() + ")");
  }
}

/// `out` without trailing separators ("runs/a/" -> "runs/a"), so siblings stay siblings.
fs::path folder_name(const fs::path& out) {
  fs::path p = out;
  while (!p.has_filename() && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  return p;
}

/// Whether `path` lies inside the folder `dir` (both resolved through links).
bool inside(const fs::path& path, const fs::path& dir) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  const fs::path d = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  auto di = d.begin();
  auto pi = p.begin();
  for (; di != d.end() && !di->empty(); ++di, ++pi) {
    if (pi == p.end() || *pi != *di) return false;
  }
  return true;
}

}  // namespace

void check_output_file(const std::filesystem::path& path, std::string_view flag) {
  const std::string name(flag);
  if (path.empty()) throw InputError(name + ": must name a file (got \"\")");
  std::error_code ec;
  if (fs::is_directory(path, ec) || !path.has_filename()) {
    throw InputError(name + ": " + path.string() + " is a folder; give the file to write (e.g. " +
                     (path / "out.json").string() + ")");
  }
  check_writable_parent(path, name);
  if (path.has_parent_path()) {  // made now: a place that cannot hold it fails before the work
    fs::create_directories(path.parent_path(), ec);
    if (ec) {
      throw InputError(name + ": cannot create " + path.parent_path().string() + " (" +
                       ec.message() + ")");
    }
  }
}

bool is_kvshift_output(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (const char* marker :
       {"summary.json", "sweep.json", "topology.json", "quality.json", "manifest.json"}) {
    if (fs::is_regular_file(dir / marker, ec)) return true;
  }
  return false;
}

std::filesystem::path staging_folder(const std::filesystem::path& out_as_given, bool force,
                                     const std::vector<std::filesystem::path>& inputs,
                                     std::string_view flag) {
  const std::string name(flag);
  const fs::path out = folder_name(out_as_given);
  if (out.empty()) throw InputError(name + ": must name a folder (got \"\")");
  std::error_code ec;
  const bool exists = fs::exists(fs::symlink_status(out, ec));
  const bool empty_dir = exists && fs::is_directory(out, ec) && fs::is_empty(out, ec);
  if (exists && !empty_dir) {
    if (!force) {
      throw InputError(name + ": " + out.string() +
                       " already exists (choose another folder, or --force to replace it)");
    }
    if (!is_kvshift_output(out)) {
      throw InputError(name + ": " + out.string() +
                       " is not a folder kvshift wrote (no summary.json, sweep.json, "
                       "topology.json, quality.json or manifest.json in it); --force replaces "
                       "only an earlier output folder, never other files");
    }
  }
  if (exists) {
    for (const fs::path& in : inputs) {
      if (!in.empty() && inside(in, out)) {
        throw InputError(name + ": " + out.string() + " holds the input " + in.string() +
                         "; choose an output folder that does not contain what the command reads");
      }
    }
  }
  check_writable_parent(out, name);
  fs::path tmp = out;
  tmp += ".partial-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  return tmp;
}

void publish_folder(const std::filesystem::path& staged,
                    const std::filesystem::path& out_as_given) {
  const fs::path out = folder_name(out_as_given);
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
