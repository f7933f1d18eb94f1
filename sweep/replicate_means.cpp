#include "sweep/replicate_means.hpp"

#include "cost_model/units.hpp"
#include "util/csv.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace kvshift::sweep {
namespace {

std::string num(double v) { return format_number("%.9g", v); }

}  // namespace

double t95(int dof) {
  static const double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                  2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof < 1) throw std::invalid_argument("t95: needs at least one degree of freedom");
  if (dof <= 30) return kTable[dof - 1];
  return 1.959964 + 2.4 / dof;  // within 0.3 % of the exact quantile above 30
}

std::string replicate_means_csv(const std::string& sweep_csv) {
  std::istringstream in(sweep_csv);
  std::vector<std::string> header;
  util::read_csv_record(in, header);
  int seed_col = -1, first_metric = -1;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "/seed") seed_col = static_cast<int>(i);
    if (first_metric < 0 && i >= 2 && header[i].find('.') != std::string::npos &&
        header[i][0] != '/') {
      first_metric = static_cast<int>(i);
    }
  }
  if (seed_col < 0 || first_metric < 0) throw std::invalid_argument("sweep.csv has no /seed axis");
  // Key: the values of every axis but /seed, in column order.
  std::map<std::vector<std::string>, std::vector<std::vector<std::string>>> groups;
  std::vector<std::vector<std::string>> order;
  for (std::vector<std::string> row; util::read_csv_record(in, row);) {
    if (row.size() == 1 && row[0].empty()) continue;
    std::vector<std::string> key;
    for (int i = 2; i < first_metric; ++i) {
      if (i != seed_col) key.push_back(row[static_cast<std::size_t>(i)]);
    }
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(row);
  }
  std::string out;
  for (int i = 2; i < first_metric; ++i) {
    if (i != seed_col) out += util::csv_escape(header[static_cast<std::size_t>(i)]) + ",";
  }
  out += "replicates";
  for (std::size_t i = static_cast<std::size_t>(first_metric); i < header.size(); ++i) {
    out += "," + header[i] + "," + header[i] + ".ci95," + header[i] + ".n";
  }
  out += "\n";
  for (const auto& key : order) {
    const auto& rows = groups[key];
    for (const std::string& k : key) out += util::csv_escape(k) + ",";
    out += std::to_string(rows.size());
    for (std::size_t c = static_cast<std::size_t>(first_metric); c < header.size(); ++c) {
      double sum = 0, sq = 0;
      int n = 0;
      for (const auto& r : rows) {
        if (c >= r.size() || r[c].empty()) continue;
        const double v = std::strtod(r[c].c_str(), nullptr);
        sum += v;
        sq += v * v;
        ++n;
      }
      if (n == 0) {
        out += ",,,0";
        continue;
      }
      const double mean = sum / n;
      std::string ci;
      if (n > 1) {
        const double var = std::max(0.0, (sq - n * mean * mean) / (n - 1));
        ci = num(t95(n - 1) * std::sqrt(var / n));
      }
      out += "," + num(mean) + "," + ci + "," + std::to_string(n);
    }
    out += "\n";
  }
  return out;
}

}  // namespace kvshift::sweep
