#include "reports/record_csv.hpp"

#include <stdexcept>

#include "util/csv.hpp"

namespace kvshift::reports {
namespace {

constexpr std::size_t kFlushBytes = 1 << 20;

// Seconds with 9 decimals, as %.9f prints them.
void append_s(std::string& out, std::int64_t ns) {
  char buf[40];
  const int n = std::snprintf(buf, sizeof buf, "%.9f", static_cast<double>(ns) * 1e-9);
  out.append(buf, static_cast<std::size_t>(n));
}

void append_int(std::string& out, std::int64_t v) { out += std::to_string(v); }

void append_deployment(std::string& out, int deployment, const DeploymentNames& names) {
  if (names.empty()) return;
  out += util::csv_escape(names[static_cast<std::size_t>(deployment)]);
  out += ',';
}

}  // namespace

std::string requests_csv_header(const DeploymentNames& deployments) {
  return std::string("strategy,id,") + (deployments.empty() ? "" : "deployment,") +
         "arrival_s,prompt_tokens,output_tokens,first_token_s,finish_s,outcome,"
         "first_node,final_node,moves,preemptions,reason\n";
}

std::string recoveries_csv_header(const DeploymentNames& deployments) {
  // latency_s of an unfinished move is a lower bound (end of run − start).
  // cached/shipped/front/tail_tokens: KV the destination's prefix cache held, KV shipped,
  // recomputed while it arrived (hybrid), recomputed after.
  return std::string("strategy_run,request,") + (deployments.empty() ? "" : "deployment,") +
         "trigger,from,to,requested,strategy,outcome,context_tokens,"
         "cached_tokens,shipped_tokens,front_tokens,tail_tokens,start_s,"
         "end_s,latency_s,estimated_s,stall_s,kv_bytes,predictor_bytes,token_bytes,transfer_s,"
         "compute_s,queue_s,delta_nll,fallback,note\n";
}

void append_request_row(std::string& o, const std::string& strategy, const sim::RequestRecord& r,
                        const DeploymentNames& deployments) {
  o += strategy;
  o += ',';
  append_int(o, static_cast<std::int64_t>(r.id));
  o += ',';
  append_deployment(o, r.deployment, deployments);
  append_s(o, r.arrival_ns);
  o += ',';
  append_int(o, r.prompt_tokens);
  o += ',';
  append_int(o, r.output_tokens);
  o += ',';
  if (r.first_token_ns >= 0) append_s(o, r.first_token_ns);
  o += ',';
  if (r.finish_ns >= 0) append_s(o, r.finish_ns);
  o += ',';
  o += sim::request_outcome_name(r.outcome);
  o += ',';
  o += util::csv_escape(r.first_node);
  o += ',';
  o += util::csv_escape(r.final_node);
  o += ',';
  append_int(o, r.moves);
  o += ',';
  append_int(o, r.preemptions);
  o += ',';
  o += util::csv_escape(r.reason);
  o += '\n';
}

void append_move_row(std::string& o, const std::string& strategy, const sim::MoveRecord& m,
                     const DeploymentNames& deployments) {
  char nll[40];
  std::snprintf(nll, sizeof nll, "%.6f", m.delta_nll);
  o += strategy;
  o += ',';
  append_int(o, static_cast<std::int64_t>(m.request));
  o += ',';
  append_deployment(o, m.deployment, deployments);
  o += sim::move_trigger_name(m.trigger);
  o += ',';
  o += util::csv_escape(m.from);
  o += ',';
  o += util::csv_escape(m.to);
  o += ',';
  o += m.requested;
  o += ',';
  o += m.strategy;
  o += ',';
  o += sim::move_outcome_name(m.outcome);
  o += ',';
  append_int(o, m.context_tokens);
  const bool replay = m.strategy == "token_replay";  // its record counts all of T as available
  for (const std::int64_t tokens : {m.cached_tokens, replay ? std::int64_t{0} : m.available_tokens,
                                    m.front_tokens, m.tail_tokens}) {
    o += ',';
    append_int(o, tokens);
  }
  for (const std::int64_t ns : {m.start_ns, m.end_ns, m.end_ns - m.start_ns}) {
    o += ',';
    append_s(o, ns);
  }
  o += ',';
  if (!m.strategy.empty()) append_s(o, m.estimated_ns);
  o += ',';
  append_s(o, m.stall_ns);
  for (const std::int64_t b : {m.kv_bytes, m.predictor_bytes, m.token_bytes}) {
    o += ',';
    append_int(o, b);
  }
  for (const std::int64_t ns : {m.transfer_ns, m.compute_ns, m.queue_ns}) {
    o += ',';
    append_s(o, ns);
  }
  o += ',';
  o += nll;
  o += ',';
  o += util::csv_escape(m.fallback);
  o += ',';
  o += util::csv_escape(m.note);
  o += '\n';
}

RecordCsvWriter::RecordCsvWriter(const std::filesystem::path& dir, bool requests, bool recoveries,
                                 DeploymentNames deployments)
    : deployments_(std::move(deployments)) {
  if (requests || recoveries) std::filesystem::create_directories(dir);
  if (requests) open(requests_, dir / "requests.csv", requests_csv_header(deployments_));
  if (recoveries) open(recoveries_, dir / "recoveries.csv", recoveries_csv_header(deployments_));
}

RecordCsvWriter::~RecordCsvWriter() {
  for (File* file : {&requests_, &recoveries_}) {
    if (file->f) std::fclose(file->f);  // close() was not reached: the run failed
  }
}

void RecordCsvWriter::open(File& file, const std::filesystem::path& path,
                           const std::string& header) {
  file.path = path;
  file.f = std::fopen(path.c_str(), "wb");
  if (!file.f) throw std::runtime_error("cannot write " + path.string());
  file.buffer = header;
}

void RecordCsvWriter::flush(File& file, bool all) {
  if (!file.f || (!all && file.buffer.size() < kFlushBytes)) return;
  if (std::fwrite(file.buffer.data(), 1, file.buffer.size(), file.f) != file.buffer.size()) {
    throw std::runtime_error("cannot write " + file.path.string());
  }
  file.buffer.clear();
}

void RecordCsvWriter::request(const sim::RequestRecord& r) {
  if (!requests_.f) return;
  append_request_row(requests_.buffer, strategy_, r, deployments_);
  flush(requests_, false);
}

void RecordCsvWriter::move(const sim::MoveRecord& m) {
  if (!recoveries_.f) return;
  append_move_row(recoveries_.buffer, strategy_, m, deployments_);
  flush(recoveries_, false);
}

void RecordCsvWriter::close() {
  for (File* file : {&requests_, &recoveries_}) {
    if (!file->f) continue;
    flush(*file, true);
    const bool ok = std::fclose(file->f) == 0;
    file->f = nullptr;
    if (!ok) throw std::runtime_error("cannot write " + file->path.string());
  }
}

}  // namespace kvshift::reports
