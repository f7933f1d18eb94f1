// Cost tables of measurements; see support_cost_table.hpp.
#include "apps/kvshift/support_cost_table.hpp"

#include <Eigen/Core>
#include <chrono>
#include <ctime>

namespace kvshift::app {
namespace {

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

input::CostTable measured_table(const backend::Profiler& profiler,
                                const backend::ProfileRequest& req,
                                const std::vector<backend::OpTiming>& rows) {
  input::CostTable table;
  table.backend = profiler.backend_name();
  table.model = req.model.name;
  table.topology = req.omission.describe();
  if (req.proxy) table.proxy = req.proxy->name;
  table.retention = req.retention;
  const bool cpu = table.backend == "cpu";
  table.machine.cpu = cpu ? profiler.device_description() : backend::cpu_model_name();
  table.machine.gpu = cpu ? "none" : profiler.device_description();
  table.machine.versions = {
      {"kvshift", KVSHIFT_VERSION},
      {"compiler", __VERSION__},
      {"eigen", std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) +
                    "." + std::to_string(EIGEN_MINOR_VERSION)}};
  table.machine.date = utc_now();
  const backend::ProfileInputs& in = req.inputs;
  table.weights = in.target ? "real" : "seeded random";
  for (const auto& [key, origin] : {std::pair{"model", &in.target_origin},
                                    {"proxy", &in.proxy_origin},
                                    {"predictors", &in.predictors_origin},
                                    {"mapper", &in.mapper_origin}}) {
    if (origin->real()) table.inputs[key] = {origin->path, origin->digest};
  }
  table.notes = profiler.notes();
  for (const auto& t : rows) {
    table.entries.push_back(
        {t.op, t.tokens, t.sharing, t.batch, t.median_s, t.p10_s, t.p90_s, t.repeats});
  }
  return table;
}

}  // namespace kvshift::app
