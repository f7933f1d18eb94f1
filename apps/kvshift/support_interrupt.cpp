#include "apps/kvshift/support_interrupt.hpp"

#include <pthread.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace kvshift::app {
namespace {

namespace fs = std::filesystem;

std::mutex& guard() {
  static std::mutex m;
  return m;
}

fs::path& staged_folder() {  // the folder to remove on a signal; empty: none
  static fs::path p;
  return p;
}

sigset_t watched() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void watch() {
  const sigset_t set = watched();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  {
    std::lock_guard lock(guard());
    const fs::path& staged = staged_folder();
    const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    std::error_code ec;
    if (!staged.empty() && fs::exists(staged, ec)) {
      for (int attempt = 0; attempt < 5 && fs::exists(staged, ec); ++attempt) {
        fs::remove_all(staged, ec);  // retried: the command may still be writing into it
      }
      std::fprintf(stderr, "\nkvshift: interrupted (%s); removed the unfinished %s\n", name,
                   staged.c_str());
    } else {
      std::fprintf(stderr, "\nkvshift: interrupted (%s)\n", name);
    }
  }
  std::fflush(stderr);
  std::_Exit(128 + sig);
}

}  // namespace

InterruptCleanup::InterruptCleanup(fs::path staged) {
  static std::once_flag started;
  {
    std::lock_guard lock(guard());
    staged_folder() = std::move(staged);
  }
  std::call_once(started, [] {
    const sigset_t set = watched();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(watch).detach();
  });
}

InterruptCleanup::~InterruptCleanup() {
  std::lock_guard lock(guard());
  staged_folder().clear();
}

}  // namespace kvshift::app
