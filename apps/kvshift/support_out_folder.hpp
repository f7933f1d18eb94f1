// Output folders of commands that write into their folder as they go (a sweep
// keeps every finished point there, so it can be resumed) and therefore cannot
// stage the whole folder and rename it at the end as `kvshift run` does. They
// refuse an existing --out through the same check (reports::staging_folder);
// with --force an earlier output folder is set aside and removed once the new
// one is complete, or put back if the command fails. A default folder is made
// fresh per invocation, even for two started within the same second.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kvshift::app {

/// kvshift-out/<name>-<time>: the default output folder's name before any -2, -3 suffix.
std::string default_dir_base(const std::string& name);

/// Creates and returns kvshift-out/<name>-<time> (empty), or <name>-<time>-2, -3, ... when
/// taken: creation is atomic, so two processes never get the same folder.
std::filesystem::path fresh_default_dir(const std::string& name);

/// Claims `dir` for a command that writes into it directly. Refuses (InputError naming --out)
/// an existing, non-empty folder without `force`, and with `force` anything but an earlier
/// kvshift output folder or one holding any of `inputs`; with `force` sets the old one aside.
class ReplacedFolder {
 public:
  ReplacedFolder(const std::filesystem::path& dir, bool force,
                 const std::vector<std::filesystem::path>& inputs);
  /// The command ended (done or interrupted): the replaced folder goes.
  void keep();
  /// Without keep(): what the command wrote goes, and a replaced folder comes back.
  ~ReplacedFolder();
  ReplacedFolder(const ReplacedFolder&) = delete;
  ReplacedFolder& operator=(const ReplacedFolder&) = delete;

 private:
  std::filesystem::path dir_, aside_;
};

}  // namespace kvshift::app
