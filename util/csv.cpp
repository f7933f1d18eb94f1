// CSV fields and records (see csv.hpp).
#include "util/csv.hpp"

#include <istream>

namespace kvshift::util {

bool csv_quotes_closed(std::string_view record) {
  bool quoted = false;
  for (char c : record) {
    if (c == '"') quoted = !quoted;
  }
  return !quoted;
}

std::string csv_escape(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_row(const std::vector<std::string>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += csv_escape(fields[i]);
  }
  return out;
}

std::vector<std::string> csv_fields(std::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

bool read_csv_record(std::istream& in, std::vector<std::string>& fields) {
  fields.clear();
  std::string record;
  if (!std::getline(in, record)) return false;
  for (std::string more; !csv_quotes_closed(record) && std::getline(in, more);) {
    record += "\n" + more;
  }
  fields = csv_fields(record);
  return true;
}

}  // namespace kvshift::util
