// Output files are written to a temporary name beside the target and renamed
// into place, so a failed or interrupted run never leaves a half-written file.
#pragma once

#include <filesystem>
#include <string_view>

namespace kvshift::reports {

/// Writes `content` to `path` atomically (temp file + rename); creates parent folders.
/// Throws std::runtime_error naming the path on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

}  // namespace kvshift::reports
