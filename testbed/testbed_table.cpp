// testbed.csv and the error statistics.
#include "testbed/testbed_run.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "util/csv.hpp"
#include "util/percentile.hpp"

namespace kvshift::testbed {
namespace {

std::string num(double v) {
  if (std::isnan(v)) return "";
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

}  // namespace

double relative_error(double measured, double predicted) {
  if (predicted == 0) return measured == 0 ? 0 : std::numeric_limits<double>::quiet_NaN();
  return (measured - predicted) / predicted;
}

ErrorStats abs_error_stats(const std::vector<double>& errors) {
  std::vector<double> a;
  for (double e : errors) {
    if (!std::isnan(e)) a.push_back(std::abs(e));
  }
  ErrorStats s;
  s.n = a.size();
  if (a.empty()) return s;
  std::sort(a.begin(), a.end());
  s.median = util::percentile(a, 0.5);
  s.p95 = util::nearest_rank_percentile(a, 0.95);
  return s;
}

std::string testbed_csv(const std::vector<MoveRow>& rows) {
  std::ostringstream out;
  out << "move,strategy,src,dst,path,tokens,bytes,planned_bytes,state,reason,work,"
         "transfer_s,decode_s,compute_s,total_s,"
         "predicted_transfer_s,predicted_compute_s,predicted_total_s,"
         "error_transfer,error_compute,error_total,frames,bytes_resent,faults,connections,"
         "charged_delta_nll,continuation_tokens,greedy_agreement,sampled_agreement,"
         "real_delta_nll,text_delta_nll,note\n";
  for (const MoveRow& r : rows) {
    const bool done = r.state == "completed";
    auto measured = [&](double v) { return done ? num(v) : std::string(); };
    auto err = [&](double m, double p) { return done ? num(relative_error(m, p)) : std::string(); };
    // Blank where the continuation was not measured (off, or the move failed).
    auto quality = [&](double v) { return r.continuation_steps > 0 ? num(v) : std::string(); };
    out << r.move << ',' << r.strategy << ',' << util::csv_escape(r.src) << ','
        << util::csv_escape(r.dst) << ',' << util::csv_escape(r.path) << ',' << r.tokens << ','
        << r.bytes << ',' << r.planned_bytes << ',' << r.state << ',' << util::csv_escape(r.reason)
        << ',' << r.work << ',' << measured(r.transfer_s) << ',' << measured(r.decode_s) << ','
        << measured(r.compute_s) << ',' << measured(r.total_s) << ',' << num(r.predicted_transfer_s)
        << ',' << num(r.predicted_compute_s) << ',' << num(r.predicted_total_s) << ','
        << err(r.transfer_s, r.predicted_transfer_s) << ','
        << err(r.compute_s, r.predicted_compute_s) << ',' << err(r.total_s, r.predicted_total_s)
        << ',' << r.frames << ',' << r.bytes_resent << ',' << r.faults << ',' << r.connections
        << ',' << num(r.charged_delta_nll) << ',' << r.continuation_steps << ','
        << quality(r.greedy_agreement) << ',' << quality(r.sampled_agreement) << ','
        << quality(r.real_delta_nll) << ','
        << (std::isnan(r.text_delta_nll) ? std::string() : quality(r.text_delta_nll)) << ','
        << util::csv_escape(r.note) << '\n';
  }
  return out.str();
}

}  // namespace kvshift::testbed
