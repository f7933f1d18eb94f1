// requests.csv (one row per request) and recoveries.csv (one row per move): the
// header and row format, written from kept records or streamed as a run goes
// (RecordCsvWriter), the same bytes either way.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/serving/results.hpp"

namespace kvshift::reports {

/// `deployments`: the names of a scenario's deployments (sim::RunResult::deployments); with
/// them, each row names its request's deployment after the request's id. Empty: one model,
/// no such column.
using DeploymentNames = std::vector<std::string>;
std::string requests_csv_header(const DeploymentNames& deployments = {});
std::string recoveries_csv_header(const DeploymentNames& deployments = {});
/// Appends one row (with its newline) to `out`.
void append_request_row(std::string& out, const std::string& strategy, const sim::RequestRecord& r,
                        const DeploymentNames& deployments = {});
void append_move_row(std::string& out, const std::string& strategy, const sim::MoveRecord& m,
                     const DeploymentNames& deployments = {});

/// Streams a run's records into `dir`/requests.csv and/or `dir`/recoveries.csv as they
/// become final, so memory holds none of them. Files are complete once close() returns
/// (write errors throw std::runtime_error naming the file).
class RecordCsvWriter final : public sim::RecordSink {
 public:
  RecordCsvWriter(const std::filesystem::path& dir, bool requests, bool recoveries,
                  DeploymentNames deployments = {});
  ~RecordCsvWriter() override;
  RecordCsvWriter(const RecordCsvWriter&) = delete;
  RecordCsvWriter& operator=(const RecordCsvWriter&) = delete;

  void begin_run(const std::string& strategy) override { strategy_ = strategy; }
  void request(const sim::RequestRecord& r) override;
  void move(const sim::MoveRecord& m) override;
  void close();

 private:
  struct File {
    std::filesystem::path path;
    std::FILE* f = nullptr;
    std::string buffer;
  };
  void open(File& file, const std::filesystem::path& path, const std::string& header);
  void flush(File& file, bool all);

  std::string strategy_;
  DeploymentNames deployments_;
  File requests_, recoveries_;
};

}  // namespace kvshift::reports
