// Trace files: each public trace's column names, units (seconds, ms,
// date-times), sorting, and every bad row reported with its line.
#include <gtest/gtest.h>

#include "cost_model/input_error.hpp"
#include "input/trace_file.hpp"

namespace kvshift::input {
namespace {

TraceFile parse(std::string_view text, TraceFormat f = TraceFormat::kAuto) {
  return parse_trace_text(text, f, "t");
}

std::string error_of(std::string_view text, TraceFormat f = TraceFormat::kAuto) {
  try {
    parse(text, f);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TraceFile, PlainCsvInSecondsIsSortedAndRebased) {
  const TraceFile t =
      parse("arrival_s,prompt_tokens,output_tokens\n5.5,100,10\n2.5,200,20\n2.5,300,0\n");
  EXPECT_EQ(t.layout, "plain");
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_DOUBLE_EQ(t.requests[0].arrival.value, 0.0);
  EXPECT_EQ(t.requests[0].prompt_tokens, 200);  // stable: equal times keep file order
  EXPECT_EQ(t.requests[1].prompt_tokens, 300);
  EXPECT_EQ(t.requests[1].output_tokens, 0);
  EXPECT_DOUBLE_EQ(t.requests[2].arrival.value, 3.0);
}

TEST(TraceFile, AUtf8ByteOrderMarkBeforeTheHeaderIsSkipped) {
  const TraceFile t = parse(
      "\xEF\xBB\xBF"
      "arrival_s,prompt_tokens,output_tokens\n1,100,10\n",
      TraceFormat::kCsv);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.requests[0].prompt_tokens, 100);
}

TEST(TraceFile, AColumnNamedTwiceIsRefused) {
  const std::string e = error_of("arrival_s,prompt_tokens,output_tokens,prompt_tokens\n1,1,1,2\n");
  EXPECT_NE(e.find("column \"prompt_tokens\" appears twice in the header"), std::string::npos) << e;
}

TEST(TraceFile, AzureColumnsWithDateTimes) {
  const TraceFile t = parse(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-11-16 18:15:46.6805900,374,44\n"
      "2023-11-16 18:15:50.1805900,396,109\n");
  EXPECT_EQ(t.layout, "azure");
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_NEAR(t.requests[1].arrival.value, 3.5, 1e-6);
  EXPECT_EQ(t.requests[1].prompt_tokens, 396);
  EXPECT_EQ(t.requests[1].output_tokens, 109);
}

TEST(TraceFile, BurstGptColumnsWithQuotedFieldsAndExtraColumns) {
  const TraceFile t = parse(
      "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
      "0,ChatGPT,472,18,490,Conversation log\n"
      "45,\"GPT-4, turbo\",1087,230,1317,Conversation log\n");
  EXPECT_EQ(t.layout, "burstgpt");
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_DOUBLE_EQ(t.requests[1].arrival.value, 45.0);
  EXPECT_EQ(t.requests[1].prompt_tokens, 1087);
  EXPECT_EQ(t.requests[1].output_tokens, 230);
}

TEST(TraceFile, MooncakeJsonlTimestampsAreMilliseconds) {
  const TraceFile t = parse(
      "{\"timestamp\": 27482, \"input_length\": 6955, \"output_length\": 52, \"hash_ids\": [46, "
      "47]}\n"
      "{\"timestamp\": 30535, \"input_length\": 6472, \"output_length\": 26, \"hash_ids\": []}\n");
  EXPECT_EQ(t.layout, "mooncake");
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_DOUBLE_EQ(t.requests[1].arrival.value, 3.053);
  EXPECT_EQ(t.requests[0].prompt_tokens, 6955);
  EXPECT_EQ(t.requests[0].block_hashes, (std::vector<std::uint64_t>{46, 47}));
  EXPECT_TRUE(t.requests[1].block_hashes.empty());
}

TEST(TraceFile, MooncakeHashIdsMustBeNonNegativeIntegers) {
  for (const char* bad : {"[1, -2]", "[1.5]", "\"3\"", "[\"a\"]"}) {
    EXPECT_EQ(error_of(std::string("{\"timestamp\": 1, \"input_length\": 600, "
                                   "\"output_length\": 2, \"hash_ids\": ") +
                       bad + "}\n"),
              "t:1: field \"hash_ids\": expected an array of non-negative integers")
        << bad;
  }
}

TEST(TraceFile, PlainJsonl) {
  const TraceFile t = parse("{\"arrival_s\": 1, \"prompt_tokens\": 8, \"output_tokens\": 2}\n",
                            TraceFormat::kJsonl);
  EXPECT_EQ(t.layout, "plain");
  EXPECT_EQ(t.requests.at(0).prompt_tokens, 8);
}

TEST(TraceFile, UnknownHeaderListsTheAcceptedColumnSets) {
  EXPECT_EQ(error_of("time,in,out\n1,2,3\n"),
            "t:1: no known column set in the header (expected one of: plain: arrival_s, "
            "prompt_tokens, output_tokens; azure: TIMESTAMP, ContextTokens, GeneratedTokens; "
            "burstgpt: Timestamp, Request tokens, Response tokens)");
}

TEST(TraceFile, EveryBadRowIsReportedWithItsLine) {
  EXPECT_EQ(error_of("arrival_s,prompt_tokens,output_tokens\n"
                     "x,1,1\n"
                     "1,0,1\n"
                     "2,5\n"
                     "3,5,-2\n"),
            "t:2: column \"arrival_s\": expected a number of seconds (got \"x\")\n"
            "  t:3: column \"prompt_tokens\": must be >= 1 (got 0)\n"
            "  t:4: missing column \"output_tokens\"\n"
            "  t:5: column \"output_tokens\": must be >= 0 (got -2)");
}

TEST(TraceFile, JsonlRowsAreCheckedWithTheReader) {
  EXPECT_EQ(
      error_of("{\"timestamp\": 1, \"input_length\": \"many\", \"output_length\": 3}\nnot json\n"),
      "t:1: /input_length: expected an integer (got \"many\")\n"
      "  t:2: expected one JSON object per line");
}

TEST(TraceFile, HugeJsonlCountsAreErrors) {
  EXPECT_EQ(error_of("{\"arrival_s\": 0, \"prompt_tokens\": 1e40, \"output_tokens\": 1}\n"),
            "t:1: /prompt_tokens: expected a token count (got 1e+40)");
}

TEST(TraceFile, EmptyTraceIsAnError) {
  EXPECT_EQ(error_of("arrival_s,prompt_tokens,output_tokens\n"),
            "t:2: the trace holds no requests");
}

TEST(TraceFile, ProblemListIsCapped) {
  std::string text = "arrival_s,prompt_tokens,output_tokens\n";
  for (int i = 0; i < 25; ++i) text += "bad,1,1\n";
  const std::string e = error_of(text);
  EXPECT_NE(e.find("t: ... and 5 more problems"), std::string::npos) << e;
}

TEST(TraceFile, DateTimeParsing) {
  EXPECT_DOUBLE_EQ(*parse_datetime_seconds("1970-01-01 00:00:00"), 0.0);
  EXPECT_DOUBLE_EQ(*parse_datetime_seconds("2000-03-01T00:00:00Z"), 951868800.0);
  EXPECT_DOUBLE_EQ(*parse_datetime_seconds("2024-05-10 01:00:00.5+01:00"), 1715299200.5);
  EXPECT_FALSE(parse_datetime_seconds("2024-13-10 00:00:00").has_value());
  EXPECT_FALSE(parse_datetime_seconds("2024-05-10").has_value());
  EXPECT_FALSE(parse_datetime_seconds("2024-05-10 00:00:00.").has_value());
}

TEST(TraceFile, ShippedSamplesParse) {
  const std::string dir = std::string(KVSHIFT_SOURCE_DIR) + "/scenarios/traces/";
  const TraceFile azure = read_trace_file(dir + "sample-azure.csv");
  EXPECT_EQ(azure.layout, "azure");
  EXPECT_EQ(azure.requests.size(), 60u);
  const TraceFile mooncake = read_trace_file(dir + "sample-mooncake.jsonl");
  EXPECT_EQ(mooncake.layout, "mooncake");
  EXPECT_EQ(mooncake.requests.size(), 20u);
  for (const auto& r : azure.requests) EXPECT_GE(r.prompt_tokens, 1);
}

TEST(TraceFile, MissingFileIsNamed) {
  try {
    read_trace_file("/nonexistent/t.csv");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/t.csv: cannot open trace file");
  }
}

}  // namespace
}  // namespace kvshift::input
