// Output files are written to a temporary name beside the target and renamed
// into place, so a failed or interrupted run never leaves a half-written file;
// a folder of results is staged whole beside its target and renamed in the same
// way, so old and new files are never mixed.
#pragma once

#include <filesystem>
#include <string_view>

namespace kvshift::reports {

/// Writes `content` to `path` atomically (temp file + rename); creates parent folders.
/// Throws std::runtime_error naming the path on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

/// The folder to stage a whole `out` in: refuses an existing, non-empty `out` unless `force`
/// (InputError naming --out), and returns a fresh sibling `out.partial-<pid>`.
std::filesystem::path staging_folder(const std::filesystem::path& out, bool force);

/// Moves the staged folder into place: an old `out` aside first, removed once the new one is
/// in. Throws std::runtime_error naming `out` on failure.
void publish_folder(const std::filesystem::path& staged, const std::filesystem::path& out);

}  // namespace kvshift::reports
