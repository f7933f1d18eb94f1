// Runs a shell command and captures its exit code, stdout and stderr, for
// tests that drive the kvshift executable as a user would.
#pragma once

#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kvshift::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// A fresh, empty folder for one test: <tmp>/kvshift-<suite>-<name>-<pid>.
inline std::filesystem::path scratch_dir(const std::string& suite, const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("kvshift-" + suite + "-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// Path of the built kvshift executable.
inline std::string kvshift_exe() { return std::string(KVSHIFT_BINARY_DIR) + "/apps/kvshift"; }

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs `cmd` under /bin/sh; stderr goes to a temporary file.
inline CommandResult run_command(const std::string& cmd) {
  char tmpl[] = "/tmp/kvshift-test-stderr-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd >= 0) ::close(fd);
  CommandResult r;
  FILE* pipe = ::popen((cmd + " 2>" + tmpl).c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = slurp(tmpl);
  ::unlink(tmpl);
  return r;
}

/// Runs the kvshift executable with `args` (already shell-quoted).
inline CommandResult run_kvshift(const std::string& args) {
  return run_command(kvshift_exe() + " " + args);
}

}  // namespace kvshift::testing
