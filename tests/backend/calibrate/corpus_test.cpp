// Requests from a corpus: disjoint windows spread over it, dealt by seed;
// request-count parsing; too-short corpora and vocabulary mismatches are
// InputErrors that say what was needed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <unistd.h>

#include "backend/calibrate/corpus.hpp"
#include "cost_model/input_error.hpp"

namespace kvshift::backend::calibrate {
namespace {

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(Corpus, ParsesRequestCounts) {
  const RequestCounts c =
      parse_request_counts("test:5,fit:7,select:6,confirm:2,order:3", {}, "--requests");
  EXPECT_EQ(c.fit, 7);
  EXPECT_EQ(c.order, 3);
  EXPECT_EQ(c.select, 6);
  EXPECT_EQ(c.test, 5);
  EXPECT_EQ(c.confirm, 2);
  // The defaults: 48 fit, 16 order + 32 select (48 selection requests), 48 test.
  const RequestCounts d = parse_request_counts("select:3", {}, "--requests");
  EXPECT_EQ(d.fit, 48);
  EXPECT_EQ(d.order, 16);
  EXPECT_EQ(d.test, 48);
  EXPECT_EQ(parse_request_counts("order:0", {}, "--requests").order, 0);
  EXPECT_NE(message_of([] {
              parse_request_counts("fit:24,slect:2", {}, "--requests");
            }).find("did you mean \"select\""),
            std::string::npos);
  EXPECT_NE(message_of([] { parse_request_counts("fit:x", {}, "--requests"); }).find("--requests"),
            std::string::npos);
  EXPECT_NE(message_of([] { parse_request_counts("fit:1", {}, "--requests"); }).find("at least 2"),
            std::string::npos);
  EXPECT_NE(message_of([] {
              parse_request_counts("test:1", {}, "--requests");
            }).find("test needs at least 2 requests"),
            std::string::npos);
  EXPECT_NE(message_of([] {
              parse_request_counts("fit:3,fit:4", {}, "--requests");
            }).find("more than once"),
            std::string::npos);
}

TEST(Corpus, WindowsAreDisjointSpreadAndSeeded) {
  const RequestCounts c{4, 2, 2, 1, 1};
  const RequestSets s = make_request_sets(10000, 100, c, 5);
  EXPECT_EQ(s.order.size(), 1u);
  EXPECT_EQ(s.fit.size(), 4u);
  EXPECT_EQ(s.select.size(), 2u);
  EXPECT_EQ(s.test.size(), 2u);
  EXPECT_EQ(s.confirm.size(), 1u);
  std::vector<std::int64_t> starts;
  for (const auto* set : {&s.fit, &s.select, &s.test, &s.confirm, &s.order}) {
    for (const Window& w : *set) starts.push_back(w.start);
  }
  std::sort(starts.begin(), starts.end());
  // 10 windows of 100 spread over 10,000 tokens: stride (10000 − 100)/9 = 1100.
  for (std::size_t i = 0; i < starts.size(); ++i)
    EXPECT_EQ(starts[i], 1100 * static_cast<std::int64_t>(i));
  EXPECT_LE(starts.back() + 100, 10000);
  const RequestSets again = make_request_sets(10000, 100, c, 5);
  EXPECT_EQ(again.fit.front().start, s.fit.front().start);
  EXPECT_EQ(again.test.back().start, s.test.back().start);
}

TEST(Corpus, TooShortCorpusSaysWhatItNeeds) {
  const std::string m = message_of([] {
    make_request_sets(70000, 1024, RequestCounts{24, 24, 24, 0, 0}, 1);
  });
  EXPECT_NE(m.find("--corpus"), std::string::npos) << m;
  EXPECT_NE(m.find("73728"), std::string::npos) << m;
}

TEST(Corpus, ReadsLittleEndianIdsAndRejectsBadFiles) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kvshift-calib-corpus-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / "ok.tokens", std::ios::binary);
    const unsigned char bytes[] = {1, 0, 0, 0, 0x10, 0x27, 0, 0};  // 1, 10000
    f.write(reinterpret_cast<const char*>(bytes), sizeof bytes);
    std::ofstream g(dir / "odd.tokens", std::ios::binary);
    g << "abc";
  }
  EXPECT_EQ(read_tokens((dir / "ok.tokens").string()), (std::vector<std::int32_t>{1, 10000}));
  EXPECT_THROW(read_tokens((dir / "odd.tokens").string()), InputError);
  EXPECT_THROW(read_tokens((dir / "missing.tokens").string()), InputError);
  // Vocabulary: an id past the model's vocabulary, and a sidecar made for another one.
  EXPECT_NE(message_of([&] {
              check_vocabulary({1, 10000}, 5000, (dir / "ok.tokens").string(), dir.string());
            }).find("vocabulary mismatch"),
            std::string::npos);
  {
    std::ofstream s(dir / "ok.json");
    s << R"({"vocab_size": 32000})";
  }
  EXPECT_NE(message_of([&] {
              check_vocabulary({1, 2}, 49152, (dir / "ok.tokens").string(), dir.string());
            }).find("32000"),
            std::string::npos);
  EXPECT_NO_THROW(check_vocabulary({1, 2}, 32000, (dir / "ok.tokens").string(), dir.string()));
  std::filesystem::remove_all(dir);
}

TEST(Corpus, SpansParseAndRefuseWhatIsNotAShare) {
  const CorpusSpan s = parse_span("0.8:1", "--span");
  EXPECT_EQ(s.begin, 0.8);
  EXPECT_EQ(s.end, 1.0);
  EXPECT_EQ(span_text(s), "0.8:1");
  EXPECT_TRUE(s.overlaps({0.0, 0.9}));
  EXPECT_FALSE(s.overlaps({0.0, 0.8}));  // half-open: they only touch
  for (const char* bad : {"0.8", "1:0.5", "0.5:0.5", "-0.1:1", "0:1.5", "a:1", "0:1x", ""}) {
    EXPECT_NE(message_of([&] { parse_span(bad, "--span"); }).find("--span"), std::string::npos)
        << bad;
  }
}

TEST(Corpus, SpreadWindowsAreDisjointInsideTheSpan) {
  for (std::int64_t count : {1, 2, 7, 32}) {
    const CorpusSpan span{0.25, 0.75};
    const auto starts = spread_windows(100'000, span, 1000, count);
    ASSERT_EQ(starts.size(), static_cast<std::size_t>(count));
    EXPECT_GE(starts.front(), 25'000);
    EXPECT_LE(starts.back() + 1000, 75'000);
    for (std::size_t i = 1; i < starts.size(); ++i) EXPECT_GE(starts[i], starts[i - 1] + 1000);
  }
  const std::string m = message_of([] { spread_windows(10'000, {0.0, 0.5}, 1024, 5); });
  EXPECT_NE(m.find("5120"), std::string::npos) << m;
  EXPECT_NE(m.find("--corpus"), std::string::npos) << m;
}

}  // namespace
}  // namespace kvshift::backend::calibrate
