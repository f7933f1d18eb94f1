// Progress of a long model command on stderr: a bar on a terminal, a line per
// stage and per 10 % otherwise (logs stay short), with the rate and an ETA.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace kvshift::app {

/// (stage, units done, units in all) → prints; `command` prefixes the log lines.
std::function<void(const std::string&, std::int64_t, std::int64_t)> progress_printer(
    const std::string& command);

}  // namespace kvshift::app
