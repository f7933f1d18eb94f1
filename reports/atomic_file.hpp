// Output files are written to a temporary name beside the target and renamed
// into place, so a failed or interrupted run never leaves a half-written file;
// a folder of results is staged whole beside its target and renamed in the same
// way, so old and new files are never mixed.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

namespace kvshift::reports {

/// Writes `content` to `path` atomically (temp file + rename); creates parent folders.
/// Throws std::runtime_error naming the path on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

/// Checks, before any work, that `path` can be written as one file: not empty, not an
/// existing folder, in a place we may write (its folder is created now). Throws InputError
/// naming `flag`.
void check_output_file(const std::filesystem::path& path, std::string_view flag);

/// Whether `dir` is a folder kvshift wrote: it holds the file each output folder has
/// (summary.json: run, testbed; sweep.json: sweep; topology.json: calibrate; quality.json:
/// quality; manifest.json: proxykv dataset).
bool is_kvshift_output(const std::filesystem::path& dir);

/// The folder to stage a whole `out` in, returned as a fresh sibling `out.partial-<pid>`.
/// Refuses (InputError naming `flag`) an empty name, an existing non-empty `out` without
/// `force`, and with `force` anything but an earlier kvshift output folder, or one that holds
/// any of `inputs` (the files the command reads), so --force never deletes a user's files.
std::filesystem::path staging_folder(const std::filesystem::path& out, bool force,
                                     const std::vector<std::filesystem::path>& inputs = {},
                                     std::string_view flag = "--out");

/// Moves the staged folder into place: an old `out` aside first, removed once the new one is
/// in. Throws std::runtime_error naming `out` on failure.
void publish_folder(const std::filesystem::path& staged, const std::filesystem::path& out);

}  // namespace kvshift::reports
