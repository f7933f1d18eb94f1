// Ctrl-C (SIGINT) or SIGTERM during a command that stages its output folder:
// the staged `<out>.partial-<pid>` is removed and a line says so before the
// process ends with 130 or 143, so an interrupted run leaves nothing behind.
// The signals are taken by a watcher thread (sigwait), not a signal handler,
// so the removal is ordinary code. Leaves out: a signal that arrives while the
// finished folder is being renamed into place (the rename is atomic either way).
#pragma once

#include <filesystem>

namespace kvshift::app {

/// While alive, SIGINT / SIGTERM remove `staged` and exit 128 + the signal number.
/// Construct it before any worker thread starts (threads inherit the blocked signals).
class InterruptCleanup {
 public:
  explicit InterruptCleanup(std::filesystem::path staged);
  ~InterruptCleanup();
  InterruptCleanup(const InterruptCleanup&) = delete;
  InterruptCleanup& operator=(const InterruptCleanup&) = delete;
};

}  // namespace kvshift::app
