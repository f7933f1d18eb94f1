// Records streamed as they become final (RecordSink) are the records a run keeps,
// in the same order; a run that keeps none has the same tally and summary; the
// streamed CSV files are byte-identical to those written from kept records.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "input/scenario_loader.hpp"
#include "reports/record_csv.hpp"
#include "reports/run_report.hpp"
#include "sim/serving/scenario_run.hpp"

namespace kvshift::sim {
namespace {

struct Collector : RecordSink {
  struct Run {
    std::string strategy;
    std::vector<RequestRecord> requests;
    std::vector<MoveRecord> moves;
  };
  std::vector<Run> runs;
  void begin_run(const std::string& strategy) override { runs.push_back({strategy, {}, {}}); }
  void request(const RequestRecord& r) override { runs.back().requests.push_back(r); }
  void move(const MoveRecord& m) override { runs.back().moves.push_back(m); }
};

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The quickstart: five strategies, failures, drains, rebalancing, unfinished requests.
const input::ScenarioSpec& quickstart() {
  static const input::ScenarioSpec spec = input::load_embedded_quickstart();
  return spec;
}

TEST(RecordStream, TheSinkGetsEveryKeptRecordOnceInOrder) {
  const input::ScenarioSpec& spec = quickstart();
  const cost_model::RooflineCosts compute(spec.gpu);
  Collector sink;
  RunOptions options;
  options.record_trace = false;
  options.sink = &sink;
  const std::vector<RunResult> runs = run_scenario(spec, compute, options);
  ASSERT_EQ(sink.runs.size(), runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunResult& run = runs[i];
    const Collector::Run& got = sink.runs[i];
    EXPECT_EQ(got.strategy, run.strategy);
    ASSERT_FALSE(run.requests.empty());
    EXPECT_EQ(got.requests, run.requests) << run.strategy;
    EXPECT_EQ(got.moves, run.moves) << run.strategy;
    for (std::size_t k = 0; k < got.requests.size(); ++k) {
      ASSERT_EQ(got.requests[k].id, k) << run.strategy << ": requests come in id order, once";
    }
    EXPECT_EQ(run.tally.arrived, static_cast<std::int64_t>(run.requests.size()));
    EXPECT_EQ(run.tally.completed + run.tally.failed + run.tally.unfinished, run.tally.arrived);
  }
}

TEST(RecordStream, KeepingNoRecordsChangesNothingElse) {
  const input::ScenarioSpec& spec = quickstart();
  const cost_model::RooflineCosts compute(spec.gpu);
  RunOptions keep, lean;
  keep.record_trace = lean.record_trace = false;
  lean.keep_records = false;
  const std::vector<RunResult> a = run_scenario(spec, compute, keep);
  const std::vector<RunResult> b = run_scenario(spec, compute, lean);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(b[i].requests.empty());
    EXPECT_TRUE(b[i].moves.empty());
    EXPECT_TRUE(a[i].tally == b[i].tally) << a[i].strategy;
    EXPECT_EQ(a[i].events, b[i].events);
  }
  EXPECT_EQ(reports::run_summary(spec, a, compute.sources()),
            reports::run_summary(spec, b, compute.sources()));
}

TEST(RecordStream, StreamedCsvFilesEqualTheKeptOnes) {
  const input::ScenarioSpec& spec = quickstart();
  const cost_model::RooflineCosts compute(spec.gpu);
  const auto base = std::filesystem::path(KVSHIFT_BINARY_DIR) / "test-out" / "record-stream";
  std::filesystem::remove_all(base);
  RunOptions options;
  options.record_trace = false;
  const std::vector<RunResult> kept = run_scenario(spec, compute, options);
  reports::write_run_outputs(base / "kept", spec, kept, compute.sources());

  reports::RecordCsvWriter writer(base / "streamed", true, true);
  options.keep_records = false;
  options.sink = &writer;
  const std::vector<RunResult> lean = run_scenario(spec, compute, options);
  writer.close();
  const auto written = reports::write_run_outputs(base / "streamed", spec, lean, compute.sources(),
                                                  {"requests", "recoveries"});
  EXPECT_EQ(written.size(), spec.outputs.files.size());  // the streamed ones listed too
  for (const char* file : {"requests.csv", "recoveries.csv", "summary.json", "links.csv"}) {
    const std::string k = read(base / "kept" / file), s = read(base / "streamed" / file);
    EXPECT_FALSE(k.empty()) << file;
    EXPECT_EQ(k, s) << file;
  }
}

}  // namespace
}  // namespace kvshift::sim
