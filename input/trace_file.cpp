// Trace file parsing: CSV (RFC 4180 quoting) and JSONL, column mapping, checks.
#include "input/trace_file.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>

#include "cost_model/input_error.hpp"
#include "input/json_reader.hpp"
#include "input/scenario_parts.hpp"
#include "util/csv.hpp"

namespace kvshift::input {
namespace {

constexpr std::size_t kMaxProblems = 20;

/// How an arrival column's values are read.
enum class TimeUnit { kSeconds, kMilliseconds, kSecondsOrDateTime };

struct Layout {
  const char* name;
  const char* arrival;
  TimeUnit unit;
  const char* prompt;
  const char* output;
};

// CSV layouts, tried in order; JSONL uses the same names but Mooncake's ms timestamps.
constexpr Layout kCsvLayouts[] = {
    {"plain", "arrival_s", TimeUnit::kSeconds, "prompt_tokens", "output_tokens"},
    {"azure", "TIMESTAMP", TimeUnit::kSecondsOrDateTime, "ContextTokens", "GeneratedTokens"},
    {"burstgpt", "Timestamp", TimeUnit::kSeconds, "Request tokens", "Response tokens"},
};
constexpr Layout kJsonlLayouts[] = {
    {"plain", "arrival_s", TimeUnit::kSeconds, "prompt_tokens", "output_tokens"},
    {"mooncake", "timestamp", TimeUnit::kMilliseconds, "input_length", "output_length"},
};

std::string expected_columns(std::span<const Layout> layouts) {
  std::string s;
  for (const Layout& l : layouts) {
    s += std::string(s.empty() ? "" : "; ") + l.name + ": " + l.arrival + ", " + l.prompt + ", " +
         l.output;
  }
  return s;
}

class Problems {
 public:
  explicit Problems(std::string_view source) : source_(source) {}
  void add(std::size_t line, const std::string& msg) {
    if (count_++ < kMaxProblems) {
      text_ += (text_.empty() ? "" : "\n  ") + source_ + ":" + std::to_string(line) + ": " + msg;
    }
  }
  bool empty() const { return count_ == 0; }
  void throw_if_any() const {
    if (count_ == 0) return;
    std::string t = text_;
    if (count_ > kMaxProblems) {
      t += "\n  " + source_ + ": ... and " + std::to_string(count_ - kMaxProblems) +
           " more problems";
    }
    throw InputError(t);
  }

 private:
  std::string source_;
  std::string text_;
  std::size_t count_ = 0;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::optional<double> to_double(std::string_view s) {
  s = trim(s);
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::int64_t> to_count(std::string_view s) {
  s = trim(s);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && p == s.data() + s.size()) return v;
  // Some exports write counts as "512.0".
  if (auto d = to_double(s); d && *d == std::floor(*d) && std::fabs(*d) < 9e15) {
    return static_cast<std::int64_t>(*d);
  }
  return std::nullopt;
}

/// Splits one CSV record (no embedded newlines) into fields; false on a broken quote.
bool split_csv(std::string_view line, std::vector<std::string>& out) {
  out = util::csv_fields(line);
  return util::csv_quotes_closed(line);
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// Converts a raw arrival value (already a number, or a date-time string) to seconds.
std::optional<double> arrival_seconds(std::string_view raw, TimeUnit unit) {
  if (auto v = to_double(raw)) return unit == TimeUnit::kMilliseconds ? *v / 1000.0 : *v;
  if (unit == TimeUnit::kSecondsOrDateTime) return parse_datetime_seconds(trim(raw));
  return std::nullopt;
}

struct Row {
  std::size_t line;
  double arrival_s;
  std::int64_t prompt;
  std::int64_t output;
  std::vector<std::uint64_t> hashes;  ///< Mooncake hash_ids
  std::string model;                  ///< its "model" field or column; empty: none
};

void check_row(const Row& r, Problems& problems, std::string_view prompt_col,
               std::string_view output_col) {
  if (r.prompt < 1) {
    problems.add(r.line, "column \"" + std::string(prompt_col) + "\": must be >= 1 (got " +
                             std::to_string(r.prompt) + ")");
  }
  if (r.output < 0) {
    problems.add(r.line, "column \"" + std::string(output_col) + "\": must be >= 0 (got " +
                             std::to_string(r.output) + ")");
  }
}

// Mooncake's "hash_ids": one key per 512-token prompt block, equal keys for equal prefixes.
bool read_hashes(const Json& obj, std::vector<std::uint64_t>& out) {
  const auto it = obj.find("hash_ids");
  if (it == obj.end()) return true;
  if (!it->is_array()) return false;
  out.reserve(it->size());
  for (const Json& v : *it) {
    if (!v.is_number_unsigned()) return false;
    out.push_back(v.get<std::uint64_t>());
  }
  return true;
}

TraceFile finish(std::vector<Row> rows, const char* layout, Problems& problems, std::size_t last) {
  if (rows.empty() && problems.empty()) problems.add(last, "the trace holds no requests");
  problems.throw_if_any();
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.arrival_s < b.arrival_s; });
  TraceFile out;
  out.layout = layout;
  const double t0 = rows.front().arrival_s;
  for (Row& r : rows) {
    out.requests.push_back({Seconds{r.arrival_s - t0}, r.prompt, r.output, std::move(r.hashes),
                            std::move(r.model), -1});
  }
  return out;
}

/// The layout the header row `cells` (trimmed here) names, with the columns of its arrival,
/// prompt and output fields in `col`; throws the problems when it names none.
const Layout* header_layout(std::vector<std::string>& cells, int col[3], Problems& problems) {
  for (auto& c : cells) c = std::string(trim(c));
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (!cells[i].empty() && std::find(cells.begin(), cells.begin() + static_cast<long>(i),
                                       cells[i]) != cells.begin() + static_cast<long>(i)) {
      problems.add(1, "column \"" + cells[i] + "\" appears twice in the header");
    }
  }
  problems.throw_if_any();
  const Layout* layout = nullptr;
  for (const Layout& l : kCsvLayouts) {
    auto find = [&](const char* name) {
      auto it = std::find(cells.begin(), cells.end(), name);
      return it == cells.end() ? -1 : static_cast<int>(it - cells.begin());
    };
    col[0] = find(l.arrival);
    col[1] = find(l.prompt);
    col[2] = find(l.output);
    if (col[0] >= 0 && col[1] >= 0 && col[2] >= 0) {
      layout = &l;
      break;
    }
  }
  if (!layout) {
    problems.add(1, "no known column set in the header (expected one of: " +
                        expected_columns(kCsvLayouts) + ")");
    problems.throw_if_any();
  }
  return layout;
}

TraceFile parse_csv(std::string_view text, Problems& problems) {
  const auto lines = lines_of(text);
  std::vector<std::string> cells;
  if (lines.empty() || trim(lines[0]).empty() || !split_csv(lines[0], cells)) {
    problems.add(1,
                 "expected a CSV header row with columns (" + expected_columns(kCsvLayouts) + ")");
    problems.throw_if_any();
  }
  int col[3] = {-1, -1, -1};
  const Layout* layout = header_layout(cells, col, problems);
  // An optional "model" column names the deployment each request asks for.
  const auto model_it = std::find(cells.begin(), cells.end(), "model");
  const int model_col = model_it == cells.end() ? -1 : static_cast<int>(model_it - cells.begin());
  std::vector<Row> rows;
  const char* names[3] = {layout->arrival, layout->prompt, layout->output};
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    const std::size_t line = i + 1;
    if (!split_csv(lines[i], cells)) {
      problems.add(line, "unterminated quoted field");
      continue;
    }
    Row r{line, 0, 0, 0, {}, {}};
    bool ok = true;
    for (int k = 0; k < 3; ++k) {
      if (col[k] >= static_cast<int>(cells.size())) {
        problems.add(line, "missing column \"" + std::string(names[k]) + "\"");
        ok = false;
        continue;
      }
      const std::string& raw = cells[static_cast<std::size_t>(col[k])];
      if (k == 0) {
        auto t = arrival_seconds(raw, layout->unit);
        if (!t) {
          problems.add(line,
                       "column \"" + std::string(names[k]) + "\": expected " +
                           (layout->unit == TimeUnit::kSecondsOrDateTime ? "seconds or a date-time"
                                                                         : "a number of seconds") +
                           " (got \"" + std::string(trim(raw)) + "\")");
          ok = false;
        } else {
          r.arrival_s = *t;
        }
      } else if (auto n = to_count(raw)) {
        (k == 1 ? r.prompt : r.output) = *n;
      } else {
        problems.add(line, "column \"" + std::string(names[k]) +
                               "\": expected a token count (got \"" + std::string(trim(raw)) +
                               "\")");
        ok = false;
      }
    }
    if (!ok) continue;
    if (model_col >= 0 && model_col < static_cast<int>(cells.size())) {
      r.model = std::string(trim(cells[static_cast<std::size_t>(model_col)]));
    }
    check_row(r, problems, layout->prompt, layout->output);
    rows.push_back(r);
  }
  return finish(std::move(rows), layout->name, problems, lines.size());
}

TraceFile parse_jsonl(std::string_view text, Problems& problems) {
  const auto lines = lines_of(text);
  std::vector<Row> rows;
  const char* layout_name = nullptr;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    const std::size_t line = i + 1;
    const Json obj = Json::parse(lines[i], nullptr, false);
    if (obj.is_discarded() || !obj.is_object()) {
      problems.add(line, "expected one JSON object per line");
      continue;
    }
    const Layout* layout = nullptr;
    for (const Layout& l : kJsonlLayouts) {
      if (obj.contains(l.arrival) || obj.contains(l.prompt)) {
        layout = &l;
        break;
      }
    }
    if (!layout) {
      problems.add(line,
                   "no known fields (expected one of: " + expected_columns(kJsonlLayouts) + ")");
      continue;
    }
    Diagnostics diag;
    Reader rd(obj, "", diag);
    auto count = [&](const char* key) -> std::optional<std::int64_t> {
      if (detail::integral_float_out_of_range(rd, key)) {
        rd.problem(key, "expected a token count (got " + detail::got(rd, key) + ")");
        return std::nullopt;
      }
      return rd.integer(key);
    };
    auto t = rd.number(layout->arrival);
    auto p = count(layout->prompt);
    auto o = count(layout->output);
    for (const std::string& item : diag.items()) problems.add(line, item);
    if (!t || !p || !o) continue;
    Row r{line, layout->unit == TimeUnit::kMilliseconds ? *t / 1000.0 : *t, *p, *o, {}, {}};
    if (!read_hashes(obj, r.hashes)) {
      problems.add(line, "field \"hash_ids\": expected an array of non-negative integers");
      continue;
    }
    if (const auto m = obj.find("model"); m != obj.end()) {
      if (!m->is_string() || m->get<std::string>().empty()) {
        problems.add(line, "field \"model\": expected a deployment's name (a non-empty string)");
        continue;
      }
      r.model = m->get<std::string>();
    }
    check_row(r, problems, layout->prompt, layout->output);
    rows.push_back(r);
    if (!layout_name) layout_name = layout->name;
  }
  return finish(std::move(rows), layout_name ? layout_name : "plain", problems, lines.size());
}

}  // namespace

TraceFormat parse_trace_format(std::string_view text, std::string_view field) {
  if (text == "auto") return TraceFormat::kAuto;
  if (text == "csv") return TraceFormat::kCsv;
  if (text == "jsonl") return TraceFormat::kJsonl;
  throw InputError(std::string(field) + ": expected \"auto\", \"csv\" or \"jsonl\" (got \"" +
                   std::string(text) + "\")");
}

TraceFile parse_trace_text(std::string_view text, TraceFormat format, std::string_view source) {
  Problems problems(source);
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 BOM, as JSON allows
  if (format == TraceFormat::kAuto) {
    const std::string_view t = trim(text.substr(0, std::min<std::size_t>(text.size(), 64)));
    format = !t.empty() && t.front() == '{' ? TraceFormat::kJsonl : TraceFormat::kCsv;
  }
  return format == TraceFormat::kJsonl ? parse_jsonl(text, problems) : parse_csv(text, problems);
}

TraceFile read_trace_file(const std::string& path, TraceFormat format) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw InputError(path + ": not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open trace file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(path + ": cannot read trace file");
  if (format == TraceFormat::kAuto && (path.ends_with(".jsonl") || path.ends_with(".json"))) {
    format = TraceFormat::kJsonl;
  } else if (format == TraceFormat::kAuto && path.ends_with(".csv")) {
    format = TraceFormat::kCsv;
  }
  return parse_trace_text(text.str(), format, path);
}

}  // namespace kvshift::input
