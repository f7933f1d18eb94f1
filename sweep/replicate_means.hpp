// Replicate means: a sweep run with --replicates N has a /seed axis of N seeds;
// this folds sweep.csv over that axis into sweep_means.csv — per point of the
// other axes, each metric's mean over the replicates and the half-width of its
// 95 % confidence interval (Student t, n − 1 degrees of freedom). Metrics a
// replicate did not report (an empty cell) are left out of that mean; the
// count of replicates that reported it is written beside it.
#pragma once

#include <string>

namespace kvshift::sweep {

/// sweep_means.csv text from sweep.csv text whose axes include "/seed".
std::string replicate_means_csv(const std::string& sweep_csv);

/// Two-sided 95 % Student t quantile for `dof` degrees of freedom (dof ≥ 1).
double t95(int dof);

}  // namespace kvshift::sweep
