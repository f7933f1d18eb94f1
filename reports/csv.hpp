// CSV as kvshift writes and reads it (RFC 4180): a cell holding a comma, a
// quote, a newline or a carriage return is quoted, quotes doubled. One
// escaper and one splitter, shared by every writer and reader of the project.
#pragma once

#include <string>
#include <vector>

namespace kvshift::reports {

/// The cell as written: quoted when it must be.
std::string csv_escape(const std::string& cell);
/// The cells of one line (quotes undone).
std::vector<std::string> csv_fields(const std::string& line);

}  // namespace kvshift::reports
