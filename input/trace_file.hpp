// Trace files: recorded request arrivals replayed by a scenario's workload.
// CSV (with a header row) or JSONL (one object per line), with the column
// names of common public LLM traces mapped onto (arrival, prompt tokens,
// output tokens) — see scenarios/README.md for the table:
//   plain     arrival_s | prompt_tokens | output_tokens   (CSV or JSONL, seconds)
//   Azure     TIMESTAMP (date-time or seconds) | ContextTokens | GeneratedTokens
//   BurstGPT  Timestamp (seconds) | Request tokens | Response tokens
//   Mooncake  timestamp (milliseconds, JSONL) | input_length | output_length
// Arrivals are made relative to the earliest one and sorted (stable). Every
// bad row is reported (up to a limit) with its line number; nothing is
// skipped silently. Mooncake's hash_ids become the prompt's block keys. Leaves out:
// per-request model names.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/spec.hpp"

namespace kvshift::input {

enum class TraceFormat { kAuto, kCsv, kJsonl };

/// "auto", "csv", "jsonl"; throws InputError naming `field`.
TraceFormat parse_trace_format(std::string_view text, std::string_view field);

struct TraceFile {
  std::vector<sim::TraceRequest> requests;  ///< arrival-sorted, first arrival at 0
  std::string
      layout;  ///< which column names were recognised: "plain", "azure", "burstgpt", "mooncake"
};

/// Parses trace text; `source` names it in messages. Throws InputError listing every problem.
TraceFile parse_trace_text(std::string_view text, TraceFormat format, std::string_view source);

/// Reads and parses a trace file; kAuto picks JSONL for .jsonl/.json, else CSV.
TraceFile read_trace_file(const std::string& path, TraceFormat format = TraceFormat::kAuto);

/// Seconds since 1970-01-01 of "YYYY-MM-DD HH:MM:SS[.frac][Z|+HH:MM]" (or 'T'); nullopt if
/// malformed.
std::optional<double> parse_datetime_seconds(std::string_view text);

}  // namespace kvshift::input
