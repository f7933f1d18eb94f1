// CSV as kvshift writes and reads it (RFC 4180): fields separated by commas; a
// field holding a comma, a quote, a carriage return or a line feed is quoted,
// with its quotes doubled. One escaper, one row writer, one splitter and one
// record reader, shared by every writer and reader of the project. Leaves out:
// other separators, and stripping a CR before a line feed (CRLF files keep the
// CR in their last field).
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace kvshift::util {

/// The field as written: quoted (quotes doubled) when it holds a comma, a quote, CR or LF.
std::string csv_escape(std::string_view field);

/// The fields, each escaped, joined by commas (no line end).
std::string csv_row(const std::vector<std::string>& fields);

/// The fields of one record, quotes undone. A record may hold line ends inside quotes; an
/// empty record is one empty field.
std::vector<std::string> csv_fields(std::string_view record);

/// Whether every quoted field of `record` is closed (doubled quotes pair up).
bool csv_quotes_closed(std::string_view record);

/// Reads the next record from `in` into `fields`: one line, continued over line ends that lie
/// inside quotes. False (and `fields` empty) at the end of the input.
bool read_csv_record(std::istream& in, std::vector<std::string>& fields);

}  // namespace kvshift::util
