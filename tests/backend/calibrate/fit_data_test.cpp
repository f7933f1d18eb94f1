// Fit data: leaving out the sink rows drops exactly the first rows of each request, the rest
// bit for bit as without them, and the validation split moves with it.
#include <gtest/gtest.h>

#include <random>

#include "backend/calibrate/fit_data.hpp"
#include "tests/backend/tiny_spec.hpp"

namespace kvshift::backend::calibrate {
namespace {

TEST(FitData, SinkRowsAreLeftOutOfEveryRequestAndTheRestIsUnchanged) {
  const Model model(random_weights(testing::tiny_spec("tiny6", {.layers = 6}), 5));
  std::mt19937_64 rng(3);
  std::vector<std::vector<std::int32_t>> ids(4, std::vector<std::int32_t>(20));
  for (auto& r : ids)
    for (auto& t : r) t = static_cast<std::int32_t>(rng() % 64);
  std::vector<std::span<const std::int32_t>> histories(ids.begin(), ids.end());
  const FitData all = gather_fit_data(model, histories, 1, 2);
  const FitData kept = gather_fit_data(model, histories, 1, 2, 3);
  EXPECT_EQ(all.rows(), 4 * 20);
  EXPECT_EQ(kept.rows(), 4 * 17);
  EXPECT_EQ(all.train_rows, 3 * 20);
  EXPECT_EQ(kept.train_rows, 3 * 17);
  for (int l = 0; l < 6; ++l) {
    for (Eigen::Index r = 0; r < 4; ++r) {
      EXPECT_EQ(Matrix(kept.features[l].middleRows(r * 17, 17)),
                Matrix(all.features[l].middleRows(r * 20 + 3, 17)))
          << "layer " << l << ", request " << r;
      EXPECT_EQ(Matrix(kept.labels[l].middleRows(r * 17, 17)),
                Matrix(all.labels[l].middleRows(r * 20 + 3, 17)));
    }
  }
  EXPECT_THROW(gather_fit_data(model, histories, 1, 1, 20), std::invalid_argument);
  EXPECT_THROW(gather_fit_data(model, histories, 1, 1, -1), std::invalid_argument);
}

}  // namespace
}  // namespace kvshift::backend::calibrate
