// testbed.csv and the error statistics.
#include "testbed/testbed_run.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace kvshift::testbed {
namespace {

std::string num(double v) {
  if (std::isnan(v)) return "";
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

std::string quoted(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
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
  const std::size_t n = a.size();
  s.median = n % 2 ? a[n / 2] : 0.5 * (a[n / 2 - 1] + a[n / 2]);
  s.p95 = a[static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(n))) - 1];
  return s;
}

std::string testbed_csv(const std::vector<MoveRow>& rows) {
  std::ostringstream out;
  out << "move,strategy,src,dst,path,tokens,bytes,planned_bytes,state,reason,work,"
         "transfer_s,decode_s,compute_s,total_s,"
         "predicted_transfer_s,predicted_compute_s,predicted_total_s,"
         "error_transfer,error_compute,error_total,frames,bytes_resent,faults,connections,note\n";
  for (const MoveRow& r : rows) {
    const bool done = r.state == "completed";
    auto measured = [&](double v) { return done ? num(v) : std::string(); };
    auto err = [&](double m, double p) { return done ? num(relative_error(m, p)) : std::string(); };
    out << r.move << ',' << r.strategy << ',' << quoted(r.src) << ',' << quoted(r.dst) << ','
        << quoted(r.path) << ',' << r.tokens << ',' << r.bytes << ',' << r.planned_bytes << ','
        << r.state << ',' << quoted(r.reason) << ',' << r.work << ',' << measured(r.transfer_s)
        << ',' << measured(r.decode_s) << ',' << measured(r.compute_s) << ',' << measured(r.total_s)
        << ',' << num(r.predicted_transfer_s) << ',' << num(r.predicted_compute_s) << ','
        << num(r.predicted_total_s) << ',' << err(r.transfer_s, r.predicted_transfer_s) << ','
        << err(r.compute_s, r.predicted_compute_s) << ',' << err(r.total_s, r.predicted_total_s)
        << ',' << r.frames << ',' << r.bytes_resent << ',' << r.faults << ',' << r.connections
        << ',' << quoted(r.note) << '\n';
  }
  return out.str();
}

}  // namespace kvshift::testbed
